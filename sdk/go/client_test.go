package svcsdk

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

var uuid7 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

var bg = context.Background()

func ok200(body any) reply { return reply{status: 200, body: body} }

func echo(_ context.Context, p map[string]any) (any, error) { return p, nil }

func TestAllowAndRequestShape(t *testing.T) {
	f := newFake(t)
	tc := ToolCall{Tool: "GitHub", Action: "read", Resource: Str("acme/api"), Parameters: map[string]any{"n": 1}}
	f.script(ok200(map[string]any{"decision": "allow", "reason": "read_only", "decision_id": "d1", "action_hash": mustHash(t, tc),
		"receipt_id": "r1", "matched_policies": []string{"p"}, "composite_risk_score": 3, "redacted_fields": []string{}}))
	c, _ := newClient(t, f.URL)
	d, err := c.Authorize(bg, tc, AuthorizeOptions{Trace: map[string]any{"run_id": "run"}, Environment: "prod"})
	if err != nil {
		t.Fatal(err)
	}
	if !d.Allowed() || d.Decision != "allow" || d.Reason != "read_only" || d.DecisionID != "d1" || d.ReceiptID != "r1" ||
		len(d.MatchedPolicies) != 1 || d.CompositeRiskScore == nil || *d.CompositeRiskScore != 3 || d.HashMismatch {
		t.Fatalf("%+v", d)
	}
	rs := f.reqs("/authorize")
	if len(rs) != 1 || rs[0].Method != "POST" || rs[0].Path != "/v2/authorize" {
		t.Fatalf("%+v", rs)
	}
	r := rs[0]
	if r.Header.Get("Authorization") != "Bearer "+testToken || r.Header.Get("Content-Type") != "application/json" {
		t.Error(r.Header)
	}
	b := r.JSON()
	if !sameJSON(b["tool_call"], map[string]any{"tool": "GitHub", "action": "read", "resource": "acme/api", "parameters": map[string]any{"n": 1}}) {
		t.Errorf("tool_call %v", b["tool_call"])
	}
	if b["mutates_state"] != false || !sameJSON(b["trace"], map[string]any{"run_id": "run"}) || b["environment"] != "prod" {
		t.Errorf("%v", b)
	}
	rid, _ := b["request_id"].(string)
	nonce, _ := b["nonce"].(string)
	if !uuid7.MatchString(rid) || len(nonce) < 8 || len(nonce) > 128 || d.RequestID != rid {
		t.Errorf("request_id %q nonce %q", rid, nonce)
	}
	if _, ok := b["dry_run"]; ok {
		t.Error("dry_run sent")
	}
	if r.Header.Get(SignatureHeader) != hmacHex(r.Body) {
		t.Error("signature is not over the bytes sent")
	}
	if strings.Contains(strings.ReplaceAll(string(r.Body), `"GitHub"`, ""), " ") {
		t.Errorf("not compact: %s", r.Body)
	}
}

func TestUnsignedWithoutKey(t *testing.T) {
	f := newFake(t)
	c, err := New(f.URL, testToken)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Authorize(bg, ToolCall{Tool: "t", Action: "a"}, AuthorizeOptions{}); err != nil {
		t.Fatal(err)
	}
	if f.reqs("/authorize")[0].Header.Get(SignatureHeader) != "" {
		t.Error("signed without a key")
	}
}

func TestRetriesReuseRequestIDFreshNonce(t *testing.T) {
	f := newFake(t)
	f.script(reply{status: 503, body: envelope(503, "ServiceUnavailable", "shared_state_unavailable", "m")},
		reply{status: 502, body: []byte("bad gateway")}, ok200(map[string]any{"decision": "allow"}))
	c, _ := newClient(t, f.URL, WithRetries(2))
	d, err := c.Authorize(bg, ToolCall{Tool: "t", Action: "a"}, AuthorizeOptions{})
	if err != nil || d.Decision != "allow" {
		t.Fatal(d, err)
	}
	rs := f.reqs("/authorize")
	ids, nonces := map[any]bool{}, map[any]bool{}
	for _, r := range rs {
		ids[r.JSON()["request_id"]] = true
		nonces[r.JSON()["nonce"]] = true
		if r.Header.Get(SignatureHeader) != hmacHex(r.Body) {
			t.Error("an attempt is not signed over its own bytes")
		}
	}
	if len(rs) != 3 || len(ids) != 1 || len(nonces) != 3 {
		t.Errorf("%d requests, %d ids, %d nonces", len(rs), len(ids), len(nonces))
	}
}

