package e2e

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"svc/testkit"
	"svc/testkit/gateway"
)

var agentTokenRE = regexp.MustCompile(`^svc_agent_[A-Za-z0-9_-]{43}$`)

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
	gateway.ForModes(t, func(t *testing.T, backend string) {
		s := gateway.Start(t, backend, nil)

		t.Run("tenants", func(t *testing.T) {
			name := "acme-" + testkit.Uniq()
			m := testkit.Obj(t, s.Want(t, 201, "POST", "/v2/tenants", gateway.SuperToken, map[string]any{"name": name}))
			id := testkit.Str(t, m, "tenant_id")
			if m["name"] != name {
				t.Errorf("name = %v, want %s", m["name"], name)
			}
			rfc3339UTC(t, "created_at", m["created_at"])
			admin := testkit.Str(t, m, "operator_token")
			if !gateway.OpTokenRE.MatchString(admin) {
				t.Errorf("operator_token %q is not svc_op_ + 43 base64url chars", admin)
			}

			_, raw := s.Do(t, "POST", "/v2/tenants", gateway.SuperToken, map[string]any{"name": name})
			gateway.Envelope(t, raw, 409, "v2", "AlreadyExists")

			other, _ := s.Tenant(t, "other-"+testkit.Uniq())
			list := testkit.Arr(t, s.Want(t, 200, "GET", "/v2/tenants", gateway.SuperToken, nil))
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
			if strings.Contains(string(s.Want(t, 200, "GET", "/v2/tenants", gateway.SuperToken, nil)), admin) {
				t.Errorf("tenant list contains a token secret")
			}

			_, agentTok := s.Agent(t, admin, "doomed", nil)
			s.Want(t, 204, "POST", "/v2/agents/heartbeat", agentTok, nil)
			s.Want(t, 204, "DELETE", "/v2/tenants/"+id, gateway.SuperToken, nil)
			_, raw = s.Do(t, "GET", "/v2/agents", admin, nil)
			gateway.Envelope(t, raw, 401, "v2", "Unauthorized")
			_, raw = s.Do(t, "POST", "/v2/agents/heartbeat", agentTok, nil)
			gateway.Envelope(t, raw, 401, "v2", "Unauthorized")
			_, raw = s.Do(t, "DELETE", "/v2/tenants/"+id, gateway.SuperToken, nil)
			gateway.Envelope(t, raw, 404, "v2", "NotFound")
			_, raw = s.Do(t, "GET", "/v2/agents", gateway.SuperToken, nil, "X-Svc-Tenant-ID", id)
			gateway.Envelope(t, raw, 404, "v2", "NotFound")
			for _, tn := range testkit.Arr(t, s.Want(t, 200, "GET", "/v2/tenants", gateway.SuperToken, nil)) {
				if tn["tenant_id"] == id {
					t.Errorf("deleted tenant still listed")
				}
			}
			// The name is free again.
			s.Tenant(t, name)
			// Deleting an unknown or malformed id: 404.
			s.Want(t, 404, "DELETE", "/v2/tenants/"+testkit.RandomUUID(), gateway.SuperToken, nil)
			s.Want(t, 404, "DELETE", "/v2/tenants/not-a-uuid", gateway.SuperToken, nil)
		})

		t.Run("operator tokens", func(t *testing.T) {
			_, admin := s.Tenant(t, "ops-"+testkit.Uniq())
			m := testkit.Obj(t, s.Want(t, 201, "POST", "/v2/operator-tokens", admin, map[string]any{"name": "soc viewer", "role": "viewer"}))
			tokID, viewer := testkit.Str(t, m, "token_id"), testkit.Str(t, m, "operator_token")
			if m["role"] != "viewer" || m["name"] != "soc viewer" {
				t.Errorf("created token = %v", m)
			}
			rfc3339UTC(t, "created_at", m["created_at"])
			if !gateway.OpTokenRE.MatchString(viewer) {
				t.Errorf("operator_token %q has the wrong form", viewer)
			}
			s.Want(t, 200, "GET", "/v2/agents", viewer, nil)

			_, raw := s.Do(t, "POST", "/v2/operator-tokens", admin, map[string]any{"name": "x", "role": "root"})
			gateway.Envelope(t, raw, 400, "v2", "BadRequest")

			raw = s.Want(t, 200, "GET", "/v2/operator-tokens", admin, nil)
			if strings.Contains(string(raw), viewer) || strings.Contains(string(raw), admin) {
				t.Errorf("token list contains a secret: %s", raw)
			}
			found := false
			for _, ot := range testkit.Arr(t, raw) {
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

			s.Want(t, 204, "DELETE", "/v2/operator-tokens/"+tokID, admin, nil)
			_, raw = s.Do(t, "GET", "/v2/agents", viewer, nil)
			gateway.Envelope(t, raw, 401, "v2", "Unauthorized")
			_, raw = s.Do(t, "DELETE", "/v2/operator-tokens/"+tokID, admin, nil)
			gateway.Envelope(t, raw, 404, "v2", "NotFound")
			_, raw = s.Do(t, "DELETE", "/v2/operator-tokens/"+testkit.RandomUUID(), admin, nil)
			gateway.Envelope(t, raw, 404, "v2", "NotFound")
			s.Want(t, 404, "DELETE", "/v2/operator-tokens/not-a-uuid", admin, nil)

			// Another tenant's token id is unknown here.
			_, adminB := s.Tenant(t, "ops-b-"+testkit.Uniq())
			idB, tokB := s.OpToken(t, adminB, "b", "viewer")
			s.Want(t, 404, "DELETE", "/v2/operator-tokens/"+idB, admin, nil)
			s.Want(t, 200, "GET", "/v2/agents", tokB, nil)
		})

		t.Run("settings", func(t *testing.T) {
			tenantID, admin := s.Tenant(t, "settings-"+testkit.Uniq())
			_, viewer := s.OpToken(t, admin, "v", "viewer")
			m := testkit.Obj(t, s.Want(t, 200, "GET", "/v2/tenants/settings", viewer, nil))
			if m["auto_rotate_token_on_leak_enabled"] != true {
				t.Errorf("default settings = %v, want auto_rotate_token_on_leak_enabled true", m)
			}
			_, raw := s.Do(t, "PATCH", "/v2/tenants/settings", viewer, map[string]any{"auto_rotate_token_on_leak_enabled": false})
			gateway.Envelope(t, raw, 403, "v2", "Forbidden")
			m = testkit.Obj(t, s.Want(t, 200, "PATCH", "/v2/tenants/settings", admin, map[string]any{"auto_rotate_token_on_leak_enabled": false}))
			if m["auto_rotate_token_on_leak_enabled"] != false {
				t.Errorf("patched settings = %v", m)
			}
			m = testkit.Obj(t, s.Want(t, 200, "GET", "/v2/tenants/settings", viewer, nil))
			if m["auto_rotate_token_on_leak_enabled"] != false {
				t.Errorf("settings after PATCH = %v", m)
			}
			_, raw = s.Do(t, "PATCH", "/v2/tenants/settings", admin, map[string]any{"auto_rotate_token_on_leak_enabled": "no"})
			if e := gateway.Envelope(t, raw, 400, "v2", "BadRequest"); gateway.Detail(e, "field") != "auto_rotate_token_on_leak_enabled" {
				t.Errorf("wrong-type PATCH did not name the field: %s", raw)
			}
			ev := s.WaitAudit(t, admin, "event_type=config_change", "config_change audit event", func(e map[string]any) bool { return true })
			if ev["tenant_id"] != tenantID || ev["event_type"] != "config_change" {
				t.Errorf("config_change event = %v", ev)
			}
		})
	})
}
