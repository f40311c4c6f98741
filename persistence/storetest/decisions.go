package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/persistence"
)

// testSeal is a stand-in for the receipt package's sealer: it links each
// receipt to the previous one by hash.
func testSeal(_ string, head persistence.ChainHead, rs []*persistence.Receipt) error {
	for _, r := range rs {
		head.Seq++
		r.Seq, r.PrevHash = head.Seq, head.Hash
		h := sha256.Sum256([]byte(head.Hash + r.ID))
		r.Hash = hex.EncodeToString(h[:])
		head.Hash = r.Hash
	}
	return nil
}

func decisionWrite(tenantID, agentID, decision string, requestID *string) persistence.DecisionWrite {
	now := time.Now().UTC().Truncate(time.Microsecond)
	d := persistence.Decision{ID: id(), TenantID: tenantID, AgentID: agentID, RequestID: requestID, Tool: "github",
		Action: "create_issue", ActionHash: "ab", Decision: decision, Reason: "because " + decision, RiskScore: 10,
		CompositeRiskScore: 20, MatchedPolicyIDs: []string{"default_allow_read"}, RedactedFields: []string{},
		MutatesState: decision != "allow", TrustLevel: "unknown", RootTrustLevel: "unknown",
		ToolCall: json.RawMessage(`{"tool":"github"}`), CreatedAt: now, AuditID: id()}
	r := &persistence.Receipt{ID: id(), TenantID: tenantID, DecisionID: d.ID, ActionHash: d.ActionHash, Decision: decision, CreatedAt: now}
	return persistence.DecisionWrite{Decision: d, Receipt: r}
}