func TestGivenRequestIDKept(t *testing.T) {
	f := newFake(t)
	c, _ := newClient(t, f.URL)
	_, _ = c.Authorize(bg, ToolCall{Tool: "t", Action: "a"}, AuthorizeOptions{RequestID: "my-id"})
	if f.reqs("/authorize")[0].JSON()["request_id"] != "my-id" {
		t.Error("request_id not kept")
	}
}

func TestRetriesExhausted(t *testing.T) {
	f := newFake(t)
	f.script(reply{status: 503, body: map[string]any{"decision": "deny", "reason": "audit_writer_unavailable"}})
	c, _ := newClient(t, f.URL, WithRetries(2))
	_, err := c.Authorize(bg, ToolCall{Tool: "t", Action: "a"}, AuthorizeOptions{})
	var e *SvcUnavailable
	if !errors.As(err, &e) || e.Status != 503 || len(f.reqs("/authorize")) != 3 {
		t.Fatal(err, len(f.reqs("/authorize")))
	}
}

func TestNeverRetried(t *testing.T) {
	for _, tt := range []struct {
		status       int
		reason, code string
		typ          string
	}{{400, "BadRequest", "invalid_json", "SvcError"}, {404, "NotFound", "not_found", "SvcError"},
		{409, "Conflict", "request_in_flight", "SvcError"}, {500, "InternalError", "database_unavailable", "SvcError"},
		{422, "Invalid", "", "SvcError"}, {401, "Unauthorized", "invalid_signature", "SvcAuthError"}} {
		f := newFake(t)
		f.script(reply{status: tt.status, body: envelope(tt.status, tt.reason, tt.code, "why"), header: map[string]string{"Retry-After": "1"}})
		c, _ := newClient(t, f.URL)
		_, err := c.Authorize(bg, ToolCall{Tool: "t", Action: "a"}, AuthorizeOptions{})
		var base *SvcError
		if TypeName(err) != tt.typ || !errors.As(err, &base) {
			t.Fatalf("%d: %T %v", tt.status, err, err)
		}
		if base.Status != tt.status || base.Reason != tt.reason || base.ErrorCode != tt.code || !strings.Contains(base.Message, "why") {
			t.Errorf("%d: %+v", tt.status, base)
		}
		if n := len(f.reqs("/authorize")); n != 1 {
			t.Errorf("%d: %d attempts", tt.status, n)
		}
	}
}

func Test403IsADenyWithoutDecisionID(t *testing.T) {
	f := newFake(t)
	f.script(reply{status: 403, body: envelope(403, "Forbidden", "FORBIDDEN", "environment not allowed for this agent")})
	c, _ := newClient(t, f.URL)
	d, err := c.Authorize(bg, ToolCall{Tool: "t", Action: "a"}, AuthorizeOptions{Environment: "prod"})
	if err != nil || d.Decision != "deny" || d.DecisionID != "" || d.Status != 403 || d.Reason != "FORBIDDEN" ||
		!strings.Contains(d.Message, "environment not allowed") || d.Allowed() {
		t.Fatalf("%+v %v", d, err)
	}
	ran := false
	_, err = c.Run(bg, ToolCall{Tool: "t", Action: "a"}, func(context.Context, map[string]any) (any, error) { ran = true; return nil, nil }, RunOptions{})
	var den *Denied
	if !errors.As(err, &den) || den.Decision.Status != 403 || ran {
		t.Fatal(err, ran)
	}
}

func TestRetryAfterHonoured(t *testing.T) {
	f := newFake(t)
	f.script(reply{status: 429, body: envelope(429, "TooManyRequests", "rate_limited", "m"), header: map[string]string{"Retry-After": "1"}},
		ok200(map[string]any{"decision": "allow"}))
	c, _ := newClient(t, f.URL, WithTimeout(3*time.Second))
	t0 := time.Now()
	d, err := c.Authorize(bg, ToolCall{Tool: "t", Action: "a"}, AuthorizeOptions{})
	if err != nil || d.Decision != "allow" || time.Since(t0) < 950*time.Millisecond {
		t.Fatal(d, err, time.Since(t0))
	}
}

