package control_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"svc/actors"
	"svc/control"
	"svc/credential"
	"svc/persistence"
)

// brokenStore fails every write the tenant and agent changes make while
// failWith is set (the database going away), so each can be checked for
// the audit writer's health.
type brokenStore struct {
	persistence.Store
	failWith error
}

func (b *brokenStore) CreateTenant(ctx context.Context, t persistence.Tenant, admin persistence.OperatorToken, hash []byte, audit ...persistence.AuditEvent) error {
	if b.failWith != nil {
		return b.failWith
	}
	return b.Store.CreateTenant(ctx, t, admin, hash, audit...)
}

func (b *brokenStore) DeleteTenant(ctx context.Context, id string) error {
	if b.failWith != nil {
		return b.failWith
	}
	return b.Store.DeleteTenant(ctx, id)
}

func (b *brokenStore) UpdateTenantSettings(ctx context.Context, id string, autoRotate bool, audit ...persistence.AuditEvent) (persistence.Tenant, error) {
	if b.failWith != nil {
		return persistence.Tenant{}, b.failWith
	}
	return b.Store.UpdateTenantSettings(ctx, id, autoRotate, audit...)
}

func (b *brokenStore) SetCodehostWebhookSecret(ctx context.Context, tenantID, secret string, at time.Time, audit ...persistence.AuditEvent) error {
	if b.failWith != nil {
		return b.failWith
	}
	return b.Store.SetCodehostWebhookSecret(ctx, tenantID, secret, at, audit...)
}

func (b *brokenStore) CreateOperatorToken(ctx context.Context, t persistence.OperatorToken, hash []byte, audit ...persistence.AuditEvent) error {
	if b.failWith != nil {
		return b.failWith
	}
	return b.Store.CreateOperatorToken(ctx, t, hash, audit...)
}

func (b *brokenStore) DeleteOperatorToken(ctx context.Context, tenantID, id string, audit ...persistence.AuditEvent) error {
	if b.failWith != nil {
		return b.failWith
	}
	return b.Store.DeleteOperatorToken(ctx, tenantID, id, audit...)
}

func (b *brokenStore) CreateAgent(ctx context.Context, a persistence.Agent, hash []byte, audit ...persistence.AuditEvent) error {
	if b.failWith != nil {
		return b.failWith
	}
	return b.Store.CreateAgent(ctx, a, hash, audit...)
}

func (b *brokenStore) UpdateAgent(ctx context.Context, tenantID, id string, p persistence.AgentPatch, audit ...persistence.AuditEvent) (persistence.Agent, error) {
	if b.failWith != nil {
		return persistence.Agent{}, b.failWith
	}
	return b.Store.UpdateAgent(ctx, tenantID, id, p, audit...)
}

func (b *brokenStore) RotateAgentToken(ctx context.Context, tenantID, id string, hash []byte, audit ...persistence.AuditEvent) (persistence.Agent, error) {
	if b.failWith != nil {
		return persistence.Agent{}, b.failWith
	}
	return b.Store.RotateAgentToken(ctx, tenantID, id, hash, audit...)
}

func (b *brokenStore) AddPermission(ctx context.Context, p persistence.Permission, audit ...persistence.AuditEvent) error {
	if b.failWith != nil {
		return b.failWith
	}
	return b.Store.AddPermission(ctx, p, audit...)
}

func (b *brokenStore) DeletePermission(ctx context.Context, tenantID, agentID, tool string, audit ...persistence.AuditEvent) error {
	if b.failWith != nil {
		return b.failWith
	}
	return b.Store.DeletePermission(ctx, tenantID, agentID, tool, audit...)
}

func (b *brokenStore) AppendAudit(ctx context.Context, events []persistence.AuditEvent) error {
	if b.failWith != nil {
		return b.failWith
	}
	return b.Store.AppendAudit(ctx, events)
}

// brokenPlane is a plane over the fixture's store that fails the writes
// while its store's failWith is set, with its own health registry.
func brokenPlane(f *fixture) (*control.Plane, *brokenStore, *actors.Registry) {
	bs := &brokenStore{Store: f.store.Store}
	reg := actors.NewRegistry()
	return control.New(control.Deps{Store: bs, Registry: reg}), bs, reg
}

