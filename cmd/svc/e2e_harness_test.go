package main

// End-to-end harness: every test talks HTTP to real gateways on SQLite and
// Postgres (and Valkey when clustered). Most run as a node in this test
// process (node.New and Start, wired as the binary wires it); what only a
// process shows (signals, exit codes, SIGKILL, TLS, configuration errors,
// the two-node cluster) runs the svc binary, built once.

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"svc/node"
	"svc/persistence"
	"svc/persistence/storetest"
)

// superToken is the SVC_ADMIN_TOKEN every harness server gets (40 chars).
const superToken = "e2e-super-admin-token-0123456789abcdefghi"

var svcBinary string

var backends = []string{"sqlite", "postgres"}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "svc-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: tempdir:", err)
		os.Exit(1)
	}
	svcBinary = filepath.Join(dir, "svc")
	args := []string{"build", "-o", svcBinary}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "./")...)
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: go build:", err)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	// A reused test environment would start this run with 127.0.0.1
	// locked out of authorize by the lockout counters earlier runs left
	// (kept an hour): every cluster test's calls come from loopback.
	storetest.DeleteValkeyKeys("svc:authfail:*")
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// syncBuf is a goroutine-safe output buffer.
type syncBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type server struct {
	base   string // http://127.0.0.1:port
	debug  string // http://127.0.0.1:port of the debug listener
	dbURL  string
	cmd    *exec.Cmd
	stdout *syncBuf
	stderr *syncBuf
	done   chan struct{}
	exit   int
	client *http.Client
	mu     sync.Mutex
	halted bool
	// peers are a cluster's nodes (startCluster); base is then the
	// balancer in front of them.
	peers []*server
	// node is the server run in this test process (startInProcess), with
	// the store it owns; cmd is nil then.
	node            *node.Node
	store           persistence.Store
	shutdownTimeout time.Duration
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// dbURLFor returns a fresh database URL for the backend.
func dbURLFor(t testing.TB, backend string) string {
	t.Helper()
	switch backend {
	case "sqlite":
		return "sqlite://" + filepath.Join(t.TempDir(), "svc.db")
	case "postgres", clusterBackend: // a cluster's database is Postgres
		return storetest.PostgresURL(t)
	}
	t.Fatalf("unknown backend %q", backend)
	return ""
}

// baseEnv is the process environment without any svc setting.
func baseEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "SVC_") || strings.HasPrefix(kv, "DATABASE_URL=") || strings.HasPrefix(kv, "GORACE=") {
			continue
		}
		out = append(out, kv)
	}
	if raceEnabled {
		// A race-built gateway exits (code 66) at its first data race, which
		// fails the test that started it.
		out = append(out, "GORACE=halt_on_error=1")
	}
	return out
}

// startServer starts the gateway on a fresh database of the backend.
func startServer(t testing.TB, backend string, env map[string]string) *server {
	t.Helper()
	if backend == clusterBackend {
		return startCluster(t, env)
	}
	return startServerOn(t, dbURLFor(t, backend), env)
}

// startServerOn starts the gateway on the given database URL: a node in
// this test process (node.New, then Start on loopback ports) unless env
// clusters it or speaks TLS, which run the binary (startProcessOn).
func startServerOn(t testing.TB, dbURL string, env map[string]string) *server {
	t.Helper()
	return startOn(t, dbURL, env, env["SVC_CLUSTER"] == "true" || env["SVC_TLS_CERT"] != "")
}

// startProcessOn starts the binary on the given database URL, for what
// only a process shows: signals, exit codes, SIGKILL, the two-node cluster.
func startProcessOn(t testing.TB, dbURL string, env map[string]string) *server {
	t.Helper()
	return startOn(t, dbURL, env, true)
}

func startOn(t testing.TB, dbURL string, env map[string]string, process bool) *server {
	t.Helper()
	// A port found free can be taken by another test's process before this
	// one binds it: then the server exits at once, and another pair of
	// ports is tried.
	for range 4 {
		if s := tryStartServerOn(t, dbURL, env, process); s != nil {
			return s
		}
	}
	t.Fatal("svc could not bind free ports in 4 tries")
	return nil
}

