package e2e

// The code host's webhook receiver end to end (SPEC 4.9, 5.5; issues 27
// and 35): the documented payloads of the five supported pairs and of
// ignored ones, signature, tenant header, delivery id and body errors,
// duplicate deliveries accepted once, replays refused on every node and
// in every tenant, a tenant's own webhook secret, and the normalized
// events on the live feed and matched by a detection rule.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	httpapi "svc/http"
	"svc/testkit"
	"svc/testkit/gateway"
)

const codehostSecret = "codehost-webhook-secret"

// noDelivery, as codehostPost's delivery, sends no X-Codehost-Delivery.
const noDelivery = "-"

// codehostPost posts a webhook delivery signed with secret ("" unsigned)
// and returns the raw answer. delivery is its X-Codehost-Delivery id: ""
// for a fresh one, noDelivery for none.
func codehostPost(t testing.TB, s *gateway.Server, status int, secret, tenantID, event, delivery string, body []byte) []byte {
	t.Helper()
	h := []string{"Content-Type", "application/json", httpapi.CodehostEventHeader, event}
	if secret != "" {
		h = append(h, httpapi.CodehostSignatureHeader, httpapi.CodehostSignature(secret, body))
	}
	if tenantID != "" {
		h = append(h, "X-Svc-Tenant-ID", tenantID)
	}
	switch delivery {
	case "":
		h = append(h, httpapi.CodehostDeliveryHeader, testkit.RandomUUID())
	case noDelivery:
	default:
		h = append(h, httpapi.CodehostDeliveryHeader, delivery)
	}
	return s.Want(t, status, "POST", "/v2/webhooks/codehost", "", string(body), h...)
}

// fresh returns body with a unique member first: another signed body, so
// a delivery of its own rather than a replay of one accepted before.
func fresh(body []byte) []byte {
	return append([]byte(`{"svc_e2e":"`+testkit.Uniq()+`",`), bytes.TrimPrefix(bytes.TrimSpace(body), []byte("{"))...)
}

// wantRefused asserts an envelope of status and reason with details.error
// code.
func wantRefused(t testing.TB, what string, raw []byte, status int, reason, code string) {
	t.Helper()
	if e := gateway.Envelope(t, raw, status, "v2", reason); gateway.Detail(e, "error") != code {
		t.Errorf("%s: %v, want %s", what, e, code)
	}
}

