package actors_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"svc/actors"
	"svc/messages"
	"svc/persistence"
	"svc/persistence/sqlite"
	"svc/testkit"
	"svc/webhooksign"
)

// ---- test helpers (prefixed ex: the package is shared with other tests) ----

// exCall is one attempt the fake transport received.
type exCall struct {
	url    string
	body   []byte
	header map[string]string
}

// exTransport is a fake actors.ExportPost: it records every attempt and
// answers each URL from a script (a status, or 0 for a transport error),
// repeating the script's last entry; URLs without a script answer 200. It
// can hold every attempt until released.
type exTransport struct {
	mu      sync.Mutex
	calls   []exCall
	scripts map[string][]int
	gate    chan struct{}
}

func newExTransport() *exTransport { return &exTransport{scripts: map[string][]int{}} }

func (f *exTransport) post(ctx context.Context, target string, body []byte, header map[string]string) (int, error) {
	h := make(map[string]string, len(header))
	for k, v := range header {
		h[k] = v
	}
	f.mu.Lock()
	f.calls = append(f.calls, exCall{url: target, body: append([]byte(nil), body...), header: h})
	gate := f.gate
	status := 200
	if script := f.scripts[target]; len(script) > 0 {
		status = script[0]
		if len(script) > 1 {
			f.scripts[target] = script[1:]
		}
	}
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	if status == 0 {
		return 0, errors.New("connection refused")
	}
	return status, nil
}

func (f *exTransport) script(url string, statuses ...int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.scripts[url] = statuses
}

func (f *exTransport) hold() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gate = make(chan struct{})
}

func (f *exTransport) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gate != nil {
		close(f.gate)
		f.gate = nil
	}
}

// to returns the attempts made to url, in order.
func (f *exTransport) to(url string) []exCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []exCall
	for _, c := range f.calls {
		if c.url == url {
			out = append(out, c)
		}
	}
	return out
}

// exSleeps records the backoff waits instead of waiting.
type exSleeps struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (s *exSleeps) sleep(_ context.Context, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waits = append(s.waits, d)
	return nil
}

func (s *exSleeps) take() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.waits
	s.waits = nil
	return out
}

// exFixture is an exporter on a real SQLite store with one tenant.
type exFixture struct {
	t      *testing.T
	store  persistence.Store
	tenant string
	agent  string
	handle *actors.ExporterHandle
	fake   *exTransport
	sleeps *exSleeps
	sys    *actor.ActorSystem
	pid    *actor.PID
}

func newExFixture(t *testing.T, opts actors.ExporterOptions) *exFixture {
	t.Helper()
	return newExFixtureOver(t, opts, nil)
}

