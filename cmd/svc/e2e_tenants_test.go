package main

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

var (
	opTokenRE    = regexp.MustCompile(`^svc_op_[A-Za-z0-9_-]{43}$`)
	agentTokenRE = regexp.MustCompile(`^svc_agent_[A-Za-z0-9_-]{43}$`)
)

// rfc3339UTC asserts a response timestamp is RFC 3339 in UTC.
func rfc3339UTC(t testing.TB, field string, v any) {
	t.Helper()
	s, _ := v.(string)
	ts, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || !strings.HasSuffix(s, "Z") || ts.IsZero() {
		t.Errorf("%s = %v, want an RFC 3339 UTC timestamp", field, v)
	}
}

// TestE2ETenants covers tenants, operator tokens and settings.
func TestE2ETenants(t *testing.T) {
	t.Parallel()
	forModes(t, func(t *testing.T, backend string) {
		s := startServer(t, backend, nil)

		t.Run("tenants", func(t *testing.T) {
			name := "acme-" + uniq()
			m := obj(t, s.want(t, 201, "POST", "/v2/tenants", superToken, map[string]any{"name": name}))
			id := str(t, m, "tenant_id")
			if m["name"] != name {
				t.Errorf("name = %v, want %s", m["name"], name)
			}
			rfc3339UTC(t, "created_at", m["created_at"])
			admin := str(t, m, "operator_token")
			if !opTokenRE.MatchString(admin) {
				t.Errorf("operator_token %q is not svc_op_ + 43 base64url chars", admin)
			}

			_, raw := s.do(t, "POST", "/v2/tenants", superToken, map[string]any{"name": name})
			envelope(t, raw, 409, "v2", "AlreadyExists")

			other, _ := s.tenant(t, "other-"+uniq())
			list := arr(t, s.want(t, 200, "GET", "/v2/tenants", superToken, nil))
			seen := map[string]bool{}
			for _, tn := range list {
				seen[tn["tenant_id"].(string)] = true
				if _, ok := tn["operator_token"]; ok {
					t.Errorf("tenant list exposes operator_token: %v", tn)
				}
			}
			if !seen[id] || !seen[other] {
				t.Errorf("tenant list %v lacks %s or %s", list, id, other)
			}
			if strings.Contains(string(s.want(t, 200, "GET", "/v2/tenants", superToken, nil)), admin) {
				t.Errorf("tenant list contains a token secret")
			}

			_, agentTok := s.agent(t, admin, "doomed", nil)
			s.want(t, 204, "POST", "/v2/agents/heartbeat", agentTok, nil)
			s.want(t, 204, "DELETE", "/v2/tenants/"+id, superToken, nil)
			_, raw = s.do(t, "GET", "/v2/agents", admin, nil)
			envelope(t, raw, 401, "v2", "Unauthorized")
			_, raw = s.do(t, "POST", "/v2/agents/heartbeat", agentTok, nil)
			envelope(t, raw, 401, "v2", "Unauthorized")
			_, raw = s.do(t, "DELETE", "/v2/tenants/"+id, superToken, nil)
			envelope(t, raw, 404, "v2", "NotFound")
			_, raw = s.do(t, "GET", "/v2/agents", superToken, nil, "X-Svc-Tenant-ID", id)
			envelope(t, raw, 404, "v2", "NotFound")
			for _, tn := range arr(t, s.want(t, 200, "GET", "/v2/tenants", superToken, nil)) {
				if tn["tenant_id"] == id {
					t.Errorf("deleted tenant still listed")
				}
			}
			// The name is free again.
			s.tenant(t, name)
			// Deleting an unknown or malformed id: 404.
			s.want(t, 404, "DELETE", "/v2/tenants/"+randomUUID(), superToken, nil)
			s.want(t, 404, "DELETE", "/v2/tenants/not-a-uuid", superToken, nil)
		})

		t.Run("operator tokens", func(t *testing.T) {
			_, admin := s.tenant(t, "ops-"+uniq())
			m := obj(t, s.want(t, 201, "POST", "/v2/operator-tokens", admin, map[string]any{"name": "soc viewer", "role": "viewer"}))
			tokID, viewer := str(t, m, "token_id"), str(t, m, "operator_token")
			if m["role"] != "viewer" || m["name"] != "soc viewer" {
				t.Errorf("created token = %v", m)
			}
			rfc3339UTC(t, "created_at", m["created_at"])
			if !opTokenRE.MatchString(viewer) {
				t.Errorf("operator_token %q has the wrong form", viewer)
			}
			s.want(t, 200, "GET", "/v2/agents", viewer, nil)

			_, raw := s.do(t, "POST", "/v2/operator-tokens", admin, map[string]any{"name": "x", "role": "root"})
			envelope(t, raw, 400, "v2", "BadRequest")

			raw = s.want(t, 200, "GET", "/v2/operator-tokens", admin, nil)
			if strings.Contains(string(raw), viewer) || strings.Contains(string(raw), admin) {
				t.Errorf("token list contains a secret: %s", raw)
			}
			found := false
			for _, ot := range arr(t, raw) {
				if _, ok := ot["operator_token"]; ok {
					t.Errorf("token list item has operator_token: %v", ot)
				}
				if ot["token_id"] == tokID {
					found = true
					if ot["role"] != "viewer" {
						t.Errorf("listed role %v", ot["role"])
					}
				}
			}
			if !found {
				t.Errorf("token %s not listed: %s", tokID, raw)
			}

			s.want(t, 204, "DELETE", "/v2/operator-tokens/"+tokID, admin, nil)
			_, raw = s.do(t, "GET", "/v2/agents", viewer, nil)
			envelope(t, raw, 401, "v2", "Unauthorized")
			_, raw = s.do(t, "DELETE", "/v2/operator-tokens/"+tokID, admin, nil)
			envelope(t, raw, 404, "v2", "NotFound")
			_, raw = s.do(t, "DELETE", "/v2/operator-tokens/"+randomUUID(), admin, nil)
			envelope(t, raw, 404, "v2", "NotFound")
			s.want(t, 404, "DELETE", "/v2/operator-tokens/not-a-uuid", admin, nil)

			// Another tenant's token id is unknown here.
			_, adminB := s.tenant(t, "ops-b-"+uniq())
			idB, tokB := s.opToken(t, adminB, "b", "viewer")
			s.want(t, 404, "DELETE", "/v2/operator-tokens/"+idB, admin, nil)
			s.want(t, 200, "GET", "/v2/agents", tokB, nil)
		})

		t.Run("settings", func(t *testing.T) {
			tenantID, admin := s.tenant(t, "settings-"+uniq())
			_, viewer := s.opToken(t, admin, "v", "viewer")
			m := obj(t, s.want(t, 200, "GET", "/v2/tenants/settings", viewer, nil))
			if m["auto_rotate_token_on_leak_enabled"] != true {
				t.Errorf("default settings = %v, want auto_rotate_token_on_leak_enabled true", m)
			}
			_, raw := s.do(t, "PATCH", "/v2/tenants/settings", viewer, map[string]any{"auto_rotate_token_on_leak_enabled": false})
			envelope(t, raw, 403, "v2", "Forbidden")
			m = obj(t, s.want(t, 200, "PATCH", "/v2/tenants/settings", admin, map[string]any{"auto_rotate_token_on_leak_enabled": false}))
			if m["auto_rotate_token_on_leak_enabled"] != false {
				t.Errorf("patched settings = %v", m)
			}
			m = obj(t, s.want(t, 200, "GET", "/v2/tenants/settings", viewer, nil))
			if m["auto_rotate_token_on_leak_enabled"] != false {
				t.Errorf("settings after PATCH = %v", m)
			}
			_, raw = s.do(t, "PATCH", "/v2/tenants/settings", admin, map[string]any{"auto_rotate_token_on_leak_enabled": "no"})
			if e := envelope(t, raw, 400, "v2", "BadRequest"); detail(e, "field") != "auto_rotate_token_on_leak_enabled" {
				t.Errorf("wrong-type PATCH did not name the field: %s", raw)
			}
			ev := s.waitAudit(t, admin, "event_type=config_change", "config_change audit event", func(e map[string]any) bool { return true })
			if ev["tenant_id"] != tenantID || ev["event_type"] != "config_change" {
				t.Errorf("config_change event = %v", ev)
			}
		})
	})
}
