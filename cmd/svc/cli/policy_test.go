package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"svc/testkit/gateway"
)

const noPayments = `package svc.policies.no_payments

results contains {"decision": "deny", "reason": "no_payments"} if input.tool_call.tool == "payments"
`

const noPaymentsTest = `package svc.policies.no_payments_test

import data.svc.policies.no_payments

test_denies_payments if {
	some r in no_payments.results with input as {"tool_call": {"tool": "payments", "action": "refund"}}
	r.decision == "deny"
}

test_leaves_search_alone if {
	count(no_payments.results) == 0 with input as {"tool_call": {"tool": "search", "action": "query"}}
}
`

func writeDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestPolicyTest: svc policy test runs a directory's Rego tests with OPA's
// runner against the base set, exit 0 when they pass; a failing test, a
// module the gateway would refuse, or a module that does not parse: exit
// 1 or 2 with the reason.
func TestPolicyTest(t *testing.T) {
	good := writeDir(t, map[string]string{"no_payments.rego": noPayments, "tests/no_payments_test.rego": noPaymentsTest})
	code, out, errOut := gateway.RunCLI("policy", "test", good)
	if code != 0 || !strings.Contains(out, "test_denies_payments: PASS") || !strings.Contains(out, "PASS: 2/2") {
		t.Fatalf("passing tests: exit %d\n%s%s", code, out, errOut)
	}

	failing := writeDir(t, map[string]string{"no_payments.rego": strings.Replace(noPayments, `"payments"`, `"payment"`, 1),
		"no_payments_test.rego": noPaymentsTest})
	if code, out, errOut := gateway.RunCLI("policy", "test", failing); code != 1 || !strings.Contains(out, "test_denies_payments: FAIL") {
		t.Errorf("a failing test: exit %d\n%s%s", code, out, errOut)
	}

	refused := writeDir(t, map[string]string{"no_results.rego": "package svc.policies.no_results\n\nallow := true\n"})
	if code, out, errOut := gateway.RunCLI("policy", "test", refused); code != 1 || !strings.Contains(out, "REFUSED: no_results.rego") ||
		!strings.Contains(out, "defines no results") {
		t.Errorf("a module the gateway refuses: exit %d\n%s%s", code, out, errOut)
	}

	broken := writeDir(t, map[string]string{"broken.rego": "package svc.policies.broken\n\nresults contains x if {\n"})
	if code, out, errOut := gateway.RunCLI("policy", "test", broken); code != 1 || !strings.Contains(errOut, "broken.rego") {
		t.Errorf("a module that does not parse: exit %d\n%s%s", code, out, errOut)
	}
	for _, args := range [][]string{{"policy"}, {"policy", "test"}, {"policy", "test", t.TempDir()}, {"policy", "nope"}} {
		if code, _, _ := gateway.RunCLI(args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}
