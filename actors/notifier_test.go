package actors_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"svc/actors"
	"svc/messages"
	"svc/testkit"
)

// ---- test helpers (prefixed: the package is shared with other tests) ----

// ntDelivery is one request the fake chat platform received.
type ntDelivery struct {
	method string
	header http.Header
	body   []byte
}

// ntChat is a loopback fake chat platform. It records every delivery,
// answers with a settable status, can hold requests until released (or
// until the client gives up) and counts concurrently open requests.
type ntChat struct {
	srv *httptest.Server

	mu         sync.Mutex
	deliveries []ntDelivery
	status     int
	gate       chan struct{} // non-nil: requests wait for it to close

	requests  atomic.Int64
	active    atomic.Int64
	maxActive atomic.Int64
}

func newNtChat(t *testing.T) *ntChat {
	t.Helper()
	f := &ntChat{status: http.StatusOK}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(func() {
		f.release()
		f.srv.Close()
	})
	return f
}

func (f *ntChat) serve(w http.ResponseWriter, r *http.Request) {
	cur := f.active.Add(1)
	defer f.active.Add(-1)
	for {
		m := f.maxActive.Load()
		if cur <= m || f.maxActive.CompareAndSwap(m, cur) {
			break
		}
	}
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.deliveries = append(f.deliveries, ntDelivery{method: r.Method, header: r.Header.Clone(), body: body})
	gate := f.gate
	f.mu.Unlock()
	f.requests.Add(1)
	if gate != nil {
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
	}
	f.mu.Lock()
	status := f.status
	f.mu.Unlock()
	w.WriteHeader(status)
}

func (f *ntChat) setStatus(code int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status = code
}

// hold makes every request from now on wait until release (a hang when
// never released).
func (f *ntChat) hold() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gate = make(chan struct{})
}

func (f *ntChat) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gate != nil {
		close(f.gate)
		f.gate = nil
	}
}

func (f *ntChat) count() int64 { return f.requests.Load() }

func (f *ntChat) delivery(t *testing.T, i int) ntDelivery {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if i >= len(f.deliveries) {
		t.Fatalf("delivery %d of %d", i, len(f.deliveries))
	}
	return f.deliveries[i]
}

// ntClock is a fake clock for the breaker's cooldown.
type ntClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *ntClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *ntClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func startNtNotifier(t *testing.T, opts actors.NotifierOptions, stats *actors.NotifierStats) (*actor.ActorSystem, *actor.PID) {
	t.Helper()
	sys := actors.NewSystem(hclog.NewNullLogger())
	pid := sys.Root.Spawn(actor.PropsFromProducer(actors.NewNotifier(opts, stats, hclog.NewNullLogger())))
	t.Cleanup(func() {
		_ = sys.Root.StopFuture(pid).Wait()
		sys.Shutdown()
	})
	return sys, pid
}

// ntOccurred is in a non-UTC zone so that the body's UTC conversion shows.
var ntOccurred = time.Date(2026, 3, 4, 5, 6, 7, 0, time.FixedZone("CET", 3600))

const ntTenant = "tenant-acme"

// ntEvent is a normal decision event: ids and hashes only.
func ntEvent(kind, decision, agentID, decisionID string) *messages.AseEvent {
	hash := strings.Repeat("ab", 32)
	trust := "trusted_internal_signed"
	return &messages.AseEvent{
		EventID: uuid.NewString(), OccurredAt: ntOccurred, TenantID: ntTenant, Kind: kind,
		AgentID: agentID, Decision: decision, Tool: "github", Action: "create_issue",
		RiskScore: 70, Reason: "policy_matched", MatchedPolicies: []string{"pol-no-prod", "pol-review"},
		SchemaVersion: messages.SchemaVersion,
		Evidence:      &messages.Evidence{DecisionID: &decisionID, ActionHash: &hash, SourceTrust: &trust},
	}
}

type ntWant struct {
	kind, severity, color, agent, summary string
	at                                    time.Time
	detailHas                             []string
}

var ntTitles = []string{"Kind", "Severity", "Tenant", "Agent", "Timestamp", "Summary"}

