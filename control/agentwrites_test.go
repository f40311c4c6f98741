package control_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"

	"svc/actors"
	"svc/control"
	"svc/credential"
	"svc/persistence"
)

// Agent registration: the token is minted with the agent prefix and
// authenticates the agent, the key is kept or generated (32 bytes),
// agent_registered is recorded; a name taken is the conflict http answered
// with.
func TestCreateAgent(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	given := []byte(strings.Repeat("k", 40))
	for _, c := range []struct {
		name    string
		n       control.NewAgent
		keySize int
	}{
		{"plain", control.NewAgent{Name: "plain", RiskTier: "low"}, 0},
		{"restricted with a key", control.NewAgent{Name: "keyed", RiskTier: "high", AllowedEnvironments: []string{"prod"}, SigningKey: given}, 40},
		{"generated key", control.NewAgent{Name: "generated", RiskTier: "medium", GenerateSigningKey: true}, 32},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, tok, err := f.plane.CreateAgent(ctx, f.op, c.n)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(tok, credential.AgentPrefix) || a.Status != persistence.AgentActive || len(a.SigningKey) != c.keySize {
				t.Fatalf("agent %+v token %q", a, tok)
			}
			got, err := f.store.LookupAgentToken(ctx, credential.Hash(tok))
			if err != nil || got.ID != a.ID || got.Name != c.n.Name || got.RiskTier != c.n.RiskTier ||
				fmt.Sprint(got.AllowedEnvironments) != fmt.Sprint(c.n.AllowedEnvironments) || string(got.SigningKey) != string(a.SigningKey) {
				t.Fatalf("stored %+v %v", got, err)
			}
			if ev := f.audit(t)[0]; ev.EventType != "admin_action" || ev.Action != "agent_registered" || ev.AgentID != a.ID ||
				ev.Details["name"] != c.n.Name || ev.Details["risk_tier"] != c.n.RiskTier {
				t.Fatalf("audit event %+v", ev)
			}
		})
	}
	before := len(f.audit(t))
	_, _, err := f.plane.CreateAgent(ctx, f.op, control.NewAgent{Name: "plain", RiskTier: "low"})
	if r := refusal(t, err); r.Kind != control.Exists || r.Code != "already_exists" || r.Message != `an agent named "plain" already exists` {
		t.Fatalf("duplicate: %+v", r)
	}
	if len(f.audit(t)) != before {
		t.Fatal("a refused registration was audited")
	}
}

