package mcpguard

// The live harness: a real svc gateway (the binary SVC_BIN names, started
// as sdk/python/tests/live/harness.py starts it), fixtures made through its
// operator API, and a real go-sdk MCP server whose tools record the
// arguments they receive.

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	svcsdk "svc/sdk/go"
)

const adminToken = "mcpguard-live-admin-token-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

// serverKey is the MCP server's key in svc.
const serverKey = "guarded"

var receiptSeed = func() []byte {
	b := make([]byte, 32)
	for i := range b {
		b[i] = byte(100 + i)
	}
	return b
}()

var receiptPub = base64.StdEncoding.EncodeToString(ed25519.NewKeyFromSeed(receiptSeed)[32:]) // the public half

// policy decides by the MCP tool's name (the action of tool mcp:guarded);
// read_tool and plain_tool are allowed only when the call does not change
// state.
const policy = `package svc.policies.mcpguard_live

mcp(name) if {
	input.tool_call.tool == "mcp:guarded"
	input.tool_call.action == name
}

results contains {"decision": "allow", "reason": "live_allow"} if { mcp("allow_tool") }
results contains {"decision": "deny", "reason": "live_deny"} if { mcp("deny_tool") }
results contains {"decision": "quarantine", "reason": "live_quarantine"} if { mcp("quarantine_tool") }
results contains {"decision": "require_approval", "reason": "live_approval"} if { mcp("approval_tool") }
results contains {"decision": "redact", "reason": "live_redact", "redact_fields": ["parameters.card", "parameters.meta.ssn"]} if {
	mcp("redact_tool")
}
results contains {"decision": "allow", "reason": "live_read_only"} if { mcp("read_tool"); input.mutates_state == false }
results contains {"decision": "deny", "reason": "live_mutating"} if { mcp("read_tool"); input.mutates_state == true }
results contains {"decision": "allow", "reason": "live_read_only"} if { mcp("plain_tool"); input.mutates_state == false }
results contains {"decision": "deny", "reason": "live_mutating"} if { mcp("plain_tool"); input.mutates_state == true }
`

// toolNames are the MCP server's tools, all registered and approved in svc.
var toolNames = []string{"allow_tool", "deny_tool", "quarantine_tool", "approval_tool", "redact_tool", "read_tool", "plain_tool"}

// ---------------------------------------------------------------------------
// The gateway

type gateway struct {
	url  string
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
	log  *bytes.Buffer
	mu   sync.Mutex
}

var (
	sharedOnce sync.Once
	shared     *gateway
	started    []*gateway
	startedMu  sync.Mutex
)

func TestMain(m *testing.M) {
	if os.Getenv("SVC_BIN") == "" {
		if os.Getenv("CI") == "true" {
			fmt.Fprintln(os.Stderr, "mcpguard: SVC_BIN is not set under CI=true: the live tests cannot run (build bin/svc with `make build` and set SVC_BIN)")
			os.Exit(1)
		}
		fmt.Fprintln(os.Stderr, "mcpguard: SVC_BIN is not set: SKIPPING every live test (build bin/svc with `make build` and set SVC_BIN=$PWD/bin/svc)")
	}
	code := m.Run()
	startedMu.Lock()
	for _, g := range started {
		g.stop()
	}
	startedMu.Unlock()
	os.Exit(code)
}

func needSVC(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("SVC_BIN")
	if bin == "" {
		t.Skip("SKIPPED: SVC_BIN is not set (the live tests need a real svc binary)")
	}
	return bin
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		t.Fatalf("address %v", l.Addr())
	}
	return a.Port
}

