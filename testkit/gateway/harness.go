// Package gateway is the end-to-end harness: tests talk HTTP to real
// gateways on SQLite and Postgres, and to two clustered nodes on Postgres
// and Valkey behind a round-robin balancer. Start runs a node in the test
// process, wired as the binary wires it (node.OpenStore, node.New) and
// served by an httptest server (node.Attach): no port to pick, no binary
// to build. StartProcess runs the svc binary (built once per test binary,
// Binary) for what only a process shows: signals, exit codes, SIGKILL,
// TLS. Every response Do receives is checked against the server's OpenAPI
// document (CheckDocumented).
package gateway

import (
	"bytes"
	"encoding/json"
	"io"
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
	"svc/testkit"
)

// SuperToken is the SVC_ADMIN_TOKEN every harness server gets (40 chars).
const SuperToken = "e2e-super-admin-token-0123456789abcdefghi"

// Backends are the databases a lone node runs on.
var Backends = []string{"sqlite", "postgres"}

// Server is one gateway under test: a node in this process, the svc
// binary (Cmd), or a cluster (Peers behind the balancer at Base).
type Server struct {
	Base   string // http://127.0.0.1:port
	Debug  string // http://127.0.0.1:port of the debug listener
	DBURL  string
	Cmd    *exec.Cmd
	Stdout *testkit.SyncBuf
	Stderr *testkit.SyncBuf
	Done   chan struct{}
	Exit   int
	Client *http.Client
	mu     sync.Mutex
	halted bool
	// Peers are a cluster's nodes (StartCluster); Base is then the
	// balancer in front of them.
	Peers []*Server
	// Node is the node run in this test process (Start), with the store
	// it owns; Cmd is nil then.
	Node            *node.Node
	Store           persistence.Store
	shutdownTimeout time.Duration
	stopServing     func() // closes the in-process node's httptest servers
}

// Main runs a test binary's tests (call it from TestMain) and removes the
// svc binary built for them, if any.
func Main(m *testing.M) {
	// A reused test environment would start this run with 127.0.0.1
	// locked out of authorize by the lockout counters earlier runs left
	// (kept an hour): every cluster test's calls come from loopback.
	storetest.DeleteValkeyKeys("svc:authfail:*")
	code := m.Run()
	removeBinary()
	os.Exit(code)
}

// DBURLFor returns a fresh database URL for the backend.
func DBURLFor(t testing.TB, backend string) string {
	t.Helper()
	switch backend {
	case "sqlite":
		return "sqlite://" + filepath.Join(t.TempDir(), "svc.db")
	case "postgres", ClusterBackend: // a cluster's database is Postgres
		return storetest.PostgresURL(t)
	}
	t.Fatalf("unknown backend %q", backend)
	return ""
}

// Start starts a gateway in this process on a fresh database of the
// backend (two clustered nodes behind the balancer for ClusterBackend).
func Start(t testing.TB, backend string, env map[string]string) *Server {
	t.Helper()
	if backend == ClusterBackend {
		return StartCluster(t, env)
	}
	return StartOn(t, DBURLFor(t, backend), env)
}

// StartOn starts a node in this process on the given database URL, on
// SVC_LISTEN_ADDR when env sets it (a restart on its predecessor's
// address), else on an address the kernel picks.
func StartOn(t testing.TB, dbURL string, env map[string]string) *Server {
	t.Helper()
	if env["SVC_TLS_CERT"] != "" {
		t.Fatal("TLS is served by the binary's listener: StartProcessOn")
	}
	return startInProcess(t, dbURL, settings(dbURL, env))
}

// settings are a server's environment: the harness's defaults, then env.
func settings(dbURL string, env map[string]string) map[string]string {
	vars := map[string]string{
		"DATABASE_URL":                      dbURL,
		"SVC_ADMIN_TOKEN":                   SuperToken,
		"SVC_LOG_LEVEL":                     "warn",
		"SVC_HEARTBEAT_FLUSH_INTERVAL_SECS": "1",
	}
	for k, v := range env {
		vars[k] = v
	}
	return vars
}

// newServer is a Server of dbURL before it starts.
func newServer(dbURL string) *Server {
	return &Server{DBURL: dbURL, Stdout: &testkit.SyncBuf{}, Stderr: &testkit.SyncBuf{}, Done: make(chan struct{}),
		Client: &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4}}}
}

// Stop sends SIGTERM and waits (SIGKILL after 15 s); it returns the exit
// code and how long the exit took. Stopping twice is a no-op.
func (s *Server) Stop(t testing.TB) (int, time.Duration) {
	t.Helper()
	if len(s.Peers) > 0 {
		start, code := time.Now(), 0
		for _, p := range s.Peers {
			if c, _ := p.Stop(t); c != 0 {
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
		<-s.Done
		return s.Exit, 0
	}
	s.Client.CloseIdleConnections()
	start := time.Now()
	if s.Node != nil {
		s.stopInProcess(t)
		return s.Exit, time.Since(start)
	}
	_ = s.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.Done:
	case <-time.After(15 * time.Second):
		t.Errorf("svc did not exit within 15s of SIGTERM; SIGQUIT for its goroutines (in its stderr below), then killing it")
		_ = s.Cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-s.Done:
		case <-time.After(5 * time.Second):
			_ = s.Cmd.Process.Kill()
			<-s.Done
		}
	}
	return s.Exit, time.Since(start)
}

