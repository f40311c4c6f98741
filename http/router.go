package httpapi

import (
	"gopkg.in/yaml.v3"

	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/julienschmidt/httprouter"

	"svc/persistence"
)

// Sunset is the HTTP-date after which /v1 is retired (SPEC 9).
const Sunset = "Wed, 31 Dec 2026 23:59:59 GMT"

// Versions served; the same handlers are mounted under each prefix.
var apiVersions = []string{"v1", "v2"}

// Route is one endpoint. Its registration carries the request and response
// types, which the OpenAPI document is generated from, so an endpoint cannot
// exist without being documented.
type Route struct {
	Method  string
	Path    string // without the version prefix, httprouter syntax: /agents/:agent_id
	Summary string
	Tag     string
	Access  Access
	// Body is a pointer to the request type, nil when the route takes no
	// body. OptionalBody accepts an empty body as {}.
	Body         any
	OptionalBody bool
	// Resp is the success response type (nil: no body), Status its code
	// (default 200).
	Resp   any
	Status int
	Query  []QueryParam
	// Paginated routes take limit, offset and cursor and may answer
	// X-Next-Cursor.
	Paginated bool
	// Errors lists the extra error statuses the route documents besides the
	// ones every route of its access level has.
	Errors []int
	Handle func(c *Call) (any, error)
	// Unversioned routes are mounted once, at Path, outside /v1 and /v2.
	Unversioned bool
	// OwnBody routes read their own body (the chat callback's form); every
	// other route without a Body still refuses an oversized, non-JSON or
	// malformed one (checkUnusedBody).
	OwnBody bool
	// SelfAuth routes authenticate inside the handler (authorize, which
	// counts failed attempts before it looks a token up); Access then only
	// documents who may call. Their body is read when the handler calls
	// Call.ReadBody, after authentication.
	SelfAuth bool
	// Stream marks a route that serves a live stream: always (StreamAlways,
	// GET /ws/events) or when asked with watch=true (StreamOnWatch, the
	// alert and incident lists). A stream holds no concurrency slot, has no
	// request timeout, and may authenticate with a one-time ?ticket= (POST
	// /v1/stream-tickets) instead of the Authorization header.
	Stream StreamMode
	// AcceptYAML routes also take their body as YAML (Content-Type
	// application/yaml), decoded into the same type as JSON would be.
	AcceptYAML bool
	// RawBody, when set, is the content type of a non-JSON success body the
	// handler returns as []byte.
	RawBody string
}

// StreamMode says when a route streams (Route.Stream).
type StreamMode int

// Stream modes.
const (
	StreamNever StreamMode = iota
	StreamAlways
	StreamOnWatch
)

// QueryParam documents one query parameter.
type QueryParam struct {
	Name        string
	Type        string // "string" or "integer" or "boolean"
	Description string
}

// Call is what a handler sees of one request.
type Call struct {
	R         *http.Request
	Params    httprouter.Params
	Principal Principal
	Version   string
	// Raw is the request body as received (size-capped).
	Raw    []byte
	body   any
	header http.Header
	srv    *Server
	// readBody, on a SelfAuth route with a body, reads and decodes it once
	// the handler has authenticated the caller (ReadBody).
	readBody func() *Error
	// tenantHeld is the tenant whose share of the node this request holds
	// (admitTenant), released when the request ends.
	tenantHeld string
	// streamHeld is the tenant whose share of the node's streams this
	// stream holds, released when it ends.
	streamHeld string
}

// ReadBody reads and decodes the body of a SelfAuth route, which the
// router leaves unread so that a bad credential is answered (and counted)
// before a bad body; a no-op elsewhere.
func (c *Call) ReadBody() error {
	if c.readBody == nil {
		return nil
	}
	read := c.readBody
	c.readBody = nil
	if e := read(); e != nil {
		return e
	}
	return nil
}

// Ctx is the request's context, bounded by the request timeout.
func (c *Call) Ctx() context.Context { return c.R.Context() }

// Param returns a path parameter.
func (c *Call) Param(name string) string { return c.Params.ByName(name) }