func auditOf(t *testing.T, store persistence.Store, tenantID string) []persistence.AuditEvent {
	t.Helper()
	evs, err := store.ListAudit(context.Background(), tenantID, persistence.AuditFilter{}, persistence.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// Tenant creation: the name is stored trimmed, the admin token is an
// operator token that authenticates with the admin role, tenant_created is
// recorded in the new tenant's trail; a name taken is the conflict http
// answered with, quoting the name as given, and changes nothing.
func TestCreateTenant(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	tn, tok, err := f.plane.CreateTenant(ctx, "admin", "  acme ")
	if err != nil {
		t.Fatal(err)
	}
	if tn.Name != "acme" || !tn.AutoRotateTokenOnLeak || !strings.HasPrefix(tok, credential.OperatorPrefix) {
		t.Fatalf("tenant %+v, token %q", tn, tok)
	}
	ot, err := f.store.LookupOperatorToken(ctx, credential.Hash(tok))
	if err != nil || ot.TenantID != tn.ID || ot.Role != persistence.RoleAdmin || ot.Name != "admin" {
		t.Fatalf("the admin token: %+v %v", ot, err)
	}
	evs := auditOf(t, f.store, tn.ID)
	if len(evs) != 1 || evs[0].EventType != "admin_action" || evs[0].Action != "tenant_created" || evs[0].Actor != "admin" ||
		evs[0].Details["name"] != "acme" || evs[0].Details["token_id"] != ot.ID || evs[0].Details["action"] != "tenant_created" {
		t.Fatalf("audit %+v", evs)
	}
	for _, name := range []string{"acme", " acme"} {
		_, _, err = f.plane.CreateTenant(ctx, "admin", name)
		if r := refusal(t, err); r.Kind != control.Exists || r.Code != "already_exists" || r.Message != `a tenant named "`+name+`" already exists` {
			t.Fatalf("duplicate %q: %+v", name, r)
		}
	}
	// The plain write (bootstrap, CLI) answers with the store's conflict.
	if _, _, err := control.NewTenant(ctx, f.store, "acme", "cli"); !errors.Is(err, persistence.ErrConflict) {
		t.Fatalf("NewTenant of a name taken: %v", err)
	}
}

func TestDeleteTenant(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if r := refusal(t, f.plane.DeleteTenant(ctx, uuid.NewString())); r.Kind != control.NotFound || r.What != "tenant" {
		t.Fatalf("unknown tenant: %+v", r)
	}
	tn, tok, err := f.plane.CreateTenant(ctx, "admin", "gone")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.plane.DeleteTenant(ctx, tn.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.GetTenant(ctx, tn.ID); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("the deleted tenant: %v", err)
	}
	if _, err := f.store.LookupOperatorToken(ctx, credential.Hash(tok)); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("the deleted tenant's token: %v", err)
	}
}

// Tenant settings: one tenant_settings_updated event per setting, the
// secret's saying set or removed and never the secret.
// TestCodehostSecretSetting: "generate" mints a secret shown once (and
// stored); a secret of the wrong form is refused before anything is
// written.
func TestCodehostSecretSetting(t *testing.T) {
	ctx := context.Background()
	t.Run("generate", func(t *testing.T) {
		f := newFixture(t)
		gen := "generate"
		_, shown, err := f.plane.UpdateTenantSettings(ctx, f.op, control.TenantSettings{CodehostWebhookSecret: &gen})
		if err != nil || !strings.HasPrefix(shown, control.CodehostKeyPrefix) || len(shown) < control.CodehostSecretMin {
			t.Fatalf("generated %q %v", shown, err)
		}
		if got, err := f.store.CodehostWebhookSecret(ctx, f.op.TenantID); err != nil || got != shown {
			t.Fatalf("stored %q %v, want the secret shown", got, err)
		}
		if evs := f.audit(t); len(evs) != 1 || strings.Contains(fmtDetails(evs[0]), shown) {
			t.Fatalf("events %+v", evs)
		}
	})
	for name, bad := range map[string]string{"too short": strings.Repeat("s", control.CodehostSecretMin-1),
		"too long": strings.Repeat("s", control.CodehostSecretMax+1), "a space": strings.Repeat("s", 31) + " x",
		"not ASCII": strings.Repeat("s", 40) + "\u00e9"} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			_, _, err := f.plane.UpdateTenantSettings(ctx, f.op, control.TenantSettings{CodehostWebhookSecret: &bad})
			var r *control.Refusal
			if !errors.As(err, &r) || r.Kind != control.Invalid || r.Field != "codehost_webhook_secret" {
				t.Fatalf("%q: %v, want an Invalid refusal of codehost_webhook_secret", bad, err)
			}
			if got, _ := f.store.CodehostWebhookSecret(ctx, f.op.TenantID); got != "" || len(f.audit(t)) != 0 {
				t.Fatalf("a refused secret was written (%q)", got)
			}
		})
	}
}

