package node

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"svc/config"
	"svc/control"
	"svc/persistence/sqlite"
)

// A node built in process serves its API over httptest without listening:
// a tenant's admin registers an agent, the agent is authorized, the
// decision is listed; Shutdown then stops it and refuses new goroutines.
func TestNodeInProcess(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"DATABASE_URL": "sqlite://" + filepath.Join(dir, "svc.db")}
	cfg, err := config.Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	store, err := sqlite.Open(ctx, sqlite.Options{Path: cfg.SQLitePath, PoolSize: cfg.DBPoolSize})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = store.Close() }()
	n, err := New(ctx, Options{Config: cfg, Store: store, Log: hclog.NewNullLogger(), Stdout: io.Discard, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(n.Handler())
	defer srv.Close()
	_, admin, err := control.NewTenant(ctx, store, "in-process", "test")
	if err != nil {
		t.Fatal(err)
	}
	call := func(method, path, tok string, body any, want int) map[string]any {
		t.Helper()
		raw, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, srv.URL+path, bytes.NewReader(raw))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, out, want)
		}
		var m map[string]any
		if strings.HasPrefix(strings.TrimSpace(string(out)), "{") {
			_ = json.Unmarshal(out, &m)
		}
		return m
	}
	agent := call("POST", "/v2/agents", admin, map[string]any{"name": "bot"}, 201)
	tok, _ := agent["agent_token"].(string)
	if tok == "" {
		t.Fatalf("agent %v", agent)
	}
	d := call("POST", "/v2/authorize", tok, map[string]any{"tool_call": map[string]any{"tool": "github", "action": "list_issues", "parameters": map[string]any{}},
		"mutates_state": false, "source_trust": "trusted_internal_signed"}, 200)
	if d["decision"] != "allow" {
		t.Fatalf("authorize %v", d)
	}
	id, _ := d["decision_id"].(string)
	got := call("GET", "/v2/decisions/"+id, admin, nil, 200)
	if got["decision"] != "allow" {
		t.Fatalf("decision %v", got)
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := n.Shutdown(sctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if n.goroutines.Go(func() {}) {
		t.Fatal("a goroutine started after Shutdown")
	}
}

func TestGoroutinesRefuseAfterClose(t *testing.T) {
	var g Goroutines
	done := make(chan struct{})
	if !g.Go(func() { <-done }) {
		t.Fatal("refused before Close")
	}
	g.Close()
	if g.Go(func() {}) {
		t.Fatal("started after Close")
	}
	close(done)
	g.Wait()
}
