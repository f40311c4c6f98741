package storetest

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"svc/persistence"
)

// Run runs the storage contract against stores made by open; each subtest
// gets a fresh store.
func Run(t *testing.T, open func(t *testing.T) persistence.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s persistence.Store)
	}{
		{"tenant create, get, list and duplicate name", testTenants},
		{"tenant delete removes every row and token", testTenantDelete},
		{"operator tokens are tenant scoped", testOperatorTokens},
		{"agents create, read, uniqueness among live agents", testAgents},
		{"agent transitions are conditional", testTransitions},
		{"agent patch and token rotation", testPatchRotate},
		{"agent listing, filter and pagination", testAgentPages},
		{"permissions add, duplicate, list, delete", testPermissions},
		{"heartbeats keep the latest time", testHeartbeats},
		{"audit listing, filter, search and cursor", testAudit},
		{"leader lease is exclusive until it expires", testLease},
		{"the write probe commits, again and again", testProbeWrite},
		{"concurrent writers all land", testConcurrentWrites},
		{"installation secrets: the first value stored wins, also at once", testInstallationSecrets},
		{"ping and pool stats", testPing},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			tc.fn(t, s)
		})
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func hash(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

func id() string { return uuid.NewString() }

func mustTenant(t *testing.T, s persistence.Store, name string) (persistence.Tenant, persistence.OperatorToken) {
	t.Helper()
	now := time.Now().UTC()
	tn := persistence.Tenant{ID: id(), Name: name, AutoRotateTokenOnLeak: true, CreatedAt: now}
	op := persistence.OperatorToken{ID: id(), TenantID: tn.ID, Name: "admin", Role: persistence.RoleAdmin, CreatedAt: now}
	if err := s.CreateTenant(ctx(t), tn, op, hash(op.ID), audit(tn.ID, "admin_action", "tenant_created")); err != nil {
		t.Fatalf("CreateTenant: %v", err)
	}
	return tn, op
}

func audit(tenantID, typ, action string) persistence.AuditEvent {
	return persistence.AuditEvent{ID: id(), TenantID: tenantID, EventType: typ, Action: action, Actor: "test",
		Details: map[string]any{"action": action}, CreatedAt: time.Now().UTC()}
}

func mustAgent(t *testing.T, s persistence.Store, tenantID, name string) persistence.Agent {
	t.Helper()
	now := time.Now().UTC()
	a := persistence.Agent{ID: id(), TenantID: tenantID, Name: name, Status: persistence.AgentActive, RiskTier: "low",
		CreatedAt: now, UpdatedAt: now}
	if err := s.CreateAgent(ctx(t), a, hash("tok-"+a.ID)); err != nil {
		t.Fatalf("CreateAgent: %v", err)
	}
	return a
}

func wantErr(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("got error %v, want %v", err, want)
	}
}

func testTenants(t *testing.T, s persistence.Store) {
	tn, op := mustTenant(t, s, "acme")
	got, err := s.GetTenant(ctx(t), tn.ID)
	if err != nil || got.Name != "acme" || !got.AutoRotateTokenOnLeak {
		t.Fatalf("GetTenant = %+v, %v", got, err)
	}
	if got.CreatedAt.Sub(tn.CreatedAt).Abs() > time.Millisecond {
		t.Fatalf("created_at round trip: %v vs %v", got.CreatedAt, tn.CreatedAt)
	}
	byName, err := s.GetTenantByName(ctx(t), "acme")
	if err != nil || byName.ID != tn.ID {
		t.Fatalf("GetTenantByName = %+v, %v", byName, err)
	}
	_, err = s.GetTenant(ctx(t), id())
	wantErr(t, err, persistence.ErrNotFound)
	dup := persistence.Tenant{ID: id(), Name: "acme", CreatedAt: time.Now()}
	err = s.CreateTenant(ctx(t), dup, persistence.OperatorToken{ID: id(), TenantID: dup.ID, Name: "a", Role: "admin", CreatedAt: time.Now()}, hash("x"))
	wantErr(t, err, persistence.ErrConflict)
	list, err := s.ListTenants(ctx(t))
	if err != nil || len(list) != 1 {
		t.Fatalf("ListTenants = %v, %v (the failed duplicate must not leave a row)", list, err)
	}
	found, err := s.LookupOperatorToken(ctx(t), hash(op.ID))
	if err != nil || found.TenantID != tn.ID || found.Role != "admin" {
		t.Fatalf("LookupOperatorToken = %+v, %v", found, err)
	}
	upd, err := s.UpdateTenantSettings(ctx(t), tn.ID, false, audit(tn.ID, "config_change", "tenant_settings_updated"))
	if err != nil || upd.AutoRotateTokenOnLeak {
		t.Fatalf("UpdateTenantSettings = %+v, %v", upd, err)
	}
	_, err = s.UpdateTenantSettings(ctx(t), id(), true)
	wantErr(t, err, persistence.ErrNotFound)
}

