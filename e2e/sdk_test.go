package e2e

// What an SDK relies on, end to end (CONTRACT §14): waiting for an
// approval without polling, whichever node decides it; an agent reading
// the receipts of its own calls; and the approval callback registered with
// SPEC 4.2's webhook field.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"svc/testkit"
	"svc/testkit/gateway"
)

// nodes returns the cluster's two nodes, or s twice for a lone node: a
// waiter on the first and a decision on the second cross nodes.
func nodes(s *gateway.Server) (*gateway.Server, *gateway.Server) {
	if len(s.Peers) >= 2 {
		return s.Peers[0], s.Peers[1]
	}
	return s, s
}

// nodeMetric sums an unlabelled or labelled series over the nodes.
func nodeMetric(t testing.TB, s *gateway.Server, series string) float64 {
	t.Helper()
	all := s.Peers
	if len(all) == 0 {
		all = []*gateway.Server{s}
	}
	var total float64
	for _, n := range all {
		_, raw := n.Do(t, "GET", "/metrics", "", nil)
		for _, line := range strings.Split(string(raw), "\n") {
			if v, ok := strings.CutPrefix(line, series+" "); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatalf("%s: %q", series, line)
				}
				total += f
			}
		}
	}
	return total
}

func TestE2EApprovalWait(t *testing.T) {
	t.Parallel()
	gateway.ForModes(t, func(t *testing.T, backend string) {
		s := gateway.Start(t, backend, map[string]string{"SVC_RATE_LIMIT_CAPACITY": "100000", "SVC_APPROVAL_CALLBACK_IP_LIMIT": "100000",
			"SVC_APPROVAL_ATTEMPT_LIMIT": "1000"})
		_, admin := s.Tenant(t, "wait-"+testkit.Uniq())
		a, b := nodes(s)

		t.Run("a decision on another node wakes the waiter", func(t *testing.T) {
			for _, op := range []string{"approve", "reject", "edit"} {
				tok, _, id := gateway.ApRequire(t, s, admin)
				ch := gateway.WaitFor(t, a, tok, id, "20")
				gateway.WaitingOn(t, a, 1)
				body := map[string]any{"approver_user_id": "alice"}
				if op == "edit" {
					body["parameters"] = map[string]any{"x": 2}
				}
				decided := time.Now()
				apDecide(t, b, admin, id, op, 200, body)
				r := gateway.Recv(t, ch, 20*time.Second)
				want := map[string]string{"approve": "APPROVED", "reject": "REJECTED", "edit": "APPROVED"}[op]
				if r.Status != 200 || r.Body["status"] != want {
					t.Fatalf("%s: wait answered %d %v, want 200 %s", op, r.Status, r.Body, want)
				}
				// Woken by the decision, not by the wait's end (20 s): the
				// bound is loose for a busy machine.
				since := time.Since(decided)
				if since > 10*time.Second {
					t.Errorf("%s: the waiter answered %s after the decision: it was not woken", op, since)
				}
				t.Logf("%s on the other node: the waiter answered %s after the decision was sent", op, since.Round(time.Millisecond))
			}
		})

		t.Run("undecided, the wait ends after N seconds with PENDING", func(t *testing.T) {
			tok, _, id := gateway.ApRequire(t, s, admin)
			r := gateway.Recv(t, gateway.WaitFor(t, a, tok, id, "1"), 20*time.Second)
			if r.Status != 200 || r.Body["status"] != "PENDING" || r.Took < 900*time.Millisecond {
				t.Fatalf("wait=1 on a pending approval: %d %v after %s", r.Status, r.Body, r.Took)
			}
			// wait=0 and no wait answer at once; a decided approval too.
			apDecide(t, s, admin, id, "reject", 200, map[string]any{"approver_user_id": "bob"})
			r = gateway.Recv(t, gateway.WaitFor(t, a, tok, id, "25"), 20*time.Second)
			if r.Status != 200 || r.Body["status"] != "REJECTED" || r.Took > 10*time.Second {
				t.Fatalf("wait on a decided approval: %d %v after %s", r.Status, r.Body, r.Took)
			}
		})

		t.Run("wait values", func(t *testing.T) {
			tok, _, id := gateway.ApRequire(t, s, admin)
			for _, bad := range []string{"abc", "-1", "+1", "1.5", "", "%20", "1e3", "0x10"} {
				raw := s.Want(t, 400, "GET", "/v2/approvals/"+id+"?wait="+bad, tok, nil)
				if e := gateway.Envelope(t, raw, 400, "v2", ""); gateway.Detail(e, "error") != "invalid_wait" {
					t.Errorf("wait=%q: %v", bad, e)
				}
			}
			// More than 25 means 25, however large: a decision still wakes it.
			ch := gateway.WaitFor(t, a, tok, id, "99999999999999999999")
			gateway.WaitingOn(t, a, 1)
			apDecide(t, b, admin, id, "approve", 200, map[string]any{"approver_user_id": "alice"})
			if r := gateway.Recv(t, ch, 30*time.Second); r.Status != 200 || r.Body["status"] != "APPROVED" {
				t.Fatalf("wait=99999999999999999999: %d %v", r.Status, r.Body)
			}
			// The operator may wait too; /v1 serves the same.
			tok2, _, id2 := gateway.ApRequire(t, s, admin)
			_ = tok2
			r := gateway.Recv(t, gateway.WaitFor(t, a, admin, id2, "1"), 20*time.Second)
			if r.Status != 200 || r.Body["status"] != "PENDING" {
				t.Fatalf("operator wait: %d %v", r.Status, r.Body)
			}
			resp, raw := a.Do(t, "GET", "/v1/approvals/"+id2+"?wait=1", admin, nil)
			if resp.StatusCode != 200 || !strings.Contains(string(raw), `"PENDING"`) {
				t.Fatalf("/v1 wait: %d %s", resp.StatusCode, raw)
			}
		})

		t.Run("another agent's approval is 404 at once", func(t *testing.T) {
			_, _, id := gateway.ApRequire(t, s, admin)
			other, _, _ := gateway.ApRequire(t, s, admin)
			unknown := s.Want(t, 404, "GET", "/v2/approvals/00000000-0000-4000-8000-000000000000?wait=5", other, nil)
			r := gateway.Recv(t, gateway.WaitFor(t, a, other, id, "5"), 20*time.Second)
			if r.Status != 404 || r.Took > 4*time.Second {
				t.Fatalf("another agent's approval: %d after %s", r.Status, r.Took)
			}
			raw, _ := json.Marshal(r.Body)
			if !strings.Contains(string(unknown), `"reason":"NotFound"`) || !strings.Contains(string(raw), `"reason":"NotFound"`) {
				t.Fatalf("404 bodies: %s / %s", unknown, raw)
			}
		})
	})
}

