package packcontents_test

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"svc/evidencepack"
	"svc/packcontents"
	"svc/persistence"
	"svc/persistence/sqlite"
	"svc/receipt"
	"svc/rules/evidence"
)

// Secrets the fixture stores and no pack may carry, each as it would
// appear in a pack's JSON if a view let it through.
const (
	agentToken     = "agent-token-plaintext-0123456789"
	signingKey     = "agent-signing-key-0123456789abcdef"
	decisionParam  = "decision-parameter-secret-value"
	approvalParam  = "approval-parameter-secret-value"
	codehostSecret = "codehost-webhook-secret-0123456789abcdef"
)

// fixture is a tenant on a real SQLite store with everything a pack reads:
// an agent with a token and a signing key, two decisions (one waiting for
// an approval) whose tool calls carry parameters, their receipts signed,
// an alert and an incident over their events, a policy, a skill and the
// tenant's code-host secret.
type fixture struct {
	store    persistence.Store
	signer   *receipt.Signer
	tenant   persistence.Tenant
	agent    persistence.Agent
	incident persistence.Incident
	approval persistence.Approval
	at       time.Time
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(t.TempDir(), "svc.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	signer, err := receipt.NewSigner(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	f := &fixture{store: store, signer: signer, at: now,
		tenant: persistence.Tenant{ID: uuid.NewString(), Name: "acme", CreatedAt: now}}
	must(t, store.CreateTenant(ctx, f.tenant, persistence.OperatorToken{ID: uuid.NewString(), TenantID: f.tenant.ID, Name: "admin",
		Role: persistence.RoleAdmin, CreatedAt: now}, sum("operator-token")))
	must(t, store.SetCodehostWebhookSecret(ctx, f.tenant.ID, codehostSecret, now))
	f.agent = persistence.Agent{ID: uuid.NewString(), TenantID: f.tenant.ID, Name: "bot", Status: persistence.AgentActive, RiskTier: "low",
		SigningKey: []byte(signingKey), CreatedAt: now, UpdatedAt: now}
	must(t, store.CreateAgent(ctx, f.agent, sum(agentToken)))
	_, err = store.CreatePolicy(ctx, persistence.Policy{TenantID: f.tenant.ID, Name: "deny_prod", Rego: "package svc.policies.deny_prod\n",
		Enabled: true, CreatedAt: now, UpdatedAt: now})
	must(t, err)
	_, err = store.PutSkill(ctx, persistence.Skill{TenantID: f.tenant.ID, Key: "github", Description: "code host",
		Actions: map[string]persistence.SkillAction{"create_issue": {Risk: "medium", MutatesState: true}}, CreatedAt: now, UpdatedAt: now})
	must(t, err)

	allow := f.decision("allow", "ev-1", decisionParam)
	wait := f.decision("require_approval", "ev-2", decisionParam)
	f.approval = persistence.Approval{ID: uuid.NewString(), TenantID: f.tenant.ID, DecisionID: wait.Decision.ID, AgentID: f.agent.ID,
		ToolCall:   json.RawMessage(`{"tool":"github","action":"create_issue","params":{"title":"` + approvalParam + `"}}`),
		ActionHash: wait.Decision.ActionHash, Status: persistence.ApprovalPending, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	wait.Approval = &f.approval
	must(t, store.CommitDecisions(ctx, []persistence.DecisionWrite{allow, wait}, func(_ string, head persistence.ChainHead, rs []*persistence.Receipt) error {
		for _, r := range rs {
			var err error
			if head, err = r.SealAfter(head, signer); err != nil {
				return err
			}
		}
		return nil
	}))
	must(t, store.AppendAlerts(ctx, []persistence.Alert{{ID: uuid.NewString(), TenantID: f.tenant.ID, RuleKey: "deny_storm", AlertName: "deny_storm",
		Severity: "HIGH", Source: "default", AgentID: f.agent.ID, DecisionID: allow.Decision.ID, SourceEventID: "ev-1", Summary: "storm", CreatedAt: now}}))
	f.incident = persistence.Incident{ID: uuid.NewString(), TenantID: f.tenant.ID, Kind: "deny_storm", Severity: "HIGH", Status: persistence.IncidentOpen,
		AgentID: f.agent.ID, Summary: "a storm", SourceEventIDs: []string{"ev-1", "ev-2"}, OpenedAt: now}
	must(t, store.OpenIncidents(ctx, []persistence.Incident{f.incident}))
	return f
}

// decision is a decision of the fixture's agent whose tool call carries
// param, with its receipt and security event id.
func (f *fixture) decision(decision, eventID, param string) persistence.DecisionWrite {
	d := persistence.Decision{ID: uuid.NewString(), TenantID: f.tenant.ID, AgentID: f.agent.ID, Tool: "github", Action: "create_issue",
		ActionHash: "hash-" + eventID, Decision: decision, Reason: "because", RiskScore: 10, CompositeRiskScore: 20, MutatesState: true,
		TrustLevel: "unknown", RootTrustLevel: "unknown", EventID: eventID, AuditID: uuid.NewString(), CreatedAt: f.at,
		ToolCall: json.RawMessage(`{"tool":"github","action":"create_issue","params":{"title":"` + param + `"}}`)}
	return persistence.DecisionWrite{Decision: d, Receipt: &persistence.Receipt{ID: uuid.NewString(), TenantID: f.tenant.ID,
		DecisionID: d.ID, ActionHash: d.ActionHash, Decision: decision, CreatedAt: f.at}}
}

// records reads the incident's records as the evidence graph does.
func (f *fixture) records(t *testing.T) evidence.Records {
	t.Helper()
	ctx := context.Background()
	in, err := f.store.GetIncident(ctx, f.tenant.ID, f.incident.ID)
	must(t, err)
	ds, err := f.store.EventDecisions(ctx, f.tenant.ID, in.AgentID, in.SourceEventIDs, in.OpenedAt.Add(-time.Hour), in.OpenedAt.Add(time.Hour))
	must(t, err)
	ap, err := f.store.GetApproval(ctx, f.tenant.ID, f.approval.ID)
	must(t, err)
	ag, err := f.store.GetAgent(ctx, f.tenant.ID, f.agent.ID)
	must(t, err)
	return evidence.Records{Incident: &in, Decisions: ds, Agents: map[string]persistence.Agent{ag.ID: ag},
		Approvals: map[string]persistence.Approval{ap.ID: ap}, Now: time.Now()}
}

// written is a pack as written: its members in order, by name.
type written struct {
	order []string
	files map[string][]byte
	raw   []byte
}

// write writes pk, checks that it verifies signed with the fixture's key,
// and reads it back.
func (f *fixture) write(t *testing.T, pk packcontents.Pack) written {
	t.Helper()
	var buf bytes.Buffer
	must(t, pk.Write(context.Background(), &buf))
	rep, err := evidencepack.Verify(bytes.NewReader(buf.Bytes()), int64(buf.Len()), f.signer.PublicKey())
	if err != nil || !rep.Valid() {
		t.Fatalf("the pack does not verify: %+v, %v", rep, err)
	}
	zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	must(t, err)
	w := written{files: map[string][]byte{}, raw: buf.Bytes()}
	for _, zf := range zr.File {
		rc, err := zf.Open()
		must(t, err)
		b, err := io.ReadAll(rc)
		must(t, err)
		_ = rc.Close()
		w.order = append(w.order, zf.Name)
		w.files[zf.Name] = b
	}
	return w
}

// noSecrets fails for every member of w that carries a secret of the
// fixture in any form a view could let through.
func noSecrets(t *testing.T, w written) {
	t.Helper()
	tokenHash := sum(agentToken)
	forms := map[string]string{
		"the agent token":                  agentToken,
		"the agent token hash (hex)":       hex.EncodeToString(tokenHash),
		"the agent token hash (base64)":    base64.StdEncoding.EncodeToString(tokenHash),
		"the signing key":                  signingKey,
		"the signing key (base64)":         base64.StdEncoding.EncodeToString([]byte(signingKey)),
		"a decision's tool parameter":      decisionParam,
		"an approval's tool parameter":     approvalParam,
		"the tenant's code-host secret":    codehostSecret,
		"a tool call's parameters (field)": `"params"`,
		"a decision's tool call (field)":   `"tool_call"`,
	}
	for name, b := range w.files {
		for what, s := range forms {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%s carries %s", name, what)
			}
		}
	}
}

