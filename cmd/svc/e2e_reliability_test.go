package main

// Reliability of the authorize path: exactly-once under concurrency, tenant
// isolation of the decision and receipt records, durability across SIGKILL,
// and fail-closed behaviour while the database is unavailable (SPEC 4.2
// rules 2, 10 and 13; CONTRACT §1, §4, §11, §13).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// azResult is one answer of a concurrent authorize call.
type azResult struct {
	status int
	body   map[string]any
	raw    []byte
	err    error
}

// azClient is a client for many concurrent calls to one server.
func azClient(conns int) *http.Client {
	return &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxIdleConns: conns}}
}

// azSend posts one authorize call; safe to use from any goroutine (it never
// calls t.Fatal).
func azSend(c *http.Client, base, tok string, body []byte) azResult {
	req, err := http.NewRequest("POST", base+"/v2/authorize", bytes.NewReader(body))
	if err != nil {
		return azResult{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := c.Do(req)
	if err != nil {
		return azResult{err: err}
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return azResult{status: resp.StatusCode, err: err}
	}
	r := azResult{status: resp.StatusCode, raw: raw}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

// azConcurrent sends n copies of body at once (released together).
func azConcurrent(s *server, tok string, n int, body []byte) []azResult {
	c := azClient(n)
	defer c.CloseIdleConnections()
	out := make([]azResult, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			out[i] = azSend(c, s.base, tok, body)
		})
	}
	close(start)
	wg.Wait()
	return out
}

func azJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestE2EReliability covers exactly-once answers under concurrency, tenant
// isolation of records, and durability across SIGKILL.
func TestE2EReliability(t *testing.T) {
	t.Parallel()
	forBackends(t, func(t *testing.T, backend string) {
		s := startServer(t, backend, map[string]string{"SVC_RATE_LIMIT_CAPACITY": "100000"})

		t.Run("one nonce, 200 concurrent calls", func(t *testing.T) {
			_, admin := s.tenant(t, "rel-nonce-"+uniq())
			_, tok := s.agent(t, admin, "racer", nil)
			body := azJSON(t, azRead(map[string]any{"nonce": "nonce-" + uniq()}))
			res := azConcurrent(s, tok, 200, body)
			allows, replays := 0, 0
			ids := map[string]bool{}
			for i, r := range res {
				if r.err != nil || r.status != 200 {
					t.Fatalf("call %d: status %d, error %v: %s", i, r.status, r.err, r.raw)
				}
				switch {
				case r.body["decision"] == "allow":
					allows++
				case r.body["decision"] == "deny" && r.body["reason"] == "replay_nonce_reused":
					replays++
				default:
					t.Errorf("call %d: unexpected answer %s", i, r.raw)
				}
				if id, _ := r.body["decision_id"].(string); id != "" {
					ids[id] = true
				}
			}
			if allows != 1 || replays != 199 {
				t.Errorf("%d allows and %d replay denies, want 1 and 199", allows, replays)
			}
			if len(ids) != 200 {
				t.Errorf("%d distinct decision ids, want 200 (every call is recorded)", len(ids))
			}
			var decs []map[string]any
			checkFor(t, 10*time.Second, "200 recorded decisions", func() bool {
				decs = azDecisions(t, s, admin)
				return len(decs) >= 200
			})
			recAllow, recReplay := 0, 0
			for _, d := range decs {
				switch {
				case d["decision"] == "allow":
					recAllow++
				case d["reason"] == "replay_nonce_reused":
					recReplay++
				}
			}
			if len(decs) != 200 || recAllow != 1 || recReplay != 199 {
				t.Errorf("recorded %d decisions (%d allow, %d replay denies), want 200 (1, 199)", len(decs), recAllow, recReplay)
			}
		})

		t.Run("one request_id, 200 concurrent calls", func(t *testing.T) {
			_, admin := s.tenant(t, "rel-idem-"+uniq())
			_, tok := s.agent(t, admin, "retrier", nil)
			rid := "req-" + uniq()
			res := azConcurrent(s, tok, 200, azJSON(t, azTrustedWrite(map[string]any{"request_id": rid})))
			first := ""
			for i, r := range res {
				if r.err != nil || r.status != 200 {
					t.Fatalf("call %d: status %d, error %v: %s", i, r.status, r.err, r.raw)
				}
				id, _ := r.body["decision_id"].(string)
				if id == "" {
					t.Fatalf("call %d: no decision_id: %s", i, r.raw)
				}
				if first == "" {
					first = id
				}
				if id != first {
					t.Errorf("call %d: decision_id %s, want %s (one decision per request_id)", i, id, first)
				}
			}
			n := 0
			for _, d := range azDecisions(t, s, admin) {
				if d["request_id"] == rid {
					n++
					if d["decision_id"] != first {
						t.Errorf("recorded decision %v for request_id %s, answered %s", d["decision_id"], rid, first)
					}
				}
			}
			if n != 1 {
				t.Errorf("%d decisions with request_id %s, want exactly 1", n, rid)
			}
		})

		t.Run("tenant isolation", func(t *testing.T) {
			tenantA, adminA := s.tenant(t, "rel-iso-a-"+uniq())
			tenantB, adminB := s.tenant(t, "rel-iso-b-"+uniq())
			_, tokA := s.agent(t, adminA, "a", nil)
			_, tokB := s.agent(t, adminB, "b", nil)
			var bIDs []string // B's decision and receipt ids, and its tenant id
			var bReceipts []string
			bIDs = append(bIDs, tenantB)
			for i := 0; i < 3; i++ {
				azWant(t, s, tokA, azRead(nil), 200)
				azWant(t, s, tokA, azUntrustedWrite(nil), 200)
				m := azWant(t, s, tokB, azRead(nil), 200)
				bIDs = append(bIDs, str(t, m, "decision_id"), str(t, m, "receipt_id"))
				bReceipts = append(bReceipts, str(t, m, "receipt_id"))
			}
			views := map[string][]byte{
				"receipts":     s.want(t, 200, "GET", "/v2/receipts?limit=500", adminA, nil),
				"decisions":    s.want(t, 200, "GET", "/v2/decisions?limit=500", adminA, nil),
				"verify-chain": s.want(t, 200, "POST", "/v2/receipts/verify-chain", adminA, nil),
				"export":       s.want(t, 200, "GET", "/v2/receipts/export", adminA, nil),
			}
			for name, raw := range views {
				for _, id := range bIDs {
					if bytes.Contains(raw, []byte(id)) {
						t.Errorf("tenant A's %s shows tenant B's id %s", name, id)
					}
				}
			}
			if !bytes.Contains(views["export"], []byte(tenantA)) {
				t.Errorf("tenant A's export does not name tenant A")
			}
			_, raw := s.do(t, "GET", "/v2/receipts/"+bReceipts[0]+"/verify", adminA, nil)
			envelope(t, raw, 404, "v2", "NotFound")
			_, raw = s.do(t, "GET", "/v2/decisions/"+bIDs[1], adminA, nil)
			envelope(t, raw, 404, "v2", "NotFound")
			cross := obj(t, s.want(t, 200, "POST", "/v2/receipts/verify-chain", adminA, map[string]any{"receipt_ids": bReceipts}))
			if cross["valid"] != false || len(cross["errors"].([]any)) != len(bReceipts) {
				t.Errorf("tenant A verifying tenant B's receipt ids = %v; want every id not found", cross)
			}
			for _, c := range []struct {
				name, tok string
				n         int
			}{{"A", adminA, 6}, {"B", adminB, 3}} {
				chain := obj(t, s.want(t, 200, "POST", "/v2/receipts/verify-chain", c.tok, nil))
				if chain["valid"] != true || chain["checked"] != float64(c.n) {
					t.Errorf("tenant %s chain = %v; want valid, checked %d", c.name, chain, c.n)
				}
				rs := arr(t, s.want(t, 200, "GET", "/v2/receipts?limit=500", c.tok, nil))
				if len(rs) != c.n || rs[len(rs)-1]["seq"] != float64(1) || rs[len(rs)-1]["prev_receipt_hash"] != "" || rs[0]["seq"] != float64(c.n) {
					t.Errorf("tenant %s receipts do not run seq 1..%d from an empty head: %v", c.name, c.n, rs)
				}
			}
		})

		// By default a low-risk read allow may be answered before its
		// receipt is durable (SPEC 4.2 rule 10); with SVC_EARLY_ANSWER=false
		// every acknowledged receipt must survive the kill.
		for _, strict := range []bool{false, true} {
			name := "SIGKILL under load loses no acknowledged receipt"
			env := map[string]string{"SVC_RATE_LIMIT_CAPACITY": "100000"}
			if strict {
				name += ", none at all with SVC_EARLY_ANSWER=false"
				env["SVC_EARLY_ANSWER"] = "false"
			}
			t.Run(name, func(t *testing.T) { killUnderLoad(t, backend, env, strict) })
		}
	})
}

// killUnderLoad drives three kinds of call from 8 workers, SIGKILLs the
// server after 1000 acknowledged decisions, restarts it on the same
// database, and checks every acknowledged receipt and the chain; strict
// also refuses any lost low-risk read allow.
func killUnderLoad(t *testing.T, backend string, env map[string]string, strict bool) {
	dbURL := dbURLFor(t, backend)
	k := startProcessOn(t, dbURL, env) // SIGKILLed below
	_, admin := k.tenant(t, "rel-kill-"+uniq())
	// A high-risk read is a protected call: answered only after its
	// receipt is durable, like every mutating call (SPEC 4.2 rule 10).
	k.want(t, 200, "PUT", "/v2/skills/vault", admin, map[string]any{"actions": map[string]any{
		"read": map[string]any{"risk": "high", "mutates_state": false}}})
	bodies := []struct {
		kind string
		body []byte
	}{
		{"mutating deny", azJSON(t, azUntrustedWrite(nil))},
		{"protected read allow", azJSON(t, azBody("vault", "read", false, azSigned, nil))},
		{"low-risk read allow", azJSON(t, azRead(nil))},
	}
	// An answered request_id is answered again after the crash.
	_, idemTok := k.agent(t, admin, "idempotent", nil)
	rid := "before-kill-" + uniq()
	answered := azDecide(t, k, idemTok, azTrustedWrite(map[string]any{"request_id": rid}), "allow", "")
	// ... and a require_approval one with its approval (CONTRACT §4).
	_, highTok := k.agent(t, admin, "needs-approval", map[string]any{"risk_tier": "high"})
	ridApproval := "before-kill-approval-" + uniq()
	pending := azDecide(t, k, highTok, apCall(nil, map[string]any{"request_id": ridApproval}), "require_approval", "")

	const workers = 8
	var toks []string
	for i := range workers {
		_, tok := k.agent(t, admin, fmt.Sprintf("worker-%d", i), nil)
		toks = append(toks, tok)
	}
	type ack struct{ receipt, kind string }
	var (
		mu         sync.Mutex
		acks       []ack
		unexpected []string
		stop       atomic.Bool
		wg         sync.WaitGroup
	)
	client := azClient(workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; !stop.Load(); i++ {
				b := bodies[i%len(bodies)]
				r := azSend(client, k.base, toks[w], b.body)
				if r.err != nil {
					continue // the process was killed under this call
				}
				mu.Lock()
				if rid, _ := r.body["receipt_id"].(string); r.status == 200 && rid != "" {
					acks = append(acks, ack{rid, b.kind})
				} else if !stop.Load() {
					unexpected = append(unexpected, fmt.Sprintf("%s: %d %s", b.kind, r.status, r.raw))
				}
				mu.Unlock()
			}
		})
	}
	checkFor(t, 20*time.Second, "1000 acknowledged decisions under load", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acks) >= 1000
	})
	if err := k.cmd.Process.Kill(); err != nil {
		t.Fatalf("SIGKILL: %v", err)
	}
	<-k.done
	stop.Store(true)
	wg.Wait()
	client.CloseIdleConnections()
	mu.Lock()
	collected := append([]ack(nil), acks...)
	if len(unexpected) > 0 {
		t.Errorf("%d unexpected answers before the kill, first: %s", len(unexpected), unexpected[0])
	}
	mu.Unlock()

	k2 := startServerOn(t, dbURL, nil)
	vc := azClient(8)
	defer vc.CloseIdleConnections()
	var missing, invalid, lowRiskLost atomic.Int64
	var firstProblem atomic.Value
	jobs := make(chan ack)
	var vwg sync.WaitGroup
	for range 8 {
		vwg.Go(func() {
			for a := range jobs {
				req, _ := http.NewRequest("GET", k2.base+"/v2/receipts/"+a.receipt+"/verify", nil)
				req.Header.Set("Authorization", "Bearer "+admin)
				resp, err := vc.Do(req)
				if err != nil {
					firstProblem.CompareAndSwap(nil, err.Error())
					missing.Add(1)
					continue
				}
				raw, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				var v map[string]any
				_ = json.Unmarshal(raw, &v)
				switch {
				case resp.StatusCode == 404 && a.kind == "low-risk read allow" && !strict:
					// SPEC 4.2 rule 10: a low-risk read allow may be
					// answered before its receipt is durable.
					lowRiskLost.Add(1)
				case resp.StatusCode != 200:
					missing.Add(1)
					firstProblem.CompareAndSwap(nil, fmt.Sprintf("%s receipt %s: %d %s", a.kind, a.receipt, resp.StatusCode, raw))
				case v["valid"] != true:
					invalid.Add(1)
					firstProblem.CompareAndSwap(nil, fmt.Sprintf("%s receipt %s: %s", a.kind, a.receipt, raw))
				}
			}
		})
	}
	for _, a := range collected {
		jobs <- a
	}
	close(jobs)
	vwg.Wait()
	if missing.Load() > 0 || invalid.Load() > 0 {
		t.Errorf("of %d acknowledged receipts, %d missing and %d invalid after SIGKILL and restart; first: %v",
			len(collected), missing.Load(), invalid.Load(), firstProblem.Load())
	}
	if n := lowRiskLost.Load(); n > 0 {
		t.Logf("%d low-risk read allows were acknowledged but not durable (allowed by SPEC 4.2 rule 10)", n)
	}
	chain := obj(t, k2.want(t, 200, "POST", "/v2/receipts/verify-chain", admin, nil))
	checked, _ := chain["checked"].(float64)
	if chain["valid"] != true || int(checked) < len(collected)-int(lowRiskLost.Load()) {
		t.Errorf("chain after restart = %.300v; want valid with at least %d receipts", fmt.Sprint(chain), len(collected))
	}
	replay := azDecide(t, k2, idemTok, azTrustedWrite(map[string]any{"request_id": rid}), "allow", "")
	for _, f := range []string{"decision_id", "receipt_id", "receipt_hash", "action_hash"} {
		if replay[f] != answered[f] {
			t.Errorf("request_id replayed after restart: %s %v, want %v", f, replay[f], answered[f])
		}
	}
	again := azDecide(t, k2, highTok, apCall(nil, map[string]any{"request_id": ridApproval}), "require_approval", "")
	for _, f := range []string{"decision_id", "receipt_id", "approval_id", "approval_expires_at"} {
		if again[f] == nil || again[f] != pending[f] {
			t.Errorf("require_approval request_id replayed after restart: %s %v, want %v", f, again[f], pending[f])
		}
	}
	// The chain goes on from the durable head.
	azWant(t, k2, toks[0], azUntrustedWrite(nil), 200)
	after := obj(t, k2.want(t, 200, "POST", "/v2/receipts/verify-chain", admin, nil))
	if after["valid"] != true || after["checked"] != checked+1 {
		t.Errorf("chain after one more decision = %.300v; want valid with %d receipts", fmt.Sprint(after), int(checked)+1)
	}
	t.Logf("%d acknowledged receipts before SIGKILL, %d in the chain after restart", len(collected), int(checked))
}