// RunDecisions runs the decision, receipt, policy, skill and risk contract.
func RunDecisions(t *testing.T, open func(t *testing.T) persistence.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s persistence.Store)
	}{
		{"commit, read back, search and stats", testCommitAndRead},
		{"a simulation reads the newest decisions of a range in seq order", testSimulationReads},
		{"a policy's mode and a decision's shadow outcomes are kept", testShadowKept},
		{"concurrent committers never fork a chain", testChainNoFork},
		{"a failed batch writes nothing", testBatchAtomic},
		{"search sees every committed row, in small and large batches and after a deletion", testSearchBacklog},
		{"search finds an id pasted whole and a hyphenated word as typed", testSearchHyphens},
		{"policies bump the tenant version", testPolicies},
		{"skills and risk settings", testSkillsRisk},
		{"recent replay nonces, oldest first, in every tenant", testRecentNonces},
		{"the audit list merges decisions and events in one order, by offset and by cursor", testAuditMerge},
		{"evidence reads: an agent's and a run's decisions, events to decisions, risk windows", testEvidenceReads},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

func testCommitAndRead(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	b, _ := mustTenant(t, s, "b")
	ag := mustAgent(t, s, a.ID, "bot")
	req := "req-1"
	w1 := decisionWrite(a.ID, ag.ID, "allow", &req)
	w2 := decisionWrite(a.ID, ag.ID, "deny", nil)
	w3 := decisionWrite(b.ID, "other", "allow", nil)
	if err := s.CommitDecisions(ctx(t), []persistence.DecisionWrite{w1, w2, w3}, testSeal); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetDecision(ctx(t), a.ID, w1.Decision.ID)
	if err != nil || got.ReceiptID != w1.Receipt.ID || got.ReceiptHash == "" || got.Decision != "allow" ||
		len(got.MatchedPolicyIDs) != 1 || string(got.ToolCall) != `{"tool":"github"}` {
		t.Fatalf("GetDecision = %+v, %v", got, err)
	}
	if _, err := s.GetDecision(ctx(t), b.ID, w1.Decision.ID); err == nil {
		t.Fatal("tenant b read tenant a's decision")
	}
	byReq, err := s.FindDecisionByRequest(ctx(t), a.ID, ag.ID, "req-1")
	if err != nil || byReq.ID != w1.Decision.ID {
		t.Fatalf("FindDecisionByRequest = %+v, %v", byReq, err)
	}
	dup := decisionWrite(a.ID, ag.ID, "allow", &req)
	wantErr(t, s.CommitDecisions(ctx(t), []persistence.DecisionWrite{dup}, testSeal), persistence.ErrConflict)
	list, err := s.ListDecisions(ctx(t), a.ID, "", persistence.Page{Limit: 10})
	if err != nil || len(list) != 2 || list[0].ID != w2.Decision.ID {
		t.Fatalf("ListDecisions = %d, %v", len(list), err)
	}
	found, _ := s.ListDecisions(ctx(t), a.ID, "because den", persistence.Page{Limit: 10})
	if len(found) != 1 || found[0].ID != w2.Decision.ID {
		t.Fatalf("q search found %d", len(found))
	}
	head, _ := s.ChainHead(ctx(t), a.ID)
	if head.Seq != 2 || head.Hash != w2.Receipt.Hash {
		t.Fatalf("head = %+v", head)
	}
	rs, _ := s.ReceiptRange(ctx(t), a.ID, 1, 0, 100)
	if len(rs) != 2 || rs[0].Seq != 1 || rs[0].PrevHash != "" || rs[1].PrevHash != rs[0].Hash {
		t.Fatalf("ReceiptRange = %+v", rs)
	}
	byID, _ := s.ReceiptsByID(ctx(t), a.ID, []string{w2.Receipt.ID, w3.Receipt.ID, w1.Receipt.ID})
	if len(byID) != 2 || byID[0].ID != w2.Receipt.ID {
		t.Fatalf("ReceiptsByID (other tenant's id skipped) = %+v", byID)
	}
	st, err := s.TenantStats(ctx(t), a.ID)
	if err != nil || st.TotalDecisions != 2 || st.ByDecision["deny"] != 1 || st.TrustLevelBreakdown["unknown"] != 2 || st.AgentsTotal != 1 {
		t.Fatalf("TenantStats = %+v, %v", st, err)
	}
	ev, _ := s.ListAudit(ctx(t), a.ID, persistence.AuditFilter{EventType: "authorize_decision"}, persistence.Page{Limit: 10})
	if len(ev) != 2 {
		t.Fatalf("audit rows travelled with the decisions: %d", len(ev))
	}
}

func testChainNoFork(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	const writers, batches, per = 4, 10, 5
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < batches; i++ {
				batch := make([]persistence.DecisionWrite, per)
				for j := range batch {
					batch[j] = decisionWrite(a.ID, "agent", "allow", nil)
				}
				var err error
				for attempt := 0; attempt < 20; attempt++ {
					if err = s.CommitDecisions(context.Background(), batch, testSeal); err == nil {
						break
					}
					time.Sleep(time.Duration(attempt+1) * time.Millisecond)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	rs, err := s.ReceiptRange(ctx(t), a.ID, 1, 0, 10000)
	if err != nil || len(rs) != writers*batches*per {
		t.Fatalf("receipts = %d, %v", len(rs), err)
	}
	prev := ""
	for i, r := range rs {
		if r.Seq != int64(i+1) || r.PrevHash != prev {
			t.Fatalf("chain forked or has a gap at index %d: %+v", i, r)
		}
		prev = r.Hash
	}
}

func testBatchAtomic(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	good := decisionWrite(a.ID, "agent", "allow", nil)
	bad := decisionWrite("no-such-tenant", "agent", "allow", nil)
	if err := s.CommitDecisions(ctx(t), []persistence.DecisionWrite{good, bad}, testSeal); err == nil {
		t.Fatal("a write for an unknown tenant committed")
	}
	if _, err := s.GetDecision(ctx(t), a.ID, good.Decision.ID); err == nil {
		t.Fatal("half a failed batch was committed")
	}
	if h, _ := s.ChainHead(ctx(t), a.ID); h.Seq != 0 {
		t.Fatalf("head advanced by a failed batch: %+v", h)
	}
}

func testPolicies(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	b, _ := mustTenant(t, s, "b")
	v0, _ := s.PolicyVersion(ctx(t), a.ID)
	p, err := s.CreatePolicy(ctx(t), persistence.Policy{TenantID: a.ID, Name: "pci", Rego: "package svc.policies.pci", Enabled: true})
	if err != nil || p.Version != 1 {
		t.Fatalf("CreatePolicy = %+v, %v", p, err)
	}
	_, err = s.CreatePolicy(ctx(t), persistence.Policy{TenantID: a.ID, Name: "pci", Rego: "x", Enabled: true})
	wantErr(t, err, persistence.ErrConflict)
	p.Rego, p.Enabled = "package svc.policies.pci\n", false
	up, err := s.UpdatePolicy(ctx(t), p)
	if err != nil || up.Version != 2 || up.Enabled {
		t.Fatalf("UpdatePolicy = %+v, %v", up, err)
	}
	if _, err := s.GetPolicy(ctx(t), b.ID, "pci"); err == nil {
		t.Fatal("tenant b read tenant a's policy")
	}
	wantErr(t, s.DeletePolicy(ctx(t), b.ID, "pci"), persistence.ErrNotFound)
	if err := s.DeletePolicy(ctx(t), a.ID, "pci"); err != nil {
		t.Fatal(err)
	}
	v1, _ := s.PolicyVersion(ctx(t), a.ID)
	if v1 != v0+3 {
		t.Fatalf("policy version %d → %d, want +3", v0, v1)
	}
	if vb, _ := s.PolicyVersion(ctx(t), b.ID); vb != 0 {
		t.Fatalf("tenant b's version moved: %d", vb)
	}
}

func testSkillsRisk(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	sk := persistence.Skill{TenantID: a.ID, Key: "github", Description: "code host",
		Actions: map[string]persistence.SkillAction{"merge": {Risk: "high", MutatesState: true, ApprovalRequired: true}}}
	if _, err := s.PutSkill(ctx(t), sk); err != nil {
		t.Fatal(err)
	}
	sk.Description = "v2"
	got, err := s.PutSkill(ctx(t), sk)
	if err != nil || got.Description != "v2" || !got.Actions["merge"].ApprovalRequired {
		t.Fatalf("PutSkill replace = %+v, %v", got, err)
	}
	list, _ := s.ListSkills(ctx(t), a.ID)
	if len(list) != 1 {
		t.Fatalf("ListSkills = %d", len(list))
	}
	if err := s.DeleteSkill(ctx(t), a.ID, "github"); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetSkill(ctx(t), a.ID, "github")
	wantErr(t, err, persistence.ErrNotFound)

	rs, err := s.GetRiskSettings(ctx(t), a.ID)
	if err != nil || rs.Weights != nil || rs.DenialThreshold != 5 || rs.WindowMinutes != 60 {
		t.Fatalf("defaults = %+v, %v", rs, err)
	}
	if err := s.PutRiskWeights(ctx(t), a.ID, map[string]float64{"trust": 0.5}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutRiskEscalation(ctx(t), a.ID, 3, 10); err != nil {
		t.Fatal(err)
	}
	rs, _ = s.GetRiskSettings(ctx(t), a.ID)
	if rs.Weights["trust"] != 0.5 || rs.DenialThreshold != 3 || rs.WindowMinutes != 10 {
		t.Fatalf("after put = %+v", rs)
	}
	ag := mustAgent(t, s, a.ID, "bot")
	if moved, err := s.EscalateTier(ctx(t), a.ID, ag.ID, "low", "medium"); err != nil || !moved {
		t.Fatalf("escalate = %v, %v", moved, err)
	}
	if moved, _ := s.EscalateTier(ctx(t), a.ID, ag.ID, "low", "medium"); moved {
		t.Fatal("a stale escalation moved the tier again")
	}
}

// testSearchBacklog: whatever the backend's full-text indexing does in bulk
// (SQLite indexes in batches inside the group commits), a search finds every
// committed decision and audit event: a few (below any batch threshold),
// many in one commit (above it), standalone audit events, and what remains
// after another tenant with rows not yet indexed is deleted.
func testSearchBacklog(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	b, _ := mustTenant(t, s, "b")
	agA := mustAgent(t, s, a.ID, "ag")
	agB := mustAgent(t, s, b.ID, "ag")
	commit := func(tenantID, agentID, reason string, n int) {
		t.Helper()
		ws := make([]persistence.DecisionWrite, n)
		for i := range ws {
			ws[i] = decisionWrite(tenantID, agentID, "deny", nil)
			ws[i].Decision.Reason = reason
		}
		if err := s.CommitDecisions(ctx(t), ws, testSeal); err != nil {
			t.Fatal(err)
		}
	}
	count := func(tenantID, q string) (decisions, audits int) {
		t.Helper()
		ds, err := s.ListDecisions(ctx(t), tenantID, q, persistence.Page{Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		es, err := s.ListAudit(ctx(t), tenantID, persistence.AuditFilter{Query: q}, persistence.Page{Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		return len(ds), len(es)
	}
	commit(a.ID, agA.ID, "fewrows", 3)
	if d, e := count(a.ID, "fewrows"); d != 3 || e != 3 {
		t.Fatalf("3 committed: search found %d decisions, %d audit events", d, e)
	}
	commit(b.ID, agB.ID, "tenantb", 2) // b's rows wait in the backlog (SQLite)
	commit(a.ID, agA.ID, "manyrows", 300)
	for range 4 {
		commit(a.ID, agA.ID, "smallbatch", 1)
	}
	if err := s.AppendAudit(ctx(t), []persistence.AuditEvent{audit(a.ID, "agent_created", "standalonerow")}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTenant(ctx(t), b.ID); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		q                string
		decisions, audit int
	}{{"manyrows", 300, 300}, {"smallbatch", 4, 4}, {"fewrows", 3, 3}, {"standalone", 0, 1}, {"tenantb", 0, 0}} {
		if d, e := count(a.ID, c.q); d != c.decisions || e != c.audit {
			t.Errorf("q=%s: %d decisions and %d audit events, want %d and %d", c.q, d, e, c.decisions, c.audit)
		}
	}
	// Rows written after the deletion are found too (the indexes were not
	// left behind by it).
	commit(a.ID, agA.ID, "afterdelete", 2)
	if d, e := count(a.ID, "afterdelete"); d != 2 || e != 2 {
		t.Fatalf("after the deletion: search found %d decisions, %d audit events", d, e)
	}
}

// testSearchHyphens: q drops hyphens without splitting there (SPEC 4.1), so
// an id pasted whole or a hyphenated word arrives as one term; the indexes
// hold values with their hyphens removed, and both match. Other separators
// still split, and the last term is still a prefix.
func testSearchHyphens(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	b, _ := mustTenant(t, s, "b")
	ag := mustAgent(t, s, a.ID, "ag")
	other := mustAgent(t, s, a.ID, "other")
	agB := mustAgent(t, s, b.ID, "ag")
	w := decisionWrite(a.ID, ag.ID, "deny", nil)
	resource := "repo/svc-main"
	w.Decision.Tool, w.Decision.Reason, w.Decision.Resource = "send-email", "fail-closed", &resource
	w.Decision.ActionHash, w.Receipt.ActionHash = "feedface0123", "feedface0123"
	plain := decisionWrite(a.ID, other.ID, "allow", nil)
	plain.Decision.Tool = "send"
	plain.Decision.ActionHash, plain.Receipt.ActionHash = "feedface0123", "feedface0123"
	wb := decisionWrite(b.ID, agB.ID, "deny", nil)
	wb.Decision.Tool = "send-email"
	if err := s.CommitDecisions(ctx(t), []persistence.DecisionWrite{w, plain, wb}, testSeal); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		q                string
		decisions, audit int
	}{
		{ag.ID, 1, 1},                  // the agent id as shown
		{strings.ToUpper(ag.ID), 1, 1}, // upper-case
		{w.Decision.ID, 0, 0},          // not an indexed column
		{w.Receipt.ID, 0, 1},           // in the audit event's details
		{w.Decision.ActionHash, 0, 2},  // in both audit events' details
		{"authorize_decision", 0, 2},   // the audit event's type
		{"send-email", 1, 1},           // as typed
		{"sendemail", 1, 1},            // as q leaves it
		{"sendem", 1, 1},               // a prefix of it
		{"send", 2, 2},                 // a prefix of both tools
		{"email", 0, 0},                // no longer a word of its own
		{"fail-closed", 1, 1},          // the reason
		{"repo svc", 1, 1},             // a slash still splits
		{"svcmain", 1, 1},              // the hyphen in the resource joins
		{agB.ID, 0, 0},                 // another tenant's agent
	} {
		ds, err := s.ListDecisions(ctx(t), a.ID, c.q, persistence.Page{Limit: 50})
		if err != nil {
			t.Fatal(err)
		}
		es, err := s.ListAudit(ctx(t), a.ID, persistence.AuditFilter{Query: c.q}, persistence.Page{Limit: 50})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) != c.decisions || len(es) != c.audit {
			t.Errorf("q=%s: %d decisions and %d audit events, want %d and %d", c.q, len(ds), len(es), c.decisions, c.audit)
		}
	}
}

func testRecentNonces(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	b, _ := mustTenant(t, s, "b")
	base := time.Now().UTC().Truncate(time.Microsecond)
	write := func(tenantID, agentID string, nonce *string, at time.Time) {
		t.Helper()
		w := decisionWrite(tenantID, agentID, "allow", nil)
		w.Decision.Nonce, w.Decision.CreatedAt, w.Receipt.CreatedAt = nonce, at, at
		if err := s.CommitDecisions(ctx(t), []persistence.DecisionWrite{w}, testSeal); err != nil {
			t.Fatal(err)
		}
	}
	str := func(v string) *string { return &v }
	write(a.ID, "bot", str("too-old-nonce"), base.Add(-10*time.Minute))
	write(a.ID, "bot", str("nonce-two"), base.Add(-2*time.Minute))
	write(a.ID, "bot", nil, base.Add(-time.Minute))
	write(b.ID, "other", str("nonce-b"), base.Add(-3*time.Minute))
	write(a.ID, "bot", str("nonce-two"), base.Add(-30*time.Second)) // reused: recorded again

	got, err := s.RecentNonces(ctx(t), base.Add(-5*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	want := []persistence.NonceUse{
		{TenantID: b.ID, AgentID: "other", Nonce: "nonce-b", At: base.Add(-3 * time.Minute)},
		{TenantID: a.ID, AgentID: "bot", Nonce: "nonce-two", At: base.Add(-2 * time.Minute)},
		{TenantID: a.ID, AgentID: "bot", Nonce: "nonce-two", At: base.Add(-30 * time.Second)},
	}
	if len(got) != len(want) {
		t.Fatalf("RecentNonces = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].TenantID != want[i].TenantID || got[i].AgentID != want[i].AgentID || got[i].Nonce != want[i].Nonce ||
			!got[i].At.Equal(want[i].At) {
			t.Errorf("RecentNonces[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// testAuditMerge: the audit list is the administrative events and the
// decisions (as their authorize_decision events) in the order they were
// written, newest first; offset and cursor pages walk it without a gap or
// a repeat, filters and search apply to both kinds, and another tenant's
// rows never appear.
func testAuditMerge(t *testing.T, s persistence.Store) {
	a, _ := mustTenant(t, s, "a")
	b, _ := mustTenant(t, s, "b")
	ag := mustAgent(t, s, a.ID, "ag")
	agB := mustAgent(t, s, b.ID, "ag")
	base, err := s.ListAudit(ctx(t), a.ID, persistence.AuditFilter{}, persistence.Page{Limit: 100}) // the tenant's and agent's creation
	if err != nil {
		t.Fatal(err)
	}
	var want []string // ids, oldest first
	for i := range 9 {
		if i%3 == 0 {
			e := audit(a.ID, "config_change", fmt.Sprintf("mergechange%d", i))
			if err := s.AppendAudit(ctx(t), []persistence.AuditEvent{e}); err != nil {
				t.Fatal(err)
			}
			want = append(want, e.ID)
			continue
		}
		ws := []persistence.DecisionWrite{decisionWrite(a.ID, ag.ID, "allow", nil), decisionWrite(b.ID, agB.ID, "allow", nil)}
		if err := s.CommitDecisions(ctx(t), ws, testSeal); err != nil {
			t.Fatal(err)
		}
		want = append(want, ws[0].Decision.AuditID)
	}
	slices.Reverse(want)
	ids := func(es []persistence.AuditEvent) []string {
		out := []string{}
		for _, e := range es {
			out = append(out, e.ID)
		}
		return out
	}
	want = append(want, ids(base)...)
	all, err := s.ListAudit(ctx(t), a.ID, persistence.AuditFilter{}, persistence.Page{Limit: 100})
	if err != nil || !slices.Equal(ids(all), want) {
		t.Fatalf("merged list = %v (%v), want %v", ids(all), err, want)
	}
	for _, size := range []int{1, 2, 4} {
		var byOffset, byCursor []string
		for off := 0; off < len(want)+size; off += size {
			page, err := s.ListAudit(ctx(t), a.ID, persistence.AuditFilter{}, persistence.Page{Limit: size, Offset: off})
			if err != nil {
				t.Fatal(err)
			}
			byOffset = append(byOffset, ids(page[:min(len(page), size)])...)
		}
		var after int64
		for {
			page, err := s.ListAudit(ctx(t), a.ID, persistence.AuditFilter{}, persistence.Page{Limit: size, After: after})
			if err != nil {
				t.Fatal(err)
			}
			byCursor = append(byCursor, ids(page[:min(len(page), size)])...)
			if len(page) <= size {
				break
			}
			after = page[size-1].Seq
		}
		if !slices.Equal(byOffset, want) || !slices.Equal(byCursor, want) {
			t.Errorf("pages of %d: by offset %v, by cursor %v; want %v", size, byOffset, byCursor, want)
		}
	}
	decided, _ := s.ListAudit(ctx(t), a.ID, persistence.AuditFilter{EventType: persistence.EventAuthorizeDecision}, persistence.Page{Limit: 100})
	changes, _ := s.ListAudit(ctx(t), a.ID, persistence.AuditFilter{EventType: "config_change"}, persistence.Page{Limit: 100})
	if len(decided) != 6 || len(changes) != 3 {
		t.Errorf("by type: %d authorize_decision and %d config_change, want 6 and 3", len(decided), len(changes))
	}
	for _, e := range decided {
		if e.EventType != persistence.EventAuthorizeDecision || e.Actor != "agent:"+ag.ID || e.DecisionID == "" ||
			e.Details["receipt_id"] == "" || e.Details["tool"] != "github" {
			t.Errorf("authorize_decision event %+v", e)
		}
	}
	// One search over both kinds: "mergechange" only in the administrative
	// events, "github" and the event type only in the decisions, and no row
	// holds both.
	for _, c := range []struct {
		q    string
		want int
	}{{"mergechange", 3}, {"github", 6}, {"authorize_decision", 6}, {"github mergechange", 0}} {
		got, err := s.ListAudit(ctx(t), a.ID, persistence.AuditFilter{Query: c.q}, persistence.Page{Limit: 100})
		if err != nil || len(got) != c.want {
			t.Errorf("q=%s: %d events (%v), want %d", c.q, len(got), err, c.want)
		}
	}
	other, _ := s.ListAudit(ctx(t), b.ID, persistence.AuditFilter{EventType: persistence.EventAuthorizeDecision}, persistence.Page{Limit: 100})
	if len(other) != 6 {
		t.Errorf("tenant b's list has %d decisions, want its 6", len(other))
	}
	for _, e := range other {
		if e.TenantID != b.ID {
			t.Errorf("tenant b's list has %+v", e)
		}
	}
}