// startGateway starts one svc process on loopback with a fresh SQLite
// database and waits for /readyz.
func startGateway(t *testing.T) *gateway {
	t.Helper()
	bin := needSVC(t)
	dir, err := os.MkdirTemp("", "mcpguard-live-")
	if err != nil {
		t.Fatal(err)
	}
	port, debug := freePort(t), freePort(t)
	g := &gateway{url: fmt.Sprintf("http://127.0.0.1:%d", port), dir: dir, done: make(chan struct{}), log: &bytes.Buffer{}}
	cmd := exec.Command(bin, "serve")
	cmd.Dir = dir
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + dir,
		"DATABASE_URL=sqlite://" + filepath.Join(dir, "svc.db"),
		fmt.Sprintf("SVC_LISTEN_ADDR=127.0.0.1:%d", port),
		fmt.Sprintf("SVC_DEBUG_ADDR=127.0.0.1:%d", debug),
		"SVC_ADMIN_TOKEN=" + adminToken,
		"SVC_RECEIPT_SIGNING_KEY=" + base64.StdEncoding.EncodeToString(receiptSeed),
		"SVC_APPROVAL_TTL_SECS=5",
		"SVC_APPROVAL_CALLBACK_IP_LIMIT=100000",
		"SVC_APPROVAL_ATTEMPT_LIMIT=100000",
		"SVC_AUTH_FAILURE_LIMIT=100000",
		"SVC_ALLOW_PRIVATE_TARGETS=true",
		"SVC_LOG_LEVEL=warn",
		"SVC_SHUTDOWN_TIMEOUT_SECS=5",
	}
	cmd.Stdout, cmd.Stderr = g, g
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g.cmd = cmd
	go func() { _ = cmd.Wait(); close(g.done) }()
	startedMu.Lock()
	started = append(started, g)
	startedMu.Unlock()
	ok := waitFor(60*time.Second, func() bool {
		select {
		case <-g.done:
			return true
		default:
		}
		st, _ := call(g.url, "GET", "/readyz", "", nil)
		return st == 200
	})
	select {
	case <-g.done:
		t.Fatalf("svc exited at start:\n%s", g.tail())
	default:
	}
	if !ok {
		g.stop()
		t.Fatalf("svc not ready within 60 s:\n%s", g.tail())
	}
	return g
}

func (g *gateway) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.log.Write(p)
}

func (g *gateway) tail() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.log.String()
	if len(s) > 4000 {
		s = s[len(s)-4000:]
	}
	return s
}

// stop ends the process (SIGTERM, then SIGKILL) and removes its directory.
func (g *gateway) stop() {
	if g.cmd != nil && g.cmd.Process != nil {
		select {
		case <-g.done:
		default:
			_ = g.cmd.Process.Signal(os.Interrupt)
			select {
			case <-g.done:
			case <-time.After(15 * time.Second):
				_ = g.cmd.Process.Kill()
				<-g.done
			}
		}
	}
	_ = os.RemoveAll(g.dir)
}

// sharedGateway is the gateway most tests share (each with agents of its own).
func sharedGateway(t *testing.T) *gateway {
	t.Helper()
	needSVC(t)
	sharedOnce.Do(func() { shared = startGateway(t) }) // a t.Fatal in it leaves shared nil
	if shared == nil {
		t.Fatal("the shared gateway did not start (see the first test's log)")
	}
	return shared
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var httpClient = &http.Client{Timeout: 15 * time.Second}

// call is one plain HTTP exchange of the operator side.
func call(base, method, path, token string, body any) (int, any) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		return 0, err.Error()
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var v any
	if json.Unmarshal(data, &v) != nil {
		v = string(data)
	}
	return resp.StatusCode, v
}

// ---------------------------------------------------------------------------
// Fixtures

type fixtures struct {
	gw *gateway
	op string
}

