package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/testkit"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TextResult(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// StartUpstream serves the tools the tests call: echo (read-only), write,
// slow (three progress notifications 300 ms apart), ask (elicitation then
// sampling: the upstream's requests to the client), hang, big (a result of
// n bytes), plus a resource and a prompt.
func StartUpstream(t testing.TB) *Upstream {
	t.Helper()
	return StartUpstreamSpeaking(t, "")
}

// ProxyServer registers the upstream as key (trust signed, an upstream
// header), discovers it and approves tools.
func ProxyServer(t testing.TB, s *Server, admin, key, url string, approve ...string) {
	t.Helper()
	s.Want(t, 201, "POST", "/v2/mcp/servers", admin, map[string]any{"server_key": key, "transport": "http", "url": url,
		"trust_level": "trusted_internal_signed", "upstream_headers": map[string]string{"X-Upstream-Key": "upstream-secret"}})
	McpDiscover(t, s, admin, key, nil)
	for _, tool := range approve {
		s.Want(t, 200, "POST", "/v2/mcp/servers/"+key+"/tools/"+tool+"/approve", admin, nil)
	}
}

// Connect opens an MCP session through the proxy with the go-sdk client.
func Connect(t testing.TB, base, key, token string, seen *ClientSeen) *mcp.ClientSession {
	t.Helper()
	opts := &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "ada"}}, nil
		},
		//nolint:staticcheck // SA1019: sampling is deprecated from 2026-07-28, still relayed for the versions before
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{ //nolint:staticcheck // SA1019: as above
				Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "sampled"}}, nil
		},
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
			if seen != nil {
				seen.mu.Lock()
				seen.progress = append(seen.progress, time.Now())
				seen.mu.Unlock()
			}
		},
	}
	return ConnectWith(t, base, key, token, opts)
}

func CallTool(t testing.TB, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	return res
}

func ResultText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// DecisionOf is a refused call's structuredContent.
func DecisionOf(t testing.TB, r *mcp.CallToolResult) map[string]any {
	t.Helper()
	if !r.IsError {
		t.Fatalf("a call svc did not forward answered without isError: %s", ResultText(r))
	}
	raw, _ := json.Marshal(r.StructuredContent)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		t.Fatalf("structuredContent %s: %v", raw, err)
	}
	return m
}

// RawMCP posts one JSON-RPC message with the session id and returns the
// status and the JSON-RPC response (the last data line of a stream).
func RawMCP(t testing.TB, base, key, tok, session, msg string) (int, map[string]any) {
	t.Helper()
	return RawMCPv(t, base, key, tok, session, "", msg)
}

func McpTools(t testing.TB, s *Server, tok, key string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, tool := range testkit.Arr(t, s.Want(t, 200, "GET", "/v2/mcp/servers/"+key+"/tools", tok, nil)) {
		out[tool["name"].(string)] = tool
	}
	return out
}

// Upstream is the MCP server behind the proxy: it records what reached it.
type Upstream struct {
	URL       string
	MCPServer *mcp.Server

	mu      sync.Mutex
	headers []http.Header  // every request's headers
	calls   []UpstreamCall // every tools/call, as received
	Hang    chan struct{}  // closed at cleanup: the "hang" tool waits on it
	// speaks, when set, is the only protocol version the server knows:
	// an initialize asking for another is answered with it (an older
	// server).
	speaks string
}

type UpstreamCall struct {
	Name string
	Args map[string]any
}

var protocolVersionRE = regexp.MustCompile(`"protocolVersion"\s*:\s*"[^"]*"`)

func (u *Upstream) record(name string, raw json.RawMessage) {
	var args map[string]any
	_ = json.Unmarshal(raw, &args)
	u.mu.Lock()
	u.calls = append(u.calls, UpstreamCall{name, args})
	u.mu.Unlock()
}

// CallsOf returns the calls of the tool that reached the upstream.
func (u *Upstream) CallsOf(name string) []UpstreamCall {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []UpstreamCall
	for _, c := range u.calls {
		if c.Name == name {
			out = append(out, c)
		}
	}
	return out
}

func (u *Upstream) SawHeaders() []http.Header {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.headers)
}