// azProxy is a TCP proxy in front of Postgres whose link can be cut: while
// cut, every open connection is closed and new ones are closed on accept,
// as when the database host goes away.
type azProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]struct{}
}

func azStartProxy(t testing.TB, target string) *azProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &azProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		p.cut()
	})
	return p
}

func (p *azProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.pipe(c)
	}
}

func (p *azProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *azProxy) pipe(c net.Conn) {
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		_ = c.Close()
		return
	}
	if !p.track(c, up) {
		_ = c.Close()
		_ = up.Close()
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
	_ = c.Close()
	_ = up.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// cut closes every connection and refuses new ones until restore.
func (p *azProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

func (p *azProxy) restore() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

// azReady reads /readyz (200 or 503).
func azReady(t testing.TB, s *server) map[string]any {
	t.Helper()
	_, raw := s.do(t, "GET", "/readyz", "", nil)
	return obj(t, raw)
}

// azOutageCall asserts that a call made while the database cannot be
// written is not answered with an acknowledged decision: a 5xx, never a 200
// allow. A 503 body, when it is a decision, is the fail-closed deny.
func azOutageCall(t testing.TB, s *server, tok string, body map[string]any) (int, map[string]any) {
	t.Helper()
	resp, m, raw := azPost(t, s, tok, body)
	t.Logf("during the outage: %d %s", resp.StatusCode, bytes.TrimSpace(raw))
	if resp.StatusCode < 500 {
		t.Errorf("call during the outage answered %d: %s; want a 5xx (fail closed)", resp.StatusCode, raw)
	}
	if m["decision"] == "allow" {
		t.Errorf("call during the outage was allowed: %s", raw)
	}
	if resp.StatusCode == 503 && m["decision"] != nil {
		if m["decision"] != "deny" || m["reason"] != "audit_writer_unavailable" {
			t.Errorf("503 decision body %s; want deny audit_writer_unavailable", raw)
		}
		// CONTRACT §4 gives the body exactly: {"decision":"deny","reason":"audit_writer_unavailable"}.
		if len(m) != 2 {
			t.Errorf("503 deny body has fields beyond decision and reason: %s", raw)
		}
	}
	return resp.StatusCode, m
}

// azRecover waits until a mutating allowed call is answered 200 allow with a
// receipt again, then checks /readyz and the receipt.
func azRecover(t testing.TB, s *server, admin, tok string) {
	t.Helper()
	// The writer probes the database while its writes fail: /readyz
	// recovers by itself, before any call is made.
	checkFor(t, 20*time.Second, "/readyz audit_writer ok with no traffic", func() bool {
		r := azReady(t, s)
		return r["audit_writer"] == "ok" && r["audit_writer_unhealthy"] == false
	})
	var m map[string]any
	checkFor(t, 20*time.Second, "a mutating allowed call to be answered 200 allow after recovery", func() bool {
		resp, body, _ := azPost(t, s, tok, azTrustedWrite(nil))
		m = body
		return resp.StatusCode == 200 && body["decision"] == "allow" && body["receipt_id"] != nil
	})
	v := obj(t, s.want(t, 200, "GET", "/v2/receipts/"+str(t, m, "receipt_id")+"/verify", admin, nil))
	if v["valid"] != true {
		t.Errorf("receipt written after recovery does not verify: %v", v)
	}
	chain := obj(t, s.want(t, 200, "POST", "/v2/receipts/verify-chain", admin, nil))
	if chain["valid"] != true {
		t.Errorf("chain after recovery = %v", chain)
	}
}

// TestE2EReliabilityPrimaryOutage cuts the link to the Postgres primary
// while reads still reach the database through SVC_DB_READ_REPLICA_URL:
// tokens authenticate and policies evaluate, but no decision can be made
// durable. Protected calls must fail closed with the 503 deny
// audit_writer_unavailable (SPEC 4.2 rule 10, CONTRACT §4), /readyz must say
// so, and the gateway must recover when the link returns. The shared
// Postgres server itself is never stopped, so this runs in parallel.
func TestE2EReliabilityPrimaryOutage(t *testing.T) {
	t.Parallel()
	forBackends(t, func(t *testing.T, backend string) {
		if backend != "postgres" {
			t.Skip("primary outage needs a network database; SQLite's unwritable file is TestE2EReliabilitySQLiteUnwritable")
		}
		direct := dbURLFor(t, backend)
		u, err := url.Parse(direct)
		if err != nil {
			t.Fatal(err)
		}
		proxy := azStartProxy(t, u.Host)
		viaProxy := *u
		viaProxy.Host = proxy.ln.Addr().String()
		s := startServerOn(t, viaProxy.String(), map[string]string{"SVC_DB_READ_REPLICA_URL": direct})
		_, admin := s.tenant(t, "rel-outage-"+uniq())
		_, tok := s.agent(t, admin, "steady", nil)
		azDecide(t, s, tok, azTrustedWrite(nil), "allow", "")
		before := len(azDecisions(t, s, admin))

		proxy.cut()
		t.Cleanup(proxy.restore)
		for _, body := range []map[string]any{azTrustedWrite(nil), azUntrustedWrite(nil)} {
			status, m := azOutageCall(t, s, tok, body)
			if status != 503 || m["decision"] != "deny" || m["reason"] != "audit_writer_unavailable" {
				t.Errorf("protected call with the primary unreachable: %d %v; want 503 deny audit_writer_unavailable", status, m)
			}
		}
		// A low-risk read is still allowed on a best-effort record (SPEC 4.2
		// rule 10). While the writer knows its writes fail it answers no
		// early answers, so the read waits for its write, which fails: the
		// answer carries no decision or receipt ids that would never exist.
		var earlyRead string
		if resp, m, raw := azPost(t, s, tok, azRead(nil)); resp.StatusCode == 200 {
			if m["decision"] != "allow" {
				t.Errorf("best-effort read during the outage: %s; want allow", raw)
			}
			for _, f := range []string{"decision_id", "receipt_id", "receipt_hash"} {
				if v, ok := m[f]; ok && v != "" {
					t.Errorf("best-effort read during the outage answered %s %v: no record will have it", f, v)
				}
			}
			earlyRead, _ = m["decision_id"].(string)
		} else if resp.StatusCode < 500 {
			t.Errorf("read during the outage: %d %s", resp.StatusCode, raw)
		}
		ready := azReady(t, s)
		if ready["audit_writer"] != "unhealthy" || ready["audit_writer_unhealthy"] != true {
			t.Errorf("/readyz during the outage = %v; want audit_writer unhealthy", ready)
		}

		proxy.restore()
		azRecover(t, s, admin, tok)
		// No refused call is ever recorded: after recovery there is the
		// recovery call and, at most, the best-effort read.
		after := azDecisions(t, s, admin)
		extra := 0
		for _, d := range after {
			if earlyRead != "" && d["decision_id"] == earlyRead {
				extra = 1
			}
		}
		if len(after) != before+1+extra {
			t.Errorf("%d decisions after recovery, want %d: a refused call was recorded", len(after), before+1+extra)
		}
	})
}

// privatePG is a Postgres cluster of this test's own, made with the binaries
// scripts/testenv.sh found (SVC_TEST_PG_BIN), so that stopping it cannot
// disturb the server the other packages' tests share.
type privatePG struct {
	bin, dir, user string
	port           int
}

func newPrivatePG(t *testing.T) *privatePG {
	t.Helper()
	bin := os.Getenv("SVC_TEST_PG_BIN")
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("SVC_TEST_PG_BIN is not set under CI: the Postgres stop/start test cannot run")
		}
		t.Skip("SVC_TEST_PG_BIN is not set: the Postgres stop/start test needs the binaries scripts/testenv.sh (make test) finds; it runs there")
	}
	dir, err := os.MkdirTemp("/tmp", "svc-pgpriv-")
	if err != nil {
		t.Fatal(err)
	}
	p := &privatePG{bin: bin, dir: dir, user: os.Getenv("SVC_TEST_PG_USER")}
	t.Cleanup(func() {
		_ = p.ctl("-m", "immediate", "stop")
		_ = os.RemoveAll(dir)
	})
	if p.user != "" {
		if out, err := exec.Command("chown", p.user, dir).CombinedOutput(); err != nil {
			t.Fatalf("chown %s: %v %s", dir, err, out)
		}
	}
	if err := p.run("initdb", "-D", p.data(), "-A", "trust", "-U", "svc", "--locale=C.UTF-8"); err != nil {
		t.Fatalf("initdb: %v", err)
	}
	_, portText, _ := net.SplitHostPort(freeAddr(t))
	p.port, _ = strconv.Atoi(portText)
	if err := p.start(); err != nil {
		t.Fatalf("starting the private cluster: %v", err)
	}
	return p
}

