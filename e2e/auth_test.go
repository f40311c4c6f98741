package e2e

import (
	"strings"
	"testing"

	"svc/testkit"
	"svc/testkit/gateway"
)

// TestE2EBadInput covers body validation on POST /v2/agents, POST
// /v2/tenants and PATCH /v2/agents/:id (CONTRACT §10).
func TestE2EBadInput(t *testing.T) {
	t.Parallel()
	gateway.ForModes(t, func(t *testing.T, backend string) {
		s := gateway.Start(t, backend, map[string]string{"SVC_MAX_BODY_LIMIT_BYTES": "1024"})
		_, admin := s.Tenant(t, "bad-"+testkit.Uniq())
		agentID, _ := s.Agent(t, admin, "bad-target", nil)

		endpoints := []struct {
			name, method, path, token string
			ok                        int
		}{
			{"POST agents", "POST", "/v2/agents", admin, 201},
			{"POST tenants", "POST", "/v2/tenants", gateway.SuperToken, 201},
			{"PATCH agent", "PATCH", "/v2/agents/" + agentID, admin, 200},
		}
		big := `{"name":"` + strings.Repeat("x", 2048) + `"}`
		for _, ep := range endpoints {
			t.Run(ep.name, func(t *testing.T) {
				cases := []struct {
					name    string
					body    string
					headers []string
					status  int
					reason  string
					errCode string
					field   string
				}{
					{name: "malformed json", body: `{"name":`, status: 400, reason: "BadRequest", errCode: "invalid_json"},
					{name: "not json at all", body: `hello`, status: 400, reason: "BadRequest", errCode: "invalid_json"},
					{name: "wrong type", body: `{"name":5}`, status: 400, reason: "BadRequest", field: "name"},
					{name: "text/plain", body: `{"name":"plain"}`, headers: []string{"Content-Type", "text/plain"}, status: 415, reason: "UnsupportedMediaType"},
					{name: "body too large", body: big, status: 400, reason: "BadRequest", errCode: "body_too_large"},
					{name: "empty name", body: `{"name":""}`, status: 400, reason: "BadRequest"},
					{name: "blank name", body: `{"name":"   "}`, status: 400, reason: "BadRequest"},
					{name: "array body", body: `[{"name":"x"}]`, status: 400, reason: "BadRequest", errCode: "invalid_json"},
					{name: "invalid UTF-8", body: "{\"name\":\"bad-\xff-" + testkit.Uniq() + "\"}", status: 400, reason: "BadRequest", errCode: "invalid_json"},
					{name: "name too long", body: `{"name":"` + strings.Repeat("n", 129) + `"}`, status: 400, reason: "BadRequest"},
					{name: "unknown fields ignored", body: `{"name":"unk-` + testkit.Uniq() + `","bogus_field":{"x":1}}`, status: ep.ok},
				}
				if ep.method == "POST" {
					// PATCH treats a null name as "unchanged"; a create needs one.
					cases = append(cases, struct {
						name    string
						body    string
						headers []string
						status  int
						reason  string
						errCode string
						field   string
					}{name: "name null", body: `{"name":null}`, status: 400, reason: "BadRequest"})
				}
				if ep.path != "/v2/tenants" {
					cases = append(cases,
						struct {
							name    string
							body    string
							headers []string
							status  int
							reason  string
							errCode string
							field   string
						}{name: "environments wrong type", body: `{"name":"env-` + testkit.Uniq() + `","allowed_environments":"prod"}`, status: 400, reason: "BadRequest", field: "allowed_environments"})
				}
				for _, tc := range cases {
					t.Run(tc.name, func(t *testing.T) {
						resp, raw := s.Do(t, ep.method, ep.path, ep.token, tc.body, tc.headers...)
						if resp.StatusCode != tc.status {
							t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, raw)
						}
						if tc.reason == "" {
							return
						}
						m := gateway.Envelope(t, raw, tc.status, "v2", tc.reason)
						if tc.errCode != "" && gateway.Detail(m, "error") != tc.errCode {
							t.Errorf("details.error = %v, want %s", gateway.Detail(m, "error"), tc.errCode)
						}
						if tc.field != "" {
							if gateway.Detail(m, "field") != tc.field {
								t.Errorf("details.field = %v, want %s", gateway.Detail(m, "field"), tc.field)
							}
							if msg, _ := m["message"].(string); !strings.Contains(msg, tc.field) {
								t.Errorf("message %q does not name the field %s", msg, tc.field)
							}
						}
					})
				}
			})
		}

		// Endpoints that take no body refuse a bad one all the same, and act
		// on nothing they refused.
		t.Run("bodyless endpoints", func(t *testing.T) {
			id, agentTok := s.Agent(t, admin, "bodyless-"+testkit.Uniq(), nil)
			big := `{"x":"` + strings.Repeat("x", 2048) + `"}`
			for _, ep := range []struct{ path, token string }{
				{"/v2/agents/" + id + "/freeze", admin},
				{"/v2/agents/heartbeat", agentTok},
			} {
				for _, tc := range []struct {
					name, body string
					headers    []string
					status     int
					code       string
				}{
					{"oversized", big, nil, 400, "body_too_large"},
					{"malformed", `{"oops`, nil, 400, "invalid_json"},
					{"text/plain", `{"x":1}`, []string{"Content-Type", "text/plain"}, 415, "unsupported_media_type"},
				} {
					resp, raw := s.Do(t, "POST", ep.path, ep.token, tc.body, tc.headers...)
					if resp.StatusCode != tc.status {
						t.Fatalf("%s %s: %d %s, want %d", ep.path, tc.name, resp.StatusCode, raw, tc.status)
					}
					if e := gateway.Envelope(t, raw, tc.status, "v2", map[int]string{400: "BadRequest", 415: "UnsupportedMediaType"}[tc.status]); gateway.Detail(e, "error") != tc.code {
						t.Errorf("%s %s: details.error %v, want %s", ep.path, tc.name, gateway.Detail(e, "error"), tc.code)
					}
				}
			}
			if a := s.GetAgent(t, admin, id); a["status"] != "active" {
				t.Errorf("a refused freeze froze the agent: %v", a["status"])
			}
			// No body, or an empty JSON object, is fine.
			s.Want(t, 200, "POST", "/v2/agents/"+id+"/freeze", admin, nil)
			s.Want(t, 200, "POST", "/v2/agents/"+id+"/unfreeze", admin, map[string]any{})
			s.Want(t, 204, "POST", "/v2/agents/heartbeat", agentTok, nil)
		})
	})
}

