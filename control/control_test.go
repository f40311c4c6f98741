package control_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"svc/actors"
	"svc/control"
	"svc/persistence"
	"svc/persistence/sqlite"
)

// fixture is a plane over a real SQLite store with one tenant, whose
// writes fail with failWith while it is set (the database going away).
type fixture struct {
	plane    *control.Plane
	store    *failingStore
	registry *actors.Registry
	mcp      *recordedDrops
	op       control.Operator
}

type failingStore struct {
	persistence.Store
	mu       sync.Mutex
	failWith error
}

func (f *failingStore) fail() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failWith
}

func (f *failingStore) TransitionAgent(ctx context.Context, tenantID, id string, from []string, to string, audit ...persistence.AuditEvent) (persistence.Agent, error) {
	if err := f.fail(); err != nil {
		return persistence.Agent{}, err
	}
	return f.Store.TransitionAgent(ctx, tenantID, id, from, to, audit...)
}

func (f *failingStore) UpdateMCPServer(ctx context.Context, tenantID, key string, p persistence.MCPServerPatch, audit ...persistence.AuditEvent) (persistence.MCPServer, error) {
	if err := f.fail(); err != nil {
		return persistence.MCPServer{}, err
	}
	return f.Store.UpdateMCPServer(ctx, tenantID, key, p, audit...)
}

// recordedDrops records the MCP cache drops the plane asks for.
type recordedDrops struct {
	mu   sync.Mutex
	keys []string
}

func (r *recordedDrops) Changed(_ context.Context, tenantID, key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.keys = append(r.keys, tenantID+"/"+key)
}

func (r *recordedDrops) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.keys...)
}

func newFixture(t *testing.T) *fixture {
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
	f := &fixture{store: &failingStore{Store: store}, registry: actors.NewRegistry(), mcp: &recordedDrops{},
		op: control.Operator{TenantID: tenant.ID, Actor: "operator:test"}}
	f.plane = control.New(control.Deps{Store: f.store, Registry: f.registry, MCP: f.mcp})
	return f
}

func (f *fixture) agent(t *testing.T, status string) string {
	t.Helper()
	ctx := context.Background()
	a := persistence.Agent{ID: uuid.NewString(), TenantID: f.op.TenantID, Name: "a-" + uuid.NewString()[:8], Status: persistence.AgentActive,
		RiskTier: "low", CreatedAt: time.Now().UTC()}
	if err := f.store.CreateAgent(ctx, a, []byte(uuid.NewString())); err != nil {
		t.Fatal(err)
	}
	if status != persistence.AgentActive {
		all := []string{persistence.AgentActive}
		if _, err := f.store.Store.TransitionAgent(ctx, f.op.TenantID, a.ID, all, status); err != nil {
			t.Fatal(err)
		}
	}
	return a.ID
}

