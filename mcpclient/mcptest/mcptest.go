// Package mcptest runs a real MCP server for tests: one built with the
// official Go SDK, serving streamable HTTP on loopback, whose tool list a
// test changes between discoveries (add, remove, change, poison); and
// servers that misbehave (garbage, a hang, a flood).
package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool is one tool the server lists.
type Tool struct {
	Name        string
	Description string
	// Schema is the input schema's JSON; empty: {"type":"object"}.
	Schema string
}

// Server is a running MCP server.
type Server struct {
	URL    string
	server *mcp.Server
	names  []string

	mu   sync.Mutex
	hold chan struct{} // while set, tools/list requests wait for it to close
	// arrived gets a value for each tools/list request held.
	arrived chan struct{}
}

// Start serves tools over streamable HTTP until the test ends; pageSize
// (0: the SDK's default) makes tools/list paginate. It answers requests
// with server-sent events, as the SDK does by default.
func Start(t testing.TB, pageSize int, tools ...Tool) *Server {
	t.Helper()
	return start(t, pageSize, nil, tools)
}

// StartJSON is Start with answers as application/json bodies instead of
// event streams (the SDK's JSONResponse option).
func StartJSON(t testing.TB, pageSize int, tools ...Tool) *Server {
	t.Helper()
	return start(t, pageSize, &mcp.StreamableHTTPOptions{JSONResponse: true}, tools)
}

func start(t testing.TB, pageSize int, opts *mcp.StreamableHTTPOptions, tools []Tool) *Server {
	s := &Server{server: mcp.NewServer(&mcp.Implementation{Name: "mcptest", Version: "1.0.0"}, &mcp.ServerOptions{PageSize: pageSize}),
		arrived: make(chan struct{}, 64)}
	s.Set(tools...)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.server }, opts)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.held(r)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { s.Release(); hs.Close() })
	s.URL = hs.URL + "/mcp"
	return s
}

// Hold makes the tools/list requests that arrive from now on wait until
// Release (or until their client leaves); Arrived reports each.
func (s *Server) Hold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hold == nil {
		s.hold = make(chan struct{})
	}
}

// Release lets the held requests, and those to come, through.
func (s *Server) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hold != nil {
		close(s.hold)
		s.hold = nil
	}
}

// Arrived gets a value for each tools/list request Hold held.
func (s *Server) Arrived() <-chan struct{} { return s.arrived }

// held waits while r is a tools/list request and the server holds them.
func (s *Server) held(r *http.Request) {
	s.mu.Lock()
	hold := s.hold
	s.mu.Unlock()
	if hold == nil || r.Method != http.MethodPost {
		return
	}
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil || !bytes.Contains(body, []byte(`"tools/list"`)) {
		return
	}
	select {
	case s.arrived <- struct{}{}:
	default:
	}
	select {
	case <-hold:
	case <-r.Context().Done():
	}
}

// Set replaces the tool list.
func (s *Server) Set(tools ...Tool) {
	s.server.RemoveTools(s.names...)
	s.names = s.names[:0]
	for _, t := range tools {
		schema := t.Schema
		if schema == "" {
			schema = `{"type":"object"}`
		}
		s.server.AddTool(&mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: json.RawMessage(schema)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
			})
		s.names = append(s.names, t.Name)
	}
}

// Garbage serves an answer that is not JSON-RPC until the test ends.
func Garbage(t testing.TB) string {
	t.Helper()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jsonrpc": "2.0", "result": 42`))
	}))
	t.Cleanup(hs.Close)
	return hs.URL
}

// Hanging serves requests that never answer (until the client leaves or
// the test ends).
func Hanging(t testing.TB) string {
	t.Helper()
	done := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-done:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(done); hs.Close() })
	return hs.URL
}

// Flood answers every request with mib MiB of white space.
func Flood(t testing.TB, mib int) string {
	t.Helper()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		chunk := []byte(strings.Repeat(" ", 1<<20))
		for range mib {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(hs.Close)
	return hs.URL
}
