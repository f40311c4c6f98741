package control

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"svc/credential"
	"svc/persistence"
)

// Tenants and their operator tokens.

// NewTenant creates a tenant named name with its first admin operator token
// and a tenant_created admin_action event, in one transaction, and returns
// the token's plaintext (shown once); actor names who asked. It is the
// plain write, with the store's errors (persistence.ErrConflict for a name
// taken): the start-up bootstrap and `svc tenants create` call it with no
// plane; POST /tenants goes through [Plane.CreateTenant].
func NewTenant(ctx context.Context, store persistence.TenantStore, name, actor string) (persistence.Tenant, string, error) {
	now := time.Now().UTC().Truncate(time.Microsecond)
	t := persistence.Tenant{ID: uuid.NewString(), Name: name, AutoRotateTokenOnLeak: true, CreatedAt: now}
	tok, hash := credential.Mint(credential.OperatorPrefix)
	admin := persistence.OperatorToken{ID: uuid.NewString(), TenantID: t.ID, Name: "admin", Role: persistence.RoleAdmin, CreatedAt: now}
	ev := Event(Operator{TenantID: t.ID, Actor: actor}, "admin_action", "tenant_created", "",
		map[string]any{"name": name, "token_id": admin.ID})
	ev.CreatedAt = now
	if err := store.CreateTenant(ctx, t, admin, hash, ev); err != nil {
		return t, "", err
	}
	return t, tok, nil
}

// CreateTenant creates a tenant named name (stored without surrounding
// blanks) as [NewTenant] does, for actor. A name taken is a Conflict
// (already_exists) quoting name as given.
func (p *Plane) CreateTenant(ctx context.Context, actor, name string) (persistence.Tenant, string, error) {
	var t persistence.Tenant
	var tok string
	err := p.change(func() (err error) {
		t, tok, err = NewTenant(ctx, p.d.Store, strings.TrimSpace(name), actor)
		if errors.Is(err, persistence.ErrConflict) {
			return exists("tenant", "a tenant named %q already exists", name)
		}
		return err
	}, nil)
	if err != nil {
		return persistence.Tenant{}, "", err
	}
	return t, tok, nil
}

// DeleteTenant removes tenant id and every row it owns, its audit trail
// included: there is no event to record, so it is not an audited write
// and leaves the audit writer's health as it is. An unknown tenant is
// NotFound. The store drops its cached records of the tenant.
func (p *Plane) DeleteTenant(ctx context.Context, id string) error {
	return refuse(p.d.Store.DeleteTenant(ctx, id), "tenant", nil)
}

// TenantSettings is a change of the tenant's settings; a nil field is left
// as it is.
type TenantSettings struct {
	AutoRotateTokenOnLeak *bool
	// CodehostWebhookSecret is the tenant's own code-host webhook secret:
	// "generate" mints one (returned once by UpdateTenantSettings), ""
	// removes it, anything else is the secret itself, CodehostSecretMin to
	// CodehostSecretMax printable ASCII characters without spaces.
	CodehostWebhookSecret *string
}

// CodehostKeyPrefix starts every code-host webhook secret svc generates.
const CodehostKeyPrefix = "svc_chsec_"

// Limits of a tenant's own code-host webhook secret given by its admin.
const (
	CodehostSecretMin = 32
	CodehostSecretMax = 256
)

// codehostSecret is the secret a setting stores, and the one to show once
// when it was generated; a secret of the wrong form is an Invalid refusal.
func codehostSecret(v string) (secret, shown string, err error) {
	switch v {
	case "":
		return "", "", nil
	case "generate":
		secret, _ = credential.Mint(CodehostKeyPrefix)
		return secret, secret, nil
	}
	ok := len(v) >= CodehostSecretMin && len(v) <= CodehostSecretMax
	for i := 0; ok && i < len(v); i++ {
		ok = v[i] > ' ' && v[i] <= '~'
	}
	if !ok {
		return "", "", invalid("codehost_webhook_secret", `must be "generate", %d to %d printable ASCII characters without spaces, or null`,
			CodehostSecretMin, CodehostSecretMax)
	}
	return v, "", nil
}

// UpdateTenantSettings applies s to the caller's tenant, one
// tenant_settings_updated config_change event per setting changed (the
// secret's says set or removed, never the secret), and returns the tenant
// and, when the code-host secret was generated, that secret (shown once).
func (p *Plane) UpdateTenantSettings(ctx context.Context, op Operator, s TenantSettings) (persistence.Tenant, string, error) {
	shown := ""
	if s.CodehostWebhookSecret != nil {
		secret, generated, err := codehostSecret(*s.CodehostWebhookSecret)
		if err != nil {
			return persistence.Tenant{}, "", err
		}
		change := "set"
		if secret == "" {
			change = "removed"
		}
		err = p.change(func() error {
			return p.d.Store.SetCodehostWebhookSecret(ctx, op.TenantID, secret, time.Now().UTC().Truncate(time.Microsecond),
				Event(op, "config_change", "tenant_settings_updated", "", map[string]any{"codehost_webhook_secret": change}))
		}, nil)
		if err != nil {
			return persistence.Tenant{}, "", err
		}
		shown = generated
	}
	if s.AutoRotateTokenOnLeak == nil {
		t, err := p.d.Store.GetTenant(ctx, op.TenantID)
		return t, shown, err
	}
	var t persistence.Tenant
	err := p.change(func() (err error) {
		t, err = p.d.Store.UpdateTenantSettings(ctx, op.TenantID, *s.AutoRotateTokenOnLeak,
			Event(op, "config_change", "tenant_settings_updated", "",
				map[string]any{"auto_rotate_token_on_leak_enabled": *s.AutoRotateTokenOnLeak}))
		return err
	}, nil)
	return t, shown, err
}

// CreateOperatorToken mints an operator token named name with role for the
// caller's tenant, with an operator_token_created admin_action event, and
// returns it with its plaintext (shown once).
func (p *Plane) CreateOperatorToken(ctx context.Context, op Operator, name, role string) (persistence.OperatorToken, string, error) {
	tok, hash := credential.Mint(credential.OperatorPrefix)
	ot := persistence.OperatorToken{ID: uuid.NewString(), TenantID: op.TenantID, Name: name, Role: role,
		CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	err := p.change(func() error {
		return p.d.Store.CreateOperatorToken(ctx, ot, hash, Event(op, "admin_action", "operator_token_created", "",
			map[string]any{"token_id": ot.ID, "role": ot.Role}))
	}, nil)
	if err != nil {
		return persistence.OperatorToken{}, "", err
	}
	return ot, tok, nil
}

// DeleteOperatorToken revokes the caller's tenant's operator token id (it
// fails on its very next call), with an operator_token_revoked admin_action
// event. An unknown token, or another tenant's, is NotFound.
func (p *Plane) DeleteOperatorToken(ctx context.Context, op Operator, id string) error {
	return p.change(func() error {
		return refuse(p.d.Store.DeleteOperatorToken(ctx, op.TenantID, id,
			Event(op, "admin_action", "operator_token_revoked", "", map[string]any{"token_id": id})), "operator token", nil)
	}, nil)
}

// exists refuses a change that would duplicate what exists (a name taken):
// Exists, code already_exists (http: 409 AlreadyExists).
func exists(what, format string, args ...any) *Refusal {
	return &Refusal{Kind: Exists, What: what, Code: "already_exists", Message: fmt.Sprintf(format, args...)}
}
