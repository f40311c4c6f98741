package e2e

import (
	"strings"
	"testing"

	"svc/testkit/gateway"
)

// The interactive API browser (SPEC 4.10): a page, its assets under a strict
// Content-Security-Policy, and the document it loads.
func TestE2EDocs(t *testing.T) {
	s := gateway.Start(t, "sqlite", nil)
	tests := []struct {
		name, path, ctype, contains string
	}{
		{name: "page", path: "/v2/docs", ctype: "text/html", contains: `<script src="docs/app.js">`},
		{name: "script", path: "/v2/docs/app.js", ctype: "text/javascript", contains: "openapi.json"},
		{name: "styles", path: "/v1/docs/app.css", ctype: "text/css", contains: "summary"},
		{name: "document", path: "/v2/docs/openapi.json", ctype: "application/json", contains: `"openapi":"3.0.3"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := s.Do(t, "GET", tc.path, "", nil)
			if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), tc.ctype) ||
				!strings.Contains(string(body), tc.contains) {
				t.Fatalf("GET %s = %d %s: %.200s", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
			if tc.ctype != "application/json" && !strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") {
				t.Fatalf("GET %s has no strict Content-Security-Policy", tc.path)
			}
		})
	}
}
