package inspect

import (
	"fmt"
	"strings"
)

// The response inspection's alert rules (SPEC 4.8): raised only by polling
// reads (the inspect endpoint and the MCP proxy), never on a stream,
// notification or export.
const (
	RuleSensitiveData = "mcp_response_sensitive_data"
	RuleInjection     = "mcp_response_injection_attempt"
)

// AlertSpec is the alert one finding of a response raises: its rule, its
// severity and its summary.
type AlertSpec struct {
	Rule, Severity, Summary string
}

// Alerts are the alerts of a response's findings, one per flagged
// category, from server serverKey: a prompt injection is HIGH
// (RuleInjection), sensitive data MEDIUM (RuleSensitiveData).
func Alerts(findings []Finding, serverKey string) []AlertSpec {
	specs := make([]AlertSpec, 0, len(findings))
	for _, f := range findings {
		rule, sev := RuleSensitiveData, "MEDIUM"
		if f.Category == PromptInjection {
			rule, sev = RuleInjection, "HIGH"
		}
		specs = append(specs, AlertSpec{Rule: rule, Severity: sev, Summary: fmt.Sprintf("%s: %d %s in a response of mcp:%s", rule, f.Count,
			strings.ReplaceAll(f.Category, "_", " "), serverKey)})
	}
	return specs
}