// checkNtBody verifies the wire shape of one delivery against want.
func checkNtBody(t *testing.T, d ntDelivery, want ntWant) {
	t.Helper()
	if d.method != http.MethodPost {
		t.Errorf("method = %s, want POST", d.method)
	}
	if ct := d.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	dec := json.NewDecoder(bytes.NewReader(d.body))
	dec.UseNumber()
	var top map[string]any
	if err := dec.Decode(&top); err != nil {
		t.Fatalf("body is not JSON: %v: %s", err, d.body)
	}
	if len(top) != 2 {
		t.Errorf("top-level keys = %v, want text and attachments", top)
	}
	text, _ := top["text"].(string)
	lines := strings.Split(text, "\n")
	if len(lines) != 2 || lines[0] != want.summary || !strings.HasPrefix(lines[1], "> ") {
		t.Errorf("text = %q, want %q then a quoted detail line", text, want.summary)
	} else {
		for _, s := range want.detailHas {
			if !strings.Contains(lines[1], s) {
				t.Errorf("detail line %q lacks %q", lines[1], s)
			}
		}
	}
	atts, _ := top["attachments"].([]any)
	if len(atts) != 1 {
		t.Fatalf("attachments = %v, want exactly one", top["attachments"])
	}
	att, _ := atts[0].(map[string]any)
	if att["color"] != want.color {
		t.Errorf("color = %v, want %s", att["color"], want.color)
	}
	if att["footer"] != "svc" {
		t.Errorf("footer = %v", att["footer"])
	}
	ts, ok := att["ts"].(json.Number)
	if !ok || strings.ContainsAny(ts.String(), ".eE") {
		t.Errorf("ts = %#v, want an integer", att["ts"])
	} else if n, _ := ts.Int64(); n != want.at.Unix() {
		t.Errorf("ts = %d, want %d", n, want.at.Unix())
	}
	fields, _ := att["fields"].([]any)
	if len(fields) != len(ntTitles) {
		t.Fatalf("fields = %v, want %d", fields, len(ntTitles))
	}
	values := []string{want.kind, want.severity, ntTenant, want.agent, want.at.UTC().Format(time.RFC3339), want.summary}
	for i, raw := range fields {
		f, _ := raw.(map[string]any)
		if f["title"] != ntTitles[i] {
			t.Errorf("field %d title = %v, want %s", i, f["title"], ntTitles[i])
		}
		if f["value"] != values[i] {
			t.Errorf("field %s value = %v, want %q", ntTitles[i], f["value"], values[i])
		}
		if short, ok := f["short"].(bool); !ok || short != (ntTitles[i] != "Summary") {
			t.Errorf("field %s short = %v", ntTitles[i], f["short"])
		}
	}
}

