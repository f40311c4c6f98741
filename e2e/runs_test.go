package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"svc/canonical"
	"svc/testkit"
	"svc/testkit/gateway"
)

// readmeRunPolicies returns the run policies of bench/runs/ (which make
// bench loads too), by name, after checking that README shows each of them
// exactly: the test runs the very text a reader copies.
func readmeRunPolicies(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```rego\n(package svc\\.policies\\.(run_[a-z_]+)\n.*?)```").FindAllStringSubmatch(string(raw), -1)
	shown := map[string]string{}
	for _, b := range blocks {
		shown[b[2]] = b[1]
	}
	out := map[string]string{}
	for _, name := range []string{"run_exfil", "run_verify_first", "run_budget", "run_loop", "run_tainted"} {
		src, err := os.ReadFile("../bench/runs/" + name + ".rego")
		if err != nil {
			t.Fatal(err)
		}
		if shown[name] != string(src) {
			t.Fatalf("README does not show bench/runs/%s.rego as it is:\n%s", name, src)
		}
		out[name] = string(src)
	}
	return out
}

// runCall is an authorize body of a call in run (no run: the ambient run).
func runCall(tool, action string, mutates bool, run string, extra map[string]any) map[string]any {
	b := gateway.AzBody(tool, action, mutates, gateway.AzSigned, extra)
	if run != "" {
		trace, _ := b["trace"].(map[string]any)
		if trace == nil {
			trace = map[string]any{}
		}
		trace["run_id"] = run
		b["trace"] = trace
	}
	return b
}

// decide asserts a decision and, when it differs, shows the run context
// the policy saw.
func decide(t *testing.T, s *gateway.Server, admin, tok string, body map[string]any, decision, reason string) map[string]any {
	t.Helper()
	m := gateway.AzWant(t, s, tok, body, 200)
	if m["decision"] != decision || (reason != "" && m["reason"] != reason) {
		seen := "(no decision recorded)"
		if id, _ := m["decision_id"].(string); id != "" {
			seen = string(s.Want(t, 200, "GET", "/v2/decisions/"+id, admin, nil))
		}
		t.Fatalf("decision %v (%v), want %s %s; the decision: %s", m["decision"], m["reason"], decision, reason, seen)
	}
	return m
}

func pay(run string, amount float64) map[string]any {
	b := runCall("payments", "pay", true, run, nil)
	b["tool_call"].(map[string]any)["parameters"] = map[string]any{"amount": amount}
	return b
}

