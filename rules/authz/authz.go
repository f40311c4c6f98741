// Package authz is SPEC 4.2's chain of rules as pure functions: given the
// facts the agent actor gathered for a call, it says whether the call is
// refused before a decision, and otherwise what the decision is and what
// must follow it. It does no I/O: the actor reads the shared state, the
// database and the policy engine, in the order the rules need them (a
// rate token before anything else, the nonce only once the agent may make
// the call), and asks this package at each step.
//
// The steps, in SPEC 4.2's order:
//
//   - [Throttle], rule 3: the rate limit and the quota.
//   - [Admit], rules 7 and 8 (every record needs the normalized call and
//     the effective trust), then rules 4 and 5: a frozen agent is denied
//     (and recorded), an environment outside the agent's list refused.
//   - [Bound], rule 6: a tool outside the agent's bindings is refused.
//   - [Replayed], rule 13: a nonce seen in the replay window is denied.
//   - [Decide], rule 9: the policy's result becomes the decision, with
//     what follows it once recorded (quarantine, the escalation window,
//     the SOC events) and whether its record is best effort (rule 10).
package authz

import (
	"slices"
	"time"

	"svc/canonical"
	"svc/messages"
	"svc/rules/policy"
)

// Refused is a refusal without a decision: its kind, the envelope's
// details.error and message, and when to retry (seconds, 0 for none).
type Refused struct {
	Refusal    messages.Refusal
	Code       string
	Message    string
	RetryAfter int
}

// Failure is the refusal as the actors answer it.
func (r *Refused) Failure() *messages.AuthorizeFailure {
	return &messages.AuthorizeFailure{Refusal: r.Refusal, Code: r.Code, Message: r.Message, RetryAfter: r.RetryAfter}
}

// Limits are rule 3's facts: whether the rate limit gave a token (and when
// one comes back), and the agent's count in its quota window (quota 0: no
// quota).
type Limits struct {
	Token      bool
	TokenAfter time.Duration
	Quota      int
	QuotaUsed  int64
	QuotaAfter time.Duration
}

// Throttle is rule 3: a refusal when the rate limit or the quota is
// exhausted, else nil.
func Throttle(l Limits) *Refused {
	if !l.Token {
		return &Refused{messages.RefusalThrottled, "rate_limited", "rate limit exceeded", RetrySeconds(l.TokenAfter)}
	}
	if l.Quota > 0 && l.QuotaUsed > int64(l.Quota) {
		return &Refused{messages.RefusalThrottled, "quota_exceeded", "quota exhausted for this window", RetrySeconds(l.QuotaAfter)}
	}
	return nil
}

// RetrySeconds is a Retry-After value: whole seconds, at least 1.
func RetrySeconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	return max(1, s)
}

// Call is what the request and the agent's record say of a call.
type Call struct {
	AgentStatus string
	// AllowedEnvironments is nil or empty when the agent is unrestricted.
	AllowedEnvironments []string
	Environment         *string
	ToolCall            messages.ToolCall
	SourceTrust         string
	// RootTrust is trace.root_trust_level; nil or empty: no upstream hop.
	RootTrust *string
}

// Admission is the outcome of rules 4, 5, 7 and 8.
type Admission struct {
	// ToolCall is the call with its identifiers normalized (rule 7), and
	// ActionHash its hash.
	ToolCall   canonical.ToolCall
	ActionHash string
	// SourceTrust is the request's trust; EffectiveTrust the tighten-only
	// combination with the upstream root (rule 8).
	SourceTrust, EffectiveTrust string
	// Refused, when set, ends the call without a decision (an invalid
	// tool call, rule 5's environment).
	Refused *Refused
	// Frozen, when set, is rule 4's deny of a frozen agent: recorded as a
	// decision, without asking the policy.
	Frozen *policy.Result
}

// Admit applies rules 7 and 8, which every record needs, then rule 4 and
// rule 5. Only active and frozen agents authenticate (rule 1), so rule 4
// denies the frozen one here.
func Admit(c Call) Admission {
	tc := canonical.ToolCall{Tool: canonical.NormalizeIdentifier(c.ToolCall.Tool), Action: canonical.NormalizeIdentifier(c.ToolCall.Action),
		Resource: c.ToolCall.Resource, Parameters: c.ToolCall.Parameters}
	if tc.Parameters == nil {
		tc.Parameters = map[string]any{}
	}
	hash, err := canonical.NormalizedActionHash(tc)
	if err != nil {
		return Admission{ToolCall: tc, Refused: &Refused{Refusal: messages.RefusalInvalid, Code: "invalid_tool_call",
			Message: "tool_call cannot be canonicalized: " + err.Error()}}
	}
	source, _ := policy.ParseTrust(c.SourceTrust)
	effective := source
	if c.RootTrust != nil && *c.RootTrust != "" {
		root, _ := policy.ParseTrust(*c.RootTrust)
		effective = policy.Tighten(root, source)
	}
	a := Admission{ToolCall: tc, ActionHash: hash, SourceTrust: source, EffectiveTrust: effective}
	if c.AgentStatus == AgentFrozen {
		a.Frozen = &policy.Result{Decision: DecisionDeny, Reason: ReasonFrozen}
		return a
	}
	if len(c.AllowedEnvironments) > 0 {
		env := ""
		if c.Environment != nil {
			env = *c.Environment
		}
		if !slices.Contains(c.AllowedEnvironments, env) {
			a.Refused = &Refused{Refusal: messages.RefusalNotPermitted, Code: "FORBIDDEN", Message: "environment not allowed for this agent"}
		}
	}
	return a
}

