package httpapi

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// Every path a route serves, asked with a method none of its routes
// takes, answers 405 MethodNotAllowed with Allow listing exactly the
// methods its routes take (RFC 9110 15.5.6), in both versions; an unknown
// path stays 404.
func TestWrongMethodAnswers405WithAllow(t *testing.T) {
	s := newTestServer(t)
	takes := map[string][]string{} // route path → its methods
	for _, rt := range s.Routes() {
		key := rt.Path
		if !rt.Unversioned {
			key = "/v2" + rt.Path
		}
		takes[key] = append(takes[key], rt.Method)
	}
	concrete := func(path string) string {
		segs := strings.Split(path, "/")
		for i, seg := range segs {
			if strings.HasPrefix(seg, ":") || strings.HasPrefix(seg, "*") {
				segs[i] = "0b5e7a3c-7a4e-4f63-9d36-0c2f3f0a9e11"
			}
		}
		return strings.Join(segs, "/")
	}
	// matches reports whether a route path template matches a concrete
	// path; a concrete path of a static route may match a parameterized
	// template too (/tenants/settings and DELETE /tenants/:tenant_id).
	matches := func(template, path string) bool {
		ts, ps := strings.Split(template, "/"), strings.Split(path, "/")
		if len(ts) != len(ps) {
			return false
		}
		for i := range ts {
			if ts[i] != ps[i] && !strings.HasPrefix(ts[i], ":") {
				return false
			}
		}
		return true
	}
	pairs := 0
	for path := range takes {
		var methods []string
		for template, ms := range takes {
			if matches(template, concrete(path)) {
				for _, m := range ms {
					if !slices.Contains(methods, m) {
						methods = append(methods, m)
					}
				}
			}
		}
		slices.SortFunc(methods, byMethodOrder)
		want := strings.Join(methods, ", ")
		for _, m := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"} {
			if slices.Contains(methods, m) {
				continue
			}
			paths := []string{concrete(path)}
			if strings.HasPrefix(path, "/v2/") {
				paths = append(paths, "/v1"+strings.TrimPrefix(concrete(path), "/v2"))
			}
			for _, p := range paths {
				rec := httptest.NewRecorder()
				s.ServeHTTP(rec, httptest.NewRequest(m, p, nil))
				pairs++
				if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != want {
					t.Errorf("%s %s: %d Allow %q, want 405 Allow %q: %s", m, p, rec.Code, rec.Header().Get("Allow"), want, rec.Body)
					continue
				}
				if m != "HEAD" && !strings.Contains(rec.Body.String(), `"reason":"MethodNotAllowed"`) {
					t.Errorf("%s %s: body %s", m, p, rec.Body)
				}
			}
		}
	}
	if pairs < 200 {
		t.Fatalf("only %d method and path pairs checked", pairs)
	}
	for _, p := range []string{"/v2/definitely/not/here", "/v1/agents/x/y/z", "/nowhere"} {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest("PUT", p, nil))
		if rec.Code != http.StatusNotFound || rec.Header().Get("Allow") != "" {
			t.Errorf("PUT %s: %d Allow %q, want 404 without Allow", p, rec.Code, rec.Header().Get("Allow"))
		}
	}
	// An unversioned API path routes by Accept, as a served one does.
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("DELETE", "/agents", nil))
	if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, POST" {
		t.Errorf("DELETE /agents: %d Allow %q", rec.Code, rec.Header().Get("Allow"))
	}
}