// newFixtures makes a tenant with the policy and the MCP server registered,
// its tools discovered and approved.
func newFixtures(t *testing.T, gw *gateway) *fixtures {
	t.Helper()
	st, body := call(gw.url, "POST", "/v2/tenants", adminToken, map[string]any{"name": fmt.Sprintf("mcpguard-%d", time.Now().UnixNano())})
	if st != 201 {
		t.Fatalf("create tenant: %d %v", st, body)
	}
	m, _ := body.(map[string]any)
	f := &fixtures{gw: gw, op: str(m, "operator_token")}
	if f.op == "" {
		t.Fatalf("create tenant: no operator_token in %v", body)
	}
	f.must(t, 201, "POST", "/v2/policies", map[string]any{"name": "mcpguard_live", "rego": policy})
	f.must(t, 201, "POST", "/v1/mcp/servers", map[string]any{"server_key": serverKey, "transport": "stdio"})
	var tools []map[string]any
	for _, n := range toolNames {
		tools = append(tools, map[string]any{"name": n, "description": n, "inputSchema": map[string]any{"type": "object"}})
	}
	f.must(t, 200, "POST", "/v1/mcp/servers/"+serverKey+"/discover", map[string]any{"tools": tools})
	for _, n := range toolNames {
		f.must(t, 200, "POST", "/v1/mcp/servers/"+serverKey+"/tools/"+n+"/approve", nil)
	}
	return f
}

func (f *fixtures) must(t *testing.T, want int, method, path string, body any) map[string]any {
	t.Helper()
	st, b := call(f.gw.url, method, path, f.op, body)
	if st != want {
		t.Fatalf("%s %s: %d %v (want %d)", method, path, st, b, want)
	}
	m, _ := b.(map[string]any)
	return m
}

var (
	fixturesOnce sync.Once
	sharedFx     *fixtures
)

// sharedFixtures is the tenant on the shared gateway.
func sharedFixtures(t *testing.T) *fixtures {
	t.Helper()
	gw := sharedGateway(t)
	fixturesOnce.Do(func() {
		sharedFx = newFixtures(t, gw)
	})
	if sharedFx == nil {
		t.Fatal("the shared fixtures were not created")
	}
	return sharedFx
}

type agent struct {
	id, token, key string
}

func (f *fixtures) agent(t *testing.T) agent {
	t.Helper()
	a := f.must(t, 201, "POST", "/v2/agents", map[string]any{"name": fmt.Sprintf("agent-%d", time.Now().UnixNano()), "signing_key": "generate"})
	ag := agent{id: str(a, "agent_id"), token: str(a, "agent_token"), key: str(a, "signing_key")}
	if ag.id == "" || ag.token == "" || ag.key == "" {
		t.Fatalf("create agent: %v", a)
	}
	return ag
}

// client is the agent's svc client, with the receipt key pinned (so every
// mutating call's receipt is verified before it is sent).
func (f *fixtures) client(t *testing.T, a agent) *svcsdk.Client {
	t.Helper()
	c, err := svcsdk.New(f.gw.url, a.token, svcsdk.WithSigningKey(a.key), svcsdk.WithReceiptPublicKey(receiptPub))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// pendingApproval waits for the agent's PENDING approval.
func (f *fixtures) pendingApproval(agentID string, timeout time.Duration) (map[string]any, error) {
	var found map[string]any
	ok := waitFor(timeout, func() bool {
		st, rows := call(f.gw.url, "GET", "/v2/approvals?agent_id="+agentID, f.op, nil)
		list, _ := rows.([]any)
		if st != 200 {
			return false
		}
		for _, r := range list {
			if m, _ := r.(map[string]any); m != nil && m["status"] == "PENDING" {
				found = m
				return true
			}
		}
		return false
	})
	if !ok {
		return nil, fmt.Errorf("no PENDING approval of agent %s within %s", agentID, timeout)
	}
	return found, nil
}

// decide approves, rejects or edits an approval as the person would.
func (f *fixtures) decide(approvalID, action string, params map[string]any) error {
	body := map[string]any{"approver_user_id": "alice", "reason": "mcpguard live " + action}
	if params != nil {
		body["parameters"] = params
	}
	st, b := call(f.gw.url, "POST", "/v2/approvals/"+approvalID+"/"+action, f.op, body)
	if st != 200 {
		return fmt.Errorf("%s %s: %d %v", action, approvalID, st, b)
	}
	return nil
}

// approver decides the agent's next PENDING approval in the background.
func (f *fixtures) approver(agentID, action string, params map[string]any) <-chan error {
	ch := make(chan error, 1)
	go func() {
		a, err := f.pendingApproval(agentID, 20*time.Second)
		if err == nil {
			err = f.decide(str(a, "approval_id"), action, params)
		}
		ch <- err
	}()
	return ch
}

// decision reads a decision as operator.
func (f *fixtures) decision(t *testing.T, id string) map[string]any {
	t.Helper()
	return f.must(t, 200, "GET", "/v2/decisions/"+id, nil)
}

// ---------------------------------------------------------------------------
// The MCP server

// recorder keeps the arguments each tool received.
type recorder struct {
	mu    sync.Mutex
	calls map[string][]map[string]any
	lists int
}

func (r *recorder) got(name string) []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]map[string]any(nil), r.calls[name]...)
}

