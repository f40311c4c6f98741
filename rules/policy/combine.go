package policy

import (
	"cmp"
	"slices"
)

// Decision values (SPEC 2.3).
const (
	DecisionAllow           = "allow"
	DecisionDeny            = "deny"
	DecisionRequireApproval = "require_approval"
	DecisionRedact          = "redact"
	DecisionQuarantine      = "quarantine"
)

// Reasons this package produces itself (the others come from the policies).
const (
	// ReasonNoMatchingPolicy is the reason of the fail-closed deny when no
	// policy produced a result.
	ReasonNoMatchingPolicy = "no_matching_policy"
	// ReasonInvalidResult is the reason of a deny that comes from a result
	// whose decision is no known value, or which is malformed, and which
	// carries no reason of its own.
	ReasonInvalidResult = "invalid_policy_result"
)

// RawResult is one object of a module's `results` set, as the engine read
// it. Policy is the object's "policy" id, or the module's name when the
// object has none. Decision is kept as written; Combine reads any value
// other than the five decisions as deny. A malformed object (not an object,
// or redact_fields not an array of strings) is read with Decision "".
type RawResult struct {
	Module       string
	Policy       string
	Decision     string
	Reason       string
	RedactFields []string
}

// Result is the combined outcome of every policy for one call.
//
// MatchedPolicies lists the policy ids of every result that any policy
// produced, whatever its decision, not only the winner's, so that the
// decision record shows all that fired (sorted, unique). RedactedFields is the
// sorted union of the redact results' fields when Decision is redact, and
// empty otherwise. Quarantine is the quarantine annotation: the call is
// denied and the agent is to be quarantined once the call is recorded.
// Both slices are non-nil, so they encode as [] rather than null.
type Result struct {
	Decision        string   `json:"decision"`
	Reason          string   `json:"reason"`
	MatchedPolicies []string `json:"matched_policies"`
	RedactedFields  []string `json:"redacted_fields"`
	Quarantine      bool     `json:"quarantine"`
	// Shadow is what the tenant's shadow modules would have added
	// (Engine.EvaluateShadow), which the caller attaches; never decided on.
	Shadow []ShadowOutcome `json:"-"`
}

// severity ranks decisions: higher wins. An unknown decision is a deny.
func severity(decision string) int {
	switch decision {
	case DecisionAllow:
		return 1
	case DecisionRedact:
		return 2
	case DecisionRequireApproval:
		return 3
	case DecisionQuarantine:
		return 5
	default: // deny, and every value that is no decision (fail closed)
		return 4
	}
}

// normalizeDecision maps a result's decision onto the five values.
func normalizeDecision(decision string) string {
	switch decision {
	case DecisionAllow, DecisionRedact, DecisionRequireApproval, DecisionQuarantine, DecisionDeny:
		return decision
	default:
		return DecisionDeny
	}
}

// Combine folds the results of every policy into one decision:
// quarantine > deny > require_approval > redact > allow (CONTRACT §6, §13).
// No result at all is a deny with reason no_matching_policy (fail closed).
// Among the results with the winning severity, the one with the smallest
// (policy id, reason) gives the reason, so the outcome does not depend on
// the order of results. A winning result without a reason gives its policy
// id as the reason (or invalid_policy_result for an unknown decision).
// Combine does not modify results.
func Combine(results []RawResult) Result {
	out := Result{MatchedPolicies: []string{}, RedactedFields: []string{}}
	if len(results) == 0 {
		out.Decision = DecisionDeny
		out.Reason = ReasonNoMatchingPolicy
		return out
	}

	winner := -1
	for i := range results {
		r := &results[i]
		out.MatchedPolicies = append(out.MatchedPolicies, policyID(r))
		if winner < 0 || better(r, &results[winner]) {
			winner = i
		}
	}
	slices.Sort(out.MatchedPolicies)
	out.MatchedPolicies = slices.Compact(out.MatchedPolicies)

	w := &results[winner]
	out.Decision = normalizeDecision(w.Decision)
	out.Reason = w.Reason
	if out.Reason == "" {
		out.Reason = policyID(w)
		if out.Decision == DecisionDeny && w.Decision != DecisionDeny {
			out.Reason = ReasonInvalidResult
		}
	}
	switch out.Decision {
	case DecisionQuarantine:
		out.Quarantine = true
	case DecisionRedact:
		for i := range results {
			if results[i].Decision == DecisionRedact {
				out.RedactedFields = append(out.RedactedFields, results[i].RedactFields...)
			}
		}
		slices.Sort(out.RedactedFields)
		out.RedactedFields = slices.Compact(out.RedactedFields)
	}
	return out
}

// better reports whether a beats b: higher severity, then the smaller policy
// id, then the smaller reason.
func better(a, b *RawResult) bool {
	if sa, sb := severity(a.Decision), severity(b.Decision); sa != sb {
		return sa > sb
	}
	if c := cmp.Compare(policyID(a), policyID(b)); c != 0 {
		return c < 0
	}
	return a.Reason < b.Reason
}

func policyID(r *RawResult) string {
	if r.Policy != "" {
		return r.Policy
	}
	return r.Module
}
