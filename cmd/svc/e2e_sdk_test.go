package main

// What an SDK relies on, end to end (CONTRACT §14): waiting for an
// approval without polling, whichever node decides it; an agent reading
// the receipts of its own calls; and the approval callback registered with
// SPEC 4.2's webhook field.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// waitResult is one ?wait= request's answer and how long it took.
type waitResult struct {
	status int
	body   map[string]any
	header http.Header
	took   time.Duration
}

// waitFor asks for the approval with ?wait=secs on s in the background.
func waitFor(t testing.TB, s *server, tok, id, secs string) <-chan waitResult {
	t.Helper()
	out := make(chan waitResult, 1)
	go func() {
		start := time.Now()
		resp, raw := s.do(t, "GET", "/v2/approvals/"+id+"?wait="+secs, tok, nil)
		r := waitResult{status: resp.StatusCode, header: resp.Header, took: time.Since(start)}
		_ = json.Unmarshal(raw, &r.body)
		out <- r
	}()
	return out
}

// recv waits for a wait's answer, failing the test after limit.
func recv(t testing.TB, ch <-chan waitResult, limit time.Duration) waitResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(limit):
		t.Fatalf("no answer to the wait within %s", limit)
		return waitResult{}
	}
}

// nodes returns the cluster's two nodes, or s twice for a lone node: a
// waiter on the first and a decision on the second cross nodes.
func nodes(s *server) (*server, *server) {
	if len(s.peers) >= 2 {
		return s.peers[0], s.peers[1]
	}
	return s, s
}

