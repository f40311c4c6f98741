package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"svc/persistence/storetest"
	"svc/testkit"
	"svc/testkit/gateway"
)

// TestE2ECluster runs two gateway nodes on one Postgres database and one
// Valkey (SVC_CLUSTER=true) and checks that they behave as one
// installation (CONTRACT §11): what must never repeat or fork is arbitrated
// by Postgres, the hot shared state by Valkey.
func TestE2ECluster(t *testing.T) {
	valkey := storetest.ValkeyURL(t)
	dbURL := storetest.PostgresURL(t)
	// Distinct Valkey key spaces per run are not needed: every key carries
	// tenant and agent ids that are new in each run.
	env := map[string]string{"SVC_CLUSTER": "true", "SVC_VALKEY_URL": valkey, "SVC_RATE_LIMIT_CAPACITY": "100000"}
	a := gateway.StartOn(t, dbURL, env)
	b := gateway.StartOn(t, dbURL, env)
	_, admin := a.Tenant(t, "cluster-"+testkit.Uniq())
	_, tok := a.Agent(t, admin, "roamer", nil)

	read := func(extra map[string]any) map[string]any {
		body := map[string]any{"tool_call": map[string]any{"tool": "fs", "action": "read", "parameters": map[string]any{}},
			"source_trust": "trusted_internal_signed"}
		for k, v := range extra {
			body[k] = v
		}
		return body
	}

	t.Run("an approval is used once across nodes", func(t *testing.T) {
		// 50 presentations on each node at once: each node's approval actor
		// lets its first through, and Postgres's conditional update inside
		// the decision's transaction lets only one of the two commit; the
		// loser is recorded as a deny approval_consumed.
		htok, _, id := gateway.ApRequire(t, a, admin)
		apDecide(t, b, admin, id, "approve", 200, map[string]any{"approver_user_id": "ops"})
		body := gateway.AzJSON(t, gateway.ApCall(map[string]any{"x": 1}, map[string]any{"approval_id": id}))
		results := make(chan []gateway.AzResult, 2)
		go func() { results <- gateway.AzConcurrent(a, htok, 50, body) }()
		go func() { results <- gateway.AzConcurrent(b, htok, 50, body) }()
		all := append(<-results, <-results...)
		allowed := 0
		for _, r := range all {
			if r.Err != nil || r.Status != 200 {
				t.Fatalf("presentation: %d %v %s", r.Status, r.Err, r.Raw)
			}
			if r.Body["decision"] == "allow" {
				allowed++
			} else if r.Body["reason"] != "approval_consumed" {
				t.Errorf("unexpected answer %s", r.Raw)
			}
		}
		if allowed != 1 {
			t.Fatalf("%d of 100 presentations across two nodes were allowed, want exactly 1", allowed)
		}
		// Every answer was recorded, and the chain still verifies.
		decided := 0
		for _, d := range gateway.AzDecisions(t, a, admin) {
			if d["reason"] == "approved" || d["reason"] == "approval_consumed" {
				decided++
			}
		}
		if decided != 100 {
			t.Errorf("%d presentations recorded, want 100", decided)
		}
		if v := testkit.Obj(t, b.Want(t, 200, "POST", "/v2/receipts/verify-chain", admin, map[string]any{})); v["valid"] != true {
			t.Errorf("chain after the race: %v", v)
		}
	})

	t.Run("the live feed and custom rules span the nodes", func(t *testing.T) {
		conn, _, err := wsDial(t, b, admin, "")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.CloseNow() }()
		col := collect(conn)
		time.Sleep(200 * time.Millisecond)
		// A rule created on b applies to the next event decided on a.
		b.Want(t, 200, "POST", "/v2/soc/rules", admin, map[string]any{"rule_key": "cluster_reads", "severity": "LOW",
			"condition": map[string]any{"tool": "fs", "action": "read"}})
		m := testkit.Obj(t, a.Want(t, 200, "POST", "/v2/authorize", tok, read(nil)))
		id, _ := m["decision_id"].(string)
		testkit.Eventually(t, 5*time.Second, "node a's alert on node b's feed", func() bool { return col.has("alert", "decision_id", id) })
		waitAlert(t, b, admin, id, "cluster_reads")
	})

	t.Run("an agent made on one node authorizes on the other", func(t *testing.T) {
		m := testkit.Obj(t, b.Want(t, 200, "POST", "/v2/authorize", tok, read(nil)))
		if m["decision"] != "allow" || m["receipt_id"] == nil {
			t.Fatalf("authorize on b = %v", m)
		}
	})

	t.Run("a nonce used on one node is a replay on the other", func(t *testing.T) {
		nonce := "cluster-" + testkit.Uniq()
		if m := testkit.Obj(t, a.Want(t, 200, "POST", "/v2/authorize", tok, read(map[string]any{"nonce": nonce}))); m["decision"] != "allow" {
			t.Fatalf("first use = %v", m)
		}
		m := testkit.Obj(t, b.Want(t, 200, "POST", "/v2/authorize", tok, read(map[string]any{"nonce": nonce})))
		if m["decision"] != "deny" || m["reason"] != "replay_nonce_reused" {
			t.Fatalf("reuse on the other node = %v", m)
		}
	})

	t.Run("a request_id answered on one node is the same answer on the other", func(t *testing.T) {
		rid := "cluster-" + testkit.Uniq()
		first := testkit.Obj(t, a.Want(t, 200, "POST", "/v2/authorize", tok, read(map[string]any{"request_id": rid})))
		second := testkit.Obj(t, b.Want(t, 200, "POST", "/v2/authorize", tok, read(map[string]any{"request_id": rid})))
		if first["decision_id"] == nil || first["decision_id"] != second["decision_id"] {
			t.Fatalf("decision ids differ: %v vs %v", first["decision_id"], second["decision_id"])
		}
	})

	t.Run("a token rotated on one node fails on the other at once", func(t *testing.T) {
		_, tok2 := a.Agent(t, admin, "rotating", nil)
		b.Want(t, 200, "POST", "/v2/authorize", tok2, read(nil))
		id2 := ""
		for _, ag := range testkit.Arr(t, a.Want(t, 200, "GET", "/v2/agents", admin, nil)) {
			if ag["name"] == "rotating" {
				id2, _ = ag["agent_id"].(string)
			}
		}
		fresh := testkit.Obj(t, a.Want(t, 200, "POST", "/v2/agents/"+id2+"/rotate-token", admin, nil))
		if resp, _ := b.Do(t, "POST", "/v2/authorize", tok2, read(nil)); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("the old token on the other node answered %d", resp.StatusCode)
		}
		newTok, _ := fresh["agent_token"].(string)
		b.Want(t, 200, "POST", "/v2/authorize", newTok, read(nil))
	})

	t.Run("a tenant policy created on one node applies on the other", func(t *testing.T) {
		rego := "package svc.policies.cluster_redact\n\nresults contains {\"decision\":\"redact\",\"reason\":\"card\"," +
			"\"redact_fields\":[\"parameters.card\"]} if input.tool_call.action == \"charge\""
		a.Want(t, 201, "POST", "/v2/policies", admin, map[string]any{"name": "cluster_redact", "rego": rego})
		body := map[string]any{"tool_call": map[string]any{"tool": "pay", "action": "charge", "parameters": map[string]any{"card": "x"}},
			"source_trust": "trusted_internal_signed"}
		// Another node learns of the change through Valkey's invalidation
		// message, and at worst through its once-a-second version check.
		testkit.Eventually(t, 3*time.Second, "the policy on node b", func() bool {
			m := testkit.Obj(t, b.Want(t, 200, "POST", "/v2/authorize", tok, body))
			return m["decision"] == "redact"
		})
	})

	t.Run("both nodes extend one chain without forking it", func(t *testing.T) {
		done := make(chan error, 2)
		for _, n := range []*gateway.Server{a, b} {
			go func(n *gateway.Server) {
				for i := 0; i < 40; i++ {
					resp, raw := n.Do(t, "POST", "/v2/authorize", tok, read(nil))
					if resp.StatusCode != 200 {
						done <- fmt.Errorf("%s: %d %s", n.Base, resp.StatusCode, raw)
						return
					}
				}
				done <- nil
			}(n)
		}
		for range 2 {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		for _, n := range []*gateway.Server{a, b} {
			m := testkit.Obj(t, n.Want(t, 200, "POST", "/v2/receipts/verify-chain", admin, nil))
			if m["valid"] != true {
				t.Fatalf("chain seen from %s: %v", n.Base, m)
			}
		}
	})

	t.Run("the rate limit is shared", func(t *testing.T) {
		// A separate pair with a small bucket: 4 calls split over both nodes
		// exhaust a capacity of 3.
		envSmall := map[string]string{"SVC_CLUSTER": "true", "SVC_VALKEY_URL": valkey, "SVC_RATE_LIMIT_CAPACITY": "3",
			"SVC_RATE_LIMIT_REFILL_RATE": "0.001"}
		db2 := storetest.PostgresURL(t)
		c := gateway.StartOn(t, db2, envSmall)
		d := gateway.StartOn(t, db2, envSmall)
		_, adm := c.Tenant(t, "cluster-rl-"+testkit.Uniq())
		_, tk := c.Agent(t, adm, "limited", nil)
		for i, n := range []*gateway.Server{c, d, c} {
			if resp, raw := n.Do(t, "POST", "/v2/authorize", tk, read(nil)); resp.StatusCode != 200 {
				t.Fatalf("call %d: %d %s", i, resp.StatusCode, raw)
			}
		}
		resp, _ := d.Do(t, "POST", "/v2/authorize", tk, read(nil))
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("4th call on the other node = %d", resp.StatusCode)
		}
	})
}