func TestUpdateTenantSettings(t *testing.T) {
	on, off := true, false
	secret, none := strings.Repeat("s", 40), ""
	for _, c := range []struct {
		name    string
		s       control.TenantSettings
		details []map[string]any // newest first
		rotate  bool
		secret  string
	}{
		{"nothing", control.TenantSettings{}, nil, false, ""},
		{"rotate on", control.TenantSettings{AutoRotateTokenOnLeak: &on},
			[]map[string]any{{"auto_rotate_token_on_leak_enabled": true}}, true, ""},
		{"rotate off", control.TenantSettings{AutoRotateTokenOnLeak: &off},
			[]map[string]any{{"auto_rotate_token_on_leak_enabled": false}}, false, ""},
		{"secret set", control.TenantSettings{CodehostWebhookSecret: &secret},
			[]map[string]any{{"codehost_webhook_secret": "set"}}, false, secret},
		{"secret removed", control.TenantSettings{CodehostWebhookSecret: &none},
			[]map[string]any{{"codehost_webhook_secret": "removed"}}, false, ""},
		{"both", control.TenantSettings{AutoRotateTokenOnLeak: &on, CodehostWebhookSecret: &secret},
			[]map[string]any{{"auto_rotate_token_on_leak_enabled": true}, {"codehost_webhook_secret": "set"}}, true, secret},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			tn, shown, err := f.plane.UpdateTenantSettings(ctx, f.op, c.s)
			if err != nil || shown != "" {
				t.Fatal(shown, err)
			}
			if tn.ID != f.op.TenantID || tn.AutoRotateTokenOnLeak != c.rotate {
				t.Fatalf("tenant %+v", tn)
			}
			if got, err := f.store.CodehostWebhookSecret(ctx, f.op.TenantID); err != nil || got != c.secret {
				t.Fatalf("secret %q %v", got, err)
			}
			evs := f.audit(t)
			if len(evs) != len(c.details) {
				t.Fatalf("%d events, want %d", len(evs), len(c.details))
			}
			for i, want := range c.details {
				ev := evs[i]
				if ev.EventType != "config_change" || ev.Action != "tenant_settings_updated" || ev.Actor != f.op.Actor {
					t.Fatalf("event %+v", ev)
				}
				for k, v := range want {
					if ev.Details[k] != v {
						t.Fatalf("event %d details %v, want %s=%v", i, ev.Details, k, v)
					}
				}
				if strings.Contains(fmtDetails(ev), secret) {
					t.Fatal("the audit event holds the secret")
				}
			}
		})
	}
}

func fmtDetails(ev persistence.AuditEvent) string {
	var b strings.Builder
	for k, v := range ev.Details {
		b.WriteString(k)
		if s, ok := v.(string); ok {
			b.WriteString(s)
		}
	}
	return b.String()
}

// Operator tokens: minted with the operator prefix, authenticating with
// their role; revoked once (then NotFound), never across tenants.
func TestOperatorTokens(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ot, tok, err := f.plane.CreateOperatorToken(ctx, f.op, "ci", persistence.RoleViewer)
	if err != nil || !strings.HasPrefix(tok, credential.OperatorPrefix) {
		t.Fatalf("token %q: %v", tok, err)
	}
	if got, err := f.store.LookupOperatorToken(ctx, credential.Hash(tok)); err != nil || got.ID != ot.ID || got.Role != persistence.RoleViewer ||
		got.TenantID != f.op.TenantID || got.Name != "ci" {
		t.Fatalf("lookup %+v %v", got, err)
	}
	if ev := f.audit(t)[0]; ev.EventType != "admin_action" || ev.Action != "operator_token_created" || ev.Details["token_id"] != ot.ID ||
		ev.Details["role"] != persistence.RoleViewer {
		t.Fatalf("audit event %+v", ev)
	}
	other := control.Operator{TenantID: uuid.NewString(), Actor: "operator:x"}
	for name, c := range map[string]struct {
		op control.Operator
		id string
	}{"unknown": {f.op, uuid.NewString()}, "another tenant's": {other, ot.ID}} {
		if r := refusal(t, f.plane.DeleteOperatorToken(ctx, c.op, c.id)); r.Kind != control.NotFound || r.What != "operator token" {
			t.Fatalf("%s token: %+v", name, r)
		}
	}
	if err := f.plane.DeleteOperatorToken(ctx, f.op, ot.ID); err != nil {
		t.Fatal(err)
	}
	if ev := f.audit(t)[0]; ev.Action != "operator_token_revoked" || ev.Details["token_id"] != ot.ID {
		t.Fatalf("audit event %+v", ev)
	}
	if _, err := f.store.LookupOperatorToken(ctx, credential.Hash(tok)); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("a revoked token still authenticates: %v", err)
	}
	if r := refusal(t, f.plane.DeleteOperatorToken(ctx, f.op, ot.ID)); r.Kind != control.NotFound {
		t.Fatalf("revoking twice: %+v", r)
	}
}