func (r *recorder) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.calls {
		n += len(c)
	}
	return n
}

func (r *recorder) listings() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lists
}

func recordingTool(r *recorder, name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args map[string]any
		if len(req.Params.Arguments) > 0 {
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return nil, err
			}
		}
		r.mu.Lock()
		if r.calls == nil {
			r.calls = map[string][]map[string]any{}
		}
		r.calls[name] = append(r.calls[name], args)
		r.mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + " ran"}}}, nil
	}
}

// newServer is a go-sdk MCP server with the tools of toolNames: read_tool
// is annotated readOnlyHint, every other tool carries no annotation.
func newServer(r *recorder) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "guarded-upstream", Version: "1.0.0"}, nil)
	for _, n := range toolNames {
		tool := &mcp.Tool{Name: n, Description: n, InputSchema: json.RawMessage(`{"type":"object"}`)}
		if n == "read_tool" {
			tool.Annotations = &mcp.ToolAnnotations{ReadOnlyHint: true}
		}
		s.AddTool(tool, recordingTool(r, n))
	}
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" {
				r.mu.Lock()
				r.lists++
				r.mu.Unlock()
			}
			return next(ctx, method, req)
		}
	})
	return s
}

// connect runs server over in-memory transports and connects client to it.
func connect(t *testing.T, server *mcp.Server, client *mcp.Client) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := client.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close(); _ = ss.Close() })
	return cs
}

// setup is one test's world: an agent of the shared tenant, a guard with
// opts, a recording MCP server, and a guarded session to it.
type setup struct {
	fx      *fixtures
	agent   agent
	svc     *svcsdk.Client
	guard   *Guard
	rec     *recorder
	server  *mcp.Server
	session *mcp.ClientSession

	mu        sync.Mutex
	decisions []*svcsdk.Decision
}

func newSetup(t *testing.T, opts Options, clientOpts *mcp.ClientOptions) *setup {
	t.Helper()
	fx := sharedFixtures(t)
	s := &setup{fx: fx, agent: fx.agent(t), rec: &recorder{}}
	s.svc = fx.client(t, s.agent)
	if opts.ServerKey == "" {
		opts.ServerKey = serverKey
	}
	opts.OnDecision = func(_ context.Context, _ *mcp.CallToolParams, d *svcsdk.Decision) {
		s.mu.Lock()
		s.decisions = append(s.decisions, d)
		s.mu.Unlock()
	}
	g, err := New(s.svc, opts)
	if err != nil {
		t.Fatal(err)
	}
	s.guard = g
	s.server = newServer(s.rec)
	client := mcp.NewClient(&mcp.Implementation{Name: "guarded-agent", Version: "1.0.0"}, clientOpts)
	g.Install(client)
	s.session = connect(t, s.server, client)
	return s
}

func (s *setup) lastDecision(t *testing.T) *svcsdk.Decision {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.decisions) == 0 {
		t.Fatal("OnDecision was never called")
	}
	return s.decisions[len(s.decisions)-1]
}

func (s *setup) decisionCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.decisions)
}

// str is m[key] when it is a string, else "".
func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// structured returns a result's structuredContent as an object.
func structured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	m, ok := res.StructuredContent.(map[string]any)
	if !ok {
		t.Fatalf("structuredContent is %T, not an object: %#v", res.StructuredContent, res.StructuredContent)
	}
	return m
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}
