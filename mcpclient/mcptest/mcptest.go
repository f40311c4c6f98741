// Package mcptest runs a real MCP server for tests: one built with the
// official Go SDK, serving streamable HTTP on loopback, whose tool list a
// test changes between discoveries (add, remove, change, poison).
package mcptest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
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
