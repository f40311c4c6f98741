package httpapi

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/hashicorp/go-hclog"

	"svc/actors"
	"svc/broadcast"
	"svc/control"
	"svc/messages"
)

// A handler still running at SVC_REQUEST_TIMEOUT_SECS sees its context end
// and the client gets 504 Timeout in the envelope.
func TestRequestTimeoutAnswers504(t *testing.T) {
	s := newTestServer(t)
	s.cfg.RequestTimeout = 50 * time.Millisecond
	s.register(Route{Method: "GET", Path: "/slow", Resp: map[string]any{}, Handle: func(c *Call) (any, error) {
		<-c.Ctx().Done()
		return nil, c.Ctx().Err()
	}})
	s.buildMux()
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/v2/slow", nil))
	if rec.Code != 504 || !strings.Contains(rec.Body.String(), `"reason":"Timeout"`) {
		t.Fatalf("got %d %s", rec.Code, rec.Body)
	}
}

// report-leaked-token emits agent_token_leak_detected on the event bus, with
// ids only, whether or not the token was rotated.
func TestLeakReportEmitsEvent(t *testing.T) {
	s := newTestServer(t)
	sys := actors.NewSystem(hclog.NewNullLogger())
	var got atomic.Pointer[messages.AseEvent]
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if ev, ok := c.Message().(*messages.AseEvent); ok {
			got.Store(ev)
		}
	}))
	s.Events = broadcast.NewEventBus(sys.Root, 8)
	s.Events.Subscribe(pid)
	stop := make(chan struct{})
	defer close(stop)
	go s.Events.Run(stop)

	tenant, tok, err := control.NewTenant(context.Background(), fullStore(s), "acme", "test")
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("POST", "/v2/agents", strings.NewReader(`{"name":"bot"}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	agentToken := between(rec.Body.String(), `"agent_token":"`, `"`)
	agentID := between(rec.Body.String(), `"agent_id":"`, `"`)
	req = httptest.NewRequest("POST", "/v2/agents/"+agentID+"/report-leaked-token", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"rotated":true`) {
		t.Fatalf("report = %d %s", rec.Code, rec.Body)
	}
	deadline := time.Now().Add(2 * time.Second)
	for got.Load() == nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	ev := got.Load()
	if ev == nil {
		t.Fatal("no event")
	}
	if ev.Kind != messages.KindAgentTokenLeakDetected || ev.TenantID != tenant.ID || ev.AgentID != agentID || ev.SchemaVersion != 1 || ev.EventID == "" {
		t.Fatalf("event = %+v", ev)
	}
	if strings.Contains(ev.Reason, agentToken) || strings.Contains(ev.Reason, "svc_agent_") {
		t.Fatal("the event carries a token")
	}
}

func between(s, from, to string) string {
	i := strings.Index(s, from)
	if i < 0 {
		return ""
	}
	s = s[i+len(from):]
	j := strings.Index(s, to)
	if j < 0 {
		return ""
	}
	return s[:j]
}