// newExFixtureOver is newExFixture with the exporter reading the store
// through wrap (nil: directly).
func newExFixtureOver(t *testing.T, opts actors.ExporterOptions, wrap func(persistence.WebhookStore) persistence.WebhookStore) *exFixture {
	t.Helper()
	store, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(t.TempDir(), "svc.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	f := &exFixture{t: t, store: store, agent: uuid.NewString(), handle: &actors.ExporterHandle{}, fake: newExTransport(), sleeps: &exSleeps{}}
	f.tenant = f.newTenant("acme")
	if opts.Post == nil {
		opts.Post = f.fake.post
	}
	opts.Sleep = f.sleeps.sleep
	if opts.Version == "" {
		opts.Version = "1.2.3"
	}
	f.sys = actors.NewSystem(hclog.NewNullLogger())
	var ws persistence.WebhookStore = store
	if wrap != nil {
		ws = wrap(store)
	}
	f.pid = f.sys.Root.Spawn(actor.PropsFromProducer(actors.NewExporter(ws, f.handle, opts, hclog.NewNullLogger())))
	t.Cleanup(func() {
		f.fake.release()
		_ = f.sys.Root.StopFuture(f.pid).Wait()
		f.sys.Shutdown()
	})
	return f
}

func (f *exFixture) newTenant(name string) string {
	f.t.Helper()
	now := time.Now().UTC()
	tn := persistence.Tenant{ID: uuid.NewString(), Name: name, CreatedAt: now}
	op := persistence.OperatorToken{ID: uuid.NewString(), TenantID: tn.ID, Name: "a", Role: "admin", CreatedAt: now}
	if err := f.store.CreateTenant(context.Background(), tn, op, []byte("h-"+tn.ID)); err != nil {
		f.t.Fatal(err)
	}
	return tn.ID
}

// sub creates a subscription of the fixture's tenant to url.
func (f *exFixture) sub(url, minSeverity, format string, enabled bool) persistence.WebhookSubscription {
	f.t.Helper()
	now := time.Now().UTC()
	w, err := f.store.CreateWebhook(context.Background(), persistence.WebhookSubscription{ID: uuid.NewString(), TenantID: f.tenant,
		URL: url, MinSeverity: minSeverity, Format: format, Enabled: enabled, DeliverySecret: "svc_whsec_" + uuid.NewString(),
		CreatedAt: now, UpdatedAt: now})
	if err != nil {
		f.t.Fatal(err)
	}
	f.handle.Invalidate(f.tenant) // as the API does after every change
	return w
}

func (f *exFixture) get(id string) persistence.WebhookSubscription {
	f.t.Helper()
	w, err := f.store.GetWebhook(context.Background(), f.tenant, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return w
}

var exOccurred = time.Date(2026, 3, 4, 5, 6, 7, 0, time.FixedZone("CET", 3600))

// deny sends a deny decision event and returns its decision id.
func (f *exFixture) decision(decision string) string {
	did := uuid.NewString()
	trust := "untrusted_external"
	hash := strings.Repeat("cd", 32)
	f.sys.Root.Send(f.pid, &messages.AseEvent{EventID: uuid.NewString(), OccurredAt: exOccurred, TenantID: f.tenant,
		Kind: messages.KindAuthorizeDecision, AgentID: f.agent, Decision: decision, Tool: "github", Action: "create_issue",
		RiskScore: 80, Reason: "untrusted_mutation", MatchedPolicies: []string{"untrusted_mutation"},
		Evidence: &messages.Evidence{DecisionID: &did, ActionHash: &hash, SourceTrust: &trust}})
	return did
}

// highAlert sends the SOC pipeline's Notification of a HIGH alert and
// returns the alert id.
func (f *exFixture) highAlert() string {
	aid := uuid.NewString()
	f.sys.Root.Send(f.pid, &messages.Notification{Kind: "confused_deputy_block", Severity: messages.NotifySeverityHigh,
		TenantID: f.tenant, AgentID: f.agent, At: exOccurred,
		Summary:    "confused_deputy_block: deny github.create_issue by agent " + f.agent,
		Detail:     fmt.Sprintf("alert %s; rule confused_deputy_block; event %s", aid, uuid.NewString()),
		RecordType: "alert", RecordID: aid, RuleKey: "confused_deputy_block"})
	return aid
}

// settle waits until every delivery started has finished and been counted.
func (f *exFixture) settle(started uint64) {
	f.t.Helper()
	testkit.Eventually(f.t, 5*time.Second, fmt.Sprintf("%d deliveries to finish", started), func() bool {
		h := f.handle
		return h.Started.Load() == started && h.Sent.Load()+h.Failed.Load() == started
	})
}

func exVerify(t *testing.T, secret string, c exCall) {
	t.Helper()
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(c.body)
	want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	got := c.header[webhooksign.Header]
	if got == "" || !hmac.Equal([]byte(got), []byte(want)) {
		t.Errorf("%s = %q, want %q (HMAC-SHA256 of the body under the delivery secret)", webhooksign.Header, got, want)
	}
}

// ---- pure functions ----

func TestExportMapping(t *testing.T) {
	did := uuid.NewString()
	ev := func(kind, decision string) *messages.AseEvent {
		return &messages.AseEvent{EventID: "ev-1", Kind: kind, Decision: decision, TenantID: "t", AgentID: "a", Tool: "github",
			Action: "create_issue", Reason: "r", RiskScore: 70, OccurredAt: exOccurred, Evidence: &messages.Evidence{DecisionID: &did}}
	}
	tests := []struct {
		name         string
		ev           *messages.AseEvent
		ok           bool
		kind, sev    string
		admittedHigh bool
	}{
		{name: "deny", ev: ev(messages.KindAuthorizeDecision, "deny"), ok: true, kind: "deny", sev: "HIGH", admittedHigh: true},
		{name: "quarantine is a deny", ev: ev(messages.KindAuthorizeDecision, "quarantine"), ok: true, kind: "quarantine", sev: "HIGH", admittedHigh: true},
		{name: "require_approval", ev: ev(messages.KindAuthorizeDecision, "require_approval"), ok: true, kind: "require_approval", sev: "INFO"},
		{name: "allow", ev: ev(messages.KindAuthorizeDecision, "allow")},
		{name: "redact", ev: ev(messages.KindAuthorizeDecision, "redact")},
		{name: "replay_attempt is not a decision event", ev: ev(messages.KindReplayAttempt, "deny")},
		{name: "nil", ev: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, ok := actors.ExportFromEvent(tc.ev)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			if e.ID != did || e.Type != "decision" || e.Kind != tc.kind || e.Severity != tc.sev || e.TenantID != "t" ||
				e.AgentID != "a" || !e.OccurredAt.Equal(exOccurred) || !strings.Contains(e.Summary, "github.create_issue") {
				t.Fatalf("export = %+v", e)
			}
			// CONTRACT §13: a deny counts as high, a require_approval as info.
			if !actors.ExportAdmitted("info", e.Severity) || actors.ExportAdmitted("high", e.Severity) != tc.admittedHigh {
				t.Fatalf("a %s decision: admitted by high = %v, want %v", tc.kind, actors.ExportAdmitted("high", e.Severity), tc.admittedHigh)
			}
		})
	}

	aid, iid := uuid.NewString(), uuid.NewString()
	notes := []struct {
		name, kind             string
		recType, recID, recKey string
		typ, id, ruleKey       string
	}{
		{"alert", "critical_deny", "alert", aid, "critical_deny_policy", "alert", aid, "critical_deny_policy"},
		{"incident", "deny_storm", "incident", iid, "", "incident", iid, ""},
		{"incident kind without a record", "runaway", "", "", "", "incident", "", ""},
		{"anything else", "custom_thing", "", "", "", "alert", "", ""},
		{"a bad record type", "custom_thing", "decision", aid, "", "alert", aid, ""},
	}
	for _, tc := range notes {
		t.Run("notification "+tc.name, func(t *testing.T) {
			e := actors.ExportFromNotification(messages.Notification{Kind: tc.kind, Severity: "high", TenantID: "t", AgentID: "a",
				At: exOccurred, Summary: "s", Detail: "free text", RecordType: tc.recType, RecordID: tc.recID, RuleKey: tc.recKey})
			if e.Type != tc.typ || e.RuleKey != tc.ruleKey || e.Severity != "HIGH" || e.Kind != tc.kind {
				t.Fatalf("export = %+v", e)
			}
			if tc.id != "" && e.ID != tc.id {
				t.Fatalf("id = %s, want %s", e.ID, tc.id)
			}
			if _, err := uuid.Parse(e.ID); err != nil {
				t.Fatalf("id %q is not a UUID", e.ID)
			}
			if !actors.ExportAdmitted("high", e.Severity) || !actors.ExportAdmitted("info", e.Severity) {
				t.Fatal("a HIGH export must reach high and info subscriptions")
			}
		})
	}
	for sev, want := range map[string]int{"INFO": 1, "LOW": 3, "MEDIUM": 5, "HIGH": 8, "high": 8, "": 5} {
		if got := actors.CEFSeverity(sev); got != want {
			t.Errorf("CEFSeverity(%q) = %d, want %d", sev, got, want)
		}
	}
	if actors.ExportAdmitted("bogus", "HIGH") {
		t.Error("an unknown min_severity admits nothing")
	}
}

func TestExportCEFEscaping(t *testing.T) {
	at := time.UnixMilli(1767225600123).UTC()
	tests := []struct {
		name string
		e    actors.Export
		want string
	}{
		{name: "plain decision", e: actors.Export{ID: "d-1", Type: "decision", Kind: "deny", Severity: "MEDIUM", TenantID: "t-1",
			AgentID: "a-1", Summary: "deny: github.create_issue by agent a-1"},
			want: "CEF:0|svc|gateway|1.2.3|deny|deny: github.create_issue by agent a-1|5|rt=1767225600123 suser=a-1 cs1Label=tenant cs1=t-1 externalId=d-1 cat=decision"},
		{name: "rule key wins over kind", e: actors.Export{ID: "x", Type: "alert", Kind: "critical_deny", RuleKey: "critical_deny_policy",
			Severity: "HIGH", TenantID: "t", AgentID: "a", Summary: "s"},
			want: "CEF:0|svc|gateway|1.2.3|critical_deny_policy|s|8|rt=1767225600123 suser=a cs1Label=tenant cs1=t externalId=x cat=alert"},
		{name: "header pipes, backslashes and line breaks", e: actors.Export{ID: "x", Type: "alert", Kind: `a|b\c`, Severity: "LOW",
			TenantID: "t", AgentID: "a", Summary: "one|two\\three\r\nfour\nfive"},
			want: `CEF:0|svc|gateway|1.2.3|a\|b\\c|one\|two\\three four five|3|rt=1767225600123 suser=a cs1Label=tenant cs1=t externalId=x cat=alert`},
		{name: "extension equals, backslashes and line breaks; pipes stay", e: actors.Export{ID: "i=d", Type: "incident", Kind: "k",
			Severity: "INFO", TenantID: "t\\1|x", AgentID: "a=b\nc\rd", Summary: "s"},
			want: `CEF:0|svc|gateway|1.2.3|k|s|1|rt=1767225600123 suser=a\=b\nc\rd cs1Label=tenant cs1=t\\1|x externalId=i\=d cat=incident`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := actors.CEFLine(tc.e, "1.2.3", at)
			if got != tc.want {
				t.Fatalf("CEF line\n got %s\nwant %s", got, tc.want)
			}
			if strings.ContainsAny(got, "\r\n") {
				t.Fatalf("CEF line spans lines: %q", got)
			}
		})
	}
	// The version is a header field too.
	if got := actors.CEFLine(actors.Export{Kind: "k"}, "v|1", at); !strings.HasPrefix(got, `CEF:0|svc|gateway|v\|1|k|`) {
		t.Fatalf("version not escaped: %s", got)
	}
}