// TestE2EApprovalWaitLimits: a waiting request holds no slot of
// SVC_MAX_CONCURRENT_REQUESTS nor its tenant's share, waiters have their
// own bound (SVC_APPROVAL_MAX_WAITERS), and a wait ends when the approval
// expires.
func TestE2EApprovalWaitLimits(t *testing.T) {
	t.Parallel()
	gateway.ForModes(t, func(t *testing.T, backend string) {
		s := gateway.Start(t, backend, map[string]string{"SVC_RATE_LIMIT_CAPACITY": "100000", "SVC_MAX_CONCURRENT_REQUESTS": "4",
			"SVC_MAX_CONCURRENT_PER_TENANT": "2", "SVC_APPROVAL_MAX_WAITERS": "6", "SVC_APPROVAL_TTL_SECS": "8"})
		_, admin := s.Tenant(t, "wl-"+testkit.Uniq())
		a, _ := nodes(s)
		var ids, toks []string
		for range 7 {
			_, tok := s.Agent(t, admin, "wl-"+testkit.Uniq(), map[string]any{"risk_tier": "high"})
			id := testkit.Str(t, gateway.AzDecide(t, s, tok, gateway.ApCall(map[string]any{"x": 1}, nil), "require_approval", ""), "approval_id")
			ids, toks = append(ids, id), append(toks, tok)
		}
		var chans []<-chan gateway.WaitResult
		for i := range 6 {
			chans = append(chans, gateway.WaitFor(t, a, toks[i], ids[i], "25"))
		}
		gateway.WaitingOn(t, a, 6)
		// Six waiters of one tenant on a node of 4 slots and a share of 2:
		// the tenant and another are still served.
		for range 3 {
			a.Want(t, 200, "GET", "/v2/agents", admin, nil)
		}
		_, other := s.Tenant(t, "wl2-"+testkit.Uniq())
		a.Want(t, 200, "GET", "/v2/agents", other, nil)
		// The seventh waiter finds the bound: answered at once, PENDING,
		// with Retry-After.
		r := gateway.Recv(t, gateway.WaitFor(t, a, toks[6], ids[6], "25"), 20*time.Second)
		if r.Status != 200 || r.Body["status"] != "PENDING" || r.Header.Get("Retry-After") != "1" || r.Took > 5*time.Second {
			t.Fatalf("waiter past SVC_APPROVAL_MAX_WAITERS: %d %v Retry-After %q after %s", r.Status, r.Body, r.Header.Get("Retry-After"), r.Took)
		}
		// The six end when their approvals expire (TTL 8 s), not at 25 s.
		for i, ch := range chans {
			r := gateway.Recv(t, ch, 40*time.Second)
			if r.Status != 200 || r.Body["status"] != "EXPIRED" {
				t.Fatalf("waiter %d: %d %v after %s, want EXPIRED", i, r.Status, r.Body, r.Took)
			}
		}
	})
}