// countAlerts counts the tenant's alerts of one rule.
func countAlerts(t testing.TB, s *gateway.Server, tok, rule string) int {
	t.Helper()
	n := 0
	for _, a := range socAlerts(t, s, tok, "") {
		if a["rule_key"] == rule {
			n++
		}
	}
	return n
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
	gateway.ForModes(t, func(t *testing.T, backend string) {
		s := gateway.Start(t, backend, map[string]string{"SVC_CODEHOST_WEBHOOK_SECRET": codehostSecret})
		tenantID, admin := s.Tenant(t, "codehost-"+testkit.Uniq())
		// Custom rules on normalized pairs: merged pull requests, opened
		// issues.
		s.Want(t, 200, "POST", "/v2/soc/rules", admin, map[string]any{"rule_key": "pr_merged", "severity": "LOW",
			"condition": map[string]any{"kind": "external_event:codehost_webhook", "action": "pull_request.merged"}})
		s.Want(t, 200, "POST", "/v2/soc/rules", admin, map[string]any{"rule_key": "issue_opened", "severity": "LOW",
			"condition": map[string]any{"kind": "external_event:codehost_webhook", "action": "issues.opened"}})
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
			m := testkit.Obj(t, codehostPost(t, s, 202, codehostSecret, tenantID, c.event, "", fixture(t, c.fixture)))
			id, _ := m["event_id"].(string)
			if m["status"] != "accepted" || m["event"] != c.pair || id == "" {
				t.Fatalf("%s: %v", c.fixture, m)
			}
			testkit.Eventually(t, 15*time.Second, c.pair+" on the live feed", func() bool { return feedEvents(frames, id) == 1 })
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
			if m := testkit.Obj(t, codehostPost(t, s, 202, codehostSecret, tenantID, c.event, "", fixture(t, c.fixture))); m["status"] != "ignored" || m["event_id"] != nil {
				t.Errorf("%s as %s: %v", c.fixture, c.event, m)
			}
		}
		waitAlertRule(t, s, admin, "pr_merged")

		// A delivery retried with its id is accepted once: the retry
		// answers the first event id and adds no event (a later delivery
		// shows the feed has caught up). On two nodes the retry and every
		// replay go to the node that did not accept the delivery.
		accepting, other := s, s
		if len(s.Peers) == 2 {
			accepting, other = s.Peers[0], s.Peers[1]
		}
		delivery := "d-" + testkit.Uniq()
		issue := fresh(fixture(t, "issues.opened"))
		first := testkit.Obj(t, codehostPost(t, accepting, 202, codehostSecret, tenantID, "issues", delivery, issue))
		again := testkit.Obj(t, codehostPost(t, other, 202, codehostSecret, tenantID, "issues", delivery, issue))
		if again["duplicate"] != true || again["event_id"] != first["event_id"] || again["event"] != "issues.opened" ||
			first["duplicate"] != nil || first["delivery_id"] != delivery {
			t.Errorf("a repeated delivery: first %v, again %v", first, again)
		}
		// Replays of the signed body (issue 35): under fresh ids (five
		// times), without an id, with an over-long one, into another
		// tenant; and the delivery's id with another body. None raises
		// an event or an alert.
		for i := range 5 {
			wantRefused(t, fmt.Sprintf("replay %d under a fresh id", i), codehostPost(t, other, 409, codehostSecret, tenantID, "issues", "", issue),
				409, "Conflict", "delivery_replayed")
		}
		wantRefused(t, "a replay without an id", codehostPost(t, other, 400, codehostSecret, tenantID, "issues", noDelivery, issue),
			400, "BadRequest", "delivery_id_required")
		wantRefused(t, "a replay with an over-long id", codehostPost(t, other, 400, codehostSecret, tenantID, "issues", strings.Repeat("d", 129), issue),
			400, "BadRequest", "invalid_delivery_id")
		tenantB, adminB := s.Tenant(t, "codehost-b-"+testkit.Uniq())
		for _, id := range []string{delivery, ""} {
			wantRefused(t, "a replay into another tenant", codehostPost(t, other, 409, codehostSecret, tenantB, "issues", id, issue),
				409, "Conflict", "delivery_replayed")
		}
		wantRefused(t, "the id with another body", codehostPost(t, other, 409, codehostSecret, tenantID, "issues", delivery,
			fresh(fixture(t, "issues.opened"))), 409, "Conflict", "delivery_id_reused")
		later := testkit.Obj(t, codehostPost(t, other, 202, codehostSecret, tenantID, "issues", "", fresh(fixture(t, "issues.opened"))))
		testkit.Eventually(t, 15*time.Second, "the later delivery on the feed", func() bool { return feedEvents(frames, later["event_id"].(string)) == 1 })
		if n := feedEvents(frames, first["event_id"].(string)); n != 1 {
			t.Errorf("the repeated delivery's event is on the feed %d times", n)
		}
		// Opened issues: the fixture's, the delivery's and the later one.
		testkit.Eventually(t, 15*time.Second, "three issue_opened alerts", func() bool { return countAlerts(t, s, admin, "issue_opened") >= 3 })
		if n := countAlerts(t, s, admin, "issue_opened"); n != 3 {
			t.Errorf("%d issue_opened alerts, want 3: the replays raised alerts", n)
		}
		if n := len(socAlerts(t, s, adminB, "")); n != 0 {
			t.Errorf("the other tenant has %d alerts", n)
		}

		// A tenant's own webhook secret (PATCH /v2/tenants/settings): from
		// then on the only one its deliveries verify with, on every node;
		// other tenants keep the installation's.
		set := testkit.Obj(t, s.Want(t, 200, "PATCH", "/v2/tenants/settings", adminB, map[string]any{"codehost_webhook_secret": "generate"}))
		own, _ := set["codehost_webhook_secret"].(string)
		if own == "" || set["codehost_webhook_secret_set"] != true {
			t.Fatalf("a generated secret: %v", set)
		}
		if m := testkit.Obj(t, s.Want(t, 200, "GET", "/v2/tenants/settings", adminB, nil)); m["codehost_webhook_secret_set"] != true || m["codehost_webhook_secret"] != nil {
			t.Errorf("the settings after: %v", m)
		}
		mine := fresh(fixture(t, "pull_request.opened"))
		for _, n := range []*gateway.Server{accepting, other} {
			wantRefused(t, "the installation secret for a tenant with its own", codehostPost(t, n, 401, codehostSecret, tenantB, "pull_request", "", mine),
				401, "Unauthorized", "invalid_signature")
		}
		if m := testkit.Obj(t, codehostPost(t, other, 202, own, tenantB, "pull_request", "", mine)); m["status"] != "accepted" {
			t.Errorf("the tenant's own secret: %v", m)
		}
		wantRefused(t, "the tenant's secret for another tenant", codehostPost(t, accepting, 401, own, tenantID, "pull_request", "",
			fresh(fixture(t, "pull_request.opened"))), 401, "Unauthorized", "invalid_signature")
		testkit.Obj(t, codehostPost(t, accepting, 202, codehostSecret, tenantID, "pull_request", "", fresh(fixture(t, "pull_request.opened"))))
		s.Want(t, 200, "PATCH", "/v2/tenants/settings", adminB, map[string]any{"codehost_webhook_secret": nil})
		testkit.Obj(t, codehostPost(t, accepting, 202, codehostSecret, tenantB, "pull_request", "", fresh(fixture(t, "pull_request.opened"))))
	})
}