// StartUpstreamSpeaking is startUpstream as a server that knows only the
// protocol version speaks ("" for every version the SDK knows).
func StartUpstreamSpeaking(t testing.TB, speaks string) *Upstream {
	t.Helper()
	u := &Upstream{Hang: make(chan struct{}), speaks: speaks}
	s := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1.0.0"}, nil)
	obj := json.RawMessage(`{"type":"object"}`)
	s.AddTool(&mcp.Tool{Name: "echo", Description: "Echoes text.", InputSchema: obj, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.record("echo", r.Params.Arguments)
			return TextResult("echo: " + string(r.Params.Arguments)), nil
		})
	s.AddTool(&mcp.Tool{Name: "write", Description: "Writes a file.", InputSchema: obj},
		func(_ context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.record("write", r.Params.Arguments)
			return TextResult("written"), nil
		})
	s.AddTool(&mcp.Tool{Name: "slow", Description: "Works for a while.", InputSchema: obj, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.record("slow", r.Params.Arguments)
			for i := 1; i <= 3; i++ {
				time.Sleep(300 * time.Millisecond)
				if tok := r.Params.GetProgressToken(); tok != nil {
					_ = r.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 3})
				}
			}
			time.Sleep(300 * time.Millisecond)
			return TextResult("done"), nil
		})
	s.AddTool(&mcp.Tool{Name: "ask", Description: "Asks the user and the model.", InputSchema: obj, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.record("ask", r.Params.Arguments)
			e, err := r.Session.Elicit(ctx, &mcp.ElicitParams{Mode: "form", Message: "Your name?",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}})
			if err != nil {
				return nil, err
			}
			// Sampling is deprecated from 2026-07-28 and still relayed for
			// the versions before.
			params := &mcp.CreateMessageParams{MaxTokens: 10, //nolint:staticcheck // SA1019: see above
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}} //nolint:staticcheck // SA1019: see above
			m, err := r.Session.CreateMessage(ctx, params) //nolint:staticcheck // SA1019: see above
			if err != nil {
				return nil, err
			}
			return TextResult(fmt.Sprintf("%s/%v/%s", e.Action, e.Content["name"], m.Content.(*mcp.TextContent).Text)), nil
		})
	s.AddTool(&mcp.Tool{Name: "hang", Description: "Never answers.", InputSchema: obj, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.record("hang", r.Params.Arguments)
			select {
			case <-u.Hang:
			case <-ctx.Done():
			}
			return TextResult("late"), nil
		})
	s.AddTool(&mcp.Tool{Name: "big", Description: "Answers n bytes.", InputSchema: obj, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ N int }
			_ = json.Unmarshal(r.Params.Arguments, &a)
			return TextResult(strings.Repeat("x", a.N)), nil
		})
	s.AddResource(&mcp.Resource{URI: "file:///greeting", Name: "greeting", MIMEType: "text/plain"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "file:///greeting", Text: "hello"}}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "greet", Arguments: []*mcp.PromptArgument{{Name: "who"}}},
		func(_ context.Context, r *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hello " + r.Params.Arguments["who"]}}}}, nil
		})
	u.MCPServer = s
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.headers = append(u.headers, r.Header.Clone())
		u.mu.Unlock()
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if u.speaks != "" && bytes.Contains(body, []byte(`"initialize"`)) {
				body = protocolVersionRE.ReplaceAll(body, []byte(`"protocolVersion":"`+u.speaks+`"`))
				r.Body = io.NopCloser(bytes.NewReader(body))
				r.ContentLength = int64(len(body))
			}
			switch {
			case bytes.Contains(body, []byte(`"garbage-please"`)):
				// Not JSON-RPC, on the stream of a tools/call.
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, "event: message\ndata: {this is not json\n\n")
				return
			case bytes.Contains(body, []byte(`"flood-please"`)):
				// Valid notifications, as fast as they go, until the proxy
				// gives up.
				w.Header().Set("Content-Type", "text/event-stream")
				rc := http.NewResponseController(w)
				for r.Context().Err() == nil {
					if _, err := io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"flood\"}}\n\n"); err != nil {
						return
					}
					_ = rc.Flush()
				}
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { close(u.Hang); hs.Close() })
	u.URL = hs.URL + "/mcp"
	return u
}

type ClientSeen struct {
	mu       sync.Mutex
	progress []time.Time
}

// Progress returns the progress notifications' arrival times so far and
// forgets them.
func (c *ClientSeen) Progress() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.progress
	c.progress = nil
	return p
}

// ConnectWith opens an MCP session through the proxy with the go-sdk
// client and opts.
func ConnectWith(t testing.TB, base, key, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1.0.0"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	hc := &http.Client{Transport: &tokenTransport{token: token, base: &http.Transport{}}}
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/v2/mcp/proxy/" + key, HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connect through the proxy: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// RawMCPv is rawMCP with Mcp-Protocol-Version (when not "").
func RawMCPv(t testing.TB, base, key, tok, session, version, msg string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/v2/mcp/proxy/"+key, strings.NewReader(msg))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	if version != "" {
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", msg, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var last map[string]any
	for _, line := range strings.Split(string(raw), "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			var m map[string]any
			if json.Unmarshal([]byte(d), &m) == nil && m["id"] != nil {
				last = m
			}
		}
	}
	if last == nil {
		_ = json.Unmarshal(raw, &last)
	}
	return resp.StatusCode, last
}

// McpDiscover discovers and returns the answer.
func McpDiscover(t testing.TB, s *Server, admin, key string, body any) map[string]any {
	t.Helper()
	return testkit.Obj(t, s.Want(t, 200, "POST", "/v2/mcp/servers/"+key+"/discover", admin, body))
}

// tokenTransport adds the agent's token and a cookie (which must not reach
// the upstream either) to every request, and counts the nodes reached.
type tokenTransport struct {
	token string
	base  http.RoundTripper
}

func (tt *tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+tt.token)
	r.Header.Set("Cookie", "session=agent-cookie")
	return tt.base.RoundTrip(r)
}