// tryStartServerOn starts svc on fresh ports; it returns nil when the
// server exited because a port was taken meanwhile.
func tryStartServerOn(t testing.TB, dbURL string, env map[string]string, process bool) *server {
	t.Helper()
	listen, debug := env["SVC_LISTEN_ADDR"], freeAddr(t)
	if listen == "" { // a restart passes its predecessor's address
		listen = freeAddr(t)
	}
	vars := map[string]string{
		"SVC_LISTEN_ADDR":                   listen,
		"SVC_DEBUG_ADDR":                    debug,
		"DATABASE_URL":                      dbURL,
		"SVC_ADMIN_TOKEN":                   superToken,
		"SVC_LOG_LEVEL":                     "warn",
		"SVC_HEARTBEAT_FLUSH_INTERVAL_SECS": "1",
	}
	for k, v := range env {
		vars[k] = v
	}
	s := &server{base: "http://" + listen, debug: "http://" + debug, dbURL: dbURL,
		stdout: &syncBuf{}, stderr: &syncBuf{}, done: make(chan struct{}),
		client: &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4}}}
	if cert := vars["SVC_TLS_CERT"]; cert != "" {
		// Speak TLS to the server, trusting only its test certificate.
		pemBytes, err := os.ReadFile(cert)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pemBytes)
		s.base = "https://" + listen
		s.client.Transport = &http.Transport{MaxIdleConnsPerHost: 4, ForceAttemptHTTP2: true,
			TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	if !process {
		return startInProcess(t, s, vars)
	}
	cmd := exec.Command(svcBinary, "serve")
	cmd.Env = baseEnv()
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = s.stdout, s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start svc: %v", err)
	}
	s.cmd = cmd
	go func() {
		err := cmd.Wait()
		s.exit = 0
		if err != nil {
			s.exit = -1
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
				s.exit = ee.ExitCode()
			}
		}
		close(s.done)
	}()
	t.Cleanup(func() {
		s.stop(t)
		if t.Failed() {
			t.Logf("svc %s stdout:\n%s\nsvc stderr:\n%s", s.base, s.stdout.String(), s.stderr.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case <-s.done:
			if strings.Contains(s.stderr.String(), "address already in use") {
				t.Logf("svc exited at startup: a port was taken meanwhile; trying others")
				return nil
			}
			t.Fatalf("svc exited during startup (code %d)\nstderr:\n%s", s.exit, s.stderr.String())
		default:
		}
		resp, err := s.client.Get(s.base + "/startupz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == 200 {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("svc did not answer /startupz 200 within 20s\nstderr:\n%s", s.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop sends SIGTERM and waits (SIGKILL after 15 s); it returns the exit
// code and how long the exit took. Stopping twice is a no-op.
func (s *server) stop(t testing.TB) (int, time.Duration) {
	t.Helper()
	if len(s.peers) > 0 {
		start, code := time.Now(), 0
		for _, p := range s.peers {
			if c, _ := p.stop(t); c != 0 {
				code = c
			}
		}
		return code, time.Since(start)
	}
	s.mu.Lock()
	already := s.halted
	s.halted = true
	s.mu.Unlock()
	if already {
		<-s.done
		return s.exit, 0
	}
	s.client.CloseIdleConnections()
	start := time.Now()
	if s.node != nil {
		s.stopInProcess(t)
		return s.exit, time.Since(start)
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(15 * time.Second):
		t.Errorf("svc did not exit within 15s of SIGTERM; SIGQUIT for its goroutines (in its stderr below), then killing it")
		_ = s.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	}
	return s.exit, time.Since(start)
}

// do sends one request. path is relative to the API base unless it starts
// with "http". body: nil, a string sent raw (Content-Type application/json
// unless overridden), or a value encoded as JSON. headers are name, value
// pairs set last.
func (s *server) do(t testing.TB, method, path, token string, body any, headers ...string) (*http.Response, []byte) {
	t.Helper()
	url := path
	if !strings.HasPrefix(path, "http") {
		url = s.base + path
	}
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatalf("encode body: %v", err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if len(headers)%2 != 0 {
		t.Fatalf("headers must be name, value pairs")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	checkDocumented(t, s, req, resp, raw) // the response must match the OpenAPI document
	return resp, raw
}

// want asserts the status code and returns the body.
func (s *server) want(t testing.TB, status int, method, path, token string, body any, headers ...string) []byte {
	t.Helper()
	resp, raw := s.do(t, method, path, token, body, headers...)
	if resp.StatusCode != status {
		t.Fatalf("%s %s: status %d, want %d; body %s", method, path, resp.StatusCode, status, raw)
	}
	return raw
}

// tenant creates a tenant with the super-admin token.
func (s *server) tenant(t testing.TB, name string) (tenantID, adminToken string) {
	t.Helper()
	m := obj(t, s.want(t, 201, "POST", "/v2/tenants", superToken, map[string]any{"name": name}))
	return str(t, m, "tenant_id"), str(t, m, "operator_token")
}

// agent registers an agent; extra fields are merged into the request.
func (s *server) agent(t testing.TB, adminTok, name string, extra map[string]any) (agentID, agentToken string) {
	t.Helper()
	req := map[string]any{"name": name}
	for k, v := range extra {
		req[k] = v
	}
	m := obj(t, s.want(t, 201, "POST", "/v2/agents", adminTok, req))
	return str(t, m, "agent_id"), str(t, m, "agent_token")
}

// opToken creates an operator token with a role in the admin's tenant.
func (s *server) opToken(t testing.TB, adminTok, name, role string) (tokenID, token string) {
	t.Helper()
	m := obj(t, s.want(t, 201, "POST", "/v2/operator-tokens", adminTok, map[string]any{"name": name, "role": role}))
	return str(t, m, "token_id"), str(t, m, "operator_token")
}

// getAgent reads an agent.
func (s *server) getAgent(t testing.TB, adminTok, id string) map[string]any {
	t.Helper()
	return obj(t, s.want(t, 200, "GET", "/v2/agents/"+id, adminTok, nil))
}

// auditEvents lists the tenant's audit events (one page of up to 500).
func (s *server) auditEvents(t testing.TB, tok, query string) []map[string]any {
	t.Helper()
	p := "/v2/audit/events?limit=500"
	if query != "" {
		p += "&" + query
	}
	return arr(t, s.want(t, 200, "GET", p, tok, nil))
}

// waitAudit polls until an audit event matching cond appears.
func (s *server) waitAudit(t testing.TB, tok, query, what string, cond func(map[string]any) bool) map[string]any {
	t.Helper()
	var found map[string]any
	checkFor(t, 10*time.Second, what, func() bool {
		for _, e := range s.auditEvents(t, tok, query) {
			if cond(e) {
				found = e
				return true
			}
		}
		return false
	})
	return found
}

func obj(t testing.TB, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("decode object: %v; body %s", err, raw)
	}
	return m
}

func arr(t testing.TB, raw []byte) []map[string]any {
	t.Helper()
	var a []map[string]any
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("decode array: %v; body %s", err, raw)
	}
	return a
}

func str(t testing.TB, m map[string]any, key string) string {
	t.Helper()
	v, ok := m[key].(string)
	if !ok || v == "" {
		t.Fatalf("field %q missing or not a non-empty string in %v", key, m)
	}
	return v
}

// checkFor polls cond every 100 ms until it holds or within passes.
func checkFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// uniq returns a short random suffix for names.
func uniq() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// randomUUID returns a random UUID v4 text.
func randomUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// envelope asserts the CONTRACT §10 error envelope and returns it.
func envelope(t testing.TB, raw []byte, status int, apiVersion, reason string) map[string]any {
	t.Helper()
	m := obj(t, raw)
	keys := []string{"kind", "apiVersion", "status", "message", "reason", "details", "code"}
	if len(m) != len(keys) {
		t.Errorf("envelope has fields %v, want exactly %v", m, keys)
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Errorf("envelope lacks %q: %s", k, raw)
		}
	}
	if m["kind"] != "Status" || m["status"] != "Failure" || m["apiVersion"] != apiVersion {
		t.Errorf("envelope kind/status/apiVersion = %v/%v/%v, want Status/Failure/%s", m["kind"], m["status"], m["apiVersion"], apiVersion)
	}
	if c, _ := m["code"].(float64); int(c) != status {
		t.Errorf("envelope code %v, want %d", m["code"], status)
	}
	if reason != "" && m["reason"] != reason {
		t.Errorf("envelope reason %v, want %s: %s", m["reason"], reason, raw)
	}
	if _, ok := m["details"].(map[string]any); !ok {
		t.Errorf("envelope details is not an object: %s", raw)
	}
	if msg, _ := m["message"].(string); msg == "" {
		t.Errorf("envelope message empty: %s", raw)
	}
	return m
}

// detail returns details[key] of an envelope.
func detail(m map[string]any, key string) any {
	d, _ := m["details"].(map[string]any)
	return d[key]
}

// forModes runs fn on SQLite, on Postgres, and on two clustered nodes
// behind a round-robin balancer (startCluster): a capability that several
// nodes must serve as one installation is checked all three ways.
func forModes(t *testing.T, fn func(t *testing.T, backend string)) {
	for _, backend := range append(slices.Clone(backends), clusterBackend) {
		t.Run(backend, func(t *testing.T) { fn(t, backend) })
	}
}

// forBackends runs fn once per backend (one node), each with its own
// subtest.
func forBackends(t *testing.T, fn func(t *testing.T, backend string)) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) { fn(t, backend) })
	}
}

// runSvc runs the binary to completion with extra environment.
func runSvc(t testing.TB, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, svcBinary, args...)
	cmd.Env = baseEnv()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("svc %v did not exit within 20s; stderr %s", args, errb.String())
	}
	code = 0
	if err != nil {
		code = -1
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			code = ee.ExitCode()
		}
	}
	return code, out.String(), errb.String()
}