// receipts checks receipts.jsonl: an export of format holding the
// fixture's two receipts, signed with its key, that verifies.
func (f *fixture) receipts(t *testing.T, b []byte, format string) {
	t.Helper()
	rep, err := receipt.VerifyExport(bytes.NewReader(b))
	if err != nil || !rep.Valid || rep.Checked != 2 || rep.KeyID != f.signer.KeyID() {
		t.Errorf("receipts.jsonl: %+v, %v", rep, err)
	}
	var header struct{ Format string }
	decode(t, bytes.SplitN(b, []byte("\n"), 2)[0], &header)
	if header.Format != format {
		t.Errorf("receipts.jsonl is a %q, want %q", header.Format, format)
	}
}

func TestIncidentPack(t *testing.T) {
	f := newFixture(t)
	pk, err := packcontents.Incident(context.Background(), f.store, f.tenant.ID, f.records(t), f.signer)
	must(t, err)
	if pk.Kind != evidencepack.KindIncident || pk.Name != "incident-"+f.incident.ID+"-evidence.zip" {
		t.Errorf("kind %q, name %q", pk.Kind, pk.Name)
	}
	w := f.write(t, pk)
	want, _ := evidencepack.RequiredFiles(evidencepack.KindIncident)
	if want = append(want, evidencepack.ManifestName, evidencepack.SignatureName); !slices.Equal(w.order, want) {
		t.Fatalf("members %v, want %v", w.order, want)
	}
	noSecrets(t, w)

	var in map[string]any
	decode(t, w.files["incident.json"], &in)
	if in["incident_id"] != f.incident.ID {
		t.Errorf("incident.json: %v", in)
	}
	var alerts, decisions, events, approvals []map[string]any
	decode(t, w.files["alerts.json"], &alerts)
	decode(t, w.files["decisions.json"], &decisions)
	decode(t, w.files["audit_events.json"], &events)
	decode(t, w.files["approvals.json"], &approvals)
	if len(alerts) != 1 || alerts[0]["source_event_id"] != "ev-1" {
		t.Errorf("alerts.json: %v", alerts)
	}
	if len(decisions) != 2 || decisions[0]["tool"] != "github" || decisions[0]["receipt_id"] == nil {
		t.Errorf("decisions.json: %v", decisions)
	}
	if len(events) != 2 || events[0]["event_type"] != persistence.EventAuthorizeDecision {
		t.Errorf("audit_events.json: %v", events)
	}
	if len(approvals) != 1 || approvals[0]["approval_id"] != f.approval.ID || approvals[0]["tool"] != "github" ||
		approvals[0]["action"] != "create_issue" || approvals[0]["status"] != "PENDING" {
		t.Errorf("approvals.json: %v", approvals)
	}
	// receipts.jsonl: the header, then both receipts in seq order, as a
	// selection export that verifies with the receipt key.
	f.receipts(t, w.files["receipts.jsonl"], receipt.SelectionFormat)
	if !bytes.Contains(w.files["narrative.md"], []byte(f.incident.ID)) {
		t.Errorf("narrative.md does not name the incident:\n%s", w.files["narrative.md"])
	}
}