// TestE2EAuth covers credentials and roles (CONTRACT §2).
func TestE2EAuth(t *testing.T) {
	t.Parallel()
	gateway.ForModes(t, func(t *testing.T, backend string) {
		s := gateway.Start(t, backend, nil)
		tenantA, admin := s.Tenant(t, "auth-a-"+testkit.Uniq())
		tenantB, adminB := s.Tenant(t, "auth-b-"+testkit.Uniq())
		_, agentTok := s.Agent(t, admin, "auth-agent", nil)
		_, viewer := s.OpToken(t, admin, "viewer", "viewer")
		_, approver := s.OpToken(t, admin, "approver", "approver")
		newAgent := func() map[string]any { return map[string]any{"name": "auth-" + testkit.Uniq()} }

		cases := []struct {
			name, method, path, token string
			body                      any
			headers                   []string
			status                    int
			reason                    string
		}{
			{name: "no token", method: "GET", path: "/v2/agents", status: 401, reason: "Unauthorized"},
			{name: "garbage token", method: "GET", path: "/v2/agents", token: "garbage", status: 401, reason: "Unauthorized"},
			{name: "unknown operator token", method: "GET", path: "/v2/agents", token: "svc_op_" + strings.Repeat("A", 43), status: 401, reason: "Unauthorized"},
			{name: "unknown agent token", method: "POST", path: "/v2/agents/heartbeat", token: "svc_agent_" + strings.Repeat("A", 43), status: 401, reason: "Unauthorized"},
			{name: "basic scheme", method: "GET", path: "/v2/agents", headers: []string{"Authorization", "Basic " + admin}, status: 401, reason: "Unauthorized"},
			{name: "wrong super-admin token", method: "GET", path: "/v2/tenants", token: strings.Repeat("z", 40), status: 401, reason: "Unauthorized"},
			{name: "agent token on agents list", method: "GET", path: "/v2/agents", token: agentTok, status: 403, reason: "Forbidden"},
			{name: "agent token on tenants", method: "POST", path: "/v2/tenants", token: agentTok, body: map[string]any{"name": "x-" + testkit.Uniq()}, status: 403, reason: "Forbidden"},
			{name: "operator token on heartbeat", method: "POST", path: "/v2/agents/heartbeat", token: admin, status: 403, reason: "Forbidden"},
			{name: "operator token on authorize", method: "POST", path: "/v2/authorize", token: viewer, body: gateway.AzRead(nil), status: 403, reason: "Forbidden"},
			{name: "super-admin token on authorize", method: "POST", path: "/v2/authorize", token: gateway.SuperToken, body: gateway.AzRead(nil), status: 403, reason: "Forbidden"},
			{name: "unknown operator token on authorize", method: "POST", path: "/v2/authorize", token: "svc_op_" + strings.Repeat("B", 43), body: gateway.AzRead(nil), status: 401, reason: "Unauthorized"},
			{name: "viewer creates agent", method: "POST", path: "/v2/agents", token: viewer, body: newAgent(), status: 403, reason: "Forbidden"},
			{name: "viewer lists agents", method: "GET", path: "/v2/agents", token: viewer, status: 200},
			// CONTRACT §2: viewer and approver are every GET and stream (the
			// approver also decides approvals); a read-only POST is admin's.
			{name: "viewer verifies the chain", method: "POST", path: "/v2/receipts/verify-chain", token: viewer, status: 403, reason: "Forbidden"},
			{name: "approver backtests a rule", method: "POST", path: "/v2/soc/rules/confused_deputy_block/backtest", token: approver, status: 403, reason: "Forbidden"},
			{name: "admin verifies the chain", method: "POST", path: "/v2/receipts/verify-chain", token: admin, status: 200},
			{name: "viewer lists audit", method: "GET", path: "/v2/audit/events", token: viewer, status: 200},
			{name: "approver lists agents", method: "GET", path: "/v2/agents", token: approver, status: 200},
			{name: "approver creates operator token", method: "POST", path: "/v2/operator-tokens", token: approver, body: map[string]any{"name": "n", "role": "viewer"}, status: 403, reason: "Forbidden"},
			{name: "approver creates agent", method: "POST", path: "/v2/agents", token: approver, body: newAgent(), status: 403, reason: "Forbidden"},
			{name: "super-admin without tenant header", method: "GET", path: "/v2/agents", token: gateway.SuperToken, status: 400, reason: "BadRequest"},
			{name: "super-admin with tenant header lists", method: "GET", path: "/v2/agents", token: gateway.SuperToken, headers: []string{"X-Svc-Tenant-ID", tenantA}, status: 200},
			{name: "super-admin with tenant header creates agent", method: "POST", path: "/v2/agents", token: gateway.SuperToken, body: newAgent(), headers: []string{"X-Svc-Tenant-ID", tenantA}, status: 201},
			{name: "super-admin with unknown tenant header", method: "GET", path: "/v2/agents", token: gateway.SuperToken, headers: []string{"X-Svc-Tenant-ID", testkit.RandomUUID()}, status: 404, reason: "NotFound"},
			{name: "operator with own tenant header", method: "GET", path: "/v2/agents", token: admin, headers: []string{"X-Svc-Tenant-ID", tenantA}, status: 200},
			{name: "operator with other tenant header", method: "GET", path: "/v2/agents", token: admin, headers: []string{"X-Svc-Tenant-ID", tenantB}, status: 403, reason: "Forbidden"},
			{name: "other tenant admin with A header", method: "POST", path: "/v2/agents", token: adminB, body: newAgent(), headers: []string{"X-Svc-Tenant-ID", tenantA}, status: 403, reason: "Forbidden"},
			{name: "operator creates tenant", method: "POST", path: "/v2/tenants", token: admin, body: map[string]any{"name": "x-" + testkit.Uniq()}, status: 403, reason: "Forbidden"},
			{name: "operator lists tenants", method: "GET", path: "/v2/tenants", token: admin, status: 403, reason: "Forbidden"},
			{name: "super-admin lists tenants", method: "GET", path: "/v2/tenants", token: gateway.SuperToken, status: 200},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				resp, raw := s.Do(t, tc.method, tc.path, tc.token, tc.body, tc.headers...)
				if resp.StatusCode != tc.status {
					t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, raw)
				}
				if tc.reason != "" {
					gateway.Envelope(t, raw, tc.status, "v2", tc.reason)
				}
			})
		}

		t.Run("super-admin acts as tenant admin", func(t *testing.T) {
			m := testkit.Obj(t, s.Want(t, 201, "POST", "/v2/agents", gateway.SuperToken, map[string]any{"name": "via-super"}, "X-Svc-Tenant-ID", tenantA))
			id := testkit.Str(t, m, "agent_id")
			s.GetAgent(t, admin, id) // visible to the tenant's own admin
			s.Want(t, 404, "GET", "/v2/agents/"+id, adminB, nil)
		})

		t.Run("short SVC_ADMIN_TOKEN fails closed", func(t *testing.T) {
			short := gateway.Start(t, backend, map[string]string{"SVC_ADMIN_TOKEN": "short"})
			resp, raw := short.Do(t, "POST", "/v2/tenants", "short", map[string]any{"name": "nope"})
			if resp.StatusCode != 401 {
				t.Fatalf("POST /v2/tenants with a short admin token: %d, want 401: %s", resp.StatusCode, raw)
			}
			gateway.Envelope(t, raw, 401, "v2", "Unauthorized")
			resp, raw = short.Do(t, "GET", "/v2/tenants", "short", nil)
			if resp.StatusCode != 401 {
				t.Fatalf("GET /v2/tenants with a short admin token: %d, want 401: %s", resp.StatusCode, raw)
			}
			// Every super-admin endpoint answers 401, whoever calls: a valid
			// operator token too (it would get 403 were super-admin enabled).
			dbURL := gateway.DBURLFor(t, backend)
			first := gateway.StartOn(t, dbURL, nil)
			_, opTok := first.Tenant(t, "short-admin-"+testkit.Uniq())
			first.Stop(t)
			again := gateway.StartOn(t, dbURL, map[string]string{"SVC_ADMIN_TOKEN": "short"})
			resp, raw = again.Do(t, "GET", "/v2/tenants", opTok, nil)
			if resp.StatusCode != 401 {
				t.Fatalf("GET /v2/tenants with an operator token while super-admin is disabled: %d, want 401: %s", resp.StatusCode, raw)
			}
			again.Want(t, 200, "GET", "/v2/agents", opTok, nil) // the operator token itself works
		})
	})
}
