package httpapi

// The operator console (SPEC 4.10, CONTRACT §12; issue 25): static ES
// modules, CSS and the vendored vis-network, embedded in the binary and
// served under /dashboard/. No build step, no network beyond this server:
// the console reads the public API with the operator's token (kept in the
// tab's sessionStorage, never in a URL).

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed dashboard
var dashboardFiles embed.FS

// dashboardCSP: the console's own scripts and styles only, no inline
// script or style, no eval, the API and its WebSocket on this origin, the
// vis-network stylesheet's data: images, and no framing.
const dashboardCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// contentTypes of the console's files, by extension.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".txt":  "text/plain; charset=utf-8",
	".svg":  "image/svg+xml",
}

// registerDashboard mounts every embedded file at its path under
// /dashboard/ (index.html at /dashboard/ itself), each a documented route.
func (s *Server) registerDashboard() {
	s.register(Route{Method: http.MethodGet, Path: "/dashboard", Unversioned: true, Tag: "console", Status: http.StatusPermanentRedirect,
		Summary: "Redirects to /dashboard/.", Handle: func(c *Call) (any, error) {
			c.Header().Set("Location", "/dashboard/")
			return nil, nil
		}})
	_ = fs.WalkDir(dashboardFiles, "dashboard", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		ctype := contentTypes[path.Ext(name)]
		if ctype == "" && !strings.HasPrefix(path.Base(name), "LICENSE") {
			return nil
		}
		if ctype == "" {
			ctype = contentTypes[".txt"]
		}
		route := "/" + name
		summary := "Operator console asset."
		if name == "dashboard/index.html" {
			route, summary = "/dashboard/", "The operator console (sign in with an operator token)."
		}
		s.register(Route{Method: http.MethodGet, Path: route, Unversioned: true, Tag: "console", RawBody: ctype, Resp: "",
			Summary: summary, Handle: s.dashboardAsset(name)})
		return nil
	})
}

// dashboardAsset answers one embedded file with the console's headers.
func (s *Server) dashboardAsset(name string) func(*Call) (any, error) {
	return func(c *Call) (any, error) {
		raw, err := dashboardFiles.ReadFile(name)
		if err != nil {
			return nil, err
		}
		h := c.Header()
		h.Set("Content-Security-Policy", dashboardCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-cache")
		return raw, nil
	}
}