// Do sends one request. path is relative to the API base unless it starts
// with "http". body: nil, a string sent raw (Content-Type application/json
// unless overridden), or a value encoded as JSON. headers are name, value
// pairs set last.
func (s *Server) Do(t testing.TB, method, path, token string, body any, headers ...string) (*http.Response, []byte) {
	t.Helper()
	url := path
	if !strings.HasPrefix(path, "http") {
		url = s.Base + path
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
	resp, err := s.Client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	CheckDocumented(t, s, req, resp, raw) // the response must match the OpenAPI document
	return resp, raw
}

// Want asserts the status code and returns the body.
func (s *Server) Want(t testing.TB, status int, method, path, token string, body any, headers ...string) []byte {
	t.Helper()
	resp, raw := s.Do(t, method, path, token, body, headers...)
	if resp.StatusCode != status {
		t.Fatalf("%s %s: status %d, want %d; body %s", method, path, resp.StatusCode, status, raw)
	}
	return raw
}

// Tenant creates a tenant with the super-admin token.
func (s *Server) Tenant(t testing.TB, name string) (tenantID, adminToken string) {
	t.Helper()
	m := testkit.Obj(t, s.Want(t, 201, "POST", "/v2/tenants", SuperToken, map[string]any{"name": name}))
	return testkit.Str(t, m, "tenant_id"), testkit.Str(t, m, "operator_token")
}

// Agent registers an agent; extra fields are merged into the request.
func (s *Server) Agent(t testing.TB, adminTok, name string, extra map[string]any) (agentID, agentToken string) {
	t.Helper()
	req := map[string]any{"name": name}
	for k, v := range extra {
		req[k] = v
	}
	m := testkit.Obj(t, s.Want(t, 201, "POST", "/v2/agents", adminTok, req))
	return testkit.Str(t, m, "agent_id"), testkit.Str(t, m, "agent_token")
}

// OpToken creates an operator token with a role in the admin's tenant.
func (s *Server) OpToken(t testing.TB, adminTok, name, role string) (tokenID, token string) {
	t.Helper()
	m := testkit.Obj(t, s.Want(t, 201, "POST", "/v2/operator-tokens", adminTok, map[string]any{"name": name, "role": role}))
	return testkit.Str(t, m, "token_id"), testkit.Str(t, m, "operator_token")
}

// GetAgent reads an agent.
func (s *Server) GetAgent(t testing.TB, adminTok, id string) map[string]any {
	t.Helper()
	return testkit.Obj(t, s.Want(t, 200, "GET", "/v2/agents/"+id, adminTok, nil))
}

// AuditEvents lists the tenant's audit events (one page of up to 500).
func (s *Server) AuditEvents(t testing.TB, tok, query string) []map[string]any {
	t.Helper()
	p := "/v2/audit/events?limit=500"
	if query != "" {
		p += "&" + query
	}
	return testkit.Arr(t, s.Want(t, 200, "GET", p, tok, nil))
}

// WaitAudit polls until an audit event matching cond appears.
func (s *Server) WaitAudit(t testing.TB, tok, query, what string, cond func(map[string]any) bool) map[string]any {
	t.Helper()
	var found map[string]any
	testkit.Eventually(t, 10*time.Second, what, func() bool {
		for _, e := range s.AuditEvents(t, tok, query) {
			if cond(e) {
				found = e
				return true
			}
		}
		return false
	})
	return found
}

// Envelope asserts the CONTRACT §10 error Envelope and returns it.
func Envelope(t testing.TB, raw []byte, status int, apiVersion, reason string) map[string]any {
	t.Helper()
	m := testkit.Obj(t, raw)
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

// Detail returns details[key] of an envelope.
func Detail(m map[string]any, key string) any {
	d, _ := m["details"].(map[string]any)
	return d[key]
}

// ForModes runs fn on SQLite, on Postgres, and on two clustered nodes
// behind a round-robin balancer (startCluster): a capability that several
// nodes must serve as one installation is checked all three ways.
func ForModes(t *testing.T, fn func(t *testing.T, backend string)) {
	for _, backend := range append(slices.Clone(Backends), ClusterBackend) {
		t.Run(backend, func(t *testing.T) { fn(t, backend) })
	}
}

// ForBackends runs fn once per backend (one node), each with its own
// subtest.
func ForBackends(t *testing.T, fn func(t *testing.T, backend string)) {
	for _, backend := range Backends {
		t.Run(backend, func(t *testing.T) { fn(t, backend) })
	}
}