func TestE2EAgentReceipts(t *testing.T) {
	t.Parallel()
	gateway.ForModes(t, func(t *testing.T, backend string) {
		_, seedB64 := gateway.AzSeed(t)
		s := gateway.Start(t, backend, map[string]string{"SVC_RATE_LIMIT_CAPACITY": "100000", "SVC_RECEIPT_SIGNING_KEY": seedB64})
		_, admin := s.Tenant(t, "ar-"+testkit.Uniq())
		_, tok := s.Agent(t, admin, "ar-"+testkit.Uniq(), nil)
		_, other := s.Agent(t, admin, "ar-"+testkit.Uniq(), nil)
		a, b := nodes(s)
		for _, mutates := range []bool{false, true} {
			m := gateway.AzWant(t, a, tok, map[string]any{"tool_call": map[string]any{"tool": "crm", "action": "read_contact", "parameters": map[string]any{}},
				"mutates_state": mutates, "source_trust": gateway.AzSigned}, 200)
			rid := testkit.Str(t, m, "receipt_id")
			// Readable at once, on the other node too.
			got := testkit.Obj(t, b.Want(t, 200, "GET", "/v2/receipts/"+rid, tok, nil))
			if got["receipt_id"] != rid || got["receipt_hash"] != m["receipt_hash"] || got["decision_id"] != m["decision_id"] ||
				got["action_hash"] != m["action_hash"] || got["signature"] == nil || len(testkit.Str(t, got, "key_id")) != 16 {
				t.Fatalf("agent reads its receipt: %v (authorize %v)", got, m)
			}
			if op := testkit.Obj(t, s.Want(t, 200, "GET", "/v2/receipts/"+rid, admin, nil)); op["receipt_hash"] != got["receipt_hash"] {
				t.Fatalf("operator reads the receipt: %v", op)
			}
			// Another agent of the tenant: the same 404 as an unknown id.
			nf := s.Want(t, 404, "GET", "/v2/receipts/"+rid, other, nil)
			unknown := s.Want(t, 404, "GET", "/v2/receipts/00000000-0000-7000-8000-000000000000", other, nil)
			if gateway.Envelope(t, nf, 404, "v2", "NotFound")["message"] != gateway.Envelope(t, unknown, 404, "v2", "NotFound")["message"] {
				t.Fatalf("another agent's receipt: %s, unknown id: %s", nf, unknown)
			}
		}
		key := testkit.Obj(t, s.Want(t, 200, "GET", "/v2/receipts/public-key", tok, nil))
		if len(testkit.Str(t, key, "public_key")) != 44 || len(testkit.Str(t, key, "key_id")) != 16 {
			t.Fatalf("public key for an agent: %v", key)
		}
		// Everything else about receipts stays the operators'.
		s.Want(t, 403, "GET", "/v2/receipts", tok, nil)
		s.Want(t, 403, "GET", "/v2/receipts/export", tok, nil)
	})
}

// cbDelivery checks one approval callback: its signature under secret and
// its timestamp, and returns its body.
func cbDelivery(t testing.TB, d whDelivery, secret string) map[string]any {
	t.Helper()
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(d.body)
	if got, want := d.header.Get("X-Svc-Signature"), "sha256="+hex.EncodeToString(mac.Sum(nil)); got != want {
		t.Errorf("X-Svc-Signature %q, want %q", got, want)
	}
	if ts := d.header.Get("X-Svc-Timestamp"); len(ts) < 10 {
		t.Errorf("X-Svc-Timestamp %q", ts)
	}
	var m map[string]any
	if err := json.Unmarshal(d.body, &m); err != nil {
		t.Fatalf("callback body: %s", d.body)
	}
	return m
}