// bodyOf returns the decoded request body as the route's Body type T (the
// router decoded it into a fresh *T before calling the handler).
func bodyOf[T any](c *Call) *T {
	if v, ok := c.body.(*T); ok {
		return v
	}
	return new(T)
}

// Header gives the response headers to set.
func (c *Call) Header() http.Header { return c.header }

// HasField reports whether the JSON body carries the top-level field (to
// tell an explicit null from an absent field).
func (c *Call) HasField(name string) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(c.Raw, &m) != nil {
		return false
	}
	_, ok := m[name]
	return ok
}

// register adds a route to the server's table.
func (s *Server) register(r Route) {
	if r.Status == 0 {
		r.Status = http.StatusOK
	}
	s.routes = append(s.routes, r)
}

// Routes returns the registered routes (for the OpenAPI document and tests).
func (s *Server) Routes() []Route { return s.routes }

// buildMux mounts every route. Fully static paths are matched exactly
// first; parameterized ones go to httprouter (whose v1 tree cannot hold a
// static segment and a parameter at the same position, as in
// POST /agents/heartbeat beside POST /agents/:agent_id/freeze).
func (s *Server) buildMux() {
	s.static = map[string]http.Handler{}
	s.router = httprouter.New()
	s.router.RedirectTrailingSlash = false
	s.router.RedirectFixedPath = false
	s.router.HandleMethodNotAllowed = false
	s.router.HandleOPTIONS = false
	s.router.PanicHandler = func(w http.ResponseWriter, r *http.Request, v any) {
		s.log.Error("handler panic", "path", r.URL.Path, "panic", fmt.Sprint(v))
		writeEnvelope(w, versionOf(r.URL.Path), apiErr("InternalError", "internal", "internal error"))
	}
	mount := func(method, path string, h httprouter.Handle) {
		if !strings.Contains(path, ":") && !strings.Contains(path, "*") {
			s.static[method+" "+path] = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h(w, r, nil) })
			return
		}
		s.router.Handle(method, path, h)
	}
	for i := range s.routes {
		r := s.routes[i]
		if r.Unversioned {
			mount(r.Method, r.Path, s.handle(r, ""))
			continue
		}
		for _, v := range apiVersions {
			mount(r.Method, "/"+v+r.Path, s.handle(r, v))
		}
	}
}

// ServeHTTP dispatches: exact static paths, then httprouter, then the
// Accept-header routing of unversioned API paths (SPEC 9.3), else 404.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.dispatch(w, r) {
		return
	}
	v := versionOf(r.URL.Path)
	if v == "" && !exempt(r.URL.Path) {
		v = "v1"
		if accepts(r.Header.Get("Accept"), "application/vnd.svc.v2+json") {
			v = "v2"
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + v + r.URL.Path
		r2.URL.RawPath = ""
		if s.dispatch(w, r2) {
			return
		}
	}
	setVersionHeaders(w, v)
	writeEnvelope(w, v, notFound("path "+r.URL.Path))
}

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