// Agent changes: the event names what changed (the signing key only that
// it did); a name taken, an unknown agent and another tenant's are refused.
func TestUpdateAgent(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	name, tier := "renamed", "high"
	envs, none := []string{"prod", "staging"}, []string(nil)
	key, nokey := []byte(strings.Repeat("k", 32)), []byte(nil)
	for _, c := range []struct {
		name    string
		ch      control.AgentChange
		details map[string]any
		check   func(a persistence.Agent) bool
	}{
		{"name and tier", control.AgentChange{Name: &name, RiskTier: &tier}, map[string]any{"name": name, "risk_tier": tier},
			func(a persistence.Agent) bool { return a.Name == name && a.RiskTier == tier }},
		{"environments", control.AgentChange{AllowedEnvironments: &envs}, map[string]any{"allowed_environments": "[prod staging]"},
			func(a persistence.Agent) bool { return fmt.Sprint(a.AllowedEnvironments) == "[prod staging]" }},
		{"environments cleared", control.AgentChange{AllowedEnvironments: &none}, map[string]any{"allowed_environments": nil},
			func(a persistence.Agent) bool { return a.AllowedEnvironments == nil }},
		{"key given", control.AgentChange{SigningKey: &key}, map[string]any{"signing_key_changed": true},
			func(a persistence.Agent) bool { return string(a.SigningKey) == string(key) }},
		{"key generated", control.AgentChange{GenerateSigningKey: true}, map[string]any{"signing_key_changed": true},
			func(a persistence.Agent) bool { return len(a.SigningKey) == 32 && string(a.SigningKey) != string(key) }},
		{"key removed", control.AgentChange{SigningKey: &nokey}, map[string]any{"signing_key_changed": true},
			func(a persistence.Agent) bool { return a.SigningKey == nil }},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := f.agent(t, persistence.AgentActive)
			a, err := f.plane.UpdateAgent(ctx, f.op, id, c.ch)
			if err != nil {
				t.Fatal(err)
			}
			stored, err := f.store.GetAgent(ctx, f.op.TenantID, id)
			if err != nil || !c.check(a) || !c.check(stored) {
				t.Fatalf("returned %+v stored %+v %v", a, stored, err)
			}
			ev := f.audit(t)[0]
			if ev.EventType != "admin_action" || ev.Action != "agent_updated" || ev.AgentID != id || len(ev.Details) != len(c.details)+1 {
				t.Fatalf("audit event %+v", ev)
			}
			for k, v := range c.details {
				if got := ev.Details[k]; fmt.Sprint(got) != fmt.Sprint(v) {
					t.Fatalf("details[%s] = %v, want %v", k, got, v)
				}
			}
		})
	}
	taken := "taken"
	if _, _, err := f.plane.CreateAgent(ctx, f.op, control.NewAgent{Name: taken, RiskTier: "low"}); err != nil {
		t.Fatal(err)
	}
	id := f.agent(t, persistence.AgentActive)
	other := control.Operator{TenantID: uuid.NewString(), Actor: "operator:x"}
	for _, c := range []struct {
		name string
		op   control.Operator
		id   string
		want control.Refusal
	}{
		{"name taken", f.op, id, control.Refusal{Kind: control.Exists, What: "agent", Code: "already_exists", Message: "an agent with that name already exists"}},
		{"unknown agent", f.op, uuid.NewString(), control.Refusal{Kind: control.NotFound, What: "agent"}},
		{"another tenant's agent", other, id, control.Refusal{Kind: control.NotFound, What: "agent"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.plane.UpdateAgent(ctx, c.op, c.id, control.AgentChange{Name: &taken})
			if r := refusal(t, err); fmt.Sprint(*r) != fmt.Sprint(c.want) {
				t.Fatalf("refusal %+v, want %+v", *r, c.want)
			}
		})
	}
}

// Tool bindings: granted once (then the conflict http answered with),
// revoked once (then NotFound), never across tenants.
func TestToolBindings(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id := f.agent(t, persistence.AgentActive)
	perm, err := f.plane.GrantTool(ctx, f.op, id, "github.create_issue")
	if err != nil || perm.AgentID != id || perm.ToolKey != "github.create_issue" || perm.CreatedAt.IsZero() {
		t.Fatalf("grant %+v %v", perm, err)
	}
	if ev := f.audit(t)[0]; ev.EventType != "admin_action" || ev.Action != "agent_tool_permission_granted" || ev.AgentID != id ||
		ev.Details["tool_key"] != "github.create_issue" {
		t.Fatalf("audit event %+v", ev)
	}
	if ps, err := f.store.ListPermissions(ctx, f.op.TenantID, id); err != nil || len(ps) != 1 {
		t.Fatalf("bindings %+v %v", ps, err)
	}
	other := control.Operator{TenantID: uuid.NewString(), Actor: "operator:x"}
	for _, c := range []struct {
		name string
		op   control.Operator
		id   string
		want control.Refusal
	}{
		{"bound already", f.op, id, control.Refusal{Kind: control.Exists, What: "permission", Code: "already_exists",
			Message: `tool "github.create_issue" is already bound`}},
		{"unknown agent", f.op, uuid.NewString(), control.Refusal{Kind: control.NotFound, What: "agent"}},
		{"another tenant's agent", other, id, control.Refusal{Kind: control.NotFound, What: "agent"}},
	} {
		t.Run("grant "+c.name, func(t *testing.T) {
			_, err := f.plane.GrantTool(ctx, c.op, c.id, "github.create_issue")
			if r := refusal(t, err); fmt.Sprint(*r) != fmt.Sprint(c.want) {
				t.Fatalf("refusal %+v, want %+v", *r, c.want)
			}
		})
	}
	if r := refusal(t, f.plane.RevokeTool(ctx, other, id, "github.create_issue")); r.Kind != control.NotFound || r.What != "permission" {
		t.Fatalf("another tenant's binding: %+v", r)
	}
	if err := f.plane.RevokeTool(ctx, f.op, id, "github.create_issue"); err != nil {
		t.Fatal(err)
	}
	if ev := f.audit(t)[0]; ev.Action != "agent_tool_permission_revoked" || ev.AgentID != id || ev.Details["tool_key"] != "github.create_issue" {
		t.Fatalf("audit event %+v", ev)
	}
	for _, agent := range []string{id, uuid.NewString()} {
		if r := refusal(t, f.plane.RevokeTool(ctx, f.op, agent, "github.create_issue")); r.Kind != control.NotFound || r.What != "permission" {
			t.Fatalf("revoking what is not bound: %+v", r)
		}
	}
}