func ntSignature(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// ---- 1. what is sent, its shape and its signature ----

func TestNotifierDeliversDecisionsSigned(t *testing.T) {
	chat := newNtChat(t)
	stats := &actors.NotifierStats{}
	const secret = "notifier-test-secret"
	sys, pid := startNtNotifier(t, actors.NotifierOptions{Post: ntPoster(chat.srv.URL), Secret: secret}, stats)

	agent, denyID, apprID := uuid.NewString(), uuid.NewString(), uuid.NewString()
	steps := []struct {
		name string
		msg  any
		want ntWant
	}{
		{"deny", ntEvent(messages.KindAuthorizeDecision, "deny", agent, denyID), ntWant{
			kind: messages.KindAuthorizeDecision, severity: "medium", color: "warning", agent: agent, at: ntOccurred,
			summary:   "deny: github.create_issue by agent " + agent,
			detailHas: []string{"policy_matched", "70", "pol-no-prod", "pol-review", denyID}}},
		{"quarantine is a deny", ntEvent(messages.KindAuthorizeDecision, "quarantine", agent, denyID), ntWant{
			kind: messages.KindAuthorizeDecision, severity: "medium", color: "warning", agent: agent, at: ntOccurred,
			summary:   "quarantine: github.create_issue by agent " + agent,
			detailHas: []string{"policy_matched", denyID}}},
		{"require_approval", ntEvent(messages.KindAuthorizeDecision, "require_approval", agent, apprID), ntWant{
			kind: messages.KindAuthorizeDecision, severity: "low", color: "good", agent: agent, at: ntOccurred,
			summary:   "require_approval: github.create_issue by agent " + agent,
			detailHas: []string{"policy_matched", "70", "pol-no-prod", apprID}}},
		{"high incident", &messages.Notification{Kind: "deny_storm", Severity: "high", TenantID: ntTenant, AgentID: agent,
			At: ntOccurred, Summary: "incident deny_storm for agent " + agent, Detail: "5 denials in 60s"}, ntWant{
			kind: "deny_storm", severity: "high", color: "danger", agent: agent, at: ntOccurred,
			summary: "incident deny_storm for agent " + agent, detailHas: []string{"5 denials in 60s"}}},
	}
	var sent uint64
	for i, st := range steps {
		sent++
		sys.Root.Send(pid, st.msg)
		testkit.Eventually(t, 3*time.Second, st.name+" delivered", func() bool { return stats.Sent.Load() == sent })
		if got := chat.count(); got != int64(i+1) {
			t.Fatalf("%s: sink saw %d requests, want %d", st.name, got, i+1)
		}
		d := chat.delivery(t, i)
		checkNtBody(t, d, st.want)
		sig := d.header.Get(actors.NotifierSignatureHeader)
		if sig == "" || !hmac.Equal([]byte(sig), []byte(ntSignature(secret, d.body))) {
			t.Errorf("%s: signature %q does not verify over the body", st.name, sig)
		}
		if sig == ntSignature("wrong-secret", d.body) {
			t.Errorf("%s: signature verifies under the wrong secret", st.name)
		}
	}
	if stats.Failed.Load()+stats.Rejected.Load()+stats.Dropped.Load()+stats.Disabled.Load() != 0 || stats.State() != "closed" {
		t.Errorf("stats = failed %d rejected %d dropped %d disabled %d state %s", stats.Failed.Load(),
			stats.Rejected.Load(), stats.Dropped.Load(), stats.Disabled.Load(), stats.State())
	}
}

func TestNotifierUnsignedWithoutSecret(t *testing.T) {
	chat := newNtChat(t)
	stats := &actors.NotifierStats{}
	sys, pid := startNtNotifier(t, actors.NotifierOptions{Post: ntPoster(chat.srv.URL)}, stats)

	agent, did := uuid.NewString(), uuid.NewString()
	sys.Root.Send(pid, ntEvent(messages.KindAuthorizeDecision, "deny", agent, did))
	testkit.Eventually(t, 3*time.Second, "delivery", func() bool { return stats.Sent.Load() == 1 })
	d := chat.delivery(t, 0)
	if _, ok := d.header[http.CanonicalHeaderKey(actors.NotifierSignatureHeader)]; ok {
		t.Errorf("unsigned POST carries %s: %q", actors.NotifierSignatureHeader, d.header.Get(actors.NotifierSignatureHeader))
	}
	checkNtBody(t, d, ntWant{kind: messages.KindAuthorizeDecision, severity: "medium", color: "warning", agent: agent,
		at: ntOccurred, summary: "deny: github.create_issue by agent " + agent, detailHas: []string{did}})
}

// With one delivery slot and a held sink, an ignored event that was sent
// by mistake would occupy the slot and push the marker out (Dropped), so
// the first request the sink sees is the marker only if nothing else went.
func TestNotifierIgnoresOtherEvents(t *testing.T) {
	chat := newNtChat(t)
	chat.hold()
	stats := &actors.NotifierStats{}
	sys, pid := startNtNotifier(t, actors.NotifierOptions{Post: ntPoster(chat.srv.URL), MaxInFlight: 1}, stats)

	agent := uuid.NewString()
	ignored := []*messages.AseEvent{
		ntEvent(messages.KindAuthorizeDecision, "allow", agent, uuid.NewString()),
		ntEvent(messages.KindAuthorizeDecision, "redact", agent, uuid.NewString()),
		ntEvent(messages.KindReplayAttempt, "deny", agent, uuid.NewString()),
		ntEvent(messages.KindMCPManifestDrift, "deny", messages.UnknownAgent, uuid.NewString()),
		ntEvent(messages.KindAgentQuarantined, "quarantine", agent, uuid.NewString()),
		ntEvent(messages.KindExternalCodehost, "allow", messages.UnknownAgent, uuid.NewString()),
	}
	for _, ev := range ignored {
		sys.Root.Send(pid, ev)
	}
	marker := uuid.NewString()
	sys.Root.Send(pid, ntEvent(messages.KindAuthorizeDecision, "deny", agent, marker))

	testkit.Eventually(t, 3*time.Second, "first request", func() bool { return chat.count() >= 1 })
	if !bytes.Contains(chat.delivery(t, 0).body, []byte(marker)) {
		t.Fatalf("first request is not the deny marker: %s", chat.delivery(t, 0).body)
	}
	if n := stats.Dropped.Load(); n != 0 {
		t.Fatalf("dropped = %d: an ignored event took the delivery slot", n)
	}
	chat.release()
	testkit.Eventually(t, 3*time.Second, "marker delivered", func() bool { return stats.Sent.Load() == 1 })
	if got := chat.count(); got != 1 {
		t.Fatalf("sink saw %d requests, want only the marker", got)
	}
}

// ---- 2. the redaction invariant ----

func TestNotifierBodyCarriesNoSecrets(t *testing.T) {
	chat := newNtChat(t)
	stats := &actors.NotifierStats{}
	sys, pid := startNtNotifier(t, actors.NotifierOptions{Post: ntPoster(chat.srv.URL), Secret: "body-secret-value"}, stats)

	agent, did := uuid.NewString(), uuid.NewString()
	approvalID := uuid.NewString()
	receiptID, traceID, runID := uuid.NewString(), "trace-"+uuid.NewString(), "run-"+uuid.NewString()
	resource := "approvals/" + approvalID + "/payroll.csv?token=xoxb-1111-2222-planted"
	ev := ntEvent(messages.KindAuthorizeDecision, "deny", agent, did)
	ev.Resource = &resource
	ev.RunID, ev.TraceID = &runID, &traceID
	ev.Evidence.ReceiptID = &receiptID
	ev.RedactedFields = []string{"parameters.api_key", "parameters.password"}
	ev.PromptInjection = json.RawMessage(`{"sample":"sk-live-4eC39HqLyjWDarjtT1zdp7dc","score":80}`)
	ev.RagPoisoning = json.RawMessage(`{"doc":"Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.planted.sig","param":"hunter2-password-value"}`)

	sys.Root.Send(pid, ev)
	testkit.Eventually(t, 3*time.Second, "delivery", func() bool { return stats.Sent.Load() == 1 })
	body := string(chat.delivery(t, 0).body)

	forbidden := []string{
		approvalID, resource, "payroll.csv", "xoxb-", "sk-live-", "4eC39HqLyjWDarjtT1zdp7dc", "Bearer", "eyJhbGciOiJIUzI1NiJ9",
		"hunter2-password-value", "api_key", "password", "parameters", "body-secret-value", receiptID, traceID, runID,
	}
	for _, s := range forbidden {
		if strings.Contains(body, s) {
			t.Errorf("body contains forbidden %q: %s", s, body)
		}
	}
	// What is there is ids, hashes' owners and short labels only.
	for _, s := range []string{did, agent, ntTenant, "github.create_issue", "pol-no-prod", "pol-review", "policy_matched", "risk 70"} {
		if !strings.Contains(body, s) {
			t.Errorf("body lacks %q: %s", s, body)
		}
	}
}

// ---- 3. the circuit breaker ----

func TestNotifierCircuitBreaker(t *testing.T) {
	chat := newNtChat(t)
	chat.setStatus(http.StatusInternalServerError)
	clock := &ntClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	stats := &actors.NotifierStats{}
	const cooldown = 30 * time.Second
	sys, pid := startNtNotifier(t, actors.NotifierOptions{Post: ntPoster(chat.srv.URL), FailureThreshold: 3, Cooldown: cooldown,
		Timeout: 2 * time.Second, Now: clock.Now}, stats)
	agent := uuid.NewString()
	send := func(n int) {
		for i := 0; i < n; i++ {
			sys.Root.Send(pid, ntEvent(messages.KindAuthorizeDecision, "deny", agent, uuid.NewString()))
		}
	}

	// Closed: failures below the threshold keep it closed.
	send(2)
	testkit.Eventually(t, 3*time.Second, "two failures", func() bool { return stats.Failed.Load() == 2 })
	if st := stats.State(); st != "closed" {
		t.Fatalf("state after 2 of 3 failures = %s, want closed", st)
	}
	// The third consecutive failure opens it.
	send(1)
	testkit.Eventually(t, 3*time.Second, "breaker open", func() bool { return stats.State() == "open" })
	if got, f := chat.count(), stats.Failed.Load(); got != 3 || f != 3 {
		t.Fatalf("sink requests = %d, failed = %d, want 3 and 3", got, f)
	}

	// Open: nothing reaches the sink, everything is Rejected.
	send(5)
	testkit.Eventually(t, 3*time.Second, "rejections", func() bool { return stats.Rejected.Load() == 5 })
	if got := chat.count(); got != 3 {
		t.Fatalf("open breaker let requests through: sink saw %d, want 3", got)
	}
	// Still open just before the cooldown ends.
	clock.Advance(cooldown - time.Second)
	send(1)
	testkit.Eventually(t, 3*time.Second, "rejection before cooldown", func() bool { return stats.Rejected.Load() == 6 })
	if got := chat.count(); got != 3 {
		t.Fatalf("breaker probed before the cooldown: sink saw %d", got)
	}

	// Cooldown over: exactly one probe even when several arrive; the
	// sink holds it so that the others meet a half-open breaker.
	chat.hold()
	clock.Advance(2 * time.Second)
	send(5)
	testkit.Eventually(t, 3*time.Second, "one probe and four rejections", func() bool {
		return chat.count() == 4 && stats.Rejected.Load() == 10
	})
	if st := stats.State(); st != "half_open" {
		t.Fatalf("state with the probe in flight = %s, want half_open", st)
	}
	// The probe fails: open again for another cooldown.
	chat.release()
	testkit.Eventually(t, 3*time.Second, "probe failure reopens", func() bool {
		return stats.Failed.Load() == 4 && stats.State() == "open"
	})
	chat.setStatus(http.StatusOK)
	send(3)
	testkit.Eventually(t, 3*time.Second, "rejections after reopening", func() bool { return stats.Rejected.Load() == 13 })
	if got := chat.count(); got != 4 {
		t.Fatalf("reopened breaker let requests through: sink saw %d, want 4", got)
	}

	// Next cooldown: the probe succeeds and closes the breaker.
	clock.Advance(cooldown)
	send(1)
	testkit.Eventually(t, 3*time.Second, "probe success closes", func() bool {
		return stats.Sent.Load() == 1 && stats.State() == "closed"
	})
	if got := chat.count(); got != 5 {
		t.Fatalf("sink saw %d requests, want 5", got)
	}
	// The failure count was reset by the probe: two new failures do not
	// reopen it.
	chat.setStatus(http.StatusBadGateway)
	send(2)
	testkit.Eventually(t, 3*time.Second, "two new failures", func() bool { return stats.Failed.Load() == 6 })
	if st := stats.State(); st != "closed" {
		t.Fatalf("state = %s after 2 failures following a successful probe, want closed", st)
	}
	// Closed: notifications flow.
	chat.setStatus(http.StatusOK)
	send(4)
	testkit.Eventually(t, 3*time.Second, "flow after close", func() bool { return stats.Sent.Load() == 5 })
	if got, r := chat.count(), stats.Rejected.Load(); got != 11 || r != 13 {
		t.Fatalf("sink requests = %d, rejected = %d, want 11 and 13", got, r)
	}
}

// ---- 4. a hanging sink ----

func TestNotifierHangingSinkNeverBlocks(t *testing.T) {
	chat := newNtChat(t)
	chat.hold() // hang until the client gives up
	stats := &actors.NotifierStats{}
	const maxInFlight, burst = 4, 1000
	sys, pid := startNtNotifier(t, actors.NotifierOptions{Post: ntPoster(chat.srv.URL), Timeout: 200 * time.Millisecond,
		MaxInFlight: maxInFlight, FailureThreshold: 10 * burst}, stats)

	agent := uuid.NewString()
	evs := make([]*messages.AseEvent, burst)
	for i := range evs {
		evs[i] = ntEvent(messages.KindAuthorizeDecision, "deny", agent, uuid.NewString())
	}
	start := time.Now()
	for _, ev := range evs {
		sys.Root.Send(pid, ev)
	}
	if el := time.Since(start); el > time.Second {
		t.Fatalf("%d sends took %s: Send blocked on delivery", burst, el)
	}

	// Every notification is either dropped (no slot) or sent and then
	// timed out; none succeeds. With the default 5s timeout this would not
	// settle within the deadline.
	testkit.Eventually(t, 3*time.Second, "all notifications accounted", func() bool {
		return stats.Dropped.Load()+stats.Failed.Load() == burst
	})
	if s := stats.Sent.Load(); s != 0 {
		t.Fatalf("sent = %d against a hanging sink", s)
	}
	if f, got := stats.Failed.Load(), chat.count(); f < maxInFlight || got != int64(f) { //nolint:gosec // test counts, far below 2^63
		t.Fatalf("failed = %d, sink requests = %d, want at least %d and equal", f, got, maxInFlight)
	}
	// The actor started MaxInFlight deliveries at once and never more.
	if m := chat.maxActive.Load(); m != maxInFlight {
		t.Fatalf("sink saw at most %d concurrent requests, want exactly %d", m, maxInFlight)
	}
	if st := stats.State(); st != "closed" {
		t.Fatalf("state = %s, want closed (threshold not reached)", st)
	}

	// The slots come back: once the sink answers, a notification goes out.
	chat.release()
	sys.Root.Send(pid, ntEvent(messages.KindAuthorizeDecision, "deny", agent, uuid.NewString()))
	testkit.Eventually(t, 3*time.Second, "delivery after timeouts", func() bool { return stats.Sent.Load() == 1 })
}

// ---- 5. no URL: a null sink ----

func TestNotifierDisabledWithoutURL(t *testing.T) {
	stats := &actors.NotifierStats{}
	sys, pid := startNtNotifier(t, actors.NotifierOptions{}, stats)

	agent := uuid.NewString()
	sys.Root.Send(pid, ntEvent(messages.KindAuthorizeDecision, "deny", agent, uuid.NewString()))
	sys.Root.Send(pid, ntEvent(messages.KindAuthorizeDecision, "allow", agent, uuid.NewString()))
	sys.Root.Send(pid, ntEvent(messages.KindAuthorizeDecision, "require_approval", agent, uuid.NewString()))
	sys.Root.Send(pid, &messages.Notification{Kind: "deny_storm", Severity: "high", TenantID: ntTenant, AgentID: agent,
		At: ntOccurred, Summary: "incident", Detail: "detail"})

	testkit.Eventually(t, 3*time.Second, "disabled count", func() bool { return stats.Disabled.Load() == 3 })
	if s, f, r, d := stats.Sent.Load(), stats.Failed.Load(), stats.Rejected.Load(), stats.Dropped.Load(); s+f+r+d != 0 {
		t.Fatalf("sent %d failed %d rejected %d dropped %d, want all 0", s, f, r, d)
	}
	if st := stats.State(); st != "closed" {
		t.Fatalf("state = %s", st)
	}
}

// ntPoster is a plain POST transport for the tests (cmd/svc wires
// outbound.Poster, tested in outbound/).
func ntPoster(target string) actors.Post {
	return func(ctx context.Context, body []byte, header map[string]string) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}
}