func (p *privatePG) data() string { return filepath.Join(p.dir, "data") }

func (p *privatePG) url() string {
	return fmt.Sprintf("postgres://svc@127.0.0.1:%d/postgres?sslmode=disable", p.port)
}

func (p *privatePG) start() error {
	return p.ctl("-w", "-t", "60", "-l", filepath.Join(p.dir, "postgres.log"), "-o",
		fmt.Sprintf("-k %s -h 127.0.0.1 -p %d -c fsync=off -c max_connections=100", p.dir, p.port), "start")
}

func (p *privatePG) ctl(args ...string) error {
	return p.run("pg_ctl", append([]string{"-D", p.data()}, args...)...)
}

// run runs a Postgres binary, as SVC_TEST_PG_USER when set (Postgres refuses
// to run as root), with its output in a file: a started postmaster would
// hold pipes open and Wait would never return.
func (p *privatePG) run(name string, args ...string) error {
	argv := append([]string{filepath.Join(p.bin, name)}, args...)
	if p.user != "" {
		argv = append([]string{"runuser", "-u", p.user, "--"}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	logf, err := os.CreateTemp("", "pg-*.log")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(logf.Name()) }()
	defer func() { _ = logf.Close() }()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Run(); err != nil {
		out, _ := os.ReadFile(logf.Name())
		return fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, out)
	}
	return nil
}

