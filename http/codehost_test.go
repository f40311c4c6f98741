package httpapi

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"

	"svc/control"
)

const testCodehostSecret = "codehost-unit-secret"

// codehostServer is a server with the installation's code-host secret and
// one tenant, and a function that posts a delivery to it.
func codehostServer(t *testing.T) (s *Server, tenantID, admin string, post func(body string, h ...string) (int, map[string]any)) {
	t.Helper()
	s = newTestServer(t)
	s.cfg.CodehostWebhookSecret = testCodehostSecret
	tn, tok, err := control.NewTenant(context.Background(), fullStore(s), "acme", "test")
	if err != nil {
		t.Fatal(err)
	}
	// post sends body signed with the installation secret, as JSON, with a
	// fresh delivery id, into the tenant; h overrides or adds headers (an
	// empty value removes one).
	post = func(body string, h ...string) (int, map[string]any) {
		req := httptest.NewRequest("POST", "/v2/webhooks/codehost", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(CodehostEventHeader, "pull_request")
		req.Header.Set(CodehostSignatureHeader, CodehostSignature(testCodehostSecret, []byte(body)))
		req.Header.Set(CodehostDeliveryHeader, uuid.NewString())
		req.Header.Set(TenantHeader, tn.ID)
		for i := 0; i+1 < len(h); i += 2 {
			if h[i+1] == "" {
				req.Header.Del(h[i])
			} else {
				req.Header.Set(h[i], h[i+1])
			}
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		var m map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &m)
		return rec.Code, m
	}
	return s, tn.ID, tok, post
}

func detailOf(m map[string]any, key string) any {
	d, _ := m["details"].(map[string]any)
	return d[key]
}

// The receiver decodes its body with the strict decoder of every other
// body (issue 35): a duplicate key, invalid UTF-8, U+0000 and a lone
// surrogate are refused, and so is a body that is not declared JSON. Each
// body is signed, so only its content decides.
func TestCodehostWebhookDecodesStrictly(t *testing.T) {
	_, _, _, post := codehostServer(t)
	pr := `"pull_request":{"number":1,"merged":false},"repository":{"full_name":"acme/widgets"}`
	tests := []struct {
		name, body  string
		status      int
		code, extra string // details.error, and details.reason or field
		headers     []string
	}{
		{name: "action twice, opened then closed", body: `{"action":"opened","action":"closed",` + pr + `}`,
			status: 400, code: "invalid_json", extra: "duplicate_key"},
		{name: "merged twice, false then true", body: `{"action":"closed","pull_request":{"number":1,"merged":false,"merged":true},"repository":{"full_name":"acme/widgets"}}`,
			status: 400, code: "invalid_json", extra: "duplicate_key"},
		{name: "invalid UTF-8", body: "{\"action\":\"opened\",\"title\":\"\xff\xfe\"," + pr + "}", status: 400, code: "invalid_json"},
		{name: "U+0000", body: `{"action":"opened","title":"a\u0000b",` + pr + `}`, status: 400, code: "nul_character", extra: "title"},
		{name: "lone high surrogate", body: `{"action":"opened","title":"\ud800",` + pr + `}`, status: 400, code: "invalid_json"},
		{name: "lone low surrogate", body: `{"action":"opened","title":"x\udc00y",` + pr + `}`, status: 400, code: "invalid_json"},
		{name: "not JSON", body: `{"action":`, status: 400, code: "invalid_json"},
		{name: "not an object", body: `[1,2]`, status: 400, code: "invalid_json"},
		{name: "null", body: `null`, status: 400, code: "invalid_json"},
		{name: "text/plain", body: `{"action":"opened",` + pr + `}`, status: 415, code: "unsupported_media_type",
			headers: []string{"Content-Type", "text/plain"}},
		{name: "form encoded", body: `{"action":"opened",` + pr + `}`, status: 415, code: "unsupported_media_type",
			headers: []string{"Content-Type", "application/x-www-form-urlencoded"}},
		{name: "no content type", body: `{"action":"opened",` + pr + `}`, status: 415, code: "unsupported_media_type",
			headers: []string{"Content-Type", ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, m := post(tc.body, tc.headers...)
			if code != tc.status || detailOf(m, "error") != tc.code {
				t.Fatalf("%d %v, want %d %s", code, m, tc.status, tc.code)
			}
			if tc.extra != "" && detailOf(m, "reason") != tc.extra && detailOf(m, "field") != tc.extra {
				t.Fatalf("details %v, want %s", m["details"], tc.extra)
			}
		})
	}
	// The well-formed body, declared as JSON with a charset or as a +json
	// type, is accepted (each under its own signature and id, so neither
	// is a replay of the other).
	for i, ct := range []string{"application/json; charset=utf-8", "application/vnd.codehost+json"} {
		body := `{"action":"opened","n":` + string(rune('0'+i)) + `,` + pr + `}`
		if code, m := post(body, "Content-Type", ct); code != 202 || m["status"] != "accepted" || m["event"] != "pull_request.opened" {
			t.Fatalf("%s: %d %v", ct, code, m)
		}
	}
}

// X-Codehost-Delivery is required: one value of 1 to 100 printable ASCII
// characters without spaces.
func TestCodehostWebhookRequiresDeliveryID(t *testing.T) {
	_, _, _, post := codehostServer(t)
	body := `{"action":"opened","pull_request":{"number":1},"repository":{"full_name":"acme/widgets"}}`
	for _, tc := range []struct {
		name, id, code string
	}{
		{"missing", "", "delivery_id_required"},
		{"101 characters", strings.Repeat("a", 101), "invalid_delivery_id"},
		{"a space", "a b", "invalid_delivery_id"},
		{"a control character", "a\tb", "invalid_delivery_id"},
		{"not ASCII", "dé", "invalid_delivery_id"},
	} {
		if code, m := post(body, CodehostDeliveryHeader, tc.id); code != 400 || detailOf(m, "error") != tc.code {
			t.Errorf("%s: %d %v, want 400 %s", tc.name, code, m, tc.code)
		}
	}
	if code, m := post(body, CodehostDeliveryHeader, strings.Repeat("a", 100)); code != 202 || m["delivery_id"] != strings.Repeat("a", 100) {
		t.Fatalf("100 characters: %d %v", code, m)
	}
}

// Two X-Codehost-Delivery headers are ambiguous: refused.
func TestCodehostWebhookRefusesTwoDeliveryIDs(t *testing.T) {
	s, tenantID, _, _ := codehostServer(t)
	body := `{"action":"opened","pull_request":{"number":1},"repository":{"full_name":"acme/widgets"}}`
	req := httptest.NewRequest("POST", "/v2/webhooks/codehost", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(CodehostEventHeader, "pull_request")
	req.Header.Set(CodehostSignatureHeader, CodehostSignature(testCodehostSecret, []byte(body)))
	req.Header.Set(TenantHeader, tenantID)
	req.Header.Add(CodehostDeliveryHeader, "d-1")
	req.Header.Add(CodehostDeliveryHeader, "d-2")
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != 400 || !strings.Contains(rec.Body.String(), `"invalid_delivery_id"`) {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
}

// A signed body is accepted once: the code host's retry (same id, same
// body) answers the first event again; a fresh id, a missing one, an
// over-long one or another tenant with the same signed body is refused,
// and so is a known id with another body.
func TestCodehostWebhookRefusesReplays(t *testing.T) {
	s, _, _, post := codehostServer(t)
	other, _, err := control.NewTenant(context.Background(), fullStore(s), "other", "test")
	if err != nil {
		t.Fatal(err)
	}
	body := `{"action":"opened","pull_request":{"number":7},"repository":{"full_name":"acme/widgets"}}`
	code, first := post(body, CodehostDeliveryHeader, "d-1")
	if code != 202 || first["status"] != "accepted" || first["duplicate"] != nil {
		t.Fatalf("first: %d %v", code, first)
	}
	code, again := post(body, CodehostDeliveryHeader, "d-1")
	if code != 202 || again["duplicate"] != true || again["event_id"] != first["event_id"] || again["event"] != "pull_request.opened" {
		t.Fatalf("the retry: %d %v", code, again)
	}
	for _, tc := range []struct {
		name    string
		headers []string
		status  int
		code    string
	}{
		{"a fresh id", []string{CodehostDeliveryHeader, "d-2"}, 409, "delivery_replayed"},
		{"no id", []string{CodehostDeliveryHeader, ""}, 400, "delivery_id_required"},
		{"an over-long id", []string{CodehostDeliveryHeader, strings.Repeat("d", 129)}, 400, "invalid_delivery_id"},
		{"another tenant", []string{CodehostDeliveryHeader, "d-1", TenantHeader, other.ID}, 409, "delivery_replayed"},
		{"another tenant, a fresh id", []string{CodehostDeliveryHeader, "d-3", TenantHeader, other.ID}, 409, "delivery_replayed"},
		// The event header is not signed: the same body as an issues
		// event is the same delivery.
		{"another event header", []string{CodehostDeliveryHeader, "d-4", CodehostEventHeader, "issues"}, 409, "delivery_replayed"},
		{"an event that is ignored", []string{CodehostDeliveryHeader, "d-5", CodehostEventHeader, "push"}, 202, ""},
	} {
		code, m := post(body, tc.headers...)
		if tc.status == 202 {
			// Nothing happens, so nothing is remembered or refused.
			if code != 202 || m["status"] != "ignored" {
				t.Errorf("%s: %d %v", tc.name, code, m)
			}
			continue
		}
		if code != tc.status || detailOf(m, "error") != tc.code {
			t.Errorf("%s: %d %v, want %d %s", tc.name, code, m, tc.status, tc.code)
		}
	}
	changed := strings.Replace(body, `"number":7`, `"number":8`, 1)
	if code, m := post(changed, CodehostDeliveryHeader, "d-1"); code != 409 || detailOf(m, "error") != "delivery_id_reused" {
		t.Errorf("a known id with another body: %d %v", code, m)
	}
	// The other tenant's own deliveries are unaffected, under any id.
	if code, m := post(changed, CodehostDeliveryHeader, "d-1", TenantHeader, other.ID); code != 202 || m["status"] != "accepted" {
		t.Errorf("another body into the other tenant: %d %v", code, m)
	}
}

// A tenant's own webhook secret (PATCH /tenants/settings) is, once set,
// the only one its deliveries are verified with; other tenants keep the
// installation's; removing it brings the installation's back.
func TestCodehostWebhookTenantSecret(t *testing.T) {
	s, _, admin, post := codehostServer(t)
	patch := func(body string) (int, map[string]any) {
		req := httptest.NewRequest("PATCH", "/v2/tenants/settings", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+admin)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		var m map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &m)
		return rec.Code, m
	}
	for _, tc := range []struct{ name, body string }{
		{"empty", `{}`},
		{"too short", `{"codehost_webhook_secret":"short"}`},
		{"a space", `{"codehost_webhook_secret":"` + strings.Repeat("s", 20) + " " + strings.Repeat("s", 20) + `"}`},
		{"too long", `{"codehost_webhook_secret":"` + strings.Repeat("s", 257) + `"}`},
		{"null auto rotate", `{"auto_rotate_token_on_leak_enabled":null}`},
	} {
		if code, m := patch(tc.body); code != 400 || detailOf(m, "error") != "invalid_field" {
			t.Errorf("%s: %d %v", tc.name, code, m)
		}
	}
	code, m := patch(`{"codehost_webhook_secret":"generate"}`)
	own, _ := m["codehost_webhook_secret"].(string)
	if code != 200 || m["codehost_webhook_secret_set"] != true || !strings.HasPrefix(own, control.CodehostKeyPrefix) ||
		m["auto_rotate_token_on_leak_enabled"] != true {
		t.Fatalf("generate: %d %v", code, m)
	}
	body := `{"action":"opened","pull_request":{"number":9},"repository":{"full_name":"acme/widgets"}}`
	if code, m := post(body); code != 401 || detailOf(m, "error") != "invalid_signature" {
		t.Fatalf("the installation secret for a tenant with its own: %d %v", code, m)
	}
	if code, m := post(body, CodehostSignatureHeader, CodehostSignature(own, []byte(body))); code != 202 || m["status"] != "accepted" {
		t.Fatalf("the tenant's own secret: %d %v", code, m)
	}
	// Shown once: GET says only that it is set.
	req := httptest.NewRequest("GET", "/v2/tenants/settings", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"codehost_webhook_secret_set":true`) || strings.Contains(rec.Body.String(), own) {
		t.Fatalf("GET settings: %d %s", rec.Code, rec.Body)
	}
	// Removed: the installation secret applies again.
	if code, m := patch(`{"codehost_webhook_secret":null,"auto_rotate_token_on_leak_enabled":false}`); code != 200 ||
		m["codehost_webhook_secret_set"] != false || m["auto_rotate_token_on_leak_enabled"] != false || m["codehost_webhook_secret"] != nil {
		t.Fatalf("remove: %d %v", code, m)
	}
	body2 := strings.Replace(body, `"number":9`, `"number":10`, 1)
	if code, m := post(body2); code != 202 || m["status"] != "accepted" {
		t.Fatalf("the installation secret after removal: %d %v", code, m)
	}
	// A secret of the admin's choosing verifies the tenant's deliveries;
	// with the installation secret unset the receiver is off for every
	// request, the tenant's own secret included (SPEC 5.5).
	chosen := strings.Repeat("k", 32)
	if code, m := patch(`{"codehost_webhook_secret":"` + chosen + `"}`); code != 200 || m["codehost_webhook_secret"] != nil {
		t.Fatalf("a chosen secret: %d %v", code, m)
	}
	body3 := strings.Replace(body, `"number":9`, `"number":11`, 1)
	if code, m := post(body3, CodehostSignatureHeader, CodehostSignature(chosen, []byte(body3))); code != 202 {
		t.Fatalf("the tenant's chosen secret: %d %v", code, m)
	}
	s.cfg.CodehostWebhookSecret = ""
	body4 := strings.Replace(body, `"number":9`, `"number":12`, 1)
	if code, m := post(body4, CodehostSignatureHeader, CodehostSignature(chosen, []byte(body4))); code != 401 || detailOf(m, "error") != "webhook_not_configured" {
		t.Fatalf("the tenant's secret without an installation secret: %d %v", code, m)
	}
	if code, m := post(body4, TenantHeader, uuid.NewString()); code != 401 || detailOf(m, "error") != "webhook_not_configured" {
		t.Fatalf("a tenant without its own secret: %d %v", code, m)
	}
}
