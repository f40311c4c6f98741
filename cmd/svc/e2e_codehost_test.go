package main

// The code host's webhook receiver end to end (SPEC 4.9, 5.5; issue 27):
// the documented payloads of the five supported pairs and of ignored
// ones, signature, tenant header and body errors, duplicate deliveries
// accepted once, and the normalized events on the live feed and matched
// by a detection rule.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	httpapi "svc/http"
)

const codehostSecret = "codehost-webhook-secret"

// codehostPost posts a webhook delivery signed with secret ("" unsigned)
// and returns the raw answer.
func codehostPost(t testing.TB, s *server, status int, secret, tenantID, event, delivery string, body []byte) []byte {
	t.Helper()
	h := []string{"Content-Type", "application/json", httpapi.CodehostEventHeader, event}
	if secret != "" {
		h = append(h, httpapi.CodehostSignatureHeader, httpapi.CodehostSignature(secret, body))
	}
	if tenantID != "" {
		h = append(h, "X-Svc-Tenant-ID", tenantID)
	}
	if delivery != "" {
		h = append(h, httpapi.CodehostDeliveryHeader, delivery)
	}
	return s.want(t, status, "POST", "/v2/webhooks/codehost", "", string(body), h...)
}

// fixture reads a documented webhook payload from testdata/codehost.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "codehost", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// feedEvents counts the feed's event frames with the event id.
func feedEvents(c *wsCollector, eventID string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, f := range c.frames {
		if d, _ := f["data"].(map[string]any); f["type"] == "event" && d["event_id"] == eventID {
			n++
		}
	}
	return n
}

func TestE2ECodehostWebhook(t *testing.T) {
	t.Parallel()
	forModes(t, func(t *testing.T, backend string) {
		s := startServer(t, backend, map[string]string{"SVC_CODEHOST_WEBHOOK_SECRET": codehostSecret})
		tenantID, admin := s.tenant(t, "codehost-"+uniq())
		// A custom rule on one normalized pair: merged pull requests.
		s.want(t, 200, "POST", "/v2/soc/rules", admin, map[string]any{"rule_key": "pr_merged", "severity": "LOW",
			"condition": map[string]any{"kind": "external_event:codehost_webhook", "action": "pull_request.merged"}})
		feed, _, err := wsDial(t, s, admin, "")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = feed.CloseNow() }()
		frames := collect(feed)

		for _, c := range []struct{ event, fixture, pair, resource string }{
			{"pull_request", "pull_request.opened", "pull_request.opened", "acme/widgets#42"},
			{"pull_request", "pull_request.merged", "pull_request.merged", "acme/widgets#42"},
			{"pull_request", "pull_request.closed", "pull_request.closed", "acme/widgets#43"},
			{"issues", "issues.opened", "issues.opened", "acme/widgets#7"},
			{"issue_comment", "issue_comment.created", "issue_comment.created", "acme/widgets#7"},
		} {
			m := obj(t, codehostPost(t, s, 202, codehostSecret, tenantID, c.event, "", fixture(t, c.fixture)))
			id, _ := m["event_id"].(string)
			if m["status"] != "accepted" || m["event"] != c.pair || id == "" {
				t.Fatalf("%s: %v", c.fixture, m)
			}
			checkFor(t, 15*time.Second, c.pair+" on the live feed", func() bool { return feedEvents(frames, id) == 1 })
			frames.mu.Lock()
			for _, f := range frames.frames {
				if d, _ := f["data"].(map[string]any); d["event_id"] == id && (d["kind"] != "external_event:codehost_webhook" ||
					d["tool"] != "codehost" || d["action"] != c.pair || d["resource"] != c.resource || d["agent_id"] != "unknown") {
					t.Errorf("%s: the event %v", c.fixture, d)
				}
			}
			frames.mu.Unlock()
		}
		for _, c := range []struct{ event, fixture string }{{"pull_request", "pull_request.synchronize"}, {"push", "push"},
			{"issues", "issue_comment.created"}} {
			if m := obj(t, codehostPost(t, s, 202, codehostSecret, tenantID, c.event, "", fixture(t, c.fixture))); m["status"] != "ignored" || m["event_id"] != nil {
				t.Errorf("%s as %s: %v", c.fixture, c.event, m)
			}
		}
		waitAlertRule(t, s, admin, "pr_merged")

		// A delivery retried with its id is accepted once: the retry
		// answers the first event id and adds no event (a later delivery
		// shows the feed has caught up).
		delivery := "d-" + uniq()
		first := obj(t, codehostPost(t, s, 202, codehostSecret, tenantID, "issues", delivery, fixture(t, "issues.opened")))
		again := obj(t, codehostPost(t, s, 202, codehostSecret, tenantID, "issues", delivery, fixture(t, "issues.opened")))
		if again["duplicate"] != true || again["event_id"] != first["event_id"] || first["duplicate"] != nil {
			t.Errorf("a repeated delivery: first %v, again %v", first, again)
		}
		later := obj(t, codehostPost(t, s, 202, codehostSecret, tenantID, "issues", "d-"+uniq(), fixture(t, "issues.opened")))
		checkFor(t, 15*time.Second, "the later delivery on the feed", func() bool { return feedEvents(frames, later["event_id"].(string)) == 1 })
		if n := feedEvents(frames, first["event_id"].(string)); n != 1 {
			t.Errorf("the repeated delivery's event is on the feed %d times", n)
		}
	})
}