// TestE2EReliabilityPostgresRestart stops Postgres under a running gateway
// and starts it again: while it is down no protected call is allowed, and
// the gateway recovers by itself. It uses a private cluster.
func TestE2EReliabilityPostgresRestart(t *testing.T) {
	pg := newPrivatePG(t)
	s := startServerOn(t, pg.url(), nil)
	_, admin := s.tenant(t, "rel-pgstop-"+uniq())
	_, tok := s.agent(t, admin, "survivor", nil)
	azDecide(t, s, tok, azTrustedWrite(nil), "allow", "")

	if err := pg.ctl("-m", "fast", "-w", "-t", "60", "stop"); err != nil {
		t.Fatalf("stopping Postgres: %v", err)
	}
	for _, body := range []map[string]any{azTrustedWrite(nil), azUntrustedWrite(nil), azTrustedWrite(nil)} {
		azOutageCall(t, s, tok, body)
	}
	checkFor(t, 10*time.Second, "/health db down or /readyz audit_writer unhealthy", func() bool {
		resp, raw := s.do(t, "GET", "/health", "", nil)
		h := obj(t, raw)
		return (resp.StatusCode == 503 && h["db"] == "down") || azReady(t, s)["audit_writer"] == "unhealthy"
	})
	if err := pg.start(); err != nil {
		t.Fatalf("starting Postgres: %v", err)
	}
	azRecover(t, s, admin, tok)
	if m := obj(t, s.want(t, 200, "GET", "/health", "", nil)); m["db"] != "up" {
		t.Errorf("/health after restart = %v", m)
	}
}

