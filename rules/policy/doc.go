// Package policy is svc's policy engine: it evaluates Rego policies (OPA,
// in process) for one authorize call and combines their results into one
// decision (CONTRACT §6 and §13, SPEC 4.2 rules 8 and 9).
//
// The package is pure: it does no I/O except reading the base policy set
// from Options.PolicyPath (SVC_POLICY_FILE) in NewEngine and ReloadBase, it
// never reaches the network, and Rego modules cannot either (http.send,
// net.lookup_ip_addr and opa.runtime are removed from the capabilities, so a
// module calling them does not compile).
//
// # Input
//
// Every module sees the call as `input`, built from [Input]
// (testdata/policy/input_example.json is a complete example):
//
//	tenant_id          string
//	agent              {id, name, risk_tier, status}; risk_tier (low, medium,
//	                   high) is the server's, never the client's
//	tool_call          {tool, action, resource, parameters}; tool and action
//	                   normalized (SPEC 4.2 rule 7); resource a string or null;
//	                   parameters an object (null when absent)
//	mutates_state      boolean, the request's own claim
//	trust_level        the hop's effective, tightened trust (rule 8)
//	root_trust_level   the chain's root trust; "" when the caller has none
//	environment        string, "" when not given
//	skill              null, or the registry metadata of (tool, action):
//	                   {key, description, action, risk (low, medium, high,
//	                   critical), mutates_state, approval_required}
//	mcp                null, or for tools "mcp:<server_key>": {server_key,
//	                   server_status ("" for an unknown server, active,
//	                   quarantined), tool_status ("" for an unknown tool,
//	                   pending, approved, disabled), trust_level}
//
// # Policy modules
//
// A module (Rego v1 syntax) has the package svc.policies.<name>, <name>
// matching [a-z0-9_]{1,64}, and adds objects to a set named results:
//
//	package svc.policies.pci
//
//	results contains {"decision": "redact", "reason": "card",
//		"redact_fields": ["parameters.card_number"]} if {
//		input.tool_call.action == "charge"
//	}
//
// Each object has decision (allow, deny, require_approval, redact or
// quarantine), reason, an optional policy (the id reported in
// matched_policies; default the module's name) and, for redact,
// redact_fields (an array of strings). These are SPEC's @decision and
// @redact_fields annotations. One prepared query collects every module's
// results, with the module's name, in one evaluation.
//
// Builtin errors are strict: a builtin that fails (to_number("x"), say) makes
// the evaluation fail instead of leaving the rule undefined, and Evaluate's
// error makes the caller deny. A result object that is malformed (not an
// object, decision not a string, redact_fields not an array of strings) counts
// as a deny.
//
// # Combination
//
// [Combine] folds the results: quarantine > deny > require_approval > redact >
// allow. No result at all is a deny with reason no_matching_policy (fail
// closed), and a decision that is no known value counts as deny. The reason is
// the winning result's, the smallest (policy id, reason) among the results of
// the winning decision, so the outcome never depends on evaluation order.
// MatchedPolicies lists the ids of every result produced, of every decision,
// not only the winner's: the decision record shows everything that fired.
// RedactedFields is the union of the redact results' fields when the outcome
// is redact, and empty otherwise. A quarantine outcome sets Quarantine: the
// call is denied and the agent is quarantined once the call is recorded.
//
// # Base policy set
//
// Embedded from base/*.rego unless SVC_POLICY_FILE names a .rego file or a
// directory of .rego files (read non-recursively; *_test.rego skipped) that
// replaces it whole. A base module's package is svc.policies.<name>, or lies
// outside svc.policies (a helper library). Every rule defining results, in
// base and tenant modules alike, must be a set rule (`results contains ...`).
//
// The embedded files all belong to one package, svc.policies.base (one
// package evaluates in about half the time of one package per policy), and
// each result names its policy id. So "base" is no tenant policy name. A call
// is mutating when mutates_state is true or the registry says the action
// mutates state, so a client cannot pass a registered mutation off as a read.
//
//	critical                        deny when skill.risk is critical
//	mcp_unknown_tool                deny an "mcp:" tool whose server is unknown
//	                                (or the mcp object missing), quarantined or
//	                                not active, or whose tool is unknown or not
//	                                approved (one reason: the first that applies)
//	untrusted_mutation              deny a mutating call when trust_level or
//	                                root_trust_level is untrusted_external or
//	                                malicious_suspected
//	malicious_quarantine            quarantine a mutating call when either level
//	                                is malicious_suspected
//	high_tier_mutation              require approval for a mutating call by a
//	                                high-tier agent, whatever the trust
//	registered_approval             require approval when skill.approval_required
//	default_allow_read              allow a call that is not mutating, at any trust
//	default_allow_trusted_mutation  allow a mutating call when trust_level is
//	                                trusted_internal_signed, trusted_internal_unsigned
//	                                or semi_trusted_customer, and so is
//	                                root_trust_level unless it is ""
//
// So a mutating call at unknown trust gets no allow and is denied with
// no_matching_policy (fail closed), and a read is allowed at every trust
// level unless another policy says otherwise.
//
// # Tenant policies
//
// [Engine.CompileTenant] validates one module the way POST /v1/policies must
// (422 with each error's line, col and message): the package must be exactly
// svc.policies.<name>, the name may not be a base package's, the module must
// define results as a set, and it must parse and compile together with the
// base set. [Engine.SetTenantPolicies]
// prepares one query for the base set plus a tenant's enabled modules at a
// version; [Engine.HasTenant] tells the caller whether that version is
// installed, so a change made on any node applies to the tenant's next call.
// A tenant's modules never take part in another tenant's evaluation.
//
// # Concurrency
//
// An Engine is safe for concurrent use. Its state is an immutable snapshot
// (base set, base query, tenant queries) behind an atomic pointer: Evaluate
// loads it and runs a prepared query, and never prepares or compiles
// (DESIGN §2). NewEngine, ReloadBase and SetTenantPolicies prepare, then swap
// a new snapshot in. ReloadBase prepares every installed tenant again against
// the new base set and applies only when all of them compile.
//
// # Trust
//
// [TrustLevels] lists the trust levels from most to least trusted.
// [ParseTrust] validates one ("" is unknown). [Tighten] returns the less
// trusted of the chain's root and the hop's source (tighten-only); an empty
// root means no upstream hop.
//
// # Errors
//
// Errors are prefixed "policy: " and wrap a sentinel: [ErrInvalidModule]
// (through a [*ModuleError] carrying [CompileError] positions), [ErrLoad]
// and [ErrEval].
package policy