// TestE2ERunPolicies runs README's five run policies (CONTRACT §16) on a
// lone node of each backend and on two nodes behind the balancer, where the
// calls of one run alternate between the nodes.
func TestE2ERunPolicies(t *testing.T) {
	t.Parallel()
	policies := readmeRunPolicies(t)
	gateway.ForModes(t, func(t *testing.T, backend string) {
		_, seed := gateway.AzSeed(t)
		s := gateway.Start(t, backend, map[string]string{"SVC_RECEIPT_SIGNING_KEY": seed})
		_, admin := s.Tenant(t, "runs-"+testkit.Uniq())
		s.Want(t, 200, "PUT", "/v2/skills/web", admin, map[string]any{"output_trust": "untrusted_external",
			"actions": map[string]any{"fetch": map[string]any{"risk": "low"}}})
		s.Want(t, 200, "PUT", "/v2/skills/email", admin, map[string]any{"actions": map[string]any{
			"send": map[string]any{"risk": "medium", "labels": []string{"egress"}}}})
		sk := testkit.Obj(t, s.Want(t, 200, "PUT", "/v2/skills/payments", admin, map[string]any{"actions": map[string]any{
			"verify": map[string]any{"risk": "low"},
			"pay":    map[string]any{"risk": "high", "mutates_state": true, "accumulate": []string{"amount"}}}}))
		if acc := sk["actions"].(map[string]any)["pay"].(map[string]any)["accumulate"]; len(gateway.AzStrings(acc)) != 1 {
			t.Fatalf("skill answered %v", sk)
		}
		// Before any run policy: no run context is built or kept.
		_, tok0 := s.Agent(t, admin, "before", nil)
		m := gateway.AzDecide(t, s, tok0, runCall("email", "send", false, "r0", nil), "allow", "")
		if d := testkit.Obj(t, s.Want(t, 200, "GET", "/v2/decisions/"+testkit.Str(t, m, "decision_id"), admin, nil)); d["run_context"] != nil || d["context_hash"] != nil {
			t.Fatalf("a tenant without run policies kept run context: %v", d)
		}
		for name, rego := range policies {
			s.Want(t, 201, "POST", "/v2/policies", admin, map[string]any{"name": name, "rego": rego})
		}

		t.Run("untrusted content, then egress", func(t *testing.T) {
			_, tok := s.Agent(t, admin, "exfil", nil)
			run := "exfil-" + testkit.Uniq()
			decide(t, s, admin, tok, runCall("email", "send", false, run, nil), "allow", "")
			decide(t, s, admin, tok, runCall("web", "fetch", false, run, nil), "allow", "")
			m := decide(t, s, admin, tok, runCall("email", "send", false, run, nil), "deny", "egress_after_untrusted_content")
			// Another run is untouched; a child run inherits the taint.
			decide(t, s, admin, tok, runCall("email", "send", false, run+"-other", nil), "allow", "")
			child := runCall("email", "send", false, run+"-child", nil)
			child["trace"].(map[string]any)["parent_run_id"] = run
			decide(t, s, admin, tok, child, "deny", "egress_after_untrusted_content")

			// The decision keeps what the policy saw, and its hash.
			d := testkit.Obj(t, s.Want(t, 200, "GET", "/v2/decisions/"+testkit.Str(t, m, "decision_id"), admin, nil))
			rc, ok := d["run_context"].(map[string]any)
			if !ok {
				t.Fatalf("decision without run_context: %v", d)
			}
			// It holds what the five policies read (trust, tools, sums)
			// and nothing else.
			r := rc["run"].(map[string]any)
			trust := r["trust"].(map[string]any)
			tools := r["tools"].(map[string]any)
			if len(r) != 3 || r["sums"] == nil || rc["agent_history"] != nil {
				t.Errorf("the run context holds more or less than the policies read: %v", rc)
			}
			// Of tools, only the entries the policies can read: the call's
			// own (the loop breaker) and payments/verify (verify before
			// paying), with the two counts they read.
			send, _ := tools["email"].(map[string]any)["send"].(map[string]any)
			if trust["min"] != "untrusted_external" || trust["untrusted_seen"] != true || len(tools) != 1 ||
				len(send) != 2 || send["attempts"] != 1.0 || send["allowed"] == nil {
				t.Errorf("run context of the deny = %v", r)
			}
			// Of trust, only the two members the policies read.
			if len(trust) != 2 {
				t.Errorf("trust = %v, want min and untrusted_seen alone", trust)
			}
			raw, _ := json.Marshal(rc)
			c, err := canonical.JCS(raw)
			if err != nil {
				t.Fatal(err)
			}
			if sum := sha256.Sum256(c); d["context_hash"] != hex.EncodeToString(sum[:]) {
				t.Errorf("context_hash %v is not the SHA-256 of the canonical run_context", d["context_hash"])
			}

			// Its receipt commits to the context (svc-receipt-2), verifies
			// online and offline, and a changed context hash is caught.
			rid := testkit.Str(t, m, "receipt_id")
			rc2 := testkit.Obj(t, s.Want(t, 200, "GET", "/v2/receipts/"+rid, admin, nil))
			if rc2["context_hash"] != d["context_hash"] {
				t.Errorf("receipt context_hash %v, decision's %v", rc2["context_hash"], d["context_hash"])
			}
			if v := testkit.Obj(t, s.Want(t, 200, "GET", "/v2/receipts/"+rid+"/verify", admin, nil)); v["valid"] != true {
				t.Errorf("verify = %v", v)
			}
			if v := testkit.Obj(t, s.Want(t, 200, "POST", "/v2/receipts/verify-chain", admin, nil)); v["valid"] != true {
				t.Errorf("verify-chain = %v", v)
			}
			path, lines := azExport(t, s, admin)
			if code, out, errOut := gateway.RunCLI("verify-receipts", path); code != 0 {
				t.Fatalf("verify-receipts: exit %d\n%s%s", code, out, errOut)
			}
			for i, l := range lines {
				if strings.Contains(l, `"receipt_id":"`+rid+`"`) {
					lines[i] = strings.Replace(l, testkit.Str(t, d, "context_hash"), strings.Repeat("0", 64), 1)
				}
			}
			if code, out := azVerifyFile(t, lines); code != 1 || !strings.Contains(out, rid) {
				t.Errorf("a changed context hash: exit %d\n%s", code, out)
			}
		})

		t.Run("verify before paying", func(t *testing.T) {
			_, tok := s.Agent(t, admin, "payer", nil)
			run := "pay-" + testkit.Uniq()
			decide(t, s, admin, tok, pay(run, 10), "deny", "pay_without_verify")
			decide(t, s, admin, tok, runCall("payments", "verify", false, run, nil), "allow", "")
			decide(t, s, admin, tok, pay(run, 10), "allow", "")
		})

		t.Run("a budget per run", func(t *testing.T) {
			_, tok := s.Agent(t, admin, "spender", nil)
			run := "budget-" + testkit.Uniq()
			decide(t, s, admin, tok, runCall("payments", "verify", false, run, nil), "allow", "")
			decide(t, s, admin, tok, pay(run, 600), "allow", "")
			decide(t, s, admin, tok, pay(run, 300), "allow", "")
			decide(t, s, admin, tok, pay(run, 200), "require_approval", "run_budget_exceeded")
			other := run + "-2"
			decide(t, s, admin, tok, runCall("payments", "verify", false, other, nil), "allow", "")
			decide(t, s, admin, tok, pay(other, 600), "allow", "")
		})

		t.Run("a loop breaker counts exactly under concurrency", func(t *testing.T) {
			_, tok := s.Agent(t, admin, "looper", nil)
			run := "loop-" + testkit.Uniq()
			body := gateway.AzJSON(t, runCall("search", "query", false, run, nil))
			results := gateway.AzConcurrent(s, tok, 20, body)
			allowed, denied := 0, 0
			for _, r := range results {
				switch {
				case r.Status == 200 && r.Body["decision"] == "allow":
					allowed++
				case r.Status == 200 && r.Body["decision"] == "deny" && r.Body["reason"] == "tool_loop":
					denied++
				default:
					t.Errorf("unexpected answer %d %s %v", r.Status, r.Raw, r.Err)
				}
			}
			if allowed != 5 || denied != 15 {
				t.Fatalf("20 concurrent calls in one run: %d allowed, %d denied, want exactly 5 and 15", allowed, denied)
			}
		})

		t.Run("dry runs and retries count nothing more", func(t *testing.T) {
			_, tok := s.Agent(t, admin, "retrier", nil)
			run := "dry-" + testkit.Uniq()
			for range 3 {
				m := decide(t, s, admin, tok, runCall("search", "query", false, run, map[string]any{"dry_run": true}), "allow", "")
				if m["decision_id"] != nil {
					t.Fatalf("a dry run recorded a decision: %v", m)
				}
			}
			for range 6 {
				decide(t, s, admin, tok, runCall("search", "query", false, run, map[string]any{"request_id": "same-" + run}), "allow", "")
			}
			for i := range 4 {
				decide(t, s, admin, tok, runCall("search", "query", false, run, map[string]any{"request_id": "next-" + run + "-" + string(rune('a'+i))}), "allow", "")
			}
			// 3 dry runs and 6 sends of one request_id were 1 attempt, then 4.
			decide(t, s, admin, tok, runCall("search", "query", false, run, nil), "deny", "tool_loop")
			m := decide(t, s, admin, tok, runCall("search", "query", false, run, map[string]any{"dry_run": true}), "deny", "tool_loop")
			if m["decision_id"] != nil {
				t.Fatalf("a dry run recorded a decision: %v", m)
			}
		})

		t.Run("a human approval once the run is tainted", func(t *testing.T) {
			_, tok := s.Agent(t, admin, "tainted", nil)
			run := "taint-" + testkit.Uniq()
			decide(t, s, admin, tok, runCall("crm", "update", true, run, nil), "allow", "")
			decide(t, s, admin, tok, runCall("web", "fetch", false, run, nil), "allow", "")
			m := decide(t, s, admin, tok, runCall("crm", "update", true, run, nil), "require_approval", "tainted_run_mutation")
			if testkit.Str(t, m, "approval_id") == "" {
				t.Fatal("no approval created")
			}
			// The caller's own source_trust taints too, and claiming a
			// higher trust later never lifts it.
			run2 := run + "-src"
			read := runCall("crm", "get", false, run2, nil)
			read["source_trust"] = gateway.AzUntrusted
			decide(t, s, admin, tok, read, "allow", "")
			decide(t, s, admin, tok, runCall("crm", "update", true, run2, nil), "require_approval", "tainted_run_mutation")

			// An MCP server's trust_level taints too, whatever the policy
			// decided for the call (here the base set denies a tool never
			// discovered: the attempt still reached the policy).
			srv := "untrusted-" + testkit.Uniq()
			s.Want(t, 201, "POST", "/v2/mcp/servers", admin, map[string]any{"server_key": srv, "transport": "stdio", "trust_level": "untrusted_external"})
			run3 := run + "-mcp"
			decide(t, s, admin, tok, runCall("mcp:"+srv, "lookup", false, run3, nil), "deny", "")
			decide(t, s, admin, tok, runCall("crm", "update", true, run3, nil), "require_approval", "tainted_run_mutation")
		})
	})
}

