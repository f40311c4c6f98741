package httpapi

import (
	"embed"
	"net/http"
)

//go:embed docs/index.html docs/app.js docs/app.css
var docsFiles embed.FS

// docsCSP keeps the browser page to its own scripts and styles and to this
// server's API.
const docsCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// registerDocs serves the interactive API browser (SPEC 4.10): a page that
// renders the OpenAPI document and sends requests with a token the user
// types, from assets embedded in the binary.
func (s *Server) registerDocs() {
	asset := func(name string) func(*Call) (any, error) {
		return func(c *Call) (any, error) {
			raw, err := docsFiles.ReadFile(name)
			if err != nil {
				return nil, err
			}
			c.Header().Set("Content-Security-Policy", docsCSP)
			c.Header().Set("X-Content-Type-Options", "nosniff")
			return raw, nil
		}
	}
	s.register(Route{Method: http.MethodGet, Path: "/docs", Tag: "operations", RawBody: "text/html; charset=utf-8", Resp: "",
		Summary: "Interactive API browser (loads /docs/openapi.json; requests use the token typed into the page).",
		Handle:  asset("docs/index.html")})
	s.register(Route{Method: http.MethodGet, Path: "/docs/app.js", Tag: "operations", RawBody: "text/javascript; charset=utf-8", Resp: "",
		Summary: "Script of the API browser.", Handle: asset("docs/app.js")})
	s.register(Route{Method: http.MethodGet, Path: "/docs/app.css", Tag: "operations", RawBody: "text/css; charset=utf-8", Resp: "",
		Summary: "Styles of the API browser.", Handle: asset("docs/app.css")})
	s.register(Route{Method: http.MethodGet, Path: "/docs/openapi.json", Tag: "operations", Resp: map[string]any{},
		Summary: "The OpenAPI document the browser loads (the same as /openapi.json).",
		Handle:  s.openAPIDocument})
}