func TestRetryAfterHTTPDate(t *testing.T) {
	f := newFake(t)
	when := time.Now().Add(2 * time.Second).UTC().Format(http.TimeFormat)
	f.script(reply{status: 429, body: envelope(429, "TooManyRequests", "rate_limited", "m"), header: map[string]string{"Retry-After": when}},
		ok200(map[string]any{"decision": "allow"}))
	c, _ := newClient(t, f.URL, WithTimeout(4*time.Second))
	t0 := time.Now()
	d, err := c.Authorize(bg, ToolCall{Tool: "t", Action: "a"}, AuthorizeOptions{})
	if err != nil || d.Decision != "allow" || time.Since(t0) < 900*time.Millisecond {
		t.Fatal(d, err, time.Since(t0))
	}
}

func TestRetryAfterBeyondDeadlineFailsNow(t *testing.T) {
	f := newFake(t)
	f.script(reply{status: 429, body: envelope(429, "TooManyRequests", "rate_limited", "m"), header: map[string]string{"Retry-After": "30"}})
	c, _ := newClient(t, f.URL, WithTimeout(3*time.Second))
	t0 := time.Now()
	_, err := c.Authorize(bg, ToolCall{Tool: "t", Action: "a"}, AuthorizeOptions{})
	var e *SvcUnavailable
	if !errors.As(err, &e) || e.Status != 429 || e.ErrorCode != "rate_limited" || time.Since(t0) > time.Second ||
		len(f.reqs("/authorize")) != 1 || e.Header.Get("Retry-After") != "30" {
		t.Fatal(err, time.Since(t0))
	}
}

func TestDeadlineOnAHungServer(t *testing.T) {
	f := newFake(t)
	f.script(reply{status: 200, body: map[string]any{"decision": "allow"}, delay: 3 * time.Second})
	c, _ := newClient(t, f.URL, WithTimeout(time.Second))
	t0 := time.Now()
	_, err := c.Authorize(bg, ToolCall{Tool: "t", Action: "a"}, AuthorizeOptions{})
	var e *SvcUnavailable
	if !errors.As(err, &e) || time.Since(t0) > 1600*time.Millisecond {
		t.Fatal(err, time.Since(t0))
	}
}

func TestConnectionRefused(t *testing.T) {
	c, _ := newClient(t, freeURL(t), WithTimeout(1500*time.Millisecond))
	t0 := time.Now()
	_, err := c.Authorize(bg, ToolCall{Tool: "t", Action: "a"}, AuthorizeOptions{})
	var e *SvcUnavailable
	if !errors.As(err, &e) || e.ErrorCode != "svc_unavailable" || time.Since(t0) > 1600*time.Millisecond {
		t.Fatal(err)
	}
}

func TestUnknownOrMissingDecisionIsDeny(t *testing.T) {
	for _, body := range []map[string]any{{"decision": "permit"}, {"reason": "x"}, {"decision": nil}, {"decision": "ALLOW"}} {
		f := newFake(t)
		f.script(ok200(body))
		c, sink := newClient(t, f.URL)
		d, err := c.Authorize(bg, ToolCall{Tool: "t", Action: "a"}, AuthorizeOptions{})
		if err != nil || d.Decision != "deny" || d.Allowed() || sink.count("unknown decision") != 1 {
			t.Fatal(body, d, err)
		}
	}
}

func TestUnreadable200IsAnError(t *testing.T) {
	for _, raw := range []string{"<html>", "[1]", ""} {
		f := newFake(t)
		f.script(reply{status: 200, body: []byte(raw)})
		c, _ := newClient(t, f.URL)
		_, err := c.Authorize(bg, ToolCall{Tool: "t", Action: "a"}, AuthorizeOptions{})
		var e *SvcError
		if TypeName(err) != "SvcError" || !errors.As(err, &e) || e.ErrorCode != "unreadable_answer" {
			t.Fatal(raw, err)
		}
	}
}

type badJSON struct{ C chan int }

