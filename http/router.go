package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"
)

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
	// Download routes write a large body as they read it (the evidence
	// packs): no request timeout cuts them (a client that leaves cancels
	// them), though they hold a request slot like any request.
	Download bool
	// AltBody, when set, is the media type (without parameters) of a second
	// success format the query can ask for instead of JSON (the handler
	// returns a rawAnswer): the scoreboard's format=csv.
	AltBody string
	// Waits marks a route that may wait with ?wait=N (an approval,
	// approvalwait.go): such a request takes a waiter's place instead of a
	// share and a slot, so that waiting agents, however many re-ask at
	// once, never shed anyone's work; with no place free it is admitted as
	// any request and answers at once.
	Waits bool
	// Proxy, when set, serves the request itself once the caller is
	// authenticated (the MCP proxy, which relays event streams both
	// ways): like a stream it holds no request slot and has no request
	// timeout, and it is counted and bounded as streams are; it reads its
	// own body (OwnBody) and writes its own answer.
	Proxy func(w http.ResponseWriter, c *Call)
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
	// admitted: the request counts against a share (admitTenant) and
	// takes a node slot for its work (takeSlot).
	admitted bool
	// slotHeld: the request holds one of the node's slots, for the work
	// of tenantHeld ("" for a super-admin call).
	slotHeld bool
	// agentHeld is the agent token whose authorize calls in flight this
	// call counts in (admitAgent).
	agentHeld string
	// tenantHeld is the tenant whose share of the node this request holds
	// (admitTenant), released when the request ends.
	tenantHeld string
	// streamHeld is the tenant whose share of the node's streams this
	// stream holds, released when it ends.
	streamHeld string
	// waiterHeld is the tenant whose place among the node's approval
	// waiters this request holds (Route.Waits), released when it ends.
	waiterHeld string
}

// Ctx is the request's context, bounded by the request timeout.
func (c *Call) Ctx() context.Context { return c.R.Context() }

// Param returns a path parameter.
func (c *Call) Param(name string) string { return c.Params.ByName(name) }

// Header gives the response headers to set.
func (c *Call) Header() http.Header { return c.header }

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
		if v == http.ErrAbortHandler { //nolint:errorlint // a sentinel panicked as is, never wrapped
			panic(v) // a download that failed midway: net/http drops the connection
		}
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
	s.methods = nil
	defer func() { slices.SortFunc(s.methods, byMethodOrder) }()
	for i := range s.routes {
		r := s.routes[i]
		if !slices.Contains(s.methods, r.Method) {
			s.methods = append(s.methods, r.Method)
		}
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
	// A path that exists under other methods answers 405 with Allow
	// (RFC 9110 15.5.6), an unknown path 404.
	allow := s.allowed(r.URL.Path)
	if allow == "" && versionOf(r.URL.Path) == "" && !exempt(r.URL.Path) {
		allow = s.allowed("/" + v + r.URL.Path)
	}
	if allow != "" {
		w.Header().Set("Allow", allow)
		e := apiErr("MethodNotAllowed", "method_not_allowed", "%s is not a method of %s; it takes %s", r.Method, r.URL.Path, allow)
		e.Details["allow"] = strings.Split(allow, ", ")
		writeEnvelope(w, v, e)
		return
	}
	writeEnvelope(w, v, notFound("path "+r.URL.Path))
}

// methodOrder is the order Allow lists methods in: reads first, as RFC
// 9110 lists them.
var methodOrder = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions}

func byMethodOrder(a, b string) int {
	ia, ib := slices.Index(methodOrder, a), slices.Index(methodOrder, b)
	if ia < 0 {
		ia = len(methodOrder)
	}
	if ib < 0 {
		ib = len(methodOrder)
	}
	if ia != ib {
		return ia - ib
	}
	return strings.Compare(a, b)
}

// allowed lists the methods path is served under, comma separated in
// the order of s.methods, or "" for a path no route matches.
func (s *Server) allowed(path string) string {
	var out []string
	for _, m := range s.methods {
		if _, ok := s.static[m+" "+path]; ok {
			out = append(out, m)
		} else if h, _, _ := s.router.Lookup(m, path); h != nil {
			out = append(out, m)
		}
	}
	return strings.Join(out, ", ")
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
	streaming := rt.Stream == StreamAlways || (rt.Stream == StreamOnWatch && r.URL.Query().Get("watch") == "true") || rt.Proxy != nil
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
	if !streaming && !rt.Download {
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
		defer cancel()
		r = r.WithContext(ctx)
	}

	c := &Call{R: r, Params: ps, Version: version, header: w.Header(), srv: s}
	defer c.release()
	// A stream is not request work: it never holds a slot. A public call
	// counts against the strangers' share here; a call with a credential
	// against its tenant's once it is known (admitTenant). Either takes a
	// node slot once its body has arrived (takeSlot).
	if !rt.Unversioned && !streaming && rt.Access == AccessPublic {
		if e := c.admitTenant(publicShare); e != nil {
			return fail(e)
		}
	}
	if e := s.identify(c, rt, streaming); e != nil {
		return fail(e)
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
	if e := s.takeBody(c, rt); e != nil {
		return fail(e)
	}
	if rt.Proxy != nil {
		sw := &statusWriter{ResponseWriter: w}
		rt.Proxy(sw, c)
		return sw.code()
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

// identify authenticates the call (a stream's ticket, or the route's
// credential) and admits it: a long poll (?wait) into the waiters' own
// bound, any other request against its tenant's share.
func (s *Server) identify(c *Call, rt Route, streaming bool) *Error {
	r := c.R
	if streaming && rt.Proxy == nil && bearer(r) == "" && r.URL.Query().Get("ticket") != "" {
		p, err := s.redeemTicket(r)
		if err != nil {
			ae, _ := toAPIError(err)
			return ae
		}
		c.Principal = p
		return nil
	}
	if rt.Access == AccessPublic || rt.SelfAuth {
		return nil
	}
	p, err := s.authenticate(r, rt.Access)
	if err != nil {
		ae, _ := toAPIError(err)
		return ae
	}
	c.Principal = p
	if wait := r.URL.Query().Get("wait"); rt.Waits && wait != "" && wait != "0" && s.waiters.enter(p.TenantID) {
		c.waiterHeld = p.TenantID
	} else if !rt.Unversioned && !streaming {
		return c.admitTenant(p.TenantID)
	}
	return nil
}

// takeBody reads the call's body as its route declares (a self-authenticating
// route reads it later, through c.readBody), refuses one a route without
// a body was sent, and takes the call's node slot when its handler reads
// no body of its own (a no-op when its body took it already).
func (s *Server) takeBody(c *Call, rt Route) *Error {
	r := c.R
	switch {
	case rt.Body != nil && rt.SelfAuth:
		c.readBody = func() *Error { return s.readBody(c, rt) }
	case rt.Body != nil:
		if e := s.readBody(c, rt); e != nil {
			return e
		}
	case !rt.OwnBody && r.Method != http.MethodGet && r.Method != http.MethodHead:
		if e := s.checkUnusedBody(c, rt); e != nil {
			return e
		}
	}
	if !rt.SelfAuth && !rt.OwnBody {
		return c.takeSlot()
	}
	return nil
}

// statusWriter records the status a Proxy route answered (for metrics);
// Unwrap lets http.ResponseController flush and set deadlines through it.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}
