package detect

import "slices"

// Default rule keys (SPEC 6.2).
const (
	KeyConfusedDeputyBlock     = "confused_deputy_block"
	KeyApprovalRequiredSurface = "approval_required_surface"
	KeyCriticalDenyRiskScore   = "critical_deny_risk_score"
	KeyCriticalDenyPolicy      = "critical_deny_policy"
	KeyReplayAttempt           = "replay_attempt"
	KeyMCPManifestDriftHigh    = "mcp_manifest_drift_high"
	KeyMCPManifestDriftMedium  = "mcp_manifest_drift_medium"
	KeyMCPManifestDriftLow     = "mcp_manifest_drift_low"
	// KeyReceiptChainBroken is beside SPEC 6.2's eight (issue 28): the
	// receipt integrity job's finding, HIGH, so that it reaches the chat
	// notifier and the webhook export like every HIGH alert.
	KeyReceiptChainBroken = "receipt_chain_broken"
)

// Default alert names where they differ from the rule key (SPEC 6.2).
const (
	AlertCriticalDeny     = "critical_deny"
	AlertMCPManifestDrift = "mcp_manifest_drift"
)

// defaultRules is built once; Defaults hands out copies. Conditions are
// immutable, so sharing them is safe.
var defaultRules = buildDefaults()

// builtIn is an enabled default rule over a condition that must parse.
func builtIn(key, alert, sev, desc string, cond map[string]any) Rule {
	c, err := ParseCondition(cond)
	if err != nil {
		panic("detect: default rule " + key + ": " + err.Error())
	}
	return Rule{Key: key, AlertName: alert, Severity: sev, Source: SourceDefault,
		Enabled: true, Condition: c, Description: desc}
}

func buildDefaults() []Rule {
	drift := func(risk map[string]any) map[string]any {
		return map[string]any{FieldKind: KindMCPManifestDrift, FieldRiskScore: risk}
	}
	medium := builtIn(KeyMCPManifestDriftMedium, AlertMCPManifestDrift, SeverityMedium,
		"kind mcp_manifest_drift and 40 <= risk_score <= 74",
		drift(map[string]any{OpGte: 40}))
	// One operator per field: the upper bound is code.
	medium.Match = func(e Event) bool { return e.RiskScore <= 74 }

	return []Rule{
		// A quarantine is a deny that also quarantines the agent (CONTRACT
		// §13), and the base policies quarantine every mutating call at
		// malicious_suspected: with "deny" alone that half never matched.
		builtIn(KeyConfusedDeputyBlock, KeyConfusedDeputyBlock, SeverityHigh,
			"decision deny (a quarantine included), mutates_state true, source_trust untrusted_external or malicious_suspected",
			map[string]any{
				FieldDecision:     map[string]any{OpIn: []string{"deny", "quarantine"}},
				FieldMutatesState: true,
				FieldSourceTrust:  map[string]any{OpIn: []string{"untrusted_external", "malicious_suspected"}},
			}),
		builtIn(KeyApprovalRequiredSurface, KeyApprovalRequiredSurface, SeverityInfo,
			"decision require_approval",
			map[string]any{FieldDecision: "require_approval"}),
		builtIn(KeyCriticalDenyRiskScore, AlertCriticalDeny, SeverityHigh,
			"risk_score >= 100",
			map[string]any{FieldRiskScore: map[string]any{OpGte: 100}}),
		builtIn(KeyCriticalDenyPolicy, AlertCriticalDeny, SeverityHigh,
			"matched_policies contains mcp_unknown_tool or critical",
			map[string]any{FieldMatchedPolicies: map[string]any{OpIn: []string{"mcp_unknown_tool", "critical"}}}),
		builtIn(KeyReplayAttempt, KeyReplayAttempt, SeverityHigh,
			"kind replay_attempt",
			map[string]any{FieldKind: KindReplayAttempt}),
		builtIn(KeyMCPManifestDriftHigh, AlertMCPManifestDrift, SeverityHigh,
			"kind mcp_manifest_drift and risk_score >= 75",
			drift(map[string]any{OpGte: 75})),
		medium,
		builtIn(KeyMCPManifestDriftLow, AlertMCPManifestDrift, SeverityLow,
			"kind mcp_manifest_drift and risk_score <= 39",
			drift(map[string]any{OpLte: 39})),
	}
}

// systemRules are default rules beside SPEC 6.2's eight, on events only
// the gateway itself emits: evaluated on every event like the others, and
// their keys reserved, but not in GET /soc/rules's list (SPEC 6.2's table)
// nor backtested, since no decision matches them.
var systemRules = []Rule{builtIn(KeyReceiptChainBroken, KeyReceiptChainBroken, SeverityHigh,
	"kind receipt_chain_broken (the receipt integrity job found a hash, link, signature or seq that does not verify)",
	map[string]any{FieldKind: KindReceiptChainBroken})}

// Defaults returns the eight default rules of SPEC 6.2, enabled, in the
// order of that table. Every rule is expressed in the condition language
// except the upper bound of mcp_manifest_drift_medium (risk_score <= 74),
// which is its Match function, since a field takes one operator. The
// slice is the caller's.
func Defaults() []Rule { return slices.Clone(defaultRules) }

// Evaluated returns the default rules an event is evaluated against:
// SPEC 6.2's eight, then the system rules (receipt_chain_broken).
func Evaluated() []Rule { return append(Defaults(), systemRules...) }

// IsDefaultKey reports whether key is a default rule's key (a system
// rule's included: no custom rule may take it).
func IsDefaultKey(key string) bool {
	for _, rules := range [][]Rule{defaultRules, systemRules} {
		if slices.ContainsFunc(rules, func(r Rule) bool { return r.Key == key }) {
			return true
		}
	}
	return false
}

// WithDefaults returns the rules an event is evaluated against: the
// defaults and system rules, then custom in the order given.
func WithDefaults(custom []Rule) []Rule {
	return append(Evaluated(), custom...)
}
