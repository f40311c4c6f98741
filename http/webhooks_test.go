package httpapi

import (
	"strings"
	"testing"

	"svc/control"
)

func TestWebhookSubscriptionValidation(t *testing.T) {
	s := newTestServer(t) // SVC_ALLOW_PRIVATE_TARGETS unset
	call := tenantCaller(t, s)
	code, created := call("POST", "/v2/webhooks/subscriptions", `{"url":"https://siem.example.com/in"}`)
	secret, _ := created["delivery_secret"].(string)
	id, _ := created["subscription_id"].(string)
	if code != 201 || created["min_severity"] != "info" || created["format"] != "json" || created["enabled"] != true ||
		created["delivery_status"] != "healthy" || !strings.HasPrefix(secret, control.DeliveryKeyPrefix) || id == "" {
		t.Fatalf("create with defaults = %d %v", code, created)
	}
	path := "/v2/webhooks/subscriptions/" + id
	tests := []struct {
		name, method, body string
		field, code        string
	}{
		{name: "no url", method: "POST", body: `{}`, field: "url", code: "invalid_field"},
		{name: "null url", method: "POST", body: `{"url":null}`, field: "url", code: "invalid_field"},
		{name: "url a number", method: "POST", body: `{"url":5}`, field: "url", code: "invalid_type"},
		{name: "relative url", method: "POST", body: `{"url":"/hook"}`, field: "url", code: "invalid_field"},
		{name: "ftp url", method: "POST", body: `{"url":"ftp://example.com/x"}`, field: "url", code: "invalid_field"},
		{name: "no host", method: "POST", body: `{"url":"https:///x"}`, field: "url", code: "invalid_field"},
		{name: "white space", method: "POST", body: `{"url":"https://example.com/a b"}`, field: "url", code: "invalid_field"},
		{name: "metadata address", method: "POST", body: `{"url":"http://169.254.169.254/latest"}`, field: "url", code: "forbidden_target"},
		{name: "loopback without SVC_ALLOW_PRIVATE_TARGETS", method: "POST", body: `{"url":"http://127.0.0.1:9/x"}`, field: "url", code: "forbidden_target"},
		{name: "bad min_severity", method: "POST", body: `{"url":"https://e.com","min_severity":"medium"}`, field: "min_severity", code: "invalid_field"},
		{name: "empty format", method: "POST", body: `{"url":"https://e.com","format":""}`, field: "format", code: "invalid_field"},
		{name: "enabled a string", method: "POST", body: `{"url":"https://e.com","enabled":"yes"}`, field: "enabled", code: "invalid_type"},
		{name: "patch null enabled", method: "PATCH", body: `{"enabled":null}`, field: "enabled", code: "invalid_field"},
		{name: "patch null url", method: "PATCH", body: `{"url":null}`, field: "url", code: "invalid_field"},
		{name: "patch private url", method: "PATCH", body: `{"url":"http://[fd00::1]/"}`, field: "url", code: "forbidden_target"},
		{name: "patch bad format", method: "PATCH", body: `{"format":"xml"}`, field: "format", code: "invalid_field"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := "/v2/webhooks/subscriptions"
			if tc.method == "PATCH" {
				p = path
			}
			code, body := call(tc.method, p, tc.body)
			d, _ := body["details"].(map[string]any)
			if code != 400 || d["field"] != tc.field || d["error"] != tc.code {
				t.Fatalf("%s %s = %d %v, want 400 field %s error %s", tc.method, tc.body, code, body, tc.field, tc.code)
			}
		})
	}
	// Nothing above changed the subscription, and no read shows the secret.
	code, got := call("GET", path, "")
	if code != 200 || got["url"] != "https://siem.example.com/in" || got["format"] != "json" {
		t.Fatalf("GET = %d %v", code, got)
	}
	if _, ok := got["delivery_secret"]; ok {
		t.Fatal("GET shows the delivery secret")
	}
	code, got = call("PATCH", path, `{"min_severity":"HIGH","format":"CEF","enabled":false}`)
	if code != 200 || got["min_severity"] != "high" || got["format"] != "cef" || got["enabled"] != false {
		t.Fatalf("PATCH = %d %v", code, got)
	}
}
