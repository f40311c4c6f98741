// Package simulate re-decides recorded decisions with a candidate policy
// set (CONTRACT §18): for each decision the caller rebuilds the policy's
// input (the call, its trust and its run context as recorded; the agent,
// the skill registry and the MCP registry as they are now), the candidate
// evaluates it, SPEC 4.2's rule 9 (authz.Decide) turns the result into a
// decision, and the report counts what changed. It does no I/O and keeps
// no decision: memory is bounded by the changes it lists and the runs it
// follows (refold), whatever the number of decisions.
//
// In refold, each run and agent is followed from its first changed
// decision on: the decisions after it are counterfactual (the agent would
// have acted differently), and the run context they are evaluated with is
// re-settled with the simulated outcomes (runstate.Resettle): the run's
// and the agent's decision-dependent members are what a fold under the
// candidate would have given, the attempt counts as recorded.
package simulate

import (
	"context"
	"slices"
	"sort"

	"svc/rules/authz"
	"svc/rules/policy"
	"svc/runstate"
)

// Modes of a simulation.
const (
	// AsRecorded evaluates each decision on the run context it kept.
	AsRecorded = "as_recorded"
	// Refold also follows each run: once the candidate decided one of its
	// calls otherwise, the calls after it in the run are counterfactual
	// (the agent would have acted differently), marked and counted apart,
	// and the run context of the calls after a change of their run or
	// agent is re-settled with the simulated outcomes.
	Refold = "refold"
)

// MaxChanges bounds the changed decisions a report lists; Changed counts
// past it.
const MaxChanges = 1000

// Skip reasons: decisions the candidate policy did not make alone.
const (
	// SkipFrozen: a frozen agent's call is denied before any policy.
	SkipFrozen = "agent_frozen"
	// SkipReplay: a reused nonce is denied before any policy.
	SkipReplay = "replay"
	// SkipApproval: a call presenting an approval was decided by the
	// approval, not by the policy alone.
	SkipApproval = "approval_presented"
	// SkipPolicyFailed: the policy set in force could not be evaluated
	// (the call was denied, failing closed).
	SkipPolicyFailed = "policy_failed"
	// SkipNoCall: the decision kept no tool call to evaluate again.
	SkipNoCall = "no_tool_call"
	// SkipEvalError: the candidate could not evaluate the call.
	SkipEvalError = "candidate_error"
)

// Recorded is one recorded decision, with the input the caller rebuilt for
// it. NoCall: the decision kept no tool call (Input is empty then).
type Recorded struct {
	DecisionID string
	// RunID is the decision's run ("" for the agent's ambient run, keyed
	// by AgentID then).
	RunID   string
	AgentID string
	// Decision and Reason as recorded; MatchedPolicies the recorded
	// matched_policy_ids.
	Decision        string
	Reason          string
	MatchedPolicies []string
	Input           policy.Input
	Facts           authz.Facts
	// Context is the run context the decision kept (Input.Run and
	// Input.AgentHistory are its documents), nil when it kept none.
	Context *runstate.Context
	// At is the decision's time in Unix ms.
	At     int64
	NoCall bool
}

// Change is a decision the candidate decides otherwise.
type Change struct {
	DecisionID string
	Recorded   string
	Simulated  string
	// Policies are the policies that differ: matched by one of the two
	// decisions and not by the other.
	Policies []string
	// Counterfactual (refold): an earlier call of its run changed, so the
	// agent would not have made this call as recorded.
	Counterfactual bool
}

// Report is what a simulation found.
type Report struct {
	Evaluated      int
	Changed        int
	Skipped        int
	SkippedReasons map[string]int
	// Transitions counts changed decisions by "<recorded>-><simulated>".
	Transitions map[string]int
	Changes     []Change
	// WithoutContext counts the decisions evaluated without the run
	// context the candidate reads (recorded before run context was kept,
	// or under a policy set that did not read it): they are evaluated with
	// none, and counted apart.
	WithoutContext int
	// Counterfactual (refold) counts the decisions evaluated after their
	// run's first change, and CounterfactualChanged those of them that
	// changed.
	Counterfactual        int
	CounterfactualChanged int
	// RunsDiverged (refold) counts the runs with a change.
	RunsDiverged int
}

// Evaluator is the candidate policy set.
type Evaluator func(ctx context.Context, in policy.Input) (policy.Result, error)

// Simulator accumulates a report. It is not safe for concurrent use.
type Simulator struct {
	eval     Evaluator
	mode     string
	readsRun bool
	report   Report
	diverged map[string]bool // refold: runs with a change so far
	maxRuns  int
	// resettle (refold) re-settles the contexts of diverged runs and
	// agents.
	resettle *runstate.Resettle
}

