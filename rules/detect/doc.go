// Package detect is svc's detection logic (SPEC 6.2, CONTRACT §7): the
// default rules, the condition language of custom rules, rule evaluation
// with deduplication by alert name, the behavioural baseline, and the
// backtest of a rule over past decisions.
//
// The package is pure: no database, no network, no clock. Times come in as
// parameters. Everything is table-tested. The caller (the SOC pipeline)
// converts each security event into an [Event], loads the tenant's custom
// rules, and turns what [Evaluate] and [Baseline.Observe] return into
// alerts.
//
// # Condition language
//
// A condition is a map from field to matcher; every matcher must hold. The
// fields are the [Event] fields a rule may test:
//
//	kind, decision, tool, action, source_trust, agent_id   string
//	resource                                               string or null
//	risk_score                                             integer
//	mutates_state                                          boolean
//	matched_policies, redacted_fields                      array of strings
//
// A matcher is a scalar, which means equality, or a map with exactly one
// operator:
//
//	eq, ne        every field; equal, not equal
//	gt, gte,      risk_score only
//	lt, lte
//	in            every field; a non-empty list of the field's element type:
//	              a string field (or risk_score, mutates_state) is one of
//	              the values; an array field contains at least one of them
//	contains      array fields only; the array contains the string
//	prefix        string fields only; the value starts with the string
//
// On an array field a scalar, and eq with one string, mean contains (they
// are shown back as contains). eq and ne with a list on an array field
// compare sets: {eq: []} matches an empty array, {eq: [a, b]} an array
// holding exactly a and b in any order and repetition; ne is the negation
// of the same test. A list is never a matcher by itself.
//
// Comparisons are exact and case-sensitive. A null resource never matches
// eq, in or prefix with a string and always matches ne; resource alone
// also accepts null, as a scalar or with eq or ne (resource: null matches
// a null resource). risk_score takes integers: a JSON 75.0 is 75, 75.5 is
// an error. mutates_state takes true or false only (YAML yes is a string).
//
// A tenant's rule body may be JSON or YAML (CONTRACT §7). This condition
// raises an alert for a mutating call from an untrusted source that a
// policy named pci matched, on a production resource, scored 60 or more:
//
//	condition:
//	  mutates_state: true
//	  source_trust: {in: [untrusted_external, malicious_suspected]}
//	  matched_policies: pci
//	  resource: {prefix: "prod/"}
//	  risk_score: {gte: 60}
//
// and in JSON:
//
//	{"mutates_state": true,
//	 "source_trust": {"in": ["untrusted_external", "malicious_suspected"]},
//	 "matched_policies": "pci",
//	 "resource": {"prefix": "prod/"},
//	 "risk_score": {"gte": 60}}
//
// [ParseCondition] checks a decoded map; [ParseConditionJSON] and
// [ParseConditionYAML] decode first; [ParseConditionValue] takes the
// "condition" member of a decoded body. [Condition.Raw] and
// [Condition.MarshalJSON] give the normalized form, every field with one
// operator:
//
//	{"matched_policies":{"contains":"pci"},"mutates_state":{"eq":true},
//	 "resource":{"prefix":"prod/"},"risk_score":{"gte":60},
//	 "source_trust":{"in":["untrusted_external","malicious_suspected"]}}
//
// # Errors
//
// An empty condition, an unknown field or operator, an operator map with no
// or several operators, an operator that does not apply to the field
// (gt on tool, prefix on risk_score, contains on a string field), a value
// of the wrong type, or an empty in list is a [*ConditionError] wrapping
// [ErrInvalidCondition]. Its Path names the place, for the 400's details:
//
//	condition                    empty, not a map, invalid JSON or YAML
//	condition.foo                unknown field foo
//	condition.risk_score         wrong scalar, a list, zero or two operators
//	condition.risk_score.gte     unknown or inapplicable operator, bad value
//	condition.decision.in[1]     bad list element
//
// Fields are checked in sorted order and the first problem is reported.
// Rule definitions fail with [ErrInvalidRuleKey], [ErrDefaultRuleKey] (409)
// or [ErrInvalidSeverity].
//
// # Rules
//
// [Defaults] returns the eight default rules of SPEC 6.2, each with its
// condition in the language, except that mcp_manifest_drift_medium's upper
// bound (risk_score <= 74) is a Match function, since a field takes one
// operator; its Condition shows the rest and its Description all of it:
//
//	key                        alert                      severity  condition
//	confused_deputy_block      confused_deputy_block      HIGH      decision in [deny, quarantine], mutates_state true,
//	                                                                source_trust in [untrusted_external, malicious_suspected]
//	approval_required_surface  approval_required_surface  INFO      decision require_approval
//	critical_deny_risk_score   critical_deny              HIGH      risk_score gte 100
//	critical_deny_policy       critical_deny              HIGH      matched_policies in [mcp_unknown_tool, critical]
//	replay_attempt             replay_attempt             HIGH      kind replay_attempt
//	mcp_manifest_drift_high    mcp_manifest_drift         HIGH      kind mcp_manifest_drift, risk_score gte 75
//	mcp_manifest_drift_medium  mcp_manifest_drift         MEDIUM    kind mcp_manifest_drift, risk_score gte 40 (and <= 74)
//	mcp_manifest_drift_low     mcp_manifest_drift         LOW       kind mcp_manifest_drift, risk_score lte 39
//
// [NewCustomRule] validates a tenant's rule: key [a-z0-9_]{1,64} and not a
// default's key ([IsDefaultKey]), alert name defaulting to the key,
// severity INFO, LOW, MEDIUM or HIGH in any case ([ParseSeverity]).
//
// [Evaluate] returns the enabled rules that match an event, in order, one
// per alert name: the first wins. Evaluate([WithDefaults](custom), e) puts
// the defaults first, so an event scored 100 that matched critical raises
// one critical_deny (from critical_deny_risk_score), and a custom rule
// whose alert name is a default's raises nothing when that default fires.
//
// # Behavioural baseline
//
// A [Baseline] follows one tenant's agent and reports
// behavioral_anomaly_new_tool (INFO) the first time a tool and action pair
// is used, and behavioral_anomaly_rate (HIGH) when the count of actions in
// the current 60-second window exceeds 3 times the mean count of the
// agent's completed active windows (at least 3 of them, the last 60 kept),
// at most once per window. It remembers at most 1024 pairs, least recently
// used evicted. The type's documentation has the details.
//
// # Backtest
//
// [Backtest] runs one rule over at most 50,000 past decisions and returns
// the match count, the first 1000 matched decision ids, the number
// scanned, and the estimated daily alert volume: matches divided by the
// range in days (fractional, so a range under a day projects up), rounded
// to 2 decimals.
package detect