func TestExportJSONShape(t *testing.T) {
	e := actors.Export{ID: "d-1", Type: "decision", Kind: "deny", Severity: "MEDIUM", TenantID: "t", AgentID: "a", Summary: "s",
		OccurredAt: exOccurred}
	body, ctype, err := actors.RenderExport(e, "json", "v", time.Now())
	if err != nil || ctype != "application/json" {
		t.Fatalf("RenderExport = %q, %v", ctype, err)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"id": "d-1", "type": "decision", "kind": "deny", "severity": "MEDIUM", "tenant_id": "t", "agent_id": "a",
		"summary": "s", "occurred_at": "2026-03-04T04:06:07Z", "schema_version": float64(1)}
	if len(m) != len(want) {
		t.Errorf("keys = %v, want exactly %v", m, want)
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
	if _, _, err := actors.RenderExport(e, "xml", "v", time.Now()); err == nil {
		t.Error("an unknown format must fail")
	}
	if _, ctype, _ := actors.RenderExport(e, "cef", "v", time.Now()); !strings.HasPrefix(ctype, "text/plain") {
		t.Errorf("cef content type = %q", ctype)
	}
}

// ---- the actor ----

func TestExporterDeliversSignedPerSubscription(t *testing.T) {
	f := newExFixture(t, actors.ExporterOptions{})
	jsonSub := f.sub("https://json.example/hook", "info", "json", true)
	cefSub := f.sub("https://cef.example/hook", "info", "cef", true)
	highSub := f.sub("https://high.example/hook", "high", "json", true)
	off := f.sub("https://off.example/hook", "info", "json", false)
	other := f.newTenant("other")
	if _, err := f.store.CreateWebhook(context.Background(), persistence.WebhookSubscription{ID: uuid.NewString(), TenantID: other,
		URL: "https://other.example/hook", MinSeverity: "info", Format: "json", Enabled: true, DeliverySecret: "s",
		CreatedAt: time.Now(), UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}

	// An allow and a redact are not exported.
	f.decision("allow")
	f.decision("redact")
	did := f.decision("deny")
	f.settle(3) // json, cef and high (a deny counts as high); not the disabled one, not the other tenant's
	js, cef := f.fake.to(jsonSub.URL), f.fake.to(cefSub.URL)
	if len(js) != 1 || len(cef) != 1 || len(f.fake.to(highSub.URL)) != 1 || len(f.fake.to(off.URL)) != 0 ||
		len(f.fake.to("https://other.example/hook")) != 0 {
		t.Fatalf("attempts: json %d cef %d high %d off %d other %d; want 1 1 1 0 0", len(js), len(cef),
			len(f.fake.to(highSub.URL)), len(f.fake.to(off.URL)), len(f.fake.to("https://other.example/hook")))
	}
	exVerify(t, jsonSub.DeliverySecret, js[0])
	exVerify(t, cefSub.DeliverySecret, cef[0])
	if js[0].header[webhooksign.Header] == webhooksign.Sign(cefSub.DeliverySecret, js[0].body) {
		t.Error("the json delivery verifies under another subscription's secret")
	}
	if js[0].header["Content-Type"] != "application/json" || !strings.HasPrefix(cef[0].header["Content-Type"], "text/plain") {
		t.Errorf("content types %q and %q", js[0].header["Content-Type"], cef[0].header["Content-Type"])
	}
	if js[0].header[actors.ExportSubscriptionHeader] != jsonSub.ID || uuid.Validate(js[0].header[actors.ExportDeliveryHeader]) != nil {
		t.Errorf("headers = %v", js[0].header)
	}
	var m map[string]any
	if err := json.Unmarshal(js[0].body, &m); err != nil {
		t.Fatal(err)
	}
	if m["id"] != did || m["type"] != "decision" || m["kind"] != "deny" || m["severity"] != "HIGH" || m["tenant_id"] != f.tenant ||
		m["agent_id"] != f.agent || m["occurred_at"] != "2026-03-04T04:06:07Z" || m["schema_version"] != float64(1) {
		t.Errorf("json body = %s", js[0].body)
	}
	wantCEF := fmt.Sprintf("CEF:0|svc|gateway|1.2.3|deny|deny: github.create_issue by agent %s (reason untrusted_mutation, risk 80)|8|"+
		"rt=%d suser=%s cs1Label=tenant cs1=%s externalId=%s cat=decision", f.agent, exOccurred.UnixMilli(), f.agent, f.tenant, did)
	if string(cef[0].body) != wantCEF {
		t.Errorf("cef body\n got %s\nwant %s", cef[0].body, wantCEF)
	}

	// A HIGH alert reaches every enabled subscription, the high one too.
	aid := f.highAlert()
	f.settle(6)
	hs := f.fake.to(highSub.URL)
	if len(hs) != 2 || len(f.fake.to(jsonSub.URL)) != 2 || len(f.fake.to(cefSub.URL)) != 2 {
		t.Fatalf("after the HIGH alert: high %d json %d cef %d", len(hs), len(f.fake.to(jsonSub.URL)), len(f.fake.to(cefSub.URL)))
	}
	exVerify(t, highSub.DeliverySecret, hs[1])
	if err := json.Unmarshal(hs[1].body, &m); err != nil || m["id"] != aid || m["type"] != "alert" || m["severity"] != "HIGH" ||
		m["kind"] != "confused_deputy_block" {
		t.Errorf("alert body = %s (%v)", hs[0].body, err)
	}
	if c := f.fake.to(cefSub.URL)[1]; !strings.Contains(string(c.body), "|confused_deputy_block|") || !strings.Contains(string(c.body), "|8|") {
		t.Errorf("alert cef = %s", c.body)
	}
	// Each success was recorded.
	for _, s := range []persistence.WebhookSubscription{jsonSub, cefSub, highSub} {
		got := f.get(s.ID)
		if got.ConsecutiveFailures != 0 || got.DeliveryStatus != "healthy" || got.LastDeliveryAt == nil {
			t.Errorf("%s after successes: %d %s %v", s.URL, got.ConsecutiveFailures, got.DeliveryStatus, got.LastDeliveryAt)
		}
	}
	if got := f.get(off.ID); got.LastDeliveryAt != nil {
		t.Error("the disabled subscription has a delivery")
	}
	if f.handle.Failed.Load() != 0 || f.handle.Dropped.Load() != 0 || len(f.sleeps.take()) != 0 {
		t.Errorf("failed %d dropped %d", f.handle.Failed.Load(), f.handle.Dropped.Load())
	}
}

func TestExporterRetriesWithBackoff(t *testing.T) {
	f := newExFixture(t, actors.ExporterOptions{})
	flaky := f.sub("https://flaky.example/hook", "info", "json", true)
	down := f.sub("https://down.example/hook", "info", "json", true)
	f.fake.script(flaky.URL, 503, 0, 200) // a 5xx, a transport error, then success
	f.fake.script(down.URL, 500)

	f.decision("deny")
	f.settle(2)
	fl, dn := f.fake.to(flaky.URL), f.fake.to(down.URL)
	if len(fl) != 3 || len(dn) != 3 {
		t.Fatalf("attempts: flaky %d down %d, want 3 each", len(fl), len(dn))
	}
	for i := 1; i < 3; i++ {
		if string(fl[i].body) != string(fl[0].body) || fl[i].header[actors.ExportDeliveryHeader] != fl[0].header[actors.ExportDeliveryHeader] {
			t.Errorf("attempt %d is not the same delivery: %v", i, fl[i].header)
		}
		exVerify(t, flaky.DeliverySecret, fl[i])
	}
	waits := f.sleeps.take()
	slices.Sort(waits)
	want := []time.Duration{200 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 400 * time.Millisecond}
	if !slices.Equal(waits, want) {
		t.Errorf("backoff waits = %v, want 200ms then 400ms per delivery: %v", waits, want)
	}
	if f.handle.Sent.Load() != 1 || f.handle.Failed.Load() != 1 {
		t.Errorf("sent %d failed %d, want 1 and 1", f.handle.Sent.Load(), f.handle.Failed.Load())
	}
	if got := f.get(flaky.ID); got.ConsecutiveFailures != 0 || got.DeliveryStatus != "healthy" || got.LastDeliveryAt == nil {
		t.Errorf("flaky after a late success: %d %s", got.ConsecutiveFailures, got.DeliveryStatus)
	}
	if got := f.get(down.ID); got.ConsecutiveFailures != 1 || got.DeliveryStatus != "degraded" || got.LastDeliveryAt == nil {
		t.Errorf("down after one failed delivery (3 attempts): %d %s, want 1 degraded", got.ConsecutiveFailures, got.DeliveryStatus)
	}
}

func TestExporterStatusTransitions(t *testing.T) {
	var diedMu sync.Mutex
	var died []string
	diedList := func() []string {
		diedMu.Lock()
		defer diedMu.Unlock()
		return append([]string(nil), died...)
	}
	f := newExFixture(t, actors.ExporterOptions{Attempts: 1, Died: func(tenantID, subID string) {
		diedMu.Lock()
		defer diedMu.Unlock()
		died = append(died, tenantID+" "+subID)
	}})
	bad := f.sub("https://bad.example/hook", "info", "json", true)
	marker := f.sub("https://marker.example/hook", "info", "json", true)
	f.fake.script(bad.URL, 502)

	// A success resets a degraded subscription.
	f.decision("deny")
	f.settle(2)
	if got := f.get(bad.ID); got.ConsecutiveFailures != 1 || got.DeliveryStatus != "degraded" {
		t.Fatalf("after one failure: %d %s", got.ConsecutiveFailures, got.DeliveryStatus)
	}
	f.fake.script(bad.URL, 200)
	f.decision("deny")
	f.settle(4)
	if got := f.get(bad.ID); got.ConsecutiveFailures != 0 || got.DeliveryStatus != "healthy" {
		t.Fatalf("after a success: %d %s, want 0 healthy", got.ConsecutiveFailures, got.DeliveryStatus)
	}

	// healthy → degraded (1..9) → dead (10).
	f.fake.script(bad.URL, 502)
	started := uint64(4)
	for i := 1; i <= persistence.WebhookDeadAfter; i++ {
		f.decision("deny")
		started += 2
		f.settle(started)
		got := f.get(bad.ID)
		want := "degraded"
		if i == persistence.WebhookDeadAfter {
			want = "dead"
		}
		if got.ConsecutiveFailures != i || got.DeliveryStatus != want {
			t.Fatalf("after %d failures: %d %s, want %d %s", i, got.ConsecutiveFailures, got.DeliveryStatus, i, want)
		}
		// Died is reported (for the other nodes' caches) when, and only
		// when, a recorded result leaves the subscription dead.
		if d := diedList(); (i < persistence.WebhookDeadAfter && len(d) != 0) ||
			(i == persistence.WebhookDeadAfter && (len(d) != 1 || d[0] != f.tenant+" "+bad.ID)) {
			t.Fatalf("after %d failures Died was called for %q", i, d)
		}
	}
	before := len(f.fake.to(bad.URL))

	// Dead: no more deliveries, although the trigger still reaches the
	// marker. Two triggers in order: once the second's delivery has started,
	// the first's dispatch is over.
	f.decision("deny")
	f.highAlert()
	started += 2
	f.settle(started)
	if n := len(f.fake.to(bad.URL)); n != before {
		t.Fatalf("a dead subscription got %d more attempts", n-before)
	}
	if n := len(f.fake.to(marker.URL)); n != 1+1+persistence.WebhookDeadAfter+2 {
		t.Fatalf("the marker got %d deliveries", n)
	}

	// An update (the API's PATCH) revives it.
	f.fake.script(bad.URL, 200)
	if _, err := f.store.UpdateWebhook(context.Background(), f.tenant, bad.ID, persistence.WebhookPatch{}, time.Now()); err != nil {
		t.Fatal(err)
	}
	f.handle.Invalidate(f.tenant)
	f.decision("require_approval")
	started += 2
	f.settle(started)
	if n := len(f.fake.to(bad.URL)); n != before+1 {
		t.Fatalf("after the update the subscription got %d attempts, want 1", n-before)
	}
	if got := f.get(bad.ID); got.ConsecutiveFailures != 0 || got.DeliveryStatus != "healthy" {
		t.Fatalf("after the update and a success: %d %s", got.ConsecutiveFailures, got.DeliveryStatus)
	}
}

func TestExporterCacheUntilInvalidated(t *testing.T) {
	f := newExFixture(t, actors.ExporterOptions{CacheTTL: time.Hour})
	a := f.sub("https://a.example/hook", "info", "json", true)
	f.decision("deny")
	f.settle(1)
	// Created behind the exporter's back: the cached list (an hour) holds.
	now := time.Now().UTC()
	b, err := f.store.CreateWebhook(context.Background(), persistence.WebhookSubscription{ID: uuid.NewString(), TenantID: f.tenant,
		URL: "https://b.example/hook", MinSeverity: "info", Format: "json", Enabled: true, DeliverySecret: "s", CreatedAt: now, UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	f.decision("deny")
	f.decision("deny")
	f.settle(3)
	if len(f.fake.to(b.URL)) != 0 || len(f.fake.to(a.URL)) != 3 {
		t.Fatalf("without invalidation: a %d b %d, want 3 0", len(f.fake.to(a.URL)), len(f.fake.to(b.URL)))
	}
	f.handle.Invalidate(f.tenant)
	f.decision("deny")
	f.settle(5)
	if len(f.fake.to(b.URL)) != 1 {
		t.Fatalf("after invalidation b got %d deliveries, want 1", len(f.fake.to(b.URL)))
	}
	f.handle.InvalidateAll()
	if err := f.store.DeleteWebhook(context.Background(), f.tenant, b.ID); err != nil {
		t.Fatal(err)
	}
	f.handle.Invalidate(f.tenant)
	f.decision("deny")
	f.settle(6)
	if len(f.fake.to(b.URL)) != 1 {
		t.Fatal("a deleted subscription got a delivery")
	}
}

func TestExporterBoundedAndNeverBlocks(t *testing.T) {
	f := newExFixture(t, actors.ExporterOptions{MaxInFlight: 2, Attempts: 1})
	a := f.sub("https://a.example/hook", "info", "json", true)
	f.fake.hold()
	for range 5 {
		f.decision("deny")
	}
	// Two deliveries hang in the transport, three are dropped, and the actor
	// goes on: a sixth trigger is processed (and dropped) at once.
	testkit.Eventually(t, 5*time.Second, "2 started and 3 dropped", func() bool {
		return f.handle.Started.Load() == 2 && f.handle.Dropped.Load() == 3
	})
	f.decision("require_approval")
	testkit.Eventually(t, 5*time.Second, "the sixth trigger to be dropped", func() bool { return f.handle.Dropped.Load() == 4 })
	if n := len(f.fake.to(a.URL)); n != 2 {
		t.Fatalf("%d attempts in the transport, want 2", n)
	}
	f.fake.release()
	testkit.Eventually(t, 5*time.Second, "the held deliveries", func() bool { return f.handle.Sent.Load() == 2 })
	// The slots are free again.
	f.decision("deny")
	f.settle(3)
}

// gatedLoads is the real store whose subscription loads read at once and
// then wait for the gate before answering.
type gatedLoads struct {
	persistence.WebhookStore
	read chan struct{}
	mu   sync.Mutex
	gate chan struct{}
}

func (g *gatedLoads) DeliverableWebhooks(ctx context.Context, tenantID string) ([]persistence.WebhookSubscription, error) {
	subs, err := g.WebhookStore.DeliverableWebhooks(ctx, tenantID)
	g.read <- struct{}{}
	g.mu.Lock()
	gate := g.gate
	g.mu.Unlock()
	<-gate
	return subs, err
}

func (g *gatedLoads) shut() chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gate = make(chan struct{})
	return g.gate
}

// A load that read the subscriptions before a delivery recorded one dead,
// and answers after that record, must not revive it: dead is final until
// an update, so nothing more goes to it.
func TestExporterStaleLoadDoesNotReviveADeadSubscription(t *testing.T) {
	g := &gatedLoads{read: make(chan struct{}, 8), gate: make(chan struct{})}
	close(g.gate) // the first load passes
	f := newExFixtureOver(t, actors.ExporterOptions{Attempts: 1}, func(s persistence.WebhookStore) persistence.WebhookStore {
		g.WebhookStore = s
		return g
	})
	bad := f.sub("https://bad.example/hook", "info", "json", true)
	f.fake.script(bad.URL, 502)
	started := uint64(0)
	for i := 1; i < persistence.WebhookDeadAfter; i++ {
		f.decision("deny")
		started++
		f.settle(started)
	}
	<-g.read
	if got := f.get(bad.ID); got.ConsecutiveFailures != persistence.WebhookDeadAfter-1 {
		t.Fatalf("%d failures before the last one, want %d", got.ConsecutiveFailures, persistence.WebhookDeadAfter-1)
	}

	// The last failing delivery is held; a load starts and reads meanwhile.
	f.fake.hold()
	f.decision("deny")
	started++
	testkit.Eventually(t, 5*time.Second, "the last failing delivery to start", func() bool { return f.handle.Started.Load() == started })
	gate := g.shut()
	f.handle.Invalidate(f.tenant)
	f.highAlert() // waits for the load
	<-g.read      // it read the subscription with one failure to go
	f.fake.release()
	f.settle(started) // the delivery failed and recorded it dead
	if got := f.get(bad.ID); got.DeliveryStatus != "dead" {
		t.Fatalf("after the last failure: %d %s, want dead", got.ConsecutiveFailures, got.DeliveryStatus)
	}
	before := len(f.fake.to(bad.URL))
	close(gate) // the stale load answers; the waiting alert is dispatched
	f.decision("deny")
	time.Sleep(300 * time.Millisecond) // what would have started has started
	f.settle(f.handle.Started.Load())
	if n := len(f.fake.to(bad.URL)); n != before {
		t.Fatalf("the dead subscription got %d more attempts after a stale load", n-before)
	}
}