// deliveriesAt waits until path got n requests and returns them.
func deliveriesAt(t testing.TB, r *whReceiver, path string, n int, limit time.Duration) []whDelivery {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		got := r.at(path)
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s got %d callbacks, want %d", path, len(got), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestE2EApprovalCallbacks(t *testing.T) {
	t.Parallel()
	gateway.ForModes(t, func(t *testing.T, backend string) {
		s := gateway.Start(t, backend, map[string]string{"SVC_RATE_LIMIT_CAPACITY": "100000", "SVC_APPROVAL_CALLBACK_IP_LIMIT": "100000",
			"SVC_APPROVAL_ATTEMPT_LIMIT": "1000", "SVC_ALLOW_PRIVATE_TARGETS": "true", "SVC_APPROVAL_TTL_SECS": "6"})
		_, admin := s.Tenant(t, "cb-"+testkit.Uniq())
		rcv := newWhReceiver(t)
		const secret = "callback-secret-of-the-agent"
		ask := func(path string) (tok, id string, m map[string]any) {
			agentID, tok := s.Agent(t, admin, "cb-"+testkit.Uniq(), map[string]any{"risk_tier": "high"})
			_ = agentID
			m = gateway.AzDecide(t, s, tok, gateway.ApCall(map[string]any{"x": 1}, map[string]any{"webhook": map[string]any{"url": rcv.url(path), "secret": secret}}),
				"require_approval", "")
			return tok, testkit.Str(t, m, "approval_id"), m
		}

		for _, op := range []string{"approve", "reject", "edit"} {
			path := "/" + op
			_, id, m := ask(path)
			body := map[string]any{"approver_user_id": "alice"}
			if op == "edit" {
				body["parameters"] = map[string]any{"x": 2}
			}
			ap := apDecide(t, s, admin, id, op, 200, body)
			got := cbDelivery(t, deliveriesAt(t, rcv, path, 1, 20*time.Second)[0], secret)
			want := map[string]string{"approve": "APPROVED", "reject": "REJECTED", "edit": "APPROVED"}[op]
			if got["approval_id"] != id || got["decision_id"] != m["decision_id"] || got["status"] != want ||
				got["action_hash"] != ap["action_hash"] || got["decided_at"] != ap["decided_at"] || len(got) != 5 {
				t.Fatalf("%s callback %v; approval %v", op, got, ap)
			}
			if strings.Contains(string(s.Want(t, 200, "GET", "/v2/approvals/"+id, admin, nil)), secret) {
				t.Fatalf("the callback secret is shown")
			}
		}

		// Expired undecided: the leader's sweep sends EXPIRED.
		_, id, _ := ask("/expire")
		got := cbDelivery(t, deliveriesAt(t, rcv, "/expire", 1, 30*time.Second)[0], secret)
		if got["approval_id"] != id || got["status"] != "EXPIRED" {
			t.Fatalf("expiry callback %v", got)
		}

		// A receiver that keeps failing gets three attempts, then none.
		rcv.fail("/down", true)
		_, id, _ = ask("/down")
		apDecide(t, s, admin, id, "approve", 200, map[string]any{"approver_user_id": "alice"})
		deliveriesAt(t, rcv, "/down", 3, 30*time.Second)
		time.Sleep(8 * time.Second) // longer than the backoff and several sweeps
		if n := len(rcv.at("/down")); n != 3 {
			t.Fatalf("a failing receiver got %d attempts, want 3", n)
		}
		if d, f := nodeMetric(t, s, `svc_approval_callbacks_total{outcome="delivered"}`), nodeMetric(t, s, `svc_approval_callbacks_total{outcome="failed"}`); d != 4 || f != 1 {
			t.Errorf("svc_approval_callbacks_total: %v delivered, %v failed; want 4 and 1", d, f)
		}
		// A bad registration is refused before anything is decided.
		for _, wh := range []map[string]any{{"url": "ftp://x/y", "secret": "s"}, {"url": "/relative", "secret": "s"},
			{"url": rcv.url("/x"), "secret": ""}} {
			_, tok := s.Agent(t, admin, "cb-"+testkit.Uniq(), map[string]any{"risk_tier": "high"})
			raw := s.Want(t, 400, "POST", "/v2/authorize", tok, gateway.ApCall(map[string]any{"x": 1}, map[string]any{"webhook": wh}))
			if f, _ := gateway.Detail(gateway.Envelope(t, raw, 400, "v2", "BadRequest"), "field").(string); !strings.HasPrefix(f, "webhook.") {
				t.Errorf("webhook %v: %s", wh, raw)
			}
		}
	})
}