func TestIncidentPackWithoutIncident(t *testing.T) {
	f := newFixture(t)
	if _, err := packcontents.Incident(context.Background(), f.store, f.tenant.ID, evidence.Records{}, nil); err == nil {
		t.Fatal("a pack of no incident was assembled")
	}
}

func TestCompliancePack(t *testing.T) {
	f := newFixture(t)
	from, to := f.at.Add(-time.Hour), f.at.Add(time.Hour)
	base := map[string]string{"base.rego": "package svc.base\n"}
	pk, err := packcontents.Compliance(context.Background(), f.store, f.tenant.ID, from, to, base, f.signer)
	must(t, err)
	if pk.Kind != evidencepack.KindCompliance ||
		pk.Name != "compliance-"+f.tenant.ID+"-"+from.Format("20060102T150405Z")+"-"+to.Format("20060102T150405Z")+"-evidence.zip" {
		t.Errorf("kind %q, name %q", pk.Kind, pk.Name)
	}
	w := f.write(t, pk)
	want, _ := evidencepack.RequiredFiles(evidencepack.KindCompliance)
	if want = append(want, evidencepack.ManifestName, evidencepack.SignatureName); !slices.Equal(w.order, want) {
		t.Fatalf("members %v, want %v", w.order, want)
	}
	noSecrets(t, w)

	var tenant struct {
		Tenant map[string]any `json:"tenant"`
	}
	decode(t, w.files["tenant.json"], &tenant)
	if tenant.Tenant["tenant_id"] != f.tenant.ID || len(tenant.Tenant) != 4 {
		t.Errorf("tenant.json: %s", w.files["tenant.json"])
	}
	var policies struct {
		Base   map[string]string `json:"base"`
		Tenant []map[string]any  `json:"tenant"`
	}
	decode(t, w.files["policies.json"], &policies)
	if policies.Base["base.rego"] != base["base.rego"] || len(policies.Tenant) != 1 || policies.Tenant[0]["name"] != "deny_prod" {
		t.Errorf("policies.json: %s", w.files["policies.json"])
	}
	var skills, agents, approvals, incidents []map[string]any
	decode(t, w.files["skills.json"], &skills)
	decode(t, w.files["agents.json"], &agents)
	decode(t, w.files["approvals.json"], &approvals)
	decode(t, w.files["incidents.json"], &incidents)
	if len(skills) != 1 || skills[0]["skill_key"] != "github" {
		t.Errorf("skills.json: %v", skills)
	}
	if len(agents) != 1 || agents[0]["agent_id"] != f.agent.ID || agents[0]["has_signing_key"] != true {
		t.Errorf("agents.json: %v", agents)
	}
	if len(approvals) != 1 || approvals[0]["approval_id"] != f.approval.ID || len(incidents) != 1 || incidents[0]["incident_id"] != f.incident.ID {
		t.Errorf("approvals.json %v, incidents.json %v", approvals, incidents)
	}
	var stats map[string]any
	decode(t, w.files["decision_stats.json"], &stats)
	if stats["total"] != float64(2) {
		t.Errorf("decision_stats.json: %v", stats)
	}
	var verified map[string]any
	decode(t, w.files["receipts_verification.json"], &verified)
	if verified["valid"] != true || verified["checked"] != float64(2) {
		t.Errorf("receipts_verification.json: %v", verified)
	}
	f.receipts(t, w.files["receipts.jsonl"], receipt.ExportFormat)
	// audit_events.jsonl: the tenant's administrative events and both
	// decisions' events, newest first, one per line.
	lines := strings.Split(strings.TrimSuffix(string(w.files["audit_events.jsonl"]), "\n"), "\n")
	decisions := 0
	for _, l := range lines {
		var e map[string]any
		decode(t, []byte(l), &e)
		if e["event_type"] == persistence.EventAuthorizeDecision {
			decisions++
		}
	}
	if decisions != 2 {
		t.Errorf("audit_events.jsonl has %d decision events:\n%s", decisions, w.files["audit_events.jsonl"])
	}
}