// maxFollowedRuns bounds the runs (and agents) refold remembers as
// diverged; past it a run's later calls are no longer marked nor
// re-settled (the report says so through RunsDiverged exceeding it).
const maxFollowedRuns = 100_000

// New starts a simulation with the candidate eval in mode (AsRecorded or
// Refold); reads are the run context members the candidate reads.
func New(eval Evaluator, mode string, reads runstate.Fields) *Simulator {
	s := &Simulator{eval: eval, mode: mode, readsRun: reads.Any(), diverged: map[string]bool{}, maxRuns: maxFollowedRuns,
		report: Report{SkippedReasons: map[string]int{}, Transitions: map[string]int{}, Changes: []Change{}}}
	if mode == Refold {
		s.resettle = runstate.NewResettle(reads, maxFollowedRuns)
	}
	return s
}

// skipReason says why a recorded decision is not the policy's alone, ""
// when it is.
func skipReason(r *Recorded) string {
	switch r.Reason {
	case authz.ReasonFrozen:
		return SkipFrozen
	case authz.ReasonReplay:
		return SkipReplay
	case authz.ReasonApproved, "approval_not_granted", authz.ReasonApprovalConsumed, "approval_expired", "approval_mismatch":
		return SkipApproval
	case "policy_unavailable", "policy_error":
		return SkipPolicyFailed
	}
	if r.NoCall {
		return SkipNoCall
	}
	return ""
}

func (s *Simulator) skip(reason string) {
	s.report.Skipped++
	s.report.SkippedReasons[reason]++
}

// Add evaluates one recorded decision with the candidate. Decisions must
// come in the order they were made (seq order) for Refold to follow runs.
func (s *Simulator) Add(ctx context.Context, r *Recorded) error {
	runKey := r.RunID
	if runKey == "" {
		runKey = "agent:" + r.AgentID
	}
	if why := skipReason(r); why != "" {
		s.skip(why)
		s.settle(runKey, r, r.Decision, r.Reason)
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	in := r.Input
	if s.resettle != nil && r.Context != nil {
		c, err := s.resettle.Patch(runKey, r.AgentID, r.Context, r.At)
		if err != nil {
			return err
		}
		in.Run, in.AgentHistory, in.RunKey = c.Run, c.AgentHistory, c.Canonical
	}
	res, err := s.eval(ctx, in)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.skip(SkipEvalError)
		s.settle(runKey, r, r.Decision, r.Reason)
		return nil
	}
	v := authz.Decide(res, r.Facts)
	simulated := v.Decision
	s.settle(runKey, r, simulated, v.Reason)
	s.report.Evaluated++
	if s.readsRun && r.Context == nil {
		s.report.WithoutContext++
	}
	counterfactual := s.mode == Refold && s.diverged[runKey]
	if counterfactual {
		s.report.Counterfactual++
	}
	if simulated == r.Decision {
		return nil
	}
	s.report.Changed++
	s.report.Transitions[r.Decision+"->"+simulated]++
	if counterfactual {
		s.report.CounterfactualChanged++
	}
	if s.mode == Refold && !s.diverged[runKey] {
		s.report.RunsDiverged++
		if len(s.diverged) < s.maxRuns {
			s.diverged[runKey] = true
		}
	}
	if len(s.report.Changes) < MaxChanges {
		s.report.Changes = append(s.report.Changes, Change{DecisionID: r.DecisionID, Recorded: r.Decision, Simulated: simulated,
			Policies: differ(r.MatchedPolicies, res.MatchedPolicies), Counterfactual: counterfactual})
	}
	return nil
}

// settle settles a decision at its run and agent (refold): the simulated
// outcome, or the recorded one of a decision not decided again. A decision
// that kept no run context was not settled at its run (or no policy read
// the run), so it is not settled here either.
func (s *Simulator) settle(runKey string, r *Recorded, decision, reason string) {
	if s.resettle == nil || r.Context == nil || r.NoCall {
		return
	}
	s.resettle.Settle(runKey, r.AgentID, r.Context, &runstate.Outcome{Tool: r.Input.ToolCall.Tool, Action: r.Input.ToolCall.Action,
		At: r.At, Recorded: r.Decision, RecordedReason: r.Reason, Decision: decision, Reason: reason})
}

// Report returns the report so far.
func (s *Simulator) Report() Report { return s.report }

// differ is the symmetric difference of two policy id lists, sorted.
func differ(a, b []string) []string {
	out := []string{}
	for _, x := range a {
		if !slices.Contains(b, x) && !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) && !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	sort.Strings(out)
	return out
}
