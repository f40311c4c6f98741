package e2e

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"svc/testkit"
	"svc/testkit/gateway"
)

const simNoPayments = "package svc.policies.no_payments\n\nresults contains {\"decision\": \"deny\", \"reason\": \"no_payments\"} if input.tool_call.tool == \"payments\"\n"

const simCRMApproval = "package svc.policies.crm_approval\n\nresults contains {\"decision\": \"require_approval\", \"reason\": \"crm_needs_a_human\"} if input.tool_call.tool == \"crm\"\n"

// written is what a simulation must not change: the tenant's decisions,
// audit events, approvals and newest receipt.
func written(t *testing.T, s *gateway.Server, admin string) string {
	t.Helper()
	ds := gateway.AzDecisions(t, s, admin)
	events := testkit.Arr(t, s.Want(t, 200, "GET", "/v2/audit/events?limit=500", admin, nil))
	approvals := testkit.Arr(t, s.Want(t, 200, "GET", "/v2/approvals?limit=500", admin, nil))
	receipts := testkit.Arr(t, s.Want(t, 200, "GET", "/v2/receipts?limit=1", admin, nil))
	newest := ""
	if len(receipts) > 0 {
		newest = fmt.Sprint(receipts[0]["receipt_hash"])
	}
	return fmt.Sprintf("%d decisions, %d events, %d approvals, head %s", len(ds), len(events), len(approvals), newest)
}

