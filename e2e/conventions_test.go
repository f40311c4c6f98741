package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"svc/testkit"
	"svc/testkit/gateway"
)

const sunset = "Wed, 31 Dec 2026 23:59:59 GMT"

// TestE2EConventions covers versions, deprecation headers, content
// negotiation, the error envelope, ETags and the OpenAPI document.
func TestE2EConventions(t *testing.T) {
	t.Parallel()
	gateway.ForModes(t, func(t *testing.T, backend string) {
		s := gateway.Start(t, backend, nil)
		_, admin := s.Tenant(t, "conv-"+testkit.Uniq())

		t.Run("deprecation headers", func(t *testing.T) {
			cases := []struct {
				name       string
				path       string
				token      string
				accept     string
				status     int
				deprecated bool
			}{
				{name: "v1 agents", path: "/v1/agents", token: admin, status: 200, deprecated: true},
				{name: "v1 error response", path: "/v1/agents", status: 401, deprecated: true},
				{name: "v1 unknown path", path: "/v1/no-such-thing", token: admin, status: 404, deprecated: true},
				{name: "v2 agents", path: "/v2/agents", token: admin, status: 200},
				{name: "v2 error response", path: "/v2/agents", status: 401},
				{name: "health", path: "/health", status: 200},
				{name: "livez", path: "/livez", status: 200},
				{name: "metrics", path: "/metrics", status: 200},
				{name: "unversioned with v2 Accept", path: "/agents", token: admin, accept: "application/vnd.svc.v2+json", status: 200},
				{name: "unversioned with v1 Accept", path: "/agents", token: admin, accept: "application/vnd.svc.v1+json", status: 200, deprecated: true},
				{name: "unversioned without Accept", path: "/agents", token: admin, status: 200, deprecated: true},
				{name: "unversioned with other Accept", path: "/agents", token: admin, accept: "application/json", status: 200, deprecated: true},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					var hdr []string
					if tc.accept != "" {
						hdr = []string{"Accept", tc.accept}
					}
					resp, raw := s.Do(t, "GET", tc.path, tc.token, nil, hdr...)
					if resp.StatusCode != tc.status {
						t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, raw)
					}
					dep, sun := resp.Header.Get("Deprecation"), resp.Header.Get("Sunset")
					if tc.deprecated {
						if dep != "true" || sun != sunset {
							t.Errorf("Deprecation %q Sunset %q, want true and %q", dep, sun, sunset)
						}
					} else if dep != "" || sun != "" {
						t.Errorf("unexpected Deprecation %q / Sunset %q", dep, sun)
					}
				})
			}
		})

		t.Run("unversioned path routes by Accept", func(t *testing.T) {
			// An error under the routed version carries that version.
			_, raw := s.Do(t, "GET", "/agents", "", nil, "Accept", "application/vnd.svc.v2+json")
			gateway.Envelope(t, raw, 401, "v2", "Unauthorized")
			_, raw = s.Do(t, "GET", "/agents", "", nil)
			gateway.Envelope(t, raw, 401, "v1", "Unauthorized")
		})

		t.Run("version bodies", func(t *testing.T) {
			v1 := testkit.Obj(t, s.Want(t, 200, "GET", "/v1/version", "", nil))
			if v1["api_version"] != "v1" || v1["deprecated"] != true || v1["sunset"] != sunset {
				t.Errorf("/v1/version = %v", v1)
			}
			if b, _ := v1["build"].(string); b == "" {
				t.Errorf("/v1/version build missing: %v", v1)
			}
			v2 := testkit.Obj(t, s.Want(t, 200, "GET", "/v2/version", "", nil))
			if v2["api_version"] != "v2" || v2["deprecated"] != false {
				t.Errorf("/v2/version = %v", v2)
			}
			if b, _ := v2["build"].(string); b == "" {
				t.Errorf("/v2/version build missing: %v", v2)
			}
			if sv, ok := v2["sunset"]; ok && sv != nil {
				t.Errorf("/v2/version has a sunset: %v", v2)
			}
		})

		t.Run("error envelope", func(t *testing.T) {
			cases := []struct {
				name, method, path, token string
				status                    int
				version, reason           string
			}{
				{"v1 unauthorized", "GET", "/v1/agents", "", 401, "v1", "Unauthorized"},
				{"v2 unauthorized", "GET", "/v2/agents", "", 401, "v2", "Unauthorized"},
				{"v2 not found agent", "GET", "/v2/agents/" + testkit.RandomUUID(), admin, 404, "v2", "NotFound"},
				{"v1 not found agent", "GET", "/v1/agents/" + testkit.RandomUUID(), admin, 404, "v1", "NotFound"},
				{"v2 unknown path", "GET", "/v2/definitely/not/here", admin, 404, "v2", "NotFound"},
				{"v1 unknown path", "GET", "/v1/definitely/not/here", "", 404, "v1", "NotFound"},
				{"v2 wrong method", "PUT", "/v2/agents", admin, 405, "v2", "MethodNotAllowed"},
				{"v1 wrong method, parameterized path", "POST", "/v1/agents/" + testkit.RandomUUID(), admin, 405, "v1", "MethodNotAllowed"},
				{"unversioned wrong method", "DELETE", "/agents", admin, 405, "v1", "MethodNotAllowed"},
				{"probe wrong method", "POST", "/readyz", "", 405, "v1", "MethodNotAllowed"},
				{"v2 forbidden", "GET", "/v2/tenants", admin, 403, "v2", "Forbidden"},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					resp, raw := s.Do(t, tc.method, tc.path, tc.token, nil)
					if tc.status == 405 {
						// RFC 9110 15.5.6: 405 names the methods the path takes.
						if allow := resp.Header.Get("Allow"); !strings.Contains(allow, "GET") || strings.Contains(allow, tc.method) {
							t.Errorf("Allow %q for %s %s", allow, tc.method, tc.path)
						}
					}
					if resp.StatusCode != tc.status {
						t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, raw)
					}
					if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
						t.Errorf("Content-Type %q", ct)
					}
					gateway.Envelope(t, raw, tc.status, tc.version, tc.reason)
				})
			}
		})

		t.Run("etag", func(t *testing.T) {
			s.Agent(t, admin, "etag-"+testkit.Uniq(), nil)
			for _, p := range []string{"/v2/agents", "/v1/agents", "/v2/tenants/settings", "/health"} {
				resp, raw := s.Do(t, "GET", p, admin, nil)
				if resp.StatusCode != 200 {
					t.Fatalf("GET %s: %d %s", p, resp.StatusCode, raw)
				}
				etag := resp.Header.Get("ETag")
				if !regexp.MustCompile(`^"[0-9a-f]{64}"$`).MatchString(etag) {
					t.Fatalf("GET %s: ETag %q is not a quoted 64-hex value", p, etag)
				}
				sum := sha256.Sum256(raw)
				if etag != `"`+hex.EncodeToString(sum[:])+`"` {
					t.Errorf("GET %s: ETag %s is not the SHA-256 of the body", p, etag)
				}
				resp2, raw2 := s.Do(t, "GET", p, admin, nil, "If-None-Match", etag)
				if resp2.StatusCode != 304 || len(raw2) != 0 {
					t.Errorf("GET %s with If-None-Match: %d, body %q; want 304 and empty", p, resp2.StatusCode, raw2)
				}
				resp3, _ := s.Do(t, "GET", p, admin, nil, "If-None-Match", `"`+strings.Repeat("0", 64)+`"`)
				if resp3.StatusCode != 200 {
					t.Errorf("GET %s with a stale If-None-Match: %d, want 200", p, resp3.StatusCode)
				}
			}
			resp, raw := s.Do(t, "POST", "/v2/agents", admin, map[string]any{"name": "etag-post-" + testkit.Uniq()})
			if resp.StatusCode != 201 {
				t.Fatalf("POST: %d %s", resp.StatusCode, raw)
			}
			if e := resp.Header.Get("ETag"); e != "" {
				t.Errorf("POST carries ETag %q", e)
			}
			resp, _ = s.Do(t, "GET", "/v2/agents/"+testkit.RandomUUID(), admin, nil)
			if resp.StatusCode != 404 || resp.Header.Get("ETag") != "" {
				t.Errorf("GET 404: status %d ETag %q; want 404 without ETag", resp.StatusCode, resp.Header.Get("ETag"))
			}
		})

		t.Run("openapi", func(t *testing.T) {
			raw := s.Want(t, 200, "GET", "/v2/openapi.json", "", nil)
			var doc struct {
				OpenAPI string                     `json:"openapi"`
				Paths   map[string]json.RawMessage `json:"paths"`
			}
			if err := json.Unmarshal(raw, &doc); err != nil {
				t.Fatalf("openapi.json does not parse: %v", err)
			}
			if doc.OpenAPI != "3.0.3" {
				t.Errorf("openapi = %q, want 3.0.3", doc.OpenAPI)
			}
			for _, p := range []string{"/v2/agents", "/v1/agents/{agent_id}/freeze"} {
				if _, ok := doc.Paths[p]; !ok {
					t.Errorf("openapi lacks path %s", p)
				}
			}
		})
	})
}
