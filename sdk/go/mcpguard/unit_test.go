package mcpguard

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	svcsdk "svc/sdk/go"
)

// These tests need no svc: they check what happens before svc is asked.

func TestNewValidates(t *testing.T) {
	c, err := svcsdk.New("http://127.0.0.1:1", "token")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(nil, Options{ServerKey: "k"}); err == nil {
		t.Fatal("New accepted a nil svc client")
	}
	if _, err := New(c, Options{}); err == nil {
		t.Fatal("New accepted an empty ServerKey")
	}
	g, err := New(c, Options{ServerKey: "k"})
	if err != nil || g.tool != "mcp:k" {
		t.Fatalf("%v %v", g, err)
	}
}

func TestArguments(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want string
	}{
		{nil, `{}`},
		{map[string]any{"a": 1}, `{"a":1}`},
		{json.RawMessage(`{"a":[1,2.5,"x"]}`), `{"a":[1,2.5,"x"]}`},
		{json.RawMessage(`null`), `{}`},
		{struct {
			A int    `json:"a"`
			B string `json:"b,omitempty"`
		}{A: 2}, `{"a":2}`},
		{map[string]int{"n": 3}, `{"n":3}`},
	} {
		got, err := arguments(tc.in)
		if err != nil {
			t.Fatalf("%#v: %v", tc.in, err)
		}
		b, _ := json.Marshal(got)
		if string(b) != tc.want {
			t.Fatalf("%#v: %s, want %s", tc.in, b, tc.want)
		}
	}
	for _, bad := range []any{[]int{1}, "text", 3, json.RawMessage(`{"a":1,"a":2}`), json.RawMessage(`[1]`)} {
		if _, err := arguments(bad); err == nil {
			t.Fatalf("%#v accepted", bad)
		}
	}
}

// offline is a guarded session to a recording server, with svc unreachable.
func offline(t *testing.T) (*mcp.ClientSession, *recorder) {
	t.Helper()
	c, err := svcsdk.New("http://127.0.0.1:1", "token", svcsdk.WithTimeout(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(c, Options{ServerKey: serverKey})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	client := mcp.NewClient(&mcp.Implementation{Name: "offline", Version: "1"}, nil)
	g.Install(client)
	return connect(t, newServer(rec), client), rec
}

func TestUnreachableSvcFailsClosed(t *testing.T) {
	cs, rec := offline(t)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_tool", Arguments: map[string]any{"q": 1}})
	var un *svcsdk.SvcUnavailable
	if err == nil || !errors.As(err, &un) || res != nil {
		t.Fatalf("%v %v", res, err)
	}
	if rec.total() != 0 {
		t.Fatal("a call reached the server without svc")
	}
	// Other methods pass: the guard listed the tools for the call above.
	if rec.listings() != 1 {
		t.Fatalf("%d listings", rec.listings())
	}
}

func TestInvalidArgumentsFailClosed(t *testing.T) {
	cs, rec := offline(t)
	for _, args := range []any{[]int{1, 2}, map[string]any{"f": math.Inf(1)}, map[string]any{"s": "a\x00b"}} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "allow_tool", Arguments: args})
		if err == nil || res != nil {
			t.Fatalf("%#v: %v %v", args, res, err)
		}
	}
	if rec.total() != 0 {
		t.Fatal("a call reached the server")
	}
}

func TestResultsHaveTheProxysShape(t *testing.T) {
	d := &svcsdk.Decision{Decision: "deny", Reason: "r", DecisionID: "d1", ReceiptID: "rc1"}
	res := deniedResult(d)
	b, _ := json.Marshal(res)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	sc, _ := m["structuredContent"].(map[string]any)
	if m["isError"] != true || len(sc) != 4 || sc["decision"] != "deny" || sc["reason"] != "r" || sc["decision_id"] != "d1" ||
		sc["receipt_id"] != "rc1" {
		t.Fatalf("%s", b)
	}
	a := &svcsdk.Decision{Decision: "require_approval", Reason: "r", DecisionID: "d2", ApprovalID: "a1", ApprovalExpiresAt: "2026-01-01T00:00:00Z"}
	b, _ = json.Marshal(approvalResult(a, svcsdk.StatusPending, nil))
	m = nil
	_ = json.Unmarshal(b, &m)
	sc, _ = m["structuredContent"].(map[string]any)
	for k, v := range map[string]any{"decision": "require_approval", "reason": "r", "decision_id": "d2", "approval_id": "a1",
		"approval_expires_at": "2026-01-01T00:00:00Z", "approval_status": "PENDING"} {
		if sc[k] != v {
			t.Fatalf("%s: %s", k, b)
		}
	}
	if m["isError"] != true {
		t.Fatalf("%s", b)
	}
}