// TestE2EEarlyAnswerSetting: a lone node answers low-risk read-only allows
// before their commit (SPEC 4.2 rule 10) unless SVC_EARLY_ANSWER=false, with
// which every decision is answered after its commit. The metric counts the
// early answers; every receipt answered is verifiable either way.
func TestE2EEarlyAnswerSetting(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		env   map[string]string
		early bool
	}{
		{"default answers early", nil, true},
		{"false answers after the commit", map[string]string{"SVC_EARLY_ANSWER": "false"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, "sqlite", tc.env)
			_, admin := s.tenant(t, "early-"+uniq())
			_, tok := s.agent(t, admin, "reader", nil)
			var receipts []string
			// The first write of a tenant reads its chain head and is never
			// answered early; the reads after it can be.
			for i := range 6 {
				body := azRead(nil)
				if i == 0 {
					body = azTrustedWrite(nil)
				}
				r := azDecide(t, s, tok, body, "allow", "")
				receipts = append(receipts, r["receipt_id"].(string))
			}
			early := metricValue(t, s, "svc_authorize_early_answers_total")
			if tc.early && early < 1 || !tc.early && early != 0 {
				t.Errorf("svc_authorize_early_answers_total = %v after 5 low-risk reads; early answers wanted: %v", early, tc.early)
			}
			for _, id := range receipts {
				v := obj(t, s.want(t, 200, "GET", "/v2/receipts/"+id+"/verify", admin, nil))
				if v["valid"] != true {
					t.Errorf("receipt %s: %v", id, v)
				}
			}
		})
	}
}