// A range that holds none of the records, before them or after them: the
// range's files are empty (still there, so the pack verifies), the chain
// is still whole.
func TestCompliancePackEmptyRange(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name     string
		from, to time.Time
	}{
		{"before the records", f.at.Add(-25 * time.Hour), f.at.Add(-24 * time.Hour)},
		{"after the records", f.at.Add(time.Hour), f.at.Add(2 * time.Hour)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pk, err := packcontents.Compliance(context.Background(), f.store, f.tenant.ID, tc.from, tc.to, nil, f.signer)
			must(t, err)
			w := f.write(t, pk)
			for _, name := range []string{"approvals.json", "incidents.json"} {
				if got := string(w.files[name]); got != "[]\n" {
					t.Errorf("%s = %q, want []", name, got)
				}
			}
			if len(w.files["audit_events.jsonl"]) != 0 {
				t.Errorf("audit_events.jsonl: %s", w.files["audit_events.jsonl"])
			}
			var verified map[string]any
			decode(t, w.files["receipts_verification.json"], &verified)
			if verified["checked"] != float64(2) {
				t.Errorf("receipts_verification.json: %v", verified)
			}
		})
	}
}

func TestCompliancePackUnknownTenant(t *testing.T) {
	f := newFixture(t)
	_, err := packcontents.Compliance(context.Background(), f.store, uuid.NewString(), f.at, f.at.Add(time.Hour), nil, nil)
	if !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("an unknown tenant: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func sum(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

func decode(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
}