// TestE2ERunTaintOutlivesRestart: a run tainted before a restart of a lone
// node is still tainted after it (the taint is durable; the counts are
// marked incomplete).
func TestE2ERunTaintOutlivesRestart(t *testing.T) {
	t.Parallel()
	policies := readmeRunPolicies(t)
	gateway.ForBackends(t, func(t *testing.T, backend string) {
		db := gateway.DBURLFor(t, backend)
		s := gateway.StartOn(t, db, nil)
		_, admin := s.Tenant(t, "runs-restart-"+testkit.Uniq())
		s.Want(t, 200, "PUT", "/v2/skills/web", admin, map[string]any{"output_trust": "untrusted_external",
			"actions": map[string]any{"fetch": map[string]any{"risk": "low"}}})
		s.Want(t, 201, "POST", "/v2/policies", admin, map[string]any{"name": "run_tainted", "rego": policies["run_tainted"]})
		// A policy that reads the sources too, so that the decision keeps
		// them (a context holds what the policies read).
		s.Want(t, 201, "POST", "/v2/policies", admin, map[string]any{"name": "restored_sources", "rego": `package svc.policies.restored_sources

results contains {"decision": "deny", "reason": "restored_audit"} if {
	input.tool_call.tool == "audit"
	some src in input.run.trust.sources
	src.via == "restored"
}
`})
		_, tok := s.Agent(t, admin, "survivor", nil)
		run := "restart-" + testkit.Uniq()
		decide(t, s, admin, tok, runCall("web", "fetch", false, run, nil), "allow", "")
		s.Stop(t)

		s2 := gateway.StartOn(t, db, nil)
		m := decide(t, s2, admin, tok, runCall("crm", "update", true, run, nil), "require_approval", "tainted_run_mutation")
		d := testkit.Obj(t, s2.Want(t, 200, "GET", "/v2/decisions/"+testkit.Str(t, m, "decision_id"), admin, nil))
		r := d["run_context"].(map[string]any)["run"].(map[string]any)
		trust, _ := json.Marshal(r["trust"])
		if !strings.Contains(string(trust), `"restored"`) || r["trust"].(map[string]any)["min"] != "untrusted_external" {
			t.Errorf("after the restart the run reads %v", r)
		}
		// An untainted run starts afresh.
		decide(t, s2, admin, tok, runCall("crm", "update", true, run+"-clean", nil), "allow", "")
	})
}