// nodeMetric sums an unlabelled or labelled series over the nodes.
func nodeMetric(t testing.TB, s *server, series string) float64 {
	t.Helper()
	all := s.peers
	if len(all) == 0 {
		all = []*server{s}
	}
	var total float64
	for _, n := range all {
		_, raw := n.do(t, "GET", "/metrics", "", nil)
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

// waitingOn waits until the node holds n approval waiters (its
// svc_approval_waiters gauge), so that a decision made next finds them
// waiting.
func waitingOn(t testing.TB, s *server, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, raw := s.do(t, "GET", "/metrics", "", nil)
		for _, line := range strings.Split(string(raw), "\n") {
			if strings.HasPrefix(line, "svc_approval_waiters ") && strings.TrimPrefix(line, "svc_approval_waiters ") == strconv.Itoa(n) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node never held %d approval waiters", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestE2EApprovalWait(t *testing.T) {
	t.Parallel()
	forModes(t, func(t *testing.T, backend string) {
		s := startServer(t, backend, map[string]string{"SVC_RATE_LIMIT_CAPACITY": "100000", "SVC_APPROVAL_CALLBACK_IP_LIMIT": "100000",
			"SVC_APPROVAL_ATTEMPT_LIMIT": "1000"})
		_, admin := s.tenant(t, "wait-"+uniq())
		a, b := nodes(s)

		t.Run("a decision on another node wakes the waiter", func(t *testing.T) {
			for _, op := range []string{"approve", "reject", "edit"} {
				tok, _, id := apRequire(t, s, admin)
				ch := waitFor(t, a, tok, id, "20")
				waitingOn(t, a, 1)
				body := map[string]any{"approver_user_id": "alice"}
				if op == "edit" {
					body["parameters"] = map[string]any{"x": 2}
				}
				decided := time.Now()
				apDecide(t, b, admin, id, op, 200, body)
				r := recv(t, ch, 20*time.Second)
				want := map[string]string{"approve": "APPROVED", "reject": "REJECTED", "edit": "APPROVED"}[op]
				if r.status != 200 || r.body["status"] != want {
					t.Fatalf("%s: wait answered %d %v, want 200 %s", op, r.status, r.body, want)
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
			tok, _, id := apRequire(t, s, admin)
			r := recv(t, waitFor(t, a, tok, id, "1"), 20*time.Second)
			if r.status != 200 || r.body["status"] != "PENDING" || r.took < 900*time.Millisecond {
				t.Fatalf("wait=1 on a pending approval: %d %v after %s", r.status, r.body, r.took)
			}
			// wait=0 and no wait answer at once; a decided approval too.
			apDecide(t, s, admin, id, "reject", 200, map[string]any{"approver_user_id": "bob"})
			r = recv(t, waitFor(t, a, tok, id, "25"), 20*time.Second)
			if r.status != 200 || r.body["status"] != "REJECTED" || r.took > 10*time.Second {
				t.Fatalf("wait on a decided approval: %d %v after %s", r.status, r.body, r.took)
			}
		})

		t.Run("wait values", func(t *testing.T) {
			tok, _, id := apRequire(t, s, admin)
			for _, bad := range []string{"abc", "-1", "+1", "1.5", "", "%20", "1e3", "0x10"} {
				raw := s.want(t, 400, "GET", "/v2/approvals/"+id+"?wait="+bad, tok, nil)
				if e := envelope(t, raw, 400, "v2", ""); detail(e, "error") != "invalid_wait" {
					t.Errorf("wait=%q: %v", bad, e)
				}
			}
			// More than 25 means 25, however large: a decision still wakes it.
			ch := waitFor(t, a, tok, id, "99999999999999999999")
			waitingOn(t, a, 1)
			apDecide(t, b, admin, id, "approve", 200, map[string]any{"approver_user_id": "alice"})
			if r := recv(t, ch, 30*time.Second); r.status != 200 || r.body["status"] != "APPROVED" {
				t.Fatalf("wait=99999999999999999999: %d %v", r.status, r.body)
			}
			// The operator may wait too; /v1 serves the same.
			tok2, _, id2 := apRequire(t, s, admin)
			_ = tok2
			r := recv(t, waitFor(t, a, admin, id2, "1"), 20*time.Second)
			if r.status != 200 || r.body["status"] != "PENDING" {
				t.Fatalf("operator wait: %d %v", r.status, r.body)
			}
			resp, raw := a.do(t, "GET", "/v1/approvals/"+id2+"?wait=1", admin, nil)
			if resp.StatusCode != 200 || !strings.Contains(string(raw), `"PENDING"`) {
				t.Fatalf("/v1 wait: %d %s", resp.StatusCode, raw)
			}
		})

		t.Run("another agent's approval is 404 at once", func(t *testing.T) {
			_, _, id := apRequire(t, s, admin)
			other, _, _ := apRequire(t, s, admin)
			unknown := s.want(t, 404, "GET", "/v2/approvals/00000000-0000-4000-8000-000000000000?wait=5", other, nil)
			r := recv(t, waitFor(t, a, other, id, "5"), 20*time.Second)
			if r.status != 404 || r.took > 4*time.Second {
				t.Fatalf("another agent's approval: %d after %s", r.status, r.took)
			}
			raw, _ := json.Marshal(r.body)
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
	forModes(t, func(t *testing.T, backend string) {
		s := startServer(t, backend, map[string]string{"SVC_RATE_LIMIT_CAPACITY": "100000", "SVC_MAX_CONCURRENT_REQUESTS": "4",
			"SVC_MAX_CONCURRENT_PER_TENANT": "2", "SVC_APPROVAL_MAX_WAITERS": "6", "SVC_APPROVAL_TTL_SECS": "8"})
		_, admin := s.tenant(t, "wl-"+uniq())
		a, _ := nodes(s)
		var ids, toks []string
		for range 7 {
			_, tok := s.agent(t, admin, "wl-"+uniq(), map[string]any{"risk_tier": "high"})
			id := str(t, azDecide(t, s, tok, apCall(map[string]any{"x": 1}, nil), "require_approval", ""), "approval_id")
			ids, toks = append(ids, id), append(toks, tok)
		}
		var chans []<-chan waitResult
		for i := range 6 {
			chans = append(chans, waitFor(t, a, toks[i], ids[i], "25"))
		}
		waitingOn(t, a, 6)
		// Six waiters of one tenant on a node of 4 slots and a share of 2:
		// the tenant and another are still served.
		for range 3 {
			a.want(t, 200, "GET", "/v2/agents", admin, nil)
		}
		_, other := s.tenant(t, "wl2-"+uniq())
		a.want(t, 200, "GET", "/v2/agents", other, nil)
		// The seventh waiter finds the bound: answered at once, PENDING,
		// with Retry-After.
		r := recv(t, waitFor(t, a, toks[6], ids[6], "25"), 20*time.Second)
		if r.status != 200 || r.body["status"] != "PENDING" || r.header.Get("Retry-After") != "1" || r.took > 5*time.Second {
			t.Fatalf("waiter past SVC_APPROVAL_MAX_WAITERS: %d %v Retry-After %q after %s", r.status, r.body, r.header.Get("Retry-After"), r.took)
		}
		// The six end when their approvals expire (TTL 8 s), not at 25 s.
		for i, ch := range chans {
			r := recv(t, ch, 40*time.Second)
			if r.status != 200 || r.body["status"] != "EXPIRED" {
				t.Fatalf("waiter %d: %d %v after %s, want EXPIRED", i, r.status, r.body, r.took)
			}
		}
	})
}

func TestE2EAgentReceipts(t *testing.T) {
	t.Parallel()
	forModes(t, func(t *testing.T, backend string) {
		_, seedB64 := azSeed(t)
		s := startServer(t, backend, map[string]string{"SVC_RATE_LIMIT_CAPACITY": "100000", "SVC_RECEIPT_SIGNING_KEY": seedB64})
		_, admin := s.tenant(t, "ar-"+uniq())
		_, tok := s.agent(t, admin, "ar-"+uniq(), nil)
		_, other := s.agent(t, admin, "ar-"+uniq(), nil)
		a, b := nodes(s)
		for _, mutates := range []bool{false, true} {
			m := azWant(t, a, tok, map[string]any{"tool_call": map[string]any{"tool": "crm", "action": "read_contact", "parameters": map[string]any{}},
				"mutates_state": mutates, "source_trust": azSigned}, 200)
			rid := str(t, m, "receipt_id")
			// Readable at once, on the other node too.
			got := obj(t, b.want(t, 200, "GET", "/v2/receipts/"+rid, tok, nil))
			if got["receipt_id"] != rid || got["receipt_hash"] != m["receipt_hash"] || got["decision_id"] != m["decision_id"] ||
				got["action_hash"] != m["action_hash"] || got["signature"] == nil || len(str(t, got, "key_id")) != 16 {
				t.Fatalf("agent reads its receipt: %v (authorize %v)", got, m)
			}
			if op := obj(t, s.want(t, 200, "GET", "/v2/receipts/"+rid, admin, nil)); op["receipt_hash"] != got["receipt_hash"] {
				t.Fatalf("operator reads the receipt: %v", op)
			}
			// Another agent of the tenant: the same 404 as an unknown id.
			nf := s.want(t, 404, "GET", "/v2/receipts/"+rid, other, nil)
			unknown := s.want(t, 404, "GET", "/v2/receipts/00000000-0000-7000-8000-000000000000", other, nil)
			if envelope(t, nf, 404, "v2", "NotFound")["message"] != envelope(t, unknown, 404, "v2", "NotFound")["message"] {
				t.Fatalf("another agent's receipt: %s, unknown id: %s", nf, unknown)
			}
		}
		key := obj(t, s.want(t, 200, "GET", "/v2/receipts/public-key", tok, nil))
		if len(str(t, key, "public_key")) != 44 || len(str(t, key, "key_id")) != 16 {
			t.Fatalf("public key for an agent: %v", key)
		}
		// Everything else about receipts stays the operators'.
		s.want(t, 403, "GET", "/v2/receipts", tok, nil)
		s.want(t, 403, "GET", "/v2/receipts/export", tok, nil)
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
	forModes(t, func(t *testing.T, backend string) {
		s := startServer(t, backend, map[string]string{"SVC_RATE_LIMIT_CAPACITY": "100000", "SVC_APPROVAL_CALLBACK_IP_LIMIT": "100000",
			"SVC_APPROVAL_ATTEMPT_LIMIT": "1000", "SVC_ALLOW_PRIVATE_TARGETS": "true", "SVC_APPROVAL_TTL_SECS": "6"})
		_, admin := s.tenant(t, "cb-"+uniq())
		rcv := newWhReceiver(t)
		const secret = "callback-secret-of-the-agent"
		ask := func(path string) (tok, id string, m map[string]any) {
			agentID, tok := s.agent(t, admin, "cb-"+uniq(), map[string]any{"risk_tier": "high"})
			_ = agentID
			m = azDecide(t, s, tok, apCall(map[string]any{"x": 1}, map[string]any{"webhook": map[string]any{"url": rcv.url(path), "secret": secret}}),
				"require_approval", "")
			return tok, str(t, m, "approval_id"), m
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
			if strings.Contains(string(s.want(t, 200, "GET", "/v2/approvals/"+id, admin, nil)), secret) {
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
			_, tok := s.agent(t, admin, "cb-"+uniq(), map[string]any{"risk_tier": "high"})
			raw := s.want(t, 400, "POST", "/v2/authorize", tok, apCall(map[string]any{"x": 1}, map[string]any{"webhook": wh}))
			if f, _ := detail(envelope(t, raw, 400, "v2", "BadRequest"), "field").(string); !strings.HasPrefix(f, "webhook.") {
				t.Errorf("webhook %v: %s", wh, raw)
			}
		}
	})
}

// TestE2EApprovalWaitShutdown: SIGTERM answers every waiting request at
// once (the approval as it stands) instead of holding the shutdown for the
// rest of their waits.
func TestE2EApprovalWaitShutdown(t *testing.T) {
	t.Parallel()
	s := startProcessOn(t, dbURLFor(t, "sqlite"), map[string]string{"SVC_RATE_LIMIT_CAPACITY": "100000"})
	_, admin := s.tenant(t, "ws-"+uniq())
	tok, _, id := apRequire(t, s, admin)
	ch := waitFor(t, s, tok, id, "25")
	waitingOn(t, s, 1)
	code, took := s.stop(t)
	r := recv(t, ch, 20*time.Second)
	if code != 0 || r.status != 200 || r.body["status"] != "PENDING" {
		t.Fatalf("SIGTERM with a waiter: exit %d after %s; the wait answered %d %v", code, took, r.status, r.body)
	}
	// The shutdown timeout is 20 s and the wait 25 s: a stop well under
	// either shows the waiter was answered, not waited for.
	if took > 10*time.Second || r.took > 15*time.Second {
		t.Fatalf("SIGTERM with a waiter: exit after %s, the wait answered after %s", took, r.took)
	}
	t.Logf("SIGTERM with a waiter: exit 0 after %s; the wait answered PENDING after %s (Retry-After %q)", took.Round(time.Millisecond), r.took.Round(time.Millisecond), r.header.Get("Retry-After"))
}
