package httpapi

// API versions (CONTRACT §1): /v1 and /v2, the version headers, and the
// paths exempt from versioning.

import (
	"mime"
	"net/http"
	"strings"
)

// Sunset is the HTTP-date after which /v1 is retired (SPEC 9).
const Sunset = "Wed, 31 Dec 2026 23:59:59 GMT"

// Versions served; the same handlers are mounted under each prefix.
var apiVersions = []string{"v1", "v2"}

// dispatch serves r when a route matches its method and path.
func (s *Server) dispatch(w http.ResponseWriter, r *http.Request) bool {
	if h, ok := s.static[r.Method+" "+r.URL.Path]; ok {
		h.ServeHTTP(w, r)
		return true
	}
	if h, ps, _ := s.router.Lookup(r.Method, r.URL.Path); h != nil {
		h(w, r, ps)
		return true
	}
	return false
}

func accepts(header, mediaType string) bool {
	for _, part := range strings.Split(header, ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err == nil && strings.EqualFold(mt, mediaType) {
			return true
		}
	}
	return false
}

// versionOf returns "v1" or "v2" for a versioned path, "" otherwise.
func versionOf(path string) string {
	for _, v := range apiVersions {
		if path == "/"+v || strings.HasPrefix(path, "/"+v+"/") {
			return v
		}
	}
	return ""
}

// exempt paths are never version-routed (SPEC 9.1).
func exempt(path string) bool {
	for _, p := range []string{"/health", "/livez", "/readyz", "/startupz", "/metrics", "/debug/", "/dashboard"} {
		if path == p || strings.HasPrefix(path, p+"/") || (strings.HasSuffix(p, "/") && strings.HasPrefix(path, p)) {
			return true
		}
	}
	return false
}

func setVersionHeaders(w http.ResponseWriter, version string) {
	if version == "v1" {
		w.Header().Set("Deprecation", "true")
		w.Header().Set("Sunset", Sunset)
	}
}
