package e2e

// Reliability of the authorize path: exactly-once under concurrency, tenant
// isolation of the decision and receipt records, durability across SIGKILL,
// and fail-closed behaviour while the database is unavailable (SPEC 4.2
// rules 2, 10 and 13; CONTRACT §1, §4, §11, §13).

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/testkit"
	"svc/testkit/gateway"
)

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
func azReady(t testing.TB, s *gateway.Server) map[string]any {
	t.Helper()
	_, raw := s.Do(t, "GET", "/readyz", "", nil)
	return testkit.Obj(t, raw)
}

// azOutageCall asserts that a call made while the database cannot be
// written is not answered with an acknowledged decision: a 5xx, never a 200
// allow. A 503 body, when it is a decision, is the fail-closed deny.
func azOutageCall(t testing.TB, s *gateway.Server, tok string, body map[string]any) (int, map[string]any) {
	t.Helper()
	resp, m, raw := gateway.AzPost(t, s, tok, body)
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
func azRecover(t testing.TB, s *gateway.Server, admin, tok string) {
	t.Helper()
	// The writer probes the database while its writes fail: /readyz
	// recovers by itself, before any call is made.
	testkit.Eventually(t, 20*time.Second, "/readyz audit_writer ok with no traffic", func() bool {
		r := azReady(t, s)
		return r["audit_writer"] == "ok" && r["audit_writer_unhealthy"] == false
	})
	var m map[string]any
	testkit.Eventually(t, 20*time.Second, "a mutating allowed call to be answered 200 allow after recovery", func() bool {
		resp, body, _ := gateway.AzPost(t, s, tok, gateway.AzTrustedWrite(nil))
		m = body
		return resp.StatusCode == 200 && body["decision"] == "allow" && body["receipt_id"] != nil
	})
	v := testkit.Obj(t, s.Want(t, 200, "GET", "/v2/receipts/"+testkit.Str(t, m, "receipt_id")+"/verify", admin, nil))
	if v["valid"] != true {
		t.Errorf("receipt written after recovery does not verify: %v", v)
	}
	chain := testkit.Obj(t, s.Want(t, 200, "POST", "/v2/receipts/verify-chain", admin, nil))
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
	gateway.ForBackends(t, func(t *testing.T, backend string) {
		if backend != "postgres" {
			t.Skip("primary outage needs a network database; SQLite's unwritable file is TestE2EReliabilitySQLiteUnwritable")
		}
		direct := gateway.DBURLFor(t, backend)
		u, err := url.Parse(direct)
		if err != nil {
			t.Fatal(err)
		}
		proxy := azStartProxy(t, u.Host)
		viaProxy := *u
		viaProxy.Host = proxy.ln.Addr().String()
		s := gateway.StartOn(t, viaProxy.String(), map[string]string{"SVC_DB_READ_REPLICA_URL": direct})
		_, admin := s.Tenant(t, "rel-outage-"+testkit.Uniq())
		_, tok := s.Agent(t, admin, "steady", nil)
		gateway.AzDecide(t, s, tok, gateway.AzTrustedWrite(nil), "allow", "")
		before := len(gateway.AzDecisions(t, s, admin))

		proxy.cut()
		t.Cleanup(proxy.restore)
		for _, body := range []map[string]any{gateway.AzTrustedWrite(nil), gateway.AzUntrustedWrite(nil)} {
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
		if resp, m, raw := gateway.AzPost(t, s, tok, gateway.AzRead(nil)); resp.StatusCode == 200 {
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
		after := gateway.AzDecisions(t, s, admin)
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
	_, portText, _ := net.SplitHostPort(gateway.FreeAddr(t))
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
	s := gateway.StartOn(t, pg.url(), nil)
	_, admin := s.Tenant(t, "rel-pgstop-"+testkit.Uniq())
	_, tok := s.Agent(t, admin, "survivor", nil)
	gateway.AzDecide(t, s, tok, gateway.AzTrustedWrite(nil), "allow", "")

	if err := pg.ctl("-m", "fast", "-w", "-t", "60", "stop"); err != nil {
		t.Fatalf("stopping Postgres: %v", err)
	}
	for _, body := range []map[string]any{gateway.AzTrustedWrite(nil), gateway.AzUntrustedWrite(nil), gateway.AzTrustedWrite(nil)} {
		azOutageCall(t, s, tok, body)
	}
	testkit.Eventually(t, 10*time.Second, "/health db down or /readyz audit_writer unhealthy", func() bool {
		resp, raw := s.Do(t, "GET", "/health", "", nil)
		h := testkit.Obj(t, raw)
		return (resp.StatusCode == 503 && h["db"] == "down") || azReady(t, s)["audit_writer"] == "unhealthy"
	})
	if err := pg.start(); err != nil {
		t.Fatalf("starting Postgres: %v", err)
	}
	azRecover(t, s, admin, tok)
	if m := testkit.Obj(t, s.Want(t, 200, "GET", "/health", "", nil)); m["db"] != "up" {
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
			s := gateway.Start(t, "sqlite", tc.env)
			_, admin := s.Tenant(t, "early-"+testkit.Uniq())
			_, tok := s.Agent(t, admin, "reader", nil)
			var receipts []string
			// The first write of a tenant reads its chain head and is never
			// answered early; the reads after it can be.
			for i := range 6 {
				body := gateway.AzRead(nil)
				if i == 0 {
					body = gateway.AzTrustedWrite(nil)
				}
				r := gateway.AzDecide(t, s, tok, body, "allow", "")
				receipts = append(receipts, r["receipt_id"].(string))
			}
			early := gateway.MetricValue(t, s, "svc_authorize_early_answers_total")
			if tc.early && early < 1 || !tc.early && early != 0 {
				t.Errorf("svc_authorize_early_answers_total = %v after 5 low-risk reads; early answers wanted: %v", early, tc.early)
			}
			for _, id := range receipts {
				v := testkit.Obj(t, s.Want(t, 200, "GET", "/v2/receipts/"+id+"/verify", admin, nil))
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
	dbURL := gateway.DBURLFor(t, "sqlite")
	path := strings.TrimPrefix(dbURL, "sqlite://")
	s := gateway.StartOn(t, dbURL, nil)
	_, admin := s.Tenant(t, "rel-readonly-"+testkit.Uniq())
	_, tok := s.Agent(t, admin, "steady", nil)
	gateway.AzDecide(t, s, tok, gateway.AzTrustedWrite(nil), "allow", "")
	before := len(gateway.AzDecisions(t, s, admin))

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

	for _, body := range []map[string]any{gateway.AzTrustedWrite(nil), gateway.AzUntrustedWrite(nil)} {
		status, m := azOutageCall(t, s, tok, body)
		if status != 503 || m["decision"] != "deny" || m["reason"] != "audit_writer_unavailable" {
			t.Errorf("protected call with the database unwritable: %d %v; want 503 deny audit_writer_unavailable", status, m)
		}
	}
	resp, m, raw := gateway.AzPost(t, s, tok, gateway.AzRead(nil))
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
	if after := len(gateway.AzDecisions(t, s, admin)); after != before+1 {
		t.Errorf("%d decisions after recovery, want %d (the recovery call only)", after, before+1)
	}
}

// TestE2ENoncesSurviveARestart: a replay nonce used before a restart is
// still refused after it, within its window (SPEC 4.2 rule 13): a starting
// node restores the window's nonces from the decisions (a lone node keeps
// them in process).
func TestE2ENoncesSurviveARestart(t *testing.T) {
	t.Parallel()
	gateway.ForBackends(t, func(t *testing.T, backend string) {
		dbURL := gateway.DBURLFor(t, backend)
		s := gateway.StartOn(t, dbURL, nil)
		_, admin := s.Tenant(t, "rel-nonce-restart-"+testkit.Uniq())
		_, tok := s.Agent(t, admin, "replayer", nil)
		nonce := "restart-" + testkit.Uniq()
		gateway.AzDecide(t, s, tok, gateway.AzRead(map[string]any{"nonce": nonce}), "allow", "")
		if code, _ := s.Stop(t); code != 0 {
			t.Fatalf("graceful stop exited %d", code)
		}

		s2 := gateway.StartOn(t, dbURL, nil)
		gateway.AzDecide(t, s2, tok, gateway.AzRead(map[string]any{"nonce": nonce}), "deny", "replay_nonce_reused")
		gateway.AzDecide(t, s2, tok, gateway.AzRead(map[string]any{"nonce": "fresh-" + testkit.Uniq()}), "allow", "")
	})
}