// Errors of the receiver, in the documented order.
func TestE2ECodehostWebhookErrors(t *testing.T) {
	t.Parallel()
	body := fixture(t, "pull_request.opened")
	off := startServer(t, "sqlite", nil)
	tenantOff, _ := off.tenant(t, "codehost-off-"+uniq())
	e := envelope(t, codehostPost(t, off, 401, codehostSecret, tenantOff, "pull_request", "", body), 401, "v2", "Unauthorized")
	if detail(e, "error") != "webhook_not_configured" {
		t.Errorf("no secret: %v", e)
	}
	s := startServer(t, "sqlite", map[string]string{"SVC_CODEHOST_WEBHOOK_SECRET": codehostSecret})
	tenantID, _ := s.tenant(t, "codehost-err-"+uniq())
	for _, c := range []struct {
		name, secret, tenant, code, reason string
		body                               []byte
		status                             int
	}{
		{"unsigned", "", tenantID, "invalid_signature", "Unauthorized", body, 401},
		{"wrong secret", "other", tenantID, "invalid_signature", "Unauthorized", body, 401},
		{"no tenant", codehostSecret, "", "tenant_required", "BadRequest", body, 400},
		{"unknown tenant", codehostSecret, randomUUID(), "not_found", "NotFound", body, 404},
		{"not JSON", codehostSecret, tenantID, "invalid_json", "BadRequest", []byte(`{"action":`), 400},
		{"not an object", codehostSecret, tenantID, "invalid_json", "BadRequest", []byte(`[1,2]`), 400},
	} {
		e := envelope(t, codehostPost(t, s, c.status, c.secret, c.tenant, "pull_request", "", c.body), c.status, "v2", c.reason)
		if detail(e, "error") != c.code {
			t.Errorf("%s: %v", c.name, e)
		}
	}
	// A body changed after signing fails the signature.
	h := []string{"Content-Type", "application/json", httpapi.CodehostEventHeader, "pull_request", "X-Svc-Tenant-ID", tenantID,
		httpapi.CodehostSignatureHeader, httpapi.CodehostSignature(codehostSecret, body)}
	tampered := strings.Replace(string(body), "widgets", "gadgets", 1)
	e = envelope(t, s.want(t, 401, "POST", "/v2/webhooks/codehost", "", tampered, h...), 401, "v2", "Unauthorized")
	if detail(e, "error") != "invalid_signature" {
		t.Errorf("tampered: %v", e)
	}
}
