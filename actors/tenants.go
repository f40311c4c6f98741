package actors

import (
	"context"
	"time"

	"github.com/google/uuid"

	"svc/credential"
	"svc/persistence"
)

// NewTenant creates a tenant with its first admin operator token and a
// tenant_created audit event, in one transaction, and returns the token's
// plaintext (shown once). POST /v1/tenants, `svc tenants create` and the
// start-up bootstrap share it; actor names who asked.
func NewTenant(ctx context.Context, store persistence.TenantStore, name, actor string) (persistence.Tenant, string, error) {
	now := time.Now().UTC().Truncate(time.Microsecond)
	t := persistence.Tenant{ID: uuid.NewString(), Name: name, AutoRotateTokenOnLeak: true, CreatedAt: now}
	tok, hash := credential.Mint(credential.OperatorPrefix)
	op := persistence.OperatorToken{ID: uuid.NewString(), TenantID: t.ID, Name: "admin", Role: persistence.RoleAdmin, CreatedAt: now}
	ev := persistence.AuditEvent{ID: persistence.NewRecordID(), TenantID: t.ID, EventType: "admin_action", Action: "tenant_created",
		Actor: actor, Details: map[string]any{"action": "tenant_created", "name": name, "token_id": op.ID}, CreatedAt: now}
	if err := store.CreateTenant(ctx, t, op, hash, ev); err != nil {
		return t, "", err
	}
	return t, tok, nil
}