// A leaked token: recorded without rotation while the tenant's
// auto-rotation is off, rotated (a new agent token, the old one dead) once
// it is on; an unknown or deleted agent is NotFound either way.
func TestReportLeakedToken(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	off, on := false, true
	a, oldTok, err := f.plane.CreateAgent(ctx, f.op, control.NewAgent{Name: "leaky", RiskTier: "low"})
	if err != nil {
		t.Fatal(err)
	}
	deleted := f.agent(t, persistence.AgentActive)
	if err := f.plane.DeleteAgent(ctx, f.op, deleted); err != nil {
		t.Fatal(err)
	}
	for _, auto := range []*bool{&off, &on} {
		if _, _, err := f.plane.UpdateTenantSettings(ctx, f.op, control.TenantSettings{AutoRotateTokenOnLeak: auto}); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{uuid.NewString(), deleted} {
			if _, _, err := f.plane.ReportLeakedToken(ctx, f.op, id); refusal(t, err).Kind != control.NotFound {
				t.Fatalf("auto=%t: agent %s: %v", *auto, id, err)
			}
		}
	}
	if _, _, err := f.plane.UpdateTenantSettings(ctx, f.op, control.TenantSettings{AutoRotateTokenOnLeak: &off}); err != nil {
		t.Fatal(err)
	}
	rotated, tok, err := f.plane.ReportLeakedToken(ctx, f.op, a.ID)
	if err != nil || rotated || tok != "" {
		t.Fatalf("without auto-rotation: %t %q %v", rotated, tok, err)
	}
	if ev := f.audit(t)[0]; ev.EventType != "agent_token_leak_detected_no_rotation" || ev.Action != "leak_reported" || ev.AgentID != a.ID ||
		ev.Details["rotated"] != false {
		t.Fatalf("audit event %+v", ev)
	}
	if _, err := f.store.LookupAgentToken(ctx, credential.Hash(oldTok)); err != nil {
		t.Fatalf("the token was rotated: %v", err)
	}
	if _, _, err := f.plane.UpdateTenantSettings(ctx, f.op, control.TenantSettings{AutoRotateTokenOnLeak: &on}); err != nil {
		t.Fatal(err)
	}
	rotated, tok, err = f.plane.ReportLeakedToken(ctx, f.op, a.ID)
	if err != nil || !rotated || !strings.HasPrefix(tok, credential.AgentPrefix) {
		t.Fatalf("with auto-rotation: %t %q %v", rotated, tok, err)
	}
	if ev := f.audit(t)[0]; ev.EventType != "agent_token_rotated" || ev.Action != "leak_rotation" || ev.AgentID != a.ID ||
		ev.Details["reason"] != "token reported leaked" {
		t.Fatalf("audit event %+v", ev)
	}
	if _, err := f.store.LookupAgentToken(ctx, credential.Hash(oldTok)); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("the leaked token still authenticates: %v", err)
	}
	if got, err := f.store.LookupAgentToken(ctx, credential.Hash(tok)); err != nil || got.ID != a.ID {
		t.Fatalf("the new token: %+v %v", got, err)
	}
}

