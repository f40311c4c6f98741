package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"svc/mcpclient/mcptest"
)

func TestToolsPaginated(t *testing.T) {
	var tools []mcptest.Tool
	for i := range 7 {
		tools = append(tools, mcptest.Tool{Name: fmt.Sprintf("tool_%d", i), Description: "does " + fmt.Sprint(i),
			Schema: `{"type":"object","properties":{"q":{"type":"string","description":"the query"}}}`})
	}
	srv := mcptest.Start(t, 3, tools...) // three pages
	got, err := Tools(context.Background(), http.DefaultClient, srv.URL, "test", DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 7 || got[6].Name != "tool_6" || got[0].Description != "does 0" || !strings.Contains(string(got[0].InputSchema), `"the query"`) {
		t.Errorf("tools: %+v", got)
	}
	srv.Set(mcptest.Tool{Name: "only"})
	if got, err = Tools(context.Background(), http.DefaultClient, srv.URL, "test", DefaultLimits); err != nil || len(got) != 1 || got[0].Name != "only" {
		t.Errorf("after Set: %v %+v", err, got)
	}
}

func TestToolsRefused(t *testing.T) {
	many := make([]mcptest.Tool, 5)
	for i := range many {
		many[i] = mcptest.Tool{Name: fmt.Sprintf("t%d", i), Description: strings.Repeat("x", 4000)}
	}
	big := mcptest.Start(t, 0, many...)
	for _, c := range []struct {
		name string
		url  string
		lim  Limits
		want error
	}{
		{"too many tools", big.URL, Limits{Timeout: 5 * time.Second, MaxBytes: 8 << 20, MaxTools: 4}, ErrTooLarge},
		{"too many bytes", big.URL, Limits{Timeout: 5 * time.Second, MaxBytes: 10 << 10, MaxTools: 100}, ErrTooLarge},
		{"50 MB", mcptest.Flood(t, 50), DefaultLimits, ErrTooLarge},
		{"garbage", mcptest.Garbage(t), DefaultLimits, ErrProtocol},
		{"hangs", mcptest.Hanging(t), Limits{Timeout: 300 * time.Millisecond, MaxBytes: 1 << 20, MaxTools: 10}, ErrTimeout},
		{"nobody there", "http://127.0.0.1:1/mcp", DefaultLimits, ErrProtocol},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			_, err := Tools(context.Background(), http.DefaultClient, c.url, "test", c.lim)
			if !errors.Is(err, c.want) {
				t.Errorf("err %v, want %v", err, c.want)
			}
			if d := time.Since(start); d > c.lim.Timeout+5*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

// A dial the caller's transport refuses is reported as that error, every
// time: the discovery's own end must not race its result (the gateway
// tells a forbidden target from a failed discovery by it).
func TestToolsKeepsTheTransportError(t *testing.T) {
	refused := errors.New("refused by the guard")
	client := &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, refused })}
	for i := range 2000 {
		_, err := Tools(context.Background(), client, "http://mcp.example/mcp", "test", DefaultLimits)
		if !errors.Is(err, refused) || !errors.Is(err, ErrProtocol) {
			t.Fatalf("call %d: %v", i, err)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
