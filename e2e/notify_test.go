package e2e

// Outbound chat notifications end to end (SPEC 6.4, part 3 breaker): a
// loopback fake of the chat platform's incoming webhook that checks what it
// receives, records it, and can fail or hang on demand.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/testkit"
	"svc/testkit/gateway"
)

// fakeChat is the chat platform's incoming webhook.
type fakeChat struct {
	t      testing.TB
	secret string

	mu        sync.Mutex
	bodies    []map[string]any
	raws      []string
	requests  int
	failing   bool
	hang      chan struct{} // non-nil: requests wait for it to close
	shapeErrs []string
}

func newFakeChat(t testing.TB, secret string) (*fakeChat, *httptest.Server) {
	f := &fakeChat{t: t, secret: secret}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(func() {
		f.mu.Lock()
		if f.hang != nil {
			close(f.hang)
			f.hang = nil
		}
		f.mu.Unlock()
		srv.Close()
	})
	return f, srv
}

func (f *fakeChat) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.requests++
	hang, failing := f.hang, f.failing
	f.mu.Unlock()
	if hang != nil {
		select {
		case <-hang:
		case <-r.Context().Done():
			return
		}
	}
	if failing {
		http.Error(w, "chat platform unavailable", http.StatusInternalServerError)
		return
	}
	var problems []string
	mac := hmac.New(sha256.New, []byte(f.secret))
	mac.Write(raw)
	if got := r.Header.Get("X-Svc-Webhook-Signature"); got != "sha256="+hex.EncodeToString(mac.Sum(nil)) {
		problems = append(problems, "bad signature "+got)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		problems = append(problems, "content type "+ct)
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		problems = append(problems, "body is not JSON")
	}
	text, _ := body["text"].(string)
	atts, _ := body["attachments"].([]any)
	if !strings.Contains(text, "\n> ") || len(atts) != 1 {
		problems = append(problems, "text/attachments shape: "+string(raw))
	} else {
		att, _ := atts[0].(map[string]any)
		fields, _ := att["fields"].([]any)
		var titles []string
		for _, fl := range fields {
			m, _ := fl.(map[string]any)
			title, _ := m["title"].(string)
			titles = append(titles, title)
			if _, ok := m["short"].(bool); !ok {
				problems = append(problems, "field without a boolean short")
			}
		}
		if strings.Join(titles, ",") != "Kind,Severity,Tenant,Agent,Timestamp,Summary" {
			problems = append(problems, "field titles "+strings.Join(titles, ","))
		}
		if _, ok := att["color"].(string); !ok {
			problems = append(problems, "no color")
		}
		if _, ok := att["footer"].(string); !ok {
			problems = append(problems, "no footer")
		}
		if _, ok := att["ts"].(float64); !ok {
			problems = append(problems, "no numeric ts")
		}
	}
	f.mu.Lock()
	f.shapeErrs = append(f.shapeErrs, problems...)
	f.bodies = append(f.bodies, body)
	f.raws = append(f.raws, string(raw))
	f.mu.Unlock()
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("ok"))
}

func (f *fakeChat) counts() (requests, delivered int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests, len(f.bodies)
}

func (f *fakeChat) set(failing bool, hang bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failing = failing
	if hang && f.hang == nil {
		f.hang = make(chan struct{})
	}
	if !hang && f.hang != nil {
		close(f.hang)
		f.hang = nil
	}
}