// handle wraps a route's handler with the conventions every endpoint gets:
// version headers, load shedding, timeout, authentication and roles, the
// JSON body checks, the envelope for errors, and ETag/304 on GET 200.
func (s *Server) handle(rt Route, version string) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		start := time.Now()
		status := s.serve(w, r, ps, rt, version)
		s.metrics.observe(rt, status, time.Since(start))
	}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, ps httprouter.Params, rt Route, version string) int {
	setVersionHeaders(w, version)
	defer s.limitBodyTime(w, r)()
	fail := func(e *Error) int {
		writeEnvelope(w, version, e)
		return e.Status()
	}
	streaming := rt.Stream == StreamAlways || (rt.Stream == StreamOnWatch && r.URL.Query().Get("watch") == "true")
	if streaming {
		// Streams hold no request slot, but their number is bounded by
		// the same setting, SVC_MAX_CONCURRENT_REQUESTS.
		if n := s.streams.open.Add(1); n > int64(s.cfg.MaxConcurrentRequests) {
			s.streams.open.Add(-1)
			s.metrics.shed.Inc()
			e := apiErr("ServiceUnavailable", "too_many_streams", "too many open streams; retry later")
			e.RetryAfter = 1
			return fail(e)
		}
		defer s.streams.open.Add(-1)
	}
	if !rt.Unversioned && !streaming { // a stream is not request work: it never holds a slot
		if !s.adm.enter() {
			s.metrics.shed.Inc()
			s.metrics.refused.WithLabelValues("overloaded").Inc()
			e := apiErr("ServiceUnavailable", "overloaded", "too many concurrent requests; retry later")
			e.RetryAfter = 1
			return fail(e)
		}
		defer s.adm.leave()
	}
	if !streaming {
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
		defer cancel()
		r = r.WithContext(ctx)
	}

	c := &Call{R: r, Params: ps, Version: version, header: w.Header(), srv: s}
	defer func() {
		if c.tenantHeld != "" {
			s.adm.leaveTenant(c.tenantHeld)
		}
		if c.streamHeld != "" {
			s.streamShare.leaveTenant(c.streamHeld)
		}
	}()
	if streaming && bearer(r) == "" && r.URL.Query().Get("ticket") != "" {
		p, err := s.redeemTicket(r)
		if err != nil {
			ae, _ := toAPIError(err)
			return fail(ae)
		}
		c.Principal = p
	} else if rt.Access != AccessPublic && !rt.SelfAuth {
		p, err := s.authenticate(r, rt.Access)
		if err != nil {
			ae, _ := toAPIError(err)
			return fail(ae)
		}
		c.Principal = p
		if !rt.Unversioned && !streaming {
			if e := c.admitTenant(p.TenantID); e != nil {
				return fail(e)
			}
		}
	}
	if e := checkURL(c); e != nil {
		return fail(e)
	}
	if streaming && c.Principal.TenantID != "" {
		// Streams are bounded in all by SVC_MAX_CONCURRENT_REQUESTS and per
		// tenant by SVC_MAX_CONCURRENT_PER_TENANT, as requests are.
		if e := s.admitShare(s.streamShare, c.Principal.TenantID, "streams open"); e != nil {
			return fail(e)
		}
		c.streamHeld = c.Principal.TenantID
	}
	switch {
	case rt.Body != nil && rt.SelfAuth:
		c.readBody = func() *Error { return s.readBody(c, rt) }
	case rt.Body != nil:
		if e := s.readBody(c, rt); e != nil {
			return fail(e)
		}
	case !rt.OwnBody && r.Method != http.MethodGet && r.Method != http.MethodHead:
		if e := s.checkUnusedBody(c, rt); e != nil {
			return fail(e)
		}
	}
	out, err := rt.Handle(c)
	if err != nil {
		ae, internal := toAPIError(err)
		if internal {
			s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "error", err)
		}
		return fail(ae)
	}
	return s.writeOK(w, r, rt, out)
}

// checkURL refuses, before any work, a path or query value that no store
// holds alike (CONTRACT §10): U+0000 or bad UTF-8 in a path segment is the
// 404 of any malformed id; in a query key or value, 400 nul_character (or
// invalid_query) naming the parameter.
func checkURL(c *Call) *Error {
	for _, p := range c.Params {
		if !persistence.StorableText(p.Value) {
			return notFound("resource")
		}
	}
	if c.R.URL.RawQuery == "" {
		return nil
	}
	for k, vs := range c.R.URL.Query() {
		for _, v := range append([]string{k}, vs...) {
			switch {
			case strings.IndexByte(v, 0) >= 0:
				e := badRequest("nul_character", "query parameter %q contains U+0000, which is not accepted", k)
				e.Details["field"] = k
				return e
			case !utf8.ValidString(v):
				e := badRequest("invalid_query", "query parameter %q is not valid UTF-8", k)
				e.Details["field"] = k
				return e
			}
		}
	}
	return nil
}

