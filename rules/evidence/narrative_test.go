package evidence

import (
	"strings"
	"testing"
	"time"

	"svc/persistence"
)

func TestNarrative(t *testing.T) {
	d1 := dec("d1", "a1", "run-1", "require_approval", time.Second, "p_approve")
	d1.ApprovalID, d1.ToolCall = "ap1", []byte(`{"parameters":{"secret":"PLANTED"}}`)
	d2 := dec("d2", "a1", "", "deny", 2*time.Second, "p_deny")
	decided := t0.Add(90 * time.Second)
	approver := "alice"
	in := NarrativeInput{
		Incident: persistence.Incident{ID: "i1", Kind: "trust_escalation", Severity: "HIGH", Status: "open", AgentID: "a1",
			Summary: "deny after\napproval", SourceEventIDs: []string{"e1", "e2", "e3"}, OpenedAt: t0.Add(3 * time.Second)},
		Agents:    map[string]persistence.Agent{"a1": {ID: "a1", Name: "bot"}},
		Decisions: []persistence.Decision{d2, d1},
		Approvals: map[string]persistence.Approval{"ap1": {ID: "ap1", Status: persistence.ApprovalApproved, CreatedAt: t0.Add(time.Second),
			DecidedAt: &decided, ApproverUserID: &approver}},
		Alerts:   []persistence.Alert{{Seq: 1, Severity: "HIGH", AlertName: "deny_alert", RuleKey: "r1", Summary: "x", CreatedAt: t0.Add(2500 * time.Millisecond)}},
		Receipts: []persistence.Receipt{{ID: "rc-d1", Seq: 7}},
	}
	got := Narrative(in)
	if again := Narrative(in); again != got {
		t.Fatal("two narratives of the same records differ")
	}
	for _, want := range []string{"# Incident i1", "deny after approval", "- Kind: trust_escalation", "agent bot (a1) called github.create_issue (run run-1, read-only",
		"**require_approval**", "receipt rc-d1 (seq 7)", "approval ap1 approved by alice", "alert HIGH **deny_alert** from rule r1",
		"incident opened (trust_escalation, HIGH) from 3 events", "Policies matched: p_approve ×1, p_deny ×1", "1 of the incident's source events have no decision"} {
		if !strings.Contains(got, want) {
			t.Errorf("narrative lacks %q:\n%s", want, got)
		}
	}
	// In time order, whatever the order of the records.
	if strings.Index(got, "decision d1") > strings.Index(got, "decision d2") || strings.Index(got, "decision d2") > strings.Index(got, "alert HIGH") {
		t.Errorf("timeline out of order:\n%s", got)
	}
	if strings.Contains(got, "PLANTED") {
		t.Error("the narrative carries a tool parameter")
	}
}