// TestE2EPolicySimulation: traffic recorded under the base set and a crm
// approval policy is simulated with a candidate that denies payments and
// drops the crm policy: the counts, transitions and changed ids are
// exactly those of the calls it touches, nothing is written, and bad
// candidates are refused clearly; on a lone node of each backend and on
// two nodes behind the balancer.
func TestE2EPolicySimulation(t *testing.T) {
	t.Parallel()
	gateway.ForModes(t, func(t *testing.T, backend string) {
		_, seed := gateway.AzSeed(t)
		s := gateway.Start(t, backend, map[string]string{"SVC_RECEIPT_SIGNING_KEY": seed, "SVC_RATE_LIMIT_CAPACITY": "100000"})
		_, admin := s.Tenant(t, "sim-"+testkit.Uniq())
		_, viewer := s.OpToken(t, admin, "sim-viewer", "viewer")
		_, tok := s.Agent(t, admin, "sim-agent", nil)
		s.Want(t, 201, "POST", "/v2/policies", admin, map[string]any{"name": "crm_approval", "rego": simCRMApproval})

		payments, crm := map[string]bool{}, map[string]bool{}
		for i := range 3 {
			d := gateway.AzDecide(t, s, tok, gateway.AzBody("payments", "list_refunds", false, gateway.AzSigned, nil), "allow", "")
			payments[testkit.Str(t, d, "decision_id")] = true
			gateway.AzDecide(t, s, tok, gateway.AzRead(map[string]any{"request_id": fmt.Sprint("read-", i)}), "allow", "")
		}
		for range 2 {
			d := gateway.AzDecide(t, s, tok, gateway.AzBody("crm", "export", false, gateway.AzSigned, nil), "require_approval", "crm_needs_a_human")
			crm[testkit.Str(t, d, "decision_id")] = true
		}
		gateway.AzDecide(t, s, tok, gateway.AzUntrustedWrite(nil), "deny", "")
		gateway.Settle(t, s)
		before := written(t, s, admin)

		sim := testkit.Obj(t, s.Want(t, 200, "POST", "/v2/policies/simulate", admin, map[string]any{
			"policies": []any{map[string]any{"name": "no_payments", "rego": simNoPayments}}, "remove": []string{"crm_approval"}}))
		if sim["evaluated"] != 9.0 || sim["changed"] != 5.0 || sim["skipped"] != 0.0 || sim["mode"] != "as_recorded" {
			t.Fatalf("simulation: %v", sim)
		}
		want := map[string]any{"allow->deny": 3.0, "require_approval->allow": 2.0}
		if got := sim["transitions"].(map[string]any); !maps.Equal(got, want) {
			t.Errorf("transitions %v, want %v", got, want)
		}
		changed := map[string]bool{}
		for _, c := range testkit.Arr(t, gateway.AzJSON(t, sim["changes"])) {
			id := testkit.Str(t, c, "decision_id")
			changed[id] = true
			switch {
			case payments[id]:
				if c["recorded"] != "allow" || c["simulated"] != "deny" || !slices.Equal(gateway.AzStrings(c["policies"]), []string{"no_payments"}) {
					t.Errorf("payments change %v", c)
				}
			case crm[id]:
				if c["recorded"] != "require_approval" || c["simulated"] != "allow" || !slices.Contains(gateway.AzStrings(c["policies"]), "crm_approval") {
					t.Errorf("crm change %v", c)
				}
			default:
				t.Errorf("a change of a decision the candidate does not touch: %v", c)
			}
		}
		if len(changed) != len(payments)+len(crm) {
			t.Errorf("changed %d decisions, want the %d payments and crm ones", len(changed), len(payments)+len(crm))
		}

		// The same through the CLI, as a CI job runs it on a pull request.
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "no_payments.rego"), []byte(simNoPayments), 0o600); err != nil {
			t.Fatal(err)
		}
		cli := func(threshold string) (int, string) {
			code, out, errOut := gateway.RunCLI("policy", "simulate", "-url", s.Base, "-token", admin, "-remove", "crm_approval",
				"-threshold", threshold, dir)
			return code, out + errOut
		}
		code, out := cli("5")
		for _, want := range []string{"| 9 | 5 (55.6%) | 0 |", "| allow → deny | 3 |", "| require_approval → allow | 2 |", "`no_payments`",
			"removed: `crm_approval`"} {
			if code != 0 || !strings.Contains(out, want) {
				t.Errorf("svc policy simulate -threshold 5: exit %d, want 0 and %q in\n%s", code, want, out)
			}
		}
		for threshold, wantCode := range map[string]int{"4": 1, "50%": 1, "60%": 0} {
			if code, out := cli(threshold); code != wantCode {
				t.Errorf("-threshold %s: exit %d, want %d\n%s", threshold, code, wantCode, out)
			}
		}

		// The newest two only; a range before any decision; refold.
		if two := testkit.Obj(t, s.Want(t, 200, "POST", "/v2/policies/simulate", admin, map[string]any{"limit": 2,
			"policies": []any{map[string]any{"name": "no_payments", "rego": simNoPayments}}})); two["evaluated"] != 2.0 {
			t.Errorf("limit 2: %v", two)
		}
		old := map[string]any{"from": "2020-01-01T00:00:00Z", "to": "2020-01-02T00:00:00Z"}
		if none := testkit.Obj(t, s.Want(t, 200, "POST", "/v2/policies/simulate", admin, old)); none["evaluated"] != 0.0 || none["changed"] != 0.0 {
			t.Errorf("an empty range: %v", none)
		}
		refold := testkit.Obj(t, s.Want(t, 200, "POST", "/v2/policies/simulate", admin, map[string]any{"mode": "refold",
			"policies": []any{map[string]any{"name": "no_payments", "rego": simNoPayments}}}))
		// The agent's calls are one ambient run: after the first payments
		// call changed, the rest of the run is counterfactual.
		if refold["changed"] != 3.0 || refold["runs_diverged"] != 1.0 || refold["counterfactual"] != 8.0 || refold["counterfactual_changed"] != 2.0 {
			t.Errorf("refold: %v", refold)
		}

		// Refusals: a module that does not compile names it, its line and
		// column; bad fields; roles.
		bad := s.Want(t, 400, "POST", "/v2/policies/simulate", admin, map[string]any{
			"policies": []any{map[string]any{"name": "broken", "rego": "package svc.policies.broken\n\nresults contains x if {\n"}}})
		e := gateway.Envelope(t, bad, 400, "v2", "BadRequest")
		if gateway.Detail(e, "error") != "policy_compile_error" || gateway.Detail(e, "module") != "broken" || !strings.Contains(string(bad), `"line":`) {
			t.Errorf("a candidate that does not compile: %s", bad)
		}
		for _, body := range []map[string]any{{"mode": "backwards"}, {"limit": 0}, {"limit": 2000000}, {"from": "yesterday"},
			{"from": "2026-02-01T00:00:00Z", "to": "2026-01-01T00:00:00Z"}, {"remove": []string{"no_such_policy"}},
			{"policies": []any{map[string]any{"name": "Bad Name", "rego": simNoPayments}}}, {"limit": "ten"}} {
			s.Want(t, 400, "POST", "/v2/policies/simulate", admin, body)
		}
		s.Want(t, 403, "POST", "/v2/policies/simulate", viewer, map[string]any{})
		s.Want(t, 403, "POST", "/v2/policies/simulate", tok, map[string]any{})

		// Another tenant sees none of these decisions.
		_, other := s.Tenant(t, "sim-other-"+testkit.Uniq())
		if o := testkit.Obj(t, s.Want(t, 200, "POST", "/v2/policies/simulate", other, map[string]any{
			"policies": []any{map[string]any{"name": "no_payments", "rego": simNoPayments}}})); o["evaluated"] != 0.0 {
			t.Errorf("another tenant's simulation: %v", o)
		}

		if after := written(t, s, admin); after != before {
			t.Errorf("the simulations wrote: before %s, after %s", before, after)
		}

		simulateRefold(t, s)
	})
}