// Every moved write marks the audit writer degraded when the storage
// fails, and ok after it succeeds; refusals leave the health as it is.
// Deleting a tenant records no event (its trail goes with it) and leaves
// the health alone.
func TestTenantAndAgentWritesHealth(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	plane, bs, reg := brokenPlane(f)
	health := func() actors.State {
		c, _ := reg.Get(control.ComponentAuditWriter)
		return c.State
	}
	on, secret := true, strings.Repeat("s", 40)
	id := f.agent(t, persistence.AgentActive)
	n := 0
	name := func() string { n++; return fmt.Sprintf("n%d", n) }
	for _, c := range []struct {
		name  string
		write func() error
	}{
		{"create tenant", func() error { _, _, err := plane.CreateTenant(ctx, "admin", name()); return err }},
		{"tenant settings", func() error {
			_, _, err := plane.UpdateTenantSettings(ctx, f.op, control.TenantSettings{AutoRotateTokenOnLeak: &on})
			return err
		}},
		{"codehost secret", func() error {
			_, _, err := plane.UpdateTenantSettings(ctx, f.op, control.TenantSettings{CodehostWebhookSecret: &secret})
			return err
		}},
		{"operator token", func() error {
			_, _, err := plane.CreateOperatorToken(ctx, f.op, name(), persistence.RoleAdmin)
			return err
		}},
		{"create agent", func() error {
			_, _, err := plane.CreateAgent(ctx, f.op, control.NewAgent{Name: name(), RiskTier: "low"})
			return err
		}},
		{"update agent", func() error {
			nm := name()
			_, err := plane.UpdateAgent(ctx, f.op, id, control.AgentChange{Name: &nm})
			return err
		}},
		{"grant tool", func() error { _, err := plane.GrantTool(ctx, f.op, id, name()); return err }},
		{"leak report", func() error { _, _, err := plane.ReportLeakedToken(ctx, f.op, id); return err }},
	} {
		t.Run(c.name, func(t *testing.T) {
			bs.failWith = fmt.Errorf("write: %w", persistence.ErrUnavailable)
			if err := c.write(); !errors.Is(err, persistence.ErrUnavailable) {
				t.Fatalf("error %v", err)
			}
			if got := health(); got != actors.StateDegraded {
				t.Fatalf("health after a storage failure %q", got)
			}
			bs.failWith = nil
			if err := c.write(); err != nil {
				t.Fatal(err)
			}
			if got := health(); got != actors.StateOK {
				t.Fatalf("health after a success %q", got)
			}
		})
	}
	// The leak report without auto-rotation appends its event alone.
	off := false
	if _, _, err := plane.UpdateTenantSettings(ctx, f.op, control.TenantSettings{AutoRotateTokenOnLeak: &off}); err != nil {
		t.Fatal(err)
	}
	bs.failWith = persistence.ErrUnavailable
	if _, _, err := plane.ReportLeakedToken(ctx, f.op, id); !errors.Is(err, persistence.ErrUnavailable) || health() != actors.StateDegraded {
		t.Fatalf("leak report without rotation: %v, health %q", err, health())
	}
	bs.failWith = nil
	// Refusals leave the health as they found it.
	for _, refused := range []error{
		plane.DeleteOperatorToken(ctx, f.op, uuid.NewString()),
		plane.RevokeTool(ctx, f.op, id, "unbound"),
		func() error { _, err := plane.GrantTool(ctx, f.op, uuid.NewString(), "x"); return err }(),
	} {
		_ = refusal(t, refused)
		if got := health(); got != actors.StateDegraded {
			t.Fatalf("a refusal changed the health to %q", got)
		}
	}
	tn, _, err := plane.CreateTenant(ctx, "admin", "doomed")
	if err != nil {
		t.Fatal(err)
	}
	bs.failWith = persistence.ErrUnavailable
	if err := plane.DeleteTenant(ctx, tn.ID); !errors.Is(err, persistence.ErrUnavailable) || health() != actors.StateOK {
		t.Fatalf("tenant deletion: %v, health %q", err, health())
	}
	bs.failWith = nil
}
