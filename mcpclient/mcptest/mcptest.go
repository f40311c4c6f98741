// Package mcptest runs a real MCP server for tests: one built with the
// official Go SDK, serving streamable HTTP on loopback, whose tool list a
// test changes between discoveries (add, remove, change, poison); and
// servers that misbehave (garbage, a hang, a flood).
package mcptest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
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
}

// Start serves tools over streamable HTTP until the test ends; pageSize
// (0: the SDK's default) makes tools/list paginate.
func Start(t testing.TB, pageSize int, tools ...Tool) *Server {
	t.Helper()
	s := &Server{server: mcp.NewServer(&mcp.Implementation{Name: "mcptest", Version: "1.0.0"}, &mcp.ServerOptions{PageSize: pageSize})}
	s.Set(tools...)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.server }, nil)
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	s.URL = hs.URL + "/mcp"
	return s
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