// Bound is rule 6: with bindings, a tool outside them is refused; no
// bindings leave the agent unrestricted. bindings are the stored tool keys,
// compared normalized with the normalized tool.
func Bound(bindings []string, tool string) *Refused {
	if len(bindings) == 0 {
		return nil
	}
	for _, b := range bindings {
		if canonical.NormalizeIdentifier(b) == tool {
			return nil
		}
	}
	return &Refused{Refusal: messages.RefusalNotPermitted, Code: "FORBIDDEN", Message: "tool not in the agent's permission bindings"}
}

// Replayed is rule 13's deny of a nonce already used in the replay window.
func Replayed() policy.Result {
	return policy.Result{Decision: DecisionDeny, Reason: ReasonReplay}
}

// Skill is what the skill registry says of the call's action (zero: not
// registered).
type Skill struct {
	Risk    string
	Mutates bool
}

// Replay says whether the call replays something used before (rule 13
// and CONTRACT §4), which raises a replay_attempt event.
type Replay int

const (
	NoReplay Replay = iota
	// NonceReplay: the nonce was seen in the replay window (Replayed).
	NonceReplay
	// ApprovalReplay: the approval presented was already used.
	ApprovalReplay
)

// Escalation is the tenant's tier escalation setting (SPEC part 3): more
// than Threshold denies within Window move the agent's tier one step.
type Escalation struct {
	Window    time.Duration
	Threshold int
}

// Facts are what rule 9 decides from besides the policy's result.
type Facts struct {
	// RequestMutates is the request's mutates_state.
	RequestMutates bool
	Skill          Skill
	// ApprovalUsed: the call uses the approval it presents, consumed in
	// the decision's transaction, so its allow is never best effort.
	ApprovalUsed bool
	Replay       Replay
	Escalation   Escalation
}

// Event is a SOC event the recorded decision raises (SPEC part 6).
type Event struct {
	Kind   string
	Reason string
	// RiskScore, when not 0, replaces the decision's advisory score.
	RiskScore int
	// Subject, when set, replaces the event's tool and action.
	Subject string
}

// Verdict is a decision and what must follow it.
type Verdict struct {
	// Decision is the policy's, or quarantine when it asked for one.
	Decision string
	Reason   string
	// Mutates: the request or the skill registry says the call mutates
	// state; the record, the score, the SOC event and the early answer
	// all go by it, so an agent cannot have a registered mutation treated
	// as a read by sending mutates_state false.
	Mutates bool
	// Quarantine: the agent is quarantined once the decision is recorded
	// (rule 9's @decision("quarantine")).
	Quarantine bool
	// Deny: a deny or a quarantine.
	Deny bool
	// LowRisk: a non-mutating allow of an action that is not registered
	// high or critical, and uses no approval; its record is best effort
	// (rule 10).
	LowRisk bool
	// Escalation, for a deny, is the window it counts in towards the tier
	// escalation once recorded (SPEC part 3); nil otherwise.
	Escalation *Escalation
	// Events are the SOC events the decision raises once recorded, in
	// order: its own authorize_decision event, then a replay_attempt for
	// a replay.
	Events []Event
}

// Decide is rule 9: the policy's result as the decision, and what follows
// it once recorded.
func Decide(res policy.Result, f Facts) Verdict {
	mutates := f.RequestMutates || f.Skill.Mutates
	decision := res.Decision
	if res.Quarantine {
		decision = DecisionQuarantine
	}
	v := Verdict{Decision: decision, Reason: res.Reason, Mutates: mutates, Quarantine: decision == DecisionQuarantine,
		Deny:    decision == DecisionDeny || decision == DecisionQuarantine,
		LowRisk: decision == DecisionAllow && !mutates && f.Skill.Risk != "high" && f.Skill.Risk != "critical" && !f.ApprovalUsed,
		Events:  []Event{{Kind: messages.KindAuthorizeDecision, Reason: res.Reason}}}
	if v.Deny {
		e := f.Escalation
		v.Escalation = &e
	}
	switch f.Replay {
	case NonceReplay:
		v.Events = append(v.Events, Event{Kind: messages.KindReplayAttempt, Reason: "replay nonce reused", RiskScore: 100, Subject: ReasonReplay})
	case ApprovalReplay:
		v.Events = append(v.Events, Event{Kind: messages.KindReplayAttempt, Reason: "approval presented again after use", RiskScore: 100})
	}
	return v
}

// Decisions and reasons named by the rules.
const (
	DecisionAllow      = "allow"
	DecisionDeny       = "deny"
	DecisionQuarantine = "quarantine"

	AgentFrozen = "frozen"

	ReasonFrozen           = "agent_frozen"
	ReasonReplay           = "replay_nonce_reused"
	ReasonApproved         = "approved"
	ReasonApprovalConsumed = "approval_consumed"
)
