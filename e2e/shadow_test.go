package e2e

import (
	"testing"

	"svc/testkit"
	"svc/testkit/gateway"
)

const shadowFailing = "package svc.policies.shadow_fails\n\nresults contains {\"decision\": \"deny\", \"reason\": \"never\"} if {\n\tinput.tool_call.tool == \"payments\"\n\t1 / 0 > 0\n}\n"

// shadowOf returns a decision's shadow outcomes as GET /v2/decisions/:id
// shows them.
func shadowOf(t *testing.T, s *gateway.Server, tok, id string) []map[string]any {
	t.Helper()
	d := testkit.Obj(t, s.Want(t, 200, "GET", "/v2/decisions/"+id, tok, nil))
	return testkit.Arr(t, gateway.AzJSON(t, d["shadow"]))
}

// TestE2EShadowPolicies: a shadow policy runs on every live call and never
// decides: the payments calls it would deny are allowed, each decision
// shows what it would have added, /metrics counts it by policy and
// decision on every node, a failing shadow policy leaves decisions as they
// are, and the same policy enforced decides; on a lone node of each
// backend and on two nodes behind the balancer.
func TestE2EShadowPolicies(t *testing.T) {
	t.Parallel()
	gateway.ForModes(t, func(t *testing.T, backend string) {
		s := gateway.Start(t, backend, map[string]string{"SVC_RATE_LIMIT_CAPACITY": "100000"})
		_, admin := s.Tenant(t, "shadow-"+testkit.Uniq())
		_, tok := s.Agent(t, admin, "shadow-agent", nil)
		created := testkit.Obj(t, s.Want(t, 201, "POST", "/v2/policies", admin, map[string]any{"name": "no_payments", "rego": simNoPayments,
			"mode": "shadow"}))
		if created["mode"] != "shadow" {
			t.Fatalf("created %v", created)
		}
		s.Want(t, 400, "POST", "/v2/policies", admin, map[string]any{"name": "other", "rego": simNoPayments, "mode": "dry"})
		series := `svc_policy_shadow_outcomes_total{decision="deny",policy="no_payments"}`
		before := nodeMetric(t, s, series)

		var paid []string
		for range 3 {
			d := gateway.AzDecide(t, s, tok, gateway.AzBody("payments", "list_refunds", false, gateway.AzSigned, nil), "allow", "")
			paid = append(paid, testkit.Str(t, d, "decision_id"))
			if got := gateway.AzStrings(d["matched_policies"]); len(got) != 1 || got[0] != "default_allow_read" {
				t.Errorf("a shadow policy matched the live answer: %v", got)
			}
		}
		read := testkit.Str(t, gateway.AzDecide(t, s, tok, gateway.AzRead(nil), "allow", ""), "decision_id")
		for _, id := range paid {
			if sh := shadowOf(t, s, admin, id); len(sh) != 1 || sh[0]["policy"] != "no_payments" || sh[0]["decision"] != "deny" {
				t.Errorf("decision %s's shadow: %v", id, sh)
			}
		}
		if sh := shadowOf(t, s, admin, read); len(sh) != 0 {
			t.Errorf("a call the shadow policy does not touch has shadow %v", sh)
		}
		if got := nodeMetric(t, s, series) - before; got != 3 {
			t.Errorf("%s rose by %v, want 3", series, got)
		}

		// A shadow policy that fails on the call: the decision stands.
		s.Want(t, 201, "POST", "/v2/policies", admin, map[string]any{"name": "shadow_fails", "rego": shadowFailing, "mode": "shadow"})
		failures := nodeMetric(t, s, "svc_policy_shadow_failures_total")
		d := gateway.AzDecide(t, s, tok, gateway.AzBody("payments", "list_refunds", false, gateway.AzSigned, nil), "allow", "")
		if sh := shadowOf(t, s, admin, testkit.Str(t, d, "decision_id")); len(sh) != 0 {
			t.Errorf("a failing shadow evaluation recorded %v", sh)
		}
		if got := nodeMetric(t, s, "svc_policy_shadow_failures_total") - failures; got != 1 {
			t.Errorf("shadow failures rose by %v, want 1", got)
		}
		s.Want(t, 204, "DELETE", "/v2/policies/shadow_fails", admin, nil)

		// Enforced, it decides.
		if p := testkit.Obj(t, s.Want(t, 200, "PUT", "/v2/policies/no_payments", admin, map[string]any{"mode": "enforce"})); p["mode"] != "enforce" {
			t.Fatalf("updated %v", p)
		}
		gateway.AzDecide(t, s, tok, gateway.AzBody("payments", "list_refunds", false, gateway.AzSigned, nil), "deny", "no_payments")
	})
}
