package httpapi

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"svc/control"
	"svc/persistence"
)

// The packs show records as the API shows them: each record packcontents
// writes equals, field for field, the API's view of the same stored row.
// packcontents has views of its own (what a pack carries is decided
// there); this keeps the two from drifting apart unnoticed. Every optional
// field of the records is set, so a field that only one side shows fails.
func TestEvidencePacksShowRecordsAsTheAPI(t *testing.T) {
	s := newTestServer(t)
	store := fullStore(s)
	ctx := context.Background()
	tenant, tok, err := control.NewTenant(ctx, store, "acme", "test")
	if err != nil {
		t.Fatal(err)
	}
	tid := tenant.ID
	now := time.Now().UTC().Truncate(time.Microsecond)
	agent := persistence.Agent{ID: uuid.NewString(), TenantID: tid, Name: "bot", Status: persistence.AgentActive, RiskTier: "high",
		AllowedEnvironments: []string{"prod"}, SigningKey: bytes.Repeat([]byte{1}, 32), CreatedAt: now, UpdatedAt: now}
	check(t, store.CreateAgent(ctx, agent, []byte("token-hash")))
	check(t, store.TouchAgents(ctx, []persistence.Heartbeat{{TenantID: tid, AgentID: agent.ID, At: now}}))
	_, err = store.CreatePolicy(ctx, persistence.Policy{TenantID: tid, Name: "p", Rego: "package svc.policies.p\n", Description: "d",
		Enabled: true, Version: 1, CreatedAt: now, UpdatedAt: now})
	check(t, err)
	_, err = store.PutSkill(ctx, persistence.Skill{TenantID: tid, Key: "github", Description: "d",
		Actions: map[string]persistence.SkillAction{"x": {Risk: "low"}}, CreatedAt: now, UpdatedAt: now})
	check(t, err)
	str := func(v string) *string { return &v }
	d := persistence.Decision{ID: uuid.NewString(), TenantID: tid, AgentID: agent.ID, RequestID: str("req"), Tool: "github", Action: "merge",
		Resource: str("repo"), ActionHash: "ah", Decision: "require_approval", Reason: "r", RiskScore: 1, CompositeRiskScore: 2,
		MatchedPolicyIDs: []string{"p"}, RedactedFields: []string{"f"}, MutatesState: true, TrustLevel: "trusted", RootTrustLevel: "trusted",
		Environment: str("prod"), RunID: str("run"), ParentRunID: str("parent"), TraceID: str("trace"), EventID: "ev-1",
		AuditID: uuid.NewString(), ToolCall: json.RawMessage(`{"tool":"github","action":"merge","params":{}}`), CreatedAt: now}
	ap := persistence.Approval{ID: uuid.NewString(), TenantID: tid, DecisionID: d.ID, AgentID: agent.ID, ToolCall: d.ToolCall,
		ActionHash: d.ActionHash, Status: persistence.ApprovalPending, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	check(t, store.CommitDecisions(ctx, []persistence.DecisionWrite{{Decision: d, Approval: &ap, Receipt: &persistence.Receipt{ID: uuid.NewString(),
		TenantID: tid, DecisionID: d.ID, ActionHash: d.ActionHash, Decision: d.Decision, CreatedAt: now}}},
		func(_ string, head persistence.ChainHead, rs []*persistence.Receipt) error {
			for _, r := range rs {
				var err error
				if head, err = r.SealAfter(head, nil); err != nil {
					return err
				}
			}
			return nil
		}))
	check(t, store.AppendAlerts(ctx, []persistence.Alert{{ID: uuid.NewString(), TenantID: tid, RuleKey: "k", AlertName: "k", Severity: "HIGH",
		Source: "default", AgentID: agent.ID, DecisionID: d.ID, SourceEventID: "ev-1", Summary: "s", CreatedAt: now}}))
	in := persistence.Incident{ID: uuid.NewString(), TenantID: tid, Kind: "k", Severity: "HIGH", Status: persistence.IncidentOpen,
		AgentID: agent.ID, Summary: "s", SourceEventIDs: []string{"ev-1"}, OpenedAt: now}
	check(t, store.OpenIncidents(ctx, []persistence.Incident{in}))

	incident := getPack(t, s, tok, "/v2/incidents/"+in.ID+"/evidence-pack", "incident-"+in.ID+"-evidence.zip")
	stored, err := store.GetDecision(ctx, tid, d.ID)
	check(t, err)
	sameViews(t, "decisions.json", incident["decisions.json"], []any{viewDecision(stored)})
	sameViews(t, "audit_events.json", incident["audit_events.json"], []any{viewAuditEvent(stored.AuditEvent())})
	alerts, err := store.AlertsBySourceEvents(ctx, tid, []string{"ev-1"})
	check(t, err)
	sameViews(t, "alerts.json", incident["alerts.json"], viewAll(alerts, func(a persistence.Alert) any { return viewAlert(a) }))
	storedIn, err := store.GetIncident(ctx, tid, in.ID)
	check(t, err)
	sameViews(t, "incident.json", incident["incident.json"], viewIncident(storedIn))

	compliance := getPack(t, s, tok, "/v2/compliance/evidence-pack", "compliance-"+tid+"-")
	storedTenant, err := store.GetTenant(ctx, tid)
	check(t, err)
	var settings map[string]json.RawMessage
	check(t, json.Unmarshal(compliance["tenant.json"], &settings))
	sameViews(t, "tenant.json's tenant", settings["tenant"], viewTenant(storedTenant))
	var policies map[string]json.RawMessage
	check(t, json.Unmarshal(compliance["policies.json"], &policies))
	ps, err := store.ListPolicies(ctx, tid)
	check(t, err)
	sameViews(t, "policies.json's tenant", policies["tenant"], viewAll(ps, viewPolicy))
	skills, err := store.ListSkills(ctx, tid)
	check(t, err)
	sameViews(t, "skills.json", compliance["skills.json"], viewAll(skills, viewSkill))
	agents, err := store.ListAgents(ctx, tid, persistence.AgentFilter{}, persistence.Page{Limit: 10})
	check(t, err)
	sameViews(t, "agents.json", compliance["agents.json"], viewAll(agents, viewAgent))
	sameViews(t, "incidents.json", compliance["incidents.json"], []any{viewIncident(storedIn)})
	events, err := store.ListAudit(ctx, tid, persistence.AuditFilter{}, persistence.Page{Limit: 10})
	check(t, err)
	lines := "[" + strings.Join(strings.Split(strings.TrimSpace(string(compliance["audit_events.jsonl"])), "\n"), ",") + "]"
	sameViews(t, "audit_events.jsonl", []byte(lines), viewAll(events, viewAuditEvent))
	sameViews(t, "receipts_verification.json", compliance["receipts_verification.json"],
		verifyChainView{Valid: true, Checked: 1, Errors: []chainErrorView{}})
}

// getPack downloads a pack as the tenant's admin and answers its files by
// name, after checking the download's headers.
func getPack(t *testing.T, s *Server, tok, path, name string) map[string][]byte {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	h := rec.Header()
	if rec.Code != 200 || h.Get("Content-Type") != "application/zip" || h.Get("Cache-Control") != "no-store" ||
		h.Get("X-Content-Type-Options") != "nosniff" || !strings.HasPrefix(h.Get("Content-Disposition"), `attachment; filename="`+name) {
		t.Fatalf("GET %s = %d %v %.300s", path, rec.Code, h, rec.Body)
	}
	zr, err := zip.NewReader(bytes.NewReader(rec.Body.Bytes()), int64(rec.Body.Len()))
	check(t, err)
	files := map[string][]byte{}
	for _, f := range zr.File {
		rc, err := f.Open()
		check(t, err)
		b, err := io.ReadAll(rc)
		check(t, err)
		_ = rc.Close()
		files[f.Name] = b
	}
	return files
}

// sameViews fails unless the pack's JSON and the API's view of the same
// rows decode to the same value.
func sameViews(t *testing.T, what string, pack []byte, api any) {
	t.Helper()
	raw, err := json.Marshal(api)
	check(t, err)
	var got, want any
	if err := json.Unmarshal(pack, &got); err != nil {
		t.Fatalf("%s: %v: %s", what, err, pack)
	}
	check(t, json.Unmarshal(raw, &want))
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s differs from the API's view:\npack %s\napi  %s", what, pack, raw)
	}
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