// Errors of the receiver, in the documented order.
func TestE2ECodehostWebhookErrors(t *testing.T) {
	t.Parallel()
	body := fixture(t, "pull_request.opened")
	off := gateway.Start(t, "sqlite", nil)
	tenantOff, _ := off.Tenant(t, "codehost-off-"+testkit.Uniq())
	e := gateway.Envelope(t, codehostPost(t, off, 401, codehostSecret, tenantOff, "pull_request", "", body), 401, "v2", "Unauthorized")
	if gateway.Detail(e, "error") != "webhook_not_configured" {
		t.Errorf("no secret: %v", e)
	}
	s := gateway.Start(t, "sqlite", map[string]string{"SVC_CODEHOST_WEBHOOK_SECRET": codehostSecret})
	tenantID, _ := s.Tenant(t, "codehost-err-"+testkit.Uniq())
	for _, c := range []struct {
		name, secret, tenant, code, reason string
		body                               []byte
		status                             int
	}{
		{"unsigned", "", tenantID, "invalid_signature", "Unauthorized", body, 401},
		{"wrong secret", "other", tenantID, "invalid_signature", "Unauthorized", body, 401},
		{"no tenant", codehostSecret, "", "tenant_required", "BadRequest", body, 400},
		{"unknown tenant", codehostSecret, testkit.RandomUUID(), "not_found", "NotFound", body, 404},
		{"no delivery id", codehostSecret, tenantID, "delivery_id_required", "BadRequest", body, 400},
		{"a delivery id with a space", codehostSecret, tenantID, "invalid_delivery_id", "BadRequest", body, 400},
		{"not JSON", codehostSecret, tenantID, "invalid_json", "BadRequest", []byte(`{"action":`), 400},
		{"not an object", codehostSecret, tenantID, "invalid_json", "BadRequest", []byte(`[1,2]`), 400},
		{"action twice", codehostSecret, tenantID, "invalid_json", "BadRequest",
			[]byte(`{"action":"opened","action":"closed","pull_request":{"number":1},"repository":{"full_name":"a/b"}}`), 400},
		{"U+0000", codehostSecret, tenantID, "nul_character", "BadRequest", []byte(`{"action":"opened","title":"\u0000"}`), 400},
		{"a lone surrogate", codehostSecret, tenantID, "invalid_json", "BadRequest", []byte(`{"action":"opened","title":"\ud800"}`), 400},
		{"invalid UTF-8", codehostSecret, tenantID, "invalid_json", "BadRequest", []byte("{\"action\":\"opened\",\"title\":\"\xff\"}"), 400},
	} {
		delivery := ""
		switch c.name {
		case "no delivery id":
			delivery = noDelivery
		case "a delivery id with a space":
			delivery = "d 1"
		}
		e := gateway.Envelope(t, codehostPost(t, s, c.status, c.secret, c.tenant, "pull_request", delivery, c.body), c.status, "v2", c.reason)
		if gateway.Detail(e, "error") != c.code {
			t.Errorf("%s: %v", c.name, e)
		}
	}
	// Another content type than JSON.
	h := []string{"Content-Type", "text/plain", httpapi.CodehostEventHeader, "pull_request", "X-Svc-Tenant-ID", tenantID,
		httpapi.CodehostSignatureHeader, httpapi.CodehostSignature(codehostSecret, body), httpapi.CodehostDeliveryHeader, testkit.RandomUUID()}
	wantRefused(t, "text/plain", s.Want(t, 415, "POST", "/v2/webhooks/codehost", "", string(body), h...), 415, "UnsupportedMediaType",
		"unsupported_media_type")
	// A body changed after signing fails the signature.
	h = []string{"Content-Type", "application/json", httpapi.CodehostEventHeader, "pull_request", "X-Svc-Tenant-ID", tenantID,
		httpapi.CodehostSignatureHeader, httpapi.CodehostSignature(codehostSecret, body)}
	tampered := strings.Replace(string(body), "widgets", "gadgets", 1)
	e = gateway.Envelope(t, s.Want(t, 401, "POST", "/v2/webhooks/codehost", "", tampered, h...), 401, "v2", "Unauthorized")
	if gateway.Detail(e, "error") != "invalid_signature" {
		t.Errorf("tampered: %v", e)
	}
}