func TestE2EChatNotifications(t *testing.T) {
	t.Parallel()
	const secret = "outbound-webhook-secret"
	chat, sink := newFakeChat(t, secret)
	s := gateway.Start(t, "sqlite", map[string]string{"SVC_RATE_LIMIT_CAPACITY": "100000", "SVC_WEBHOOK_URL": sink.URL + "/hooks/T000",
		"SVC_WEBHOOK_SECRET": secret, "SVC_WEBHOOK_FAILURE_THRESHOLD": "2", "SVC_WEBHOOK_COOLDOWN_SECS": "1",
		"SVC_ALLOW_PRIVATE_TARGETS": "true"})
	_, admin := s.Tenant(t, "notify-"+testkit.Uniq())
	_, tok := s.Agent(t, admin, "notified", nil)

	t.Run("deny, require_approval and HIGH alerts are sent, allow is not", func(t *testing.T) {
		read := gateway.AzDecide(t, s, tok, gateway.AzRead(nil), "allow", "")
		write := gateway.AzDecide(t, s, tok, gateway.AzTrustedWrite(nil), "allow", "")
		deny := gateway.AzDecide(t, s, tok, gateway.AzUntrustedWrite(nil), "deny", "")
		_, highTok := s.Agent(t, admin, "notified-high", map[string]any{"risk_tier": "high"})
		req := gateway.AzDecide(t, s, highTok, gateway.ApCall(map[string]any{"secret_param": "p@ssw0rd-value"}, nil), "require_approval", "")
		// The deny, the confused_deputy_block alert it raises (HIGH), and the
		// require_approval; the INFO alerts (approval_required_surface, new
		// tool) are not sent.
		testkit.Eventually(t, 5*time.Second, "three deliveries", func() bool { _, n := chat.counts(); return n >= 3 })
		time.Sleep(300 * time.Millisecond) // an allow wrongly sent would arrive by now
		chat.mu.Lock()
		defer chat.mu.Unlock()
		if len(chat.shapeErrs) > 0 {
			t.Fatalf("deliveries malformed: %v", chat.shapeErrs)
		}
		if len(chat.bodies) != 3 {
			t.Fatalf("%d deliveries, want exactly 3 (deny, its HIGH alert, require_approval): %v", len(chat.bodies), chat.raws)
		}
		all := strings.Join(chat.raws, "\n")
		if !strings.Contains(all, "confused_deputy_block") || strings.Contains(all, testkit.Str(t, read, "decision_id")) ||
			strings.Contains(all, testkit.Str(t, write, "decision_id")) {
			t.Errorf("want the HIGH alert and no allow among the deliveries: %s", all)
		}
		if !strings.Contains(all, testkit.Str(t, deny, "decision_id")) || !strings.Contains(all, testkit.Str(t, req, "decision_id")) {
			t.Errorf("deliveries do not name the decisions: %s", all)
		}
		for _, secretText := range []string{testkit.Str(t, req, "approval_id"), "p@ssw0rd-value", tok, highTok, secret} {
			if strings.Contains(all, secretText) {
				t.Errorf("a delivery contains %q: %s", secretText, all)
			}
		}
	})

	t.Run("breaker opens, probes once after the cooldown, closes", func(t *testing.T) {
		chat.set(true, false)
		before, _ := chat.counts()
		gateway.AzDecide(t, s, tok, gateway.AzUntrustedWrite(nil), "deny", "")
		gateway.AzDecide(t, s, tok, gateway.AzUntrustedWrite(nil), "deny", "")
		testkit.Eventually(t, 5*time.Second, "two failed deliveries", func() bool { n, _ := chat.counts(); return n >= before+2 })
		testkit.Eventually(t, 5*time.Second, "the breaker to open", func() bool { return gateway.MetricValue(t, s, "svc_notifier_breaker_open") == 1 })
		open, _ := chat.counts()
		for range 5 {
			gateway.AzDecide(t, s, tok, gateway.AzUntrustedWrite(nil), "deny", "")
		}
		if n, _ := chat.counts(); n != open {
			t.Fatalf("the sink got %d requests while the breaker was open", n-open)
		}
		if gateway.MetricValue(t, s, "svc_notifications_rejected_total") < 5 {
			t.Errorf("rejected notifications not counted")
		}
		chat.set(false, false)
		time.Sleep(1100 * time.Millisecond) // the cooldown (1 s) elapses
		_, deliveredBefore := chat.counts()
		gateway.AzDecide(t, s, tok, gateway.AzUntrustedWrite(nil), "deny", "")
		testkit.Eventually(t, 5*time.Second, "the probe", func() bool { _, n := chat.counts(); return n >= deliveredBefore+1 })
		testkit.Eventually(t, 5*time.Second, "the breaker to close", func() bool { return gateway.MetricValue(t, s, "svc_notifier_breaker_open") == 0 })
		gateway.AzDecide(t, s, tok, gateway.AzUntrustedWrite(nil), "deny", "")
		_, afterProbe := chat.counts()
		gateway.AzDecide(t, s, tok, gateway.AzUntrustedWrite(nil), "deny", "")
		testkit.Eventually(t, 5*time.Second, "deliveries after closing", func() bool { _, n := chat.counts(); return n >= afterProbe+2 })
	})

	t.Run("a hanging sink never holds authorize up", func(t *testing.T) {
		start := time.Now()
		for range 30 {
			gateway.AzDecide(t, s, tok, gateway.AzUntrustedWrite(nil), "deny", "")
		}
		t.Logf("30 denies answered in %s with a healthy sink", time.Since(start))
		chat.set(false, true)
		before, _ := chat.counts()
		start = time.Now()
		for range 30 {
			gateway.AzDecide(t, s, tok, gateway.AzUntrustedWrite(nil), "deny", "")
		}
		held, _ := chat.counts()
		if held == before {
			t.Fatal("no delivery reached the hanging sink")
		}
		// Every call above was answered while deliveries hung (each up to
		// its 5 s timeout): authorize does not wait for them.
		t.Logf("30 denies answered in %s with %d deliveries held by the sink", time.Since(start), held-before)
		chat.set(false, false)
	})
}

// TestE2EChatNotificationPrivateTarget: without SVC_ALLOW_PRIVATE_TARGETS a
// loopback webhook is never contacted (CONTRACT §7); the refusal counts as
// a failed delivery.
func TestE2EChatNotificationPrivateTarget(t *testing.T) {
	t.Parallel()
	chat, sink := newFakeChat(t, "s")
	s := gateway.Start(t, "sqlite", map[string]string{"SVC_WEBHOOK_URL": sink.URL + "/hooks/T000"})
	_, admin := s.Tenant(t, "notify-private-"+testkit.Uniq())
	_, tok := s.Agent(t, admin, "notified", nil)
	gateway.AzDecide(t, s, tok, gateway.AzUntrustedWrite(nil), "deny", "")
	testkit.Eventually(t, 5*time.Second, "the refused delivery to be counted", func() bool { return gateway.MetricValue(t, s, "svc_notifications_failed_total") >= 1 })
	if n, _ := chat.counts(); n != 0 {
		t.Fatalf("the loopback sink got %d requests although private targets are not allowed", n)
	}
}
