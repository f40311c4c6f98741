package evidence

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"svc/persistence"
)

// NarrativeInput is what an incident's root-cause narrative is built from:
// stored records only.
type NarrativeInput struct {
	Incident  persistence.Incident
	Agents    map[string]persistence.Agent
	Decisions []persistence.Decision
	Approvals map[string]persistence.Approval
	Alerts    []persistence.Alert
	Receipts  []persistence.Receipt
	Now       time.Time
}

// Narrative is the incident evidence pack's narrative.md: a deterministic
// timeline in Markdown built from the records (the same records give the
// same text; no model), of what the agent did, which rules and policies
// fired, and what was decided and approved. It names tools, actions,
// decisions, reasons, policies, rules and ids, never a tool parameter, a
// token or a key: the records it reads carry none (a decision's tool call
// is not read).
func Narrative(in NarrativeInput) string {
	var b strings.Builder
	inc := in.Incident
	agent := agentName(in.Agents, inc.AgentID)
	fmt.Fprintf(&b, "# Incident %s\n\n", inc.ID)
	fmt.Fprintf(&b, "%s\n\n", oneLine(inc.Summary))
	fmt.Fprintf(&b, "- Kind: %s\n- Severity: %s\n- Status: %s\n- Agent: %s\n- Opened: %s\n", inc.Kind, inc.Severity, inc.Status, agent, stamp(inc.OpenedAt))
	if inc.ClosedAt != nil {
		reason := "no reason given"
		if inc.CloseReason != nil {
			reason = oneLine(*inc.CloseReason)
		}
		fmt.Fprintf(&b, "- Closed: %s (%s)\n", stamp(*inc.ClosedAt), reason)
	}
	fmt.Fprintf(&b, "- Source events: %d; decisions found for them: %d\n", len(inc.SourceEventIDs), len(in.Decisions))

	b.WriteString("\n## Timeline\n\n")
	type entry struct {
		at   time.Time
		seq  int64
		text string
	}
	var tl []entry
	receipts := map[string]persistence.Receipt{}
	for _, r := range in.Receipts {
		receipts[r.ID] = r
	}
	for _, d := range in.Decisions {
		run := "no run"
		if d.RunID != nil && *d.RunID != "" {
			run = "run " + *d.RunID
		}
		text := fmt.Sprintf("%s called %s.%s (%s, %s, %s): **%s**, reason `%s`, risk %d, composite risk %d",
			agentName(in.Agents, d.AgentID), d.Tool, d.Action, run, mutation(d.MutatesState), d.RootTrustLevel, d.Decision,
			oneLine(d.Reason), d.RiskScore, d.CompositeRiskScore)
		if len(d.MatchedPolicyIDs) > 0 {
			text += "; policies " + strings.Join(d.MatchedPolicyIDs, ", ")
		}
		if r, ok := receipts[d.ReceiptID]; ok {
			text += fmt.Sprintf("; receipt %s (seq %d)", r.ID, r.Seq)
		}
		text += "; decision " + d.ID
		tl = append(tl, entry{d.CreatedAt, d.Seq, text})
		if a, ok := in.Approvals[d.ApprovalID]; ok && d.ApprovalID != "" {
			tl = append(tl, entry{a.CreatedAt, d.Seq, fmt.Sprintf("approval %s requested for decision %s", a.ID, d.ID)})
			if a.DecidedAt != nil {
				who := "an approver"
				if a.ApproverUserID != nil {
					who = oneLine(*a.ApproverUserID)
				}
				tl = append(tl, entry{*a.DecidedAt, d.Seq, fmt.Sprintf("approval %s %s by %s", a.ID, strings.ToLower(a.Status), who)})
			}
			if a.ConsumedAt != nil {
				tl = append(tl, entry{*a.ConsumedAt, d.Seq, fmt.Sprintf("approval %s used by the agent", a.ID)})
			}
		}
	}
	for _, a := range in.Alerts {
		tl = append(tl, entry{a.CreatedAt, a.Seq, fmt.Sprintf("alert %s **%s** from rule %s: %s", a.Severity, a.AlertName, a.RuleKey, oneLine(a.Summary))})
	}
	tl = append(tl, entry{inc.OpenedAt, 1 << 62, fmt.Sprintf("incident opened (%s, %s) from %d events", inc.Kind, inc.Severity, len(inc.SourceEventIDs))})
	if inc.ClosedAt != nil {
		tl = append(tl, entry{*inc.ClosedAt, 1<<62 + 1, "incident closed"})
	}
	slices.SortStableFunc(tl, func(a, c entry) int {
		if n := a.at.Compare(c.at); n != 0 {
			return n
		}
		return cmp.Compare(a.seq, c.seq)
	})
	for _, e := range tl {
		fmt.Fprintf(&b, "- %s %s\n", stamp(e.at), e.text)
	}

	b.WriteString("\n## What fired\n\n")
	decisions, policies, rules := map[string]int{}, map[string]int{}, map[string]int{}
	for _, d := range in.Decisions {
		decisions[d.Decision]++
		for _, p := range d.MatchedPolicyIDs {
			policies[p]++
		}
	}
	for _, a := range in.Alerts {
		rules[a.RuleKey]++
	}
	fmt.Fprintf(&b, "- Decisions: %s\n- Policies matched: %s\n- Detection rules: %s\n", counts(decisions), counts(policies), counts(rules))
	if len(in.Decisions) < len(inc.SourceEventIDs) {
		fmt.Fprintf(&b, "\n%d of the incident's source events have no decision on record here: events of decisions recorded before the gateway stored each decision's event id, or of decisions no longer stored.\n",
			len(inc.SourceEventIDs)-len(in.Decisions))
	}
	return b.String()
}

func agentName(agents map[string]persistence.Agent, id string) string {
	if a, ok := agents[id]; ok {
		return fmt.Sprintf("agent %s (%s)", oneLine(a.Name), id)
	}
	return "agent " + id
}

func mutation(m bool) string {
	if m {
		return "mutating"
	}
	return "read-only"
}

// counts is "a ×2, b ×1" in name order, or "none".
func counts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// oneLine keeps a stored text on one Markdown line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