const simDenyGuard = "package svc.policies.deny_guard\n\nresults contains {\"decision\": \"deny\", \"reason\": \"too_many_denies\"} if input.run.decisions.deny >= 5\n"

const simStopAfterDeny = "package svc.policies.stop_after_deny\n\nresults contains {\"decision\": \"deny\", \"reason\": \"run_has_a_deny\"} if input.run.decisions.deny >= 1\n"

// simulateRefold: traffic recorded under a policy that reads the run's
// decision counts, simulated with a candidate that denies payments and
// stops a run after a deny. As recorded, only the payments call changes
// (the reads after it saw a run without denies); refolded, the reads of
// its run see the simulated deny and change too, counterfactual, and the
// other run does not.
func simulateRefold(t *testing.T, s *gateway.Server) {
	t.Helper()
	_, admin := s.Tenant(t, "refold-"+testkit.Uniq())
	_, tok := s.Agent(t, admin, "refold-agent", nil)
	s.Want(t, 201, "POST", "/v2/policies", admin, map[string]any{"name": "deny_guard", "rego": simDenyGuard})
	in := func(run string) map[string]any { return map[string]any{"trace": map[string]any{"run_id": run}} }
	var r1 []string
	first := gateway.AzDecide(t, s, tok, gateway.AzBody("payments", "list_refunds", false, gateway.AzSigned, in("run-1")), "allow", "")
	for range 3 {
		gateway.AzDecide(t, s, tok, gateway.AzRead(in("run-2")), "allow", "")
		d := gateway.AzDecide(t, s, tok, gateway.AzRead(in("run-1")), "allow", "")
		r1 = append(r1, testkit.Str(t, d, "decision_id"))
	}
	gateway.Settle(t, s)
	candidate := []any{map[string]any{"name": "no_payments", "rego": simNoPayments}, map[string]any{"name": "stop_after_deny", "rego": simStopAfterDeny}}

	recorded := testkit.Obj(t, s.Want(t, 200, "POST", "/v2/policies/simulate", admin, map[string]any{"policies": candidate}))
	if recorded["evaluated"] != 7.0 || recorded["changed"] != 1.0 || recorded["without_context"] != 0.0 {
		t.Errorf("as recorded: %v", recorded)
	}
	refold := testkit.Obj(t, s.Want(t, 200, "POST", "/v2/policies/simulate", admin, map[string]any{"mode": "refold", "policies": candidate}))
	if refold["evaluated"] != 7.0 || refold["changed"] != 4.0 || refold["runs_diverged"] != 1.0 || refold["counterfactual"] != 3.0 ||
		refold["counterfactual_changed"] != 3.0 {
		t.Errorf("refold: %v", refold)
	}
	if want := map[string]any{"allow->deny": 4.0}; !maps.Equal(refold["transitions"].(map[string]any), want) {
		t.Errorf("refold transitions %v, want %v", refold["transitions"], want)
	}
	var got []string
	for _, c := range testkit.Arr(t, gateway.AzJSON(t, refold["changes"])) {
		id := testkit.Str(t, c, "decision_id")
		got = append(got, id)
		if id == testkit.Str(t, first, "decision_id") {
			if c["counterfactual"] != false || !slices.Equal(gateway.AzStrings(c["policies"]), []string{"no_payments"}) {
				t.Errorf("the payments change: %v", c)
			}
		} else if c["counterfactual"] != true || c["simulated"] != "deny" || !slices.Equal(gateway.AzStrings(c["policies"]), []string{"stop_after_deny"}) {
			t.Errorf("a refolded change: %v", c)
		}
	}
	if want := append([]string{testkit.Str(t, first, "decision_id")}, r1...); !slices.Equal(got, want) {
		t.Errorf("refold changed %v, want the payments call and the reads of its run %v", got, want)
	}
}
