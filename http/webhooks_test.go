package httpapi

import (
	"errors"
	"strings"
	"testing"
)

func TestWebhookTargetHost(t *testing.T) {
	tests := []struct {
		name         string
		host         string
		allowPrivate bool
		refused      bool
	}{
		{name: "public address", host: "93.184.216.34"},
		{name: "a name is left to the dial-time check", host: "hooks.example.com"},
		{name: "metadata", host: "169.254.169.254", allowPrivate: true, refused: true},
		{name: "IPv6 link-local", host: "fe80::1", allowPrivate: true, refused: true},
		{name: "unspecified", host: "0.0.0.0", allowPrivate: true, refused: true},
		{name: "multicast", host: "224.0.0.1", allowPrivate: true, refused: true},
		{name: "loopback", host: "127.0.0.1", refused: true},
		{name: "loopback allowed", host: "127.0.0.1", allowPrivate: true},
		{name: "IPv6 loopback", host: "::1", refused: true},
		{name: "IPv4-mapped loopback", host: "::ffff:127.0.0.1", refused: true},
		{name: "private", host: "10.1.2.3", refused: true},
		{name: "shared", host: "100.64.0.1", refused: true},
		{name: "localhost", host: "LocalHost.", refused: true},
		{name: "a .localhost name", host: "api.localhost", refused: true},
		{name: "localhost allowed", host: "localhost", allowPrivate: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := checkTargetHost(tc.host, tc.allowPrivate)
			if (err != nil) != tc.refused {
				t.Fatalf("checkTargetHost(%q, %v) = %v, want refused %v", tc.host, tc.allowPrivate, err, tc.refused)
			}
			if err != nil && !errors.Is(err, ErrForbiddenTarget) {
				t.Fatalf("error %v is not ErrForbiddenTarget", err)
			}
		})
	}
}

func TestWebhookSubscriptionValidation(t *testing.T) {
	s := newTestServer(t) // SVC_ALLOW_PRIVATE_TARGETS unset
	call := tenantCaller(t, s)
	code, created := call("POST", "/v2/webhooks/subscriptions", `{"url":"https://siem.example.com/in"}`)
	secret, _ := created["delivery_secret"].(string)
	id, _ := created["subscription_id"].(string)
	if code != 201 || created["min_severity"] != "info" || created["format"] != "json" || created["enabled"] != true ||
		created["delivery_status"] != "healthy" || !strings.HasPrefix(secret, deliveryKeyPrefix) || id == "" {
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
