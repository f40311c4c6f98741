# The combined decision, as svc computes it, for OPA's bare server.
#
# svc evaluates, in one prepared query, the `results` set of every policy
# package it knows for the tenant (the embedded base set, package
# svc.policies.base, plus the tenant's enabled modules, svc.policies.<name>)
# and folds them in Go (rules/policy/combine.go):
#
#   quarantine > deny > require_approval > redact > allow,
#   no result at all: deny with reason no_matching_policy (fail closed),
#   a decision that is none of the five counts as deny,
#   among the winners the smallest (policy id, reason) gives the reason,
#   a winner without a reason gives its policy id (invalid_policy_result
#   for an unknown decision),
#   matched_policies: every result's policy id, sorted, unique,
#   redacted_fields: the sorted union of the redact results' fields when the
#   outcome is redact, [] otherwise.
#
# This package does the same fold in Rego, so that OPA answers
# POST /v1/data/svc/decision {"input": <svc's policy input>} with the object
# svc's engine returns (rules/policy.Result). See bench/README.md.
package svc

# The modules svc's query names for the benchmark tenant: the base set and
# the tenant policy the load generator installs (bench_redact.rego). Naming
# the packages is what svc's prepared query does too (rules/policy/engine.go
# buildQuery), rather than enumerating data.svc.policies on every call.
module_results := {
	"base": data.svc.policies.base.results,
	"bench_redact": data.svc.policies.bench_redact.results,
}

severity := {"allow": 1, "redact": 2, "require_approval": 3, "deny": 4, "quarantine": 5}

# sev ranks a decision; anything that is not one of the five is a deny.
sev(d) := object.get(severity, d, 4)

normalize(d) := d if {
	severity[d]
} else := "deny"

# policy_id is the result's "policy" when it is a non-empty string, else the
# module's name.
policy_id(name, r) := p if {
	p := r.policy
	is_string(p)
	p != ""
} else := name

# results: every module's results, each with its policy id and decision.
results := [{"policy": policy_id(name, r), "decision": object.get(r, "decision", ""), "reason": object.get(r, "reason", ""), "raw": r} |
	some name, rs in module_results
	some r in rs
]

top := max({sev(r.decision) | some r in results})

# winner: among the results of the top severity, the smallest (policy id,
# reason); the index breaks exact ties deterministically.
winner := results[min([[r.policy, r.reason, i] | some i, r in results; sev(r.decision) == top])[2]]

winner_reason := winner.reason if {
	is_string(winner.reason)
	winner.reason != ""
} else := "invalid_policy_result" if {
	normalize(winner.decision) == "deny"
	winner.decision != "deny"
} else := winner.policy

redacted := sort({f |
	some r in results
	r.decision == "redact"
	some f in r.raw.redact_fields
}) if {
	normalize(winner.decision) == "redact"
} else := []

default decision := {"decision": "deny", "reason": "no_matching_policy", "matched_policies": [], "redacted_fields": [], "quarantine": false}

decision := {
	"decision": d,
	"reason": winner_reason,
	"matched_policies": sort({r.policy | some r in results}),
	"redacted_fields": redacted,
	"quarantine": d == "quarantine",
} if {
	count(results) > 0
	d := normalize(winner.decision)
}