// TestE2EReliabilitySQLiteUnwritable makes the SQLite database and its log
// immutable (chattr +i: as root, file permissions do not stop writes, and
// the server holds its files open) under a running gateway: protected calls
// must fail closed with the 503 deny, a low-risk read is allowed without ids
// that no record will have, /readyz says audit_writer unhealthy, and once
// the files are writable again the gateway recovers by itself, /readyz
// first, with no call made.
func TestE2EReliabilitySQLiteUnwritable(t *testing.T) {
	t.Parallel()
	dbURL := dbURLFor(t, "sqlite")
	path := strings.TrimPrefix(dbURL, "sqlite://")
	s := startServerOn(t, dbURL, nil)
	_, admin := s.tenant(t, "rel-readonly-"+uniq())
	_, tok := s.agent(t, admin, "steady", nil)
	azDecide(t, s, tok, azTrustedWrite(nil), "allow", "")
	before := len(azDecisions(t, s, admin))

	immutable := func(on bool) error {
		flag := "-i"
		if on {
			flag = "+i"
		}
		out, err := exec.Command("chattr", flag, path, path+"-wal").CombinedOutput()
		if err != nil {
			return fmt.Errorf("chattr %s: %w %s", flag, err, out)
		}
		return nil
	}
	if err := immutable(true); err != nil {
		t.Skipf("cannot make the database immutable here (needs root and a file system with attributes): %v", err)
	}
	t.Cleanup(func() { _ = immutable(false) })

	for _, body := range []map[string]any{azTrustedWrite(nil), azUntrustedWrite(nil)} {
		status, m := azOutageCall(t, s, tok, body)
		if status != 503 || m["decision"] != "deny" || m["reason"] != "audit_writer_unavailable" {
			t.Errorf("protected call with the database unwritable: %d %v; want 503 deny audit_writer_unavailable", status, m)
		}
	}
	resp, m, raw := azPost(t, s, tok, azRead(nil))
	if resp.StatusCode != 200 || m["decision"] != "allow" {
		t.Errorf("best-effort read with the database unwritable: %d %s; want 200 allow", resp.StatusCode, raw)
	}
	for _, f := range []string{"decision_id", "receipt_id", "receipt_hash"} {
		if v, ok := m[f]; ok && v != "" {
			t.Errorf("best-effort read with the database unwritable answered %s %v: no record will have it", f, v)
		}
	}
	if ready := azReady(t, s); ready["audit_writer"] != "unhealthy" || ready["audit_writer_unhealthy"] != true {
		t.Errorf("/readyz with the database unwritable = %v; want audit_writer unhealthy", ready)
	}

	if err := immutable(false); err != nil {
		t.Fatal(err)
	}
	azRecover(t, s, admin, tok)
	if after := len(azDecisions(t, s, admin)); after != before+1 {
		t.Errorf("%d decisions after recovery, want %d (the recovery call only)", after, before+1)
	}
}

// TestE2ENoncesSurviveARestart: a replay nonce used before a restart is
// still refused after it, within its window (SPEC 4.2 rule 13): a starting
// node restores the window's nonces from the decisions (a lone node keeps
// them in process).
func TestE2ENoncesSurviveARestart(t *testing.T) {
	t.Parallel()
	forBackends(t, func(t *testing.T, backend string) {
		dbURL := dbURLFor(t, backend)
		s := startServerOn(t, dbURL, nil)
		_, admin := s.tenant(t, "rel-nonce-restart-"+uniq())
		_, tok := s.agent(t, admin, "replayer", nil)
		nonce := "restart-" + uniq()
		azDecide(t, s, tok, azRead(map[string]any{"nonce": nonce}), "allow", "")
		if code, _ := s.stop(t); code != 0 {
			t.Fatalf("graceful stop exited %d", code)
		}

		s2 := startServerOn(t, dbURL, nil)
		azDecide(t, s2, tok, azRead(map[string]any{"nonce": nonce}), "deny", "replay_nonce_reused")
		azDecide(t, s2, tok, azRead(map[string]any{"nonce": "fresh-" + uniq()}), "allow", "")
	})
}