func (f *fixture) audit(t *testing.T) []persistence.AuditEvent {
	t.Helper()
	evs, err := f.store.ListAudit(context.Background(), f.op.TenantID, persistence.AuditFilter{}, persistence.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func (f *fixture) health(t *testing.T) actors.State {
	t.Helper()
	c, ok := f.registry.Get(control.ComponentAuditWriter)
	if !ok {
		t.Fatal("the plane registered no audit writer health entry")
	}
	return c.State
}

func refusal(t *testing.T, err error) *control.Refusal {
	t.Helper()
	var r *control.Refusal
	if !errors.As(err, &r) {
		t.Fatalf("error %v is not a refusal", err)
	}
	return r
}

// The agent lifecycle table, applied from every status: the allowed ones
// move the agent and record one admin_action event in the same write; the
// others are a Conflict refusal naming the operation, and change nothing.
func TestAgentTransitions(t *testing.T) {
	statuses := []string{persistence.AgentActive, persistence.AgentQuarantined, persistence.AgentFrozen, persistence.AgentRevoked}
	f := newFixture(t)
	ctx := context.Background()
	for _, tr := range control.Transitions() {
		for _, from := range statuses {
			t.Run(fmt.Sprintf("%s_from_%s", tr.Op, from), func(t *testing.T) {
				id := f.agent(t, from)
				before := len(f.audit(t))
				a, err := f.plane.TransitionAgent(ctx, f.op, id, tr)
				allowed := false
				for _, s := range tr.From {
					allowed = allowed || s == from
				}
				if !allowed {
					r := refusal(t, err)
					if r.Kind != control.Conflict || r.Code != "invalid_transition" || r.Message != "the agent's status does not allow "+tr.Op {
						t.Fatalf("refusal %+v", r)
					}
					if n := len(f.audit(t)); n != before {
						t.Fatalf("a refused transition recorded %d audit events", n-before)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if a.Status != tr.To {
					t.Fatalf("status %q, want %q", a.Status, tr.To)
				}
				evs := f.audit(t)
				if len(evs) != before+1 {
					t.Fatalf("%d audit events recorded, want 1", len(evs)-before)
				}
				ev := evs[0]
				if ev.EventType != "admin_action" || ev.Action != tr.Action || ev.AgentID != id || ev.Actor != "operator:test" ||
					ev.Details["to"] != tr.To {
					t.Fatalf("audit event %+v", ev)
				}
			})
		}
	}
}

func TestAgentNotFoundAndDelete(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	_, err := f.plane.TransitionAgent(ctx, f.op, uuid.NewString(), control.Transitions()[0])
	if r := refusal(t, err); r.Kind != control.NotFound || r.What != "agent" {
		t.Fatalf("unknown agent: %+v", r)
	}
	other := control.Operator{TenantID: uuid.NewString(), Actor: "operator:x"}
	id := f.agent(t, persistence.AgentFrozen)
	if r := refusal(t, f.plane.DeleteAgent(ctx, other, id)); r.Kind != control.NotFound {
		t.Fatalf("another tenant's agent: %+v", r)
	}
	if err := f.plane.DeleteAgent(ctx, f.op, id); err != nil {
		t.Fatal(err)
	}
	if r := refusal(t, f.plane.DeleteAgent(ctx, f.op, id)); r.Kind != control.NotFound {
		t.Fatalf("deleting a deleted agent: %+v", r)
	}
	if ev := f.audit(t)[0]; ev.Action != "agent_deleted" || ev.AgentID != id {
		t.Fatalf("audit event %+v", ev)
	}
}

func TestRotateAgentToken(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id := f.agent(t, persistence.AgentActive)
	tok, err := f.plane.RotateAgentToken(ctx, f.op, id, "operator_rotation")
	if err != nil || len(tok) < 20 {
		t.Fatalf("token %q, error %v", tok, err)
	}
	if ev := f.audit(t)[0]; ev.EventType != "agent_token_rotated" || ev.Action != "operator_rotation" {
		t.Fatalf("audit event %+v", ev)
	}
	if _, err := f.plane.RotateAgentToken(ctx, f.op, uuid.NewString(), "operator_rotation"); refusal(t, err).Kind != control.NotFound {
		t.Fatal("an unknown agent's rotation was not NotFound")
	}
}

// The audit writer's health follows the writes: degraded while they fail
// for storage reasons, untouched by refusals, ok after the next success.
func TestAuditWriterHealth(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	freeze := control.Transitions()[0]
	id := f.agent(t, persistence.AgentActive)
	if got := f.health(t); got != actors.StateOK {
		t.Fatalf("health at start %q", got)
	}
	f.store.failWith = fmt.Errorf("write: %w", persistence.ErrUnavailable)
	if _, err := f.plane.TransitionAgent(ctx, f.op, id, freeze); !errors.Is(err, persistence.ErrUnavailable) {
		t.Fatalf("error %v", err)
	}
	if got := f.health(t); got != actors.StateDegraded {
		t.Fatalf("health after a storage failure %q", got)
	}
	f.store.failWith = nil
	if _, err := f.plane.TransitionAgent(ctx, f.op, uuid.NewString(), freeze); refusal(t, err).Kind != control.NotFound {
		t.Fatal("want NotFound")
	}
	if got := f.health(t); got != actors.StateDegraded {
		t.Fatalf("a refusal changed the health to %q", got)
	}
	if _, err := f.plane.TransitionAgent(ctx, f.op, id, freeze); err != nil {
		t.Fatal(err)
	}
	if got := f.health(t); got != actors.StateOK {
		t.Fatalf("health after a success %q", got)
	}
}

func TestStorageFailure(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{persistence.ErrNotFound, false},
		{fmt.Errorf("x: %w", persistence.ErrStateConflict), false},
		{persistence.ErrConflict, false},
		{persistence.ErrInvalidInput, false},
		{&control.Refusal{Kind: control.Conflict}, false},
		{persistence.ErrUnavailable, true},
		{persistence.ErrBusy, true},
		{context.DeadlineExceeded, true},
		{errors.New("anything else"), true},
		{domainErr(true), false},
		{domainErr(false), true},
	} {
		if got := control.StorageFailure(c.err); got != c.want {
			t.Errorf("StorageFailure(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

type domainErr bool

func (d domainErr) Error() string { return "domain" }
func (d domainErr) Domain() bool  { return bool(d) }

// MCP server changes: quarantine and restore move the status only from the
// state they apply to, record a config_change event, and drop the server's
// caches on every node only after a commit.
func TestMCPServerChanges(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	srv, err := f.store.CreateMCPServer(ctx, persistence.MCPServer{TenantID: f.op.TenantID, Key: "github", Transport: persistence.MCPTransportStdio,
		TrustLevel: "low", Status: persistence.MCPServerActive, CreatedAt: time.Now().UTC(), UpdatedAt: time.Now().UTC()}, 100)
	if err != nil {
		t.Fatal(err)
	}
	key := srv.Key
	got, err := f.plane.QuarantineMCPServer(ctx, f.op, key)
	if err != nil || got.Status != persistence.MCPServerQuarantined {
		t.Fatalf("quarantine: %+v %v", got, err)
	}
	if ev := f.audit(t)[0]; ev.EventType != "config_change" || ev.Action != "mcp_server_quarantined" || ev.Details["server_key"] != key ||
		ev.Details["to"] != persistence.MCPServerQuarantined {
		t.Fatalf("audit event %+v", ev)
	}
	if _, err := f.plane.QuarantineMCPServer(ctx, f.op, key); refusal(t, err).Message != "the mcp server is already quarantined" {
		t.Fatalf("second quarantine: %v", err)
	}
	f.store.failWith = persistence.ErrUnavailable
	if _, err := f.plane.RestoreMCPServer(ctx, f.op, key); !errors.Is(err, persistence.ErrUnavailable) {
		t.Fatalf("restore while the store fails: %v", err)
	}
	f.store.failWith = nil
	if _, err := f.plane.RestoreMCPServer(ctx, f.op, key); err != nil {
		t.Fatal(err)
	}
	if _, err := f.plane.RestoreMCPServer(ctx, f.op, key); refusal(t, err).Message != "the mcp server is not quarantined" {
		t.Fatalf("second restore: %v", err)
	}
	if _, err := f.plane.PinMCPServer(ctx, f.op, key); refusal(t, err).Code != "invalid_transition" {
		t.Fatalf("pin before discovery: %v", err)
	}
	if _, err := f.plane.QuarantineMCPServer(ctx, f.op, "nope"); refusal(t, err).Kind != control.NotFound {
		t.Fatal("unknown server: want NotFound")
	}
	if err := f.plane.DeleteMCPServer(ctx, f.op, key); err != nil {
		t.Fatal(err)
	}
	want := []string{f.op.TenantID + "/" + key, f.op.TenantID + "/" + key, f.op.TenantID + "/" + key}
	if drops := f.mcp.list(); fmt.Sprint(drops) != fmt.Sprint(want) {
		t.Fatalf("cache drops %v, want one per committed change %v", drops, want)
	}
}
