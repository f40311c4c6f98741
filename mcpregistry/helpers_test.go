package mcpregistry

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"svc/messages"
	"svc/persistence"
	"svc/persistence/sqlite"
)

// discardEvents is a SOC event bus that drops what is published.
type discardEvents struct{}

func (discardEvents) Publish(messages.AseEvent) {}

// storeWithTenant opens a SQLite store with one tenant.
func storeWithTenant(t *testing.T) (persistence.Store, persistence.Tenant) {
	t.Helper()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(t.TempDir(), "svc.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	tenant := persistence.Tenant{ID: uuid.NewString(), Name: "t", CreatedAt: time.Now().UTC()}
	if err := store.CreateTenant(ctx, tenant, persistence.OperatorToken{ID: uuid.NewString(), TenantID: tenant.ID, Name: "admin",
		Role: persistence.RoleAdmin, CreatedAt: time.Now().UTC()}, []byte(uuid.NewString())); err != nil {
		t.Fatal(err)
	}
	return store, tenant
}