// readRaw reads the body under the size cap and checks its content type
// (JSON, or YAML where the route accepts it, converted to JSON), JSON
// validity and UTF-8; nil for an empty body.
func (s *Server) readRaw(c *Call, rt Route) ([]byte, *Error) {
	raw, e := s.readCapped(c)
	if e != nil {
		return nil, e
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	ct := c.R.Header.Get("Content-Type")
	mt, _, perr := mime.ParseMediaType(ct)
	yamlBody := rt.AcceptYAML && perr == nil && (mt == "application/yaml" || mt == "application/x-yaml" || mt == "text/yaml")
	if yamlBody {
		if !utf8.Valid(raw) {
			return nil, badRequest("invalid_yaml", "request body is not valid UTF-8")
		}
		converted, err := yamlToJSON(raw)
		if err != nil {
			return nil, badRequest("invalid_yaml", "request body is not valid YAML: %v", err)
		}
		raw = converted
	} else if ct == "" || perr != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		if rt.AcceptYAML {
			return nil, apiErr("UnsupportedMediaType", "unsupported_media_type", "Content-Type must be application/json or application/yaml")
		}
		return nil, apiErr("UnsupportedMediaType", "unsupported_media_type", "Content-Type must be application/json")
	}
	if e := checkJSON(raw); e != nil {
		return nil, e
	}
	return raw, nil
}

// checkUnusedBody holds a route that takes no body to the same rules when
// a client sends one anyway (CONTRACT §10): over the cap 400, another
// content type 415, not JSON 400; an empty body is fine and a valid one is
// ignored.
func (s *Server) checkUnusedBody(c *Call, rt Route) *Error {
	raw, e := s.readRaw(c, rt)
	if e == nil {
		c.Raw = raw
	}
	return e
}

// readBody enforces the content type, the size cap and JSON validity
// (readRaw), then decodes into a fresh value of the route's Body type.
func (s *Server) readBody(c *Call, rt Route) *Error {
	raw, e := s.readRaw(c, rt)
	if e != nil {
		return e
	}
	if raw == nil {
		if !rt.OptionalBody {
			return badRequest("invalid_json", "request body is empty; a JSON object is required")
		}
		raw = []byte("{}")
	}
	c.Raw = raw
	v := reflect.New(reflect.TypeOf(rt.Body).Elem()).Interface()
	if e := decodeStrict(raw, v); e != nil {
		return e
	}
	c.body = v
	return nil
}

// writeOK encodes a success, with ETag and 304 for GET 200.
func (s *Server) writeOK(w http.ResponseWriter, r *http.Request, rt Route, out any) int {
	if st, ok := out.(streamOut); ok {
		st(w, r)
		return http.StatusOK
	}
	status := rt.Status
	if ws, ok := out.(withStatus); ok {
		status, out = ws.Status, ws.Body
	}
	if rt.Status == http.StatusNoContent || (out == nil && rt.Resp == nil) {
		w.WriteHeader(rt.Status)
		return rt.Status
	}
	var body []byte
	ctype := "application/json"
	if raw, ok := out.([]byte); ok && rt.RawBody != "" {
		body, ctype = raw, rt.RawBody
	} else {
		var err error
		if body, err = json.Marshal(out); err != nil {
			s.log.Error("encode response", "path", r.URL.Path, "error", err)
			writeEnvelope(w, versionOf(r.URL.Path), apiErr("InternalError", "internal", "internal error"))
			return http.StatusInternalServerError
		}
	}
	if r.Method == http.MethodGet && status == http.StatusOK {
		sum := sha256.Sum256(body)
		etag := `"` + hex.EncodeToString(sum[:]) + `"`
		w.Header().Set("ETag", etag)
		if etagMatches(r.Header.Get("If-None-Match"), etag) {
			w.WriteHeader(http.StatusNotModified)
			return http.StatusNotModified
		}
	}
	w.Header().Set("Content-Type", ctype)
	w.WriteHeader(status)
	_, _ = w.Write(body)
	return status
}

// withStatus lets a handler answer a documented non-default status with a
// body of its own (the probes' 503).
type withStatus struct {
	Status int
	Body   any
}

func etagMatches(header, etag string) bool {
	for _, part := range strings.Split(header, ",") {
		p := strings.TrimPrefix(strings.TrimSpace(part), "W/")
		if p == etag || p == "*" {
			return true
		}
	}
	return false
}

// yamlToJSON re-encodes a YAML document as JSON (a body of an AcceptYAML
// route), so that it is decoded and checked exactly like a JSON body.
func yamlToJSON(raw []byte) ([]byte, error) {
	var v any
	if err := yaml.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("not representable as JSON: %w", err)
	}
	return out, nil
}