func TestPrechecksSendNothing(t *testing.T) {
	f := newFake(t)
	c, _ := newClient(t, f.URL)
	nan := 0.0
	nan = nan / nan
	big := strings.Repeat("x", 1<<20)
	cases := []struct {
		tc ToolCall
		o  AuthorizeOptions
	}{
		{ToolCall{Tool: "t", Action: "a", Parameters: map[string]any{"a": "x\x00y"}}, AuthorizeOptions{}},
		{ToolCall{Tool: "t", Action: "a", Parameters: map[string]any{"a\x00": 1}}, AuthorizeOptions{}},
		{ToolCall{Tool: "t", Action: "a", Parameters: map[string]any{"a": nan}}, AuthorizeOptions{}},
		{ToolCall{Tool: "t", Action: "a", Parameters: map[string]any{"a": 1 / (nan - nan + 0)}}, AuthorizeOptions{}},
		{ToolCall{Tool: "t", Action: "a", Parameters: map[string]any{"a": big}}, AuthorizeOptions{}},
		{ToolCall{Tool: "t", Action: "a", Parameters: map[string]any{"a": "\xff"}}, AuthorizeOptions{}},
		{ToolCall{Tool: "t", Action: "a", Parameters: map[string]any{"a": badJSON{}}}, AuthorizeOptions{}},
		{ToolCall{Tool: "t", Action: "a", Parameters: map[string]any{"a": []any{[]any{"\xfe"}}}}, AuthorizeOptions{}},
		{ToolCall{Tool: "t", Action: "a", Parameters: map[string]any{"a": struct{ S string }{"\xff"}}}, AuthorizeOptions{}},
		{ToolCall{Tool: "t", Action: "a", Parameters: map[string]any{"a": json1e400}}, AuthorizeOptions{}},
		{ToolCall{Tool: "t", Action: "a", Resource: Str("r\x00")}, AuthorizeOptions{}},
		{ToolCall{Tool: "t", Action: "a"}, AuthorizeOptions{Environment: "p\x00"}},
		{ToolCall{Tool: "t", Action: "a"}, AuthorizeOptions{Trace: map[string]any{"run_id": "\x00"}}},
		{ToolCall{Tool: "", Action: "a"}, AuthorizeOptions{}},
		{ToolCall{Tool: "t", Action: " "}, AuthorizeOptions{}},
		{ToolCall{Tool: "t\x00", Action: "a"}, AuthorizeOptions{}},
	}
	for i, tt := range cases {
		_, err := c.Authorize(bg, tt.tc, tt.o)
		var e *InvalidRequest
		if !errors.As(err, &e) {
			t.Errorf("case %d: %T %v", i, err, err)
		}
	}
	if n := len(f.reqs("")); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

var json1e400 = jsonNumber("1" + strings.Repeat("0", 400))

func TestKeepAliveReuseAndConcurrency(t *testing.T) {
	f := newFake(t)
	c, _ := newClient(t, f.URL)
	for i := 0; i < 5; i++ {
		if _, err := c.Authorize(bg, ToolCall{Tool: "t", Action: "a"}, AuthorizeOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if f.conns != 1 {
		t.Errorf("%d connections", f.conns)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				if d, err := c.Authorize(bg, ToolCall{Tool: "t", Action: "a"}, AuthorizeOptions{}); err != nil || d.Decision != "allow" {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if n := len(f.reqs("/authorize")); n != 85 {
		t.Errorf("%d requests", n)
	}
}

func TestDeprecationOnce(t *testing.T) {
	f := newFake(t)
	f.script(reply{status: 200, body: map[string]any{"decision": "allow"}, header: map[string]string{"Deprecation": "true", "Sunset": "Wed, 31 Dec 2026 23:59:59 GMT"}})
	c, sink := newClient(t, f.URL)
	for i := 0; i < 2; i++ {
		_, _ = c.Authorize(bg, ToolCall{Tool: "t", Action: "a"}, AuthorizeOptions{})
	}
	if n := sink.count("deprecated"); n != 1 {
		t.Errorf("%d deprecation warnings", n)
	}
}

func TestV1PathsAndWarning(t *testing.T) {
	f := newFake(t)
	c, sink := newClient(t, f.URL, WithAPIVersion("v1"))
	_, _ = c.Authorize(bg, ToolCall{Tool: "t", Action: "a"}, AuthorizeOptions{})
	_, _ = c.Authorize(bg, ToolCall{Tool: "t", Action: "a"}, AuthorizeOptions{})
	if sink.count("deprecated") != 1 || f.reqs("/authorize")[0].Path != "/v1/authorize" {
		t.Error(sink.msgs, f.reqs("/authorize")[0].Path)
	}
}

func TestHashMismatchRecorded(t *testing.T) {
	f := newFake(t)
	f.script(ok200(map[string]any{"decision": "allow", "action_hash": strings.Repeat("1", 64)}))
	c, sink := newClient(t, f.URL)
	d, err := c.Authorize(bg, ToolCall{Tool: "t", Action: "a"}, AuthorizeOptions{})
	if err != nil || !d.HashMismatch || d.LocalActionHash == "" || sink.count("action_hash mismatch") != 1 {
		t.Fatal(d, err)
	}
	// A direct allow still runs.
	if _, err := c.Run(bg, ToolCall{Tool: "t", Action: "a"}, echo, RunOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestContextCancelAuthorize(t *testing.T) {
	f := newFake(t)
	f.script(reply{status: 200, body: map[string]any{"decision": "allow"}, delay: 5 * time.Second})
	c, _ := newClient(t, f.URL, WithTimeout(10*time.Second))
	ctx, cancel := context.WithCancel(bg)
	time.AfterFunc(200*time.Millisecond, cancel)
	t0 := time.Now()
	_, err := c.Authorize(ctx, ToolCall{Tool: "t", Action: "a"}, AuthorizeOptions{})
	if !errors.Is(err, context.Canceled) || time.Since(t0) > time.Second {
		t.Fatal(err, time.Since(t0))
	}
}

// ---------------------------------------------------------------------------
// Fail-open

func TestFailOpenListedReadOnlyToolRuns(t *testing.T) {
	c, sink := newClient(t, freeURL(t), WithTimeout(500*time.Millisecond),
		WithFailOpenTools(FailOpenTool{Tool: "Search"}, FailOpenTool{Tool: "kb", Action: "lookup"}))
	got, err := c.Run(bg, ToolCall{Tool: "search", Action: "q", Parameters: map[string]any{"x": 1}}, echo, RunOptions{})
	if err != nil || !sameJSON(got, map[string]any{"x": 1}) {
		t.Fatal(got, err)
	}
	d, err := c.Authorize(bg, ToolCall{Tool: "kb", Action: "lookup"}, AuthorizeOptions{})
	if err != nil || !d.FailOpen || !d.Allowed() || d.DecisionID != "" {
		t.Fatal(d, err)
	}
	if c.FailOpenCount() != 2 || sink.count("FAIL-OPEN") != 2 {
		t.Error(c.FailOpenCount(), sink.msgs)
	}
}

func TestFailOpenNeverMutatingOrUnlisted(t *testing.T) {
	c, _ := newClient(t, freeURL(t), WithTimeout(500*time.Millisecond),
		WithFailOpenTools(FailOpenTool{Tool: "search"}, FailOpenTool{Tool: "kb", Action: "lookup"}))
	for _, tt := range []struct {
		tc  ToolCall
		mut bool
	}{{ToolCall{Tool: "search", Action: "q"}, true}, {ToolCall{Tool: "other", Action: "q"}, false}, {ToolCall{Tool: "kb", Action: "delete"}, false}} {
		ran := false
		_, err := c.Run(bg, tt.tc, func(context.Context, map[string]any) (any, error) { ran = true; return nil, nil },
			RunOptions{AuthorizeOptions: AuthorizeOptions{MutatesState: tt.mut}})
		var e *SvcUnavailable
		if !errors.As(err, &e) || ran {
			t.Fatal(tt, err)
		}
	}
	if c.FailOpenCount() != 0 {
		t.Error(c.FailOpenCount())
	}
}

func TestErrorsOtherThanUnavailableNeverFailOpen(t *testing.T) {
	f := newFake(t)
	f.script(reply{status: 500, body: envelope(500, "InternalError", "database_unavailable", "m")})
	c, _ := newClient(t, f.URL, WithFailOpenTools(FailOpenTool{Tool: "search"}))
	_, err := c.Authorize(bg, ToolCall{Tool: "search", Action: "q"}, AuthorizeOptions{})
	if TypeName(err) != "SvcError" || c.FailOpenCount() != 0 {
		t.Fatal(err)
	}
}