func testTenantDelete(t *testing.T, s persistence.Store) {
	a, opA := mustTenant(t, s, "a")
	b, _ := mustTenant(t, s, "b")
	ag := mustAgent(t, s, a.ID, "bot")
	if err := s.AddPermission(ctx(t), persistence.Permission{TenantID: a.ID, AgentID: ag.ID, ToolKey: "fs", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	bAgent := mustAgent(t, s, b.ID, "bot")
	if err := s.DeleteTenant(ctx(t), a.ID); err != nil {
		t.Fatal(err)
	}
	wantErr(t, s.DeleteTenant(ctx(t), a.ID), persistence.ErrNotFound)
	_, err := s.GetTenant(ctx(t), a.ID)
	wantErr(t, err, persistence.ErrNotFound)
	_, err = s.LookupOperatorToken(ctx(t), hash(opA.ID))
	wantErr(t, err, persistence.ErrNotFound)
	_, err = s.LookupAgentToken(ctx(t), hash("tok-"+ag.ID))
	wantErr(t, err, persistence.ErrNotFound)
	ev, err := s.ListAudit(ctx(t), a.ID, persistence.AuditFilter{}, persistence.Page{Limit: 10})
	if err != nil || len(ev) != 0 {
		t.Fatalf("audit of a deleted tenant = %v, %v", ev, err)
	}
	if _, err := s.GetAgent(ctx(t), b.ID, bAgent.ID); err != nil {
		t.Fatalf("the other tenant's agent is gone: %v", err)
	}
}

func testOperatorTokens(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	b, _ := mustTenant(t, s, "b")
	tok := persistence.OperatorToken{ID: id(), TenantID: a.ID, Name: "ci", Role: persistence.RoleViewer, CreatedAt: time.Now()}
	if err := s.CreateOperatorToken(ctx(t), tok, hash("ci")); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListOperatorTokens(ctx(t), a.ID)
	if err != nil || len(list) != 2 {
		t.Fatalf("ListOperatorTokens = %v, %v", list, err)
	}
	wantErr(t, s.DeleteOperatorToken(ctx(t), b.ID, tok.ID), persistence.ErrNotFound)
	if err := s.DeleteOperatorToken(ctx(t), a.ID, tok.ID); err != nil {
		t.Fatal(err)
	}
	_, err = s.LookupOperatorToken(ctx(t), hash("ci"))
	wantErr(t, err, persistence.ErrNotFound)
}

func testAgents(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	b, _ := mustTenant(t, s, "b")
	now := time.Now().UTC()
	ag := persistence.Agent{ID: id(), TenantID: a.ID, Name: "bot", Status: "active", RiskTier: "medium",
		AllowedEnvironments: []string{"prod", "staging"}, SigningKey: []byte("0123456789abcdef0123456789abcdef"),
		CreatedAt: now, UpdatedAt: now}
	if err := s.CreateAgent(ctx(t), ag, hash("t1")); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetAgent(ctx(t), a.ID, ag.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "bot" || got.RiskTier != "medium" || len(got.AllowedEnvironments) != 2 ||
		string(got.SigningKey) != string(ag.SigningKey) || got.LastSeenAt != nil {
		t.Fatalf("GetAgent = %+v", got)
	}
	_, err = s.GetAgent(ctx(t), b.ID, ag.ID)
	wantErr(t, err, persistence.ErrNotFound)
	dup := ag
	dup.ID = id()
	wantErr(t, s.CreateAgent(ctx(t), dup, hash("t2")), persistence.ErrConflict)
	// Same name in another tenant is fine.
	dup.TenantID = b.ID
	if err := s.CreateAgent(ctx(t), dup, hash("t3")); err != nil {
		t.Fatal(err)
	}
	// After deletion the name is free again.
	if _, err := s.TransitionAgent(ctx(t), a.ID, ag.ID, []string{"active"}, persistence.AgentDeleted); err != nil {
		t.Fatal(err)
	}
	again := mustAgent(t, s, a.ID, "bot")
	if again.ID == ag.ID {
		t.Fatal("same id")
	}
	byTok, err := s.LookupAgentToken(ctx(t), hash("t1"))
	if err != nil || byTok.Status != persistence.AgentDeleted {
		t.Fatalf("LookupAgentToken of a deleted agent = %+v, %v", byTok, err)
	}
	unrestricted := mustAgent(t, s, a.ID, "free")
	if unrestricted.AllowedEnvironments != nil {
		t.Fatal("unrestricted agent has environments")
	}
	g2, _ := s.GetAgent(ctx(t), a.ID, unrestricted.ID)
	if g2.AllowedEnvironments != nil || g2.SigningKey != nil {
		t.Fatalf("nil fields did not round-trip: %+v", g2)
	}
}

func testTransitions(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	ag := mustAgent(t, s, a.ID, "bot")
	got, err := s.TransitionAgent(ctx(t), a.ID, ag.ID, []string{"active", "quarantined"}, "frozen",
		audit(a.ID, "admin_action", "agent_frozen"))
	if err != nil || got.Status != "frozen" {
		t.Fatalf("freeze = %+v, %v", got, err)
	}
	_, err = s.TransitionAgent(ctx(t), a.ID, ag.ID, []string{"active", "quarantined"}, "frozen")
	wantErr(t, err, persistence.ErrStateConflict)
	_, err = s.TransitionAgent(ctx(t), a.ID, id(), []string{"active"}, "frozen")
	wantErr(t, err, persistence.ErrNotFound)
	ev, _ := s.ListAudit(ctx(t), a.ID, persistence.AuditFilter{EventType: "admin_action"}, persistence.Page{Limit: 10})
	n := 0
	for _, e := range ev {
		if e.Action == "agent_frozen" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("want exactly one agent_frozen audit event (the failed transition writes none), got %d", n)
	}
}

func testPatchRotate(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	ag := mustAgent(t, s, a.ID, "bot")
	name, tier := "renamed", "high"
	envs := []string{"prod"}
	key := []byte("k")
	got, err := s.UpdateAgent(ctx(t), a.ID, ag.ID, persistence.AgentPatch{Name: &name, RiskTier: &tier,
		AllowedEnvironments: &envs, SigningKey: &key})
	if err != nil || got.Name != name || got.RiskTier != tier || len(got.AllowedEnvironments) != 1 || string(got.SigningKey) != "k" {
		t.Fatalf("UpdateAgent = %+v, %v", got, err)
	}
	var none []string
	var nokey []byte
	got, err = s.UpdateAgent(ctx(t), a.ID, ag.ID, persistence.AgentPatch{AllowedEnvironments: &none, SigningKey: &nokey})
	if err != nil || got.AllowedEnvironments != nil || got.SigningKey != nil {
		t.Fatalf("clearing = %+v, %v", got, err)
	}
	other := mustAgent(t, s, a.ID, "other")
	_, err = s.UpdateAgent(ctx(t), a.ID, other.ID, persistence.AgentPatch{Name: &name})
	wantErr(t, err, persistence.ErrConflict)
	if _, err := s.RotateAgentToken(ctx(t), a.ID, ag.ID, hash("new")); err != nil {
		t.Fatal(err)
	}
	_, err = s.LookupAgentToken(ctx(t), hash("tok-"+ag.ID))
	wantErr(t, err, persistence.ErrNotFound)
	if got, err := s.LookupAgentToken(ctx(t), hash("new")); err != nil || got.ID != ag.ID {
		t.Fatalf("new token: %+v, %v", got, err)
	}
	b, _ := mustTenant(t, s, "b")
	_, err = s.RotateAgentToken(ctx(t), b.ID, ag.ID, hash("evil"))
	wantErr(t, err, persistence.ErrNotFound)
}

func testAgentPages(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	var ids []string
	for i := 0; i < 7; i++ {
		ids = append(ids, mustAgent(t, s, a.ID, fmt.Sprintf("bot%d", i)).ID)
	}
	if _, err := s.TransitionAgent(ctx(t), a.ID, ids[0], []string{"active"}, "deleted"); err != nil {
		t.Fatal(err)
	}
	// Limit 3 reads 4 rows: newest first.
	page, err := s.ListAgents(ctx(t), a.ID, persistence.AgentFilter{}, persistence.Page{Limit: 3})
	if err != nil || len(page) != 4 || page[0].ID != ids[6] {
		t.Fatalf("first page = %d rows, %v", len(page), err)
	}
	next, err := s.ListAgents(ctx(t), a.ID, persistence.AgentFilter{}, persistence.Page{Limit: 3, After: page[2].Seq})
	if err != nil || len(next) != 3 || next[0].ID != ids[3] || next[2].ID != ids[1] {
		t.Fatalf("second page = %+v, %v (deleted agents must be hidden)", next, err)
	}
	off, err := s.ListAgents(ctx(t), a.ID, persistence.AgentFilter{}, persistence.Page{Limit: 2, Offset: 4})
	if err != nil || len(off) != 2 || off[0].ID != ids[2] {
		t.Fatalf("offset page = %+v, %v", off, err)
	}
	del, err := s.ListAgents(ctx(t), a.ID, persistence.AgentFilter{Status: "deleted"}, persistence.Page{Limit: 10})
	if err != nil || len(del) != 1 || del[0].ID != ids[0] {
		t.Fatalf("status filter = %+v, %v", del, err)
	}
}

func testPermissions(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	b, _ := mustTenant(t, s, "b")
	ag := mustAgent(t, s, a.ID, "bot")
	p := persistence.Permission{TenantID: a.ID, AgentID: ag.ID, ToolKey: "github", CreatedAt: time.Now()}
	if err := s.AddPermission(ctx(t), p); err != nil {
		t.Fatal(err)
	}
	wantErr(t, s.AddPermission(ctx(t), p), persistence.ErrConflict)
	wantErr(t, s.AddPermission(ctx(t), persistence.Permission{TenantID: b.ID, AgentID: ag.ID, ToolKey: "x", CreatedAt: time.Now()}),
		persistence.ErrNotFound)
	list, err := s.ListPermissions(ctx(t), a.ID, ag.ID)
	if err != nil || len(list) != 1 || list[0].ToolKey != "github" {
		t.Fatalf("ListPermissions = %v, %v", list, err)
	}
	if list, _ := s.ListPermissions(ctx(t), b.ID, ag.ID); len(list) != 0 {
		t.Fatalf("other tenant sees %v", list)
	}
	wantErr(t, s.DeletePermission(ctx(t), b.ID, ag.ID, "github"), persistence.ErrNotFound)
	if err := s.DeletePermission(ctx(t), a.ID, ag.ID, "github"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, s.DeletePermission(ctx(t), a.ID, ag.ID, "github"), persistence.ErrNotFound)
}

func testHeartbeats(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	ag := mustAgent(t, s, a.ID, "bot")
	t1 := time.Now().UTC().Add(-time.Minute).Truncate(time.Microsecond)
	t0 := t1.Add(-time.Hour)
	if err := s.TouchAgents(ctx(t), []persistence.Heartbeat{{TenantID: a.ID, AgentID: ag.ID, At: t1}}); err != nil {
		t.Fatal(err)
	}
	if err := s.TouchAgents(ctx(t), []persistence.Heartbeat{{TenantID: a.ID, AgentID: ag.ID, At: t0}}); err != nil {
		t.Fatal(err)
	}
	got, _ := s.GetAgent(ctx(t), a.ID, ag.ID)
	if got.LastSeenAt == nil || !got.LastSeenAt.Equal(t1) {
		t.Fatalf("last_seen_at = %v, want %v", got.LastSeenAt, t1)
	}
}

func testAudit(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a") // writes one tenant_created event
	b, _ := mustTenant(t, s, "b")
	var evs []persistence.AuditEvent
	for i := 0; i < 5; i++ {
		evs = append(evs, audit(a.ID, "agent_token_rotated", fmt.Sprintf("rotation_%d", i)))
	}
	evs = append(evs, audit(a.ID, "config_change", "policy_file_reload"))
	if err := s.AppendAudit(ctx(t), evs); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendAudit(ctx(t), []persistence.AuditEvent{audit(b.ID, "agent_token_rotated", "other_tenant")}); err != nil {
		t.Fatal(err)
	}
	// An event of a tenant that does not exist (deleted while buffered) is
	// refused as a lasting failure, not as a busy or unreachable database:
	// the audit buffer then drops it alone instead of keeping it forever.
	gone := []persistence.AuditEvent{audit("no-such-tenant", "agent_quarantined", "orphan"), audit(a.ID, "config_change", "beside_orphan")}
	if err := s.AppendAudit(ctx(t), gone); err == nil || errors.Is(err, persistence.ErrBusy) || errors.Is(err, persistence.ErrUnavailable) {
		t.Fatalf("AppendAudit with an unknown tenant's event = %v; want a lasting failure", err)
	}
	all, err := s.ListAudit(ctx(t), a.ID, persistence.AuditFilter{}, persistence.Page{Limit: 100})
	if err != nil || len(all) != 7 {
		t.Fatalf("ListAudit = %d, %v", len(all), err)
	}
	if all[0].Action != "policy_file_reload" || all[0].Details["action"] != "policy_file_reload" {
		t.Fatalf("newest first with details: %+v", all[0])
	}
	typed, _ := s.ListAudit(ctx(t), a.ID, persistence.AuditFilter{EventType: "agent_token_rotated"}, persistence.Page{Limit: 100})
	if len(typed) != 5 {
		t.Fatalf("event_type filter = %d", len(typed))
	}
	cases := []struct {
		name string
		q    string
		want int
	}{
		{"prefix of a word", "polic", 1},
		{"underscored prefix", "policy_fi", 1},
		{"punctuation stripped", "policy!!!", 1},
		{"two words", "token rota", 5},
		{"no match", "zebra", 0},
		{"all punctuation means no filter", "!!!", 7},
		{"other tenant's words", "other_tenant", 0},
	}
	for _, c := range cases {
		got, err := s.ListAudit(ctx(t), a.ID, persistence.AuditFilter{Query: c.q}, persistence.Page{Limit: 100})
		if err != nil || len(got) != c.want {
			t.Errorf("%s: q=%q got %d rows, %v; want %d", c.name, c.q, len(got), err, c.want)
		}
	}
	p1, _ := s.ListAudit(ctx(t), a.ID, persistence.AuditFilter{}, persistence.Page{Limit: 3})
	if len(p1) != 4 {
		t.Fatalf("limit+1 rows expected, got %d", len(p1))
	}
	p2, _ := s.ListAudit(ctx(t), a.ID, persistence.AuditFilter{}, persistence.Page{Limit: 3, After: p1[2].Seq})
	if len(p2) != 4 || p2[0].Seq >= p1[2].Seq {
		t.Fatalf("cursor page = %d rows", len(p2))
	}
	p3, _ := s.ListAudit(ctx(t), a.ID, persistence.AuditFilter{}, persistence.Page{Limit: 3, After: p2[2].Seq})
	if len(p3) != 1 || p3[0].Action != "tenant_created" {
		t.Fatalf("last page = %+v", p3)
	}
}

func testProbeWrite(t *testing.T, s persistence.Store) {
	for i := range 3 {
		if err := s.ProbeWrite(ctx(t)); err != nil {
			t.Fatalf("ProbeWrite %d: %v", i+1, err)
		}
	}
}

func testLease(t *testing.T, s persistence.Store) {
	ok, err := s.AcquireLease(ctx(t), "maintenance", "n1", time.Second)
	if err != nil || !ok {
		t.Fatalf("first acquire = %v, %v", ok, err)
	}
	if ok, _ := s.AcquireLease(ctx(t), "maintenance", "n2", time.Second); ok {
		t.Fatal("n2 took a live lease")
	}
	if ok, _ := s.AcquireLease(ctx(t), "maintenance", "n1", 50*time.Millisecond); !ok {
		t.Fatal("n1 could not renew")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		ok, err := s.AcquireLease(ctx(t), "maintenance", "n2", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("n2 never took the expired lease")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ok, _ := s.AcquireLease(ctx(t), "maintenance", "n1", time.Second); ok {
		t.Fatal("n1 took n2's lease")
	}
	if err := s.ReleaseLease(ctx(t), "maintenance", "n2"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.AcquireLease(ctx(t), "maintenance", "n1", time.Second); !ok {
		t.Fatal("n1 could not take a released lease")
	}
}

func testConcurrentWrites(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs <- s.AppendAudit(context.Background(), []persistence.AuditEvent{audit(a.ID, "admin_action", fmt.Sprintf("c%d", i))})
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, _ := s.ListAudit(ctx(t), a.ID, persistence.AuditFilter{EventType: "admin_action"}, persistence.Page{Limit: 500})
	if len(got) != 41 {
		t.Fatalf("want 41 admin_action events, got %d", len(got))
	}
}

func testPing(t *testing.T, s persistence.Store) {
	if err := s.Ping(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SampleAcquire(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if st := s.PoolStats(); st.Max < 1 {
		t.Fatalf("PoolStats = %+v", st)
	}
}
