package gateway

// Every response the end-to-end tests receive through (*server).do is
// checked against the server's own OpenAPI document (GET /v2/openapi.json,
// fetched once per test binary): its status must be documented for the
// operation, declared headers must match, and a JSON body must match the
// status's schema. Drift between the handlers and the document fails the
// test that saw it.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// apiDoc is the document and its router, loaded by the first response
// checked (every server of one build serves the same document).
var apiDoc struct {
	mu     sync.Mutex
	doc    *openapi3.T
	router routers.Router
}

// documentOf returns the cached document, fetching it from s the first
// time; nil when it cannot be fetched now (a later response retries).
func documentOf(s *Server) (*openapi3.T, routers.Router, error) {
	apiDoc.mu.Lock()
	defer apiDoc.mu.Unlock()
	if apiDoc.doc != nil {
		return apiDoc.doc, apiDoc.router, nil
	}
	// A client of its own, without keep-alive, so that fetching the
	// document leaves no connection of the server's open.
	client := &http.Client{Timeout: 15 * time.Second}
	if tr, ok := s.Client.Transport.(*http.Transport); ok {
		tr = tr.Clone()
		tr.DisableKeepAlives = true
		client.Transport = tr
	}
	resp, err := client.Get(s.Base + "/v2/openapi.json")
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("GET /v2/openapi.json: status %d", resp.StatusCode)
	}
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("load the document: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, nil, fmt.Errorf("the document is not valid: %w", err)
	}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, nil, fmt.Errorf("route the document: %w", err)
	}
	apiDoc.doc, apiDoc.router = doc, router
	return doc, router, nil
}

// validationOptions check formats (uuid, date-time) as well as types.
var validationOptions = &openapi3filter.Options{
	IncludeResponseStatus: true,
	SchemaValidationOptions: []openapi3.SchemaValidationOption{
		openapi3.EnableFormatValidation(),
		openapi3.WithStringFormatValidator("uuid", openapi3.NewRegexpFormatValidator(openapi3.FormatOfStringForUUIDOfRFC9562)),
	},
}

// exemptPaths are served outside the version prefixes (SPEC 9.1); the ones
// the document does not describe (the console, the debug listener) are
// not checked.
func exemptPath(p string) bool {
	for _, e := range []string{"/health", "/livez", "/readyz", "/startupz", "/metrics", "/debug/", "/dashboard"} {
		if p == e || strings.HasPrefix(p, strings.TrimSuffix(e, "/")+"/") {
			return true
		}
	}
	return false
}

// CheckDocumented validates one response against the document (see the
// top of this file); a mismatch is a test error naming the request, the
// status and what does not match.
func CheckDocumented(t testing.TB, s *Server, req *http.Request, resp *http.Response, raw []byte) {
	t.Helper()
	base, err := url.Parse(s.Base)
	if err != nil || req.URL.Host != base.Host || req.Method == http.MethodHead ||
		resp.StatusCode == http.StatusSwitchingProtocols {
		return // another listener (debug), or no body to check
	}
	doc, router, err := documentOf(s)
	if err != nil {
		if apiDoc.doc == nil && resp.StatusCode < 500 {
			t.Logf("openapi: document not available yet, %s %s not checked: %v", req.Method, req.URL.Path, err)
		}
		return
	}
	fail := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if len(msg) > 2000 {
			msg = msg[:2000] + "..."
		}
		body := string(raw)
		if len(body) > 500 {
			body = body[:500] + "..."
		}
		t.Errorf("openapi: %s %s answered %d, which the document does not allow: %s\nbody: %s",
			req.Method, req.URL.RequestURI(), resp.StatusCode, msg, body)
	}
	// A 405 is the status envelope with Allow, whatever the document's
	// router makes of the path (the methods Allow lists are checked
	// against the route table by http's TestWrongMethodAnswers405WithAllow).
	if resp.StatusCode == http.StatusMethodNotAllowed {
		if resp.Header.Get("Allow") == "" {
			fail("a 405 without Allow")
		}
		if err := doc.Components.Schemas["Status"].Value.VisitJSON(jsonValue(raw), validationOptions.SchemaValidationOptions...); err != nil {
			fail("a 405 is not the status envelope: %v", err)
		}
		return
	}
	// Route the request as the server does: an unversioned API path goes
	// to /v2 when Accept asks for it, else to /v1.
	lookup := req.Clone(context.Background())
	lookup.Body = http.NoBody
	route, params, err := router.FindRoute(lookup)
	if err != nil && !exemptPath(req.URL.Path) && !strings.HasPrefix(req.URL.Path, "/v1/") && !strings.HasPrefix(req.URL.Path, "/v2/") {
		v := "/v1"
		for _, part := range strings.Split(req.Header.Get("Accept"), ",") {
			if mt, _, perr := mime.ParseMediaType(strings.TrimSpace(part)); perr == nil && strings.EqualFold(mt, "application/vnd.svc.v2+json") {
				v = "/v2"
			}
		}
		lookup.URL.Path, lookup.URL.RawPath = v+req.URL.Path, ""
		route, params, err = router.FindRoute(lookup)
	}
	if err != nil {
		if re := (*routers.RouteError)(nil); !errors.As(err, &re) {
			fail("routing against the document: %v", err)
			return
		}
		// No documented operation: the server's answer is the 404
		// envelope, or 405 with Allow for a documented path asked with
		// another method (paths the document leaves out, the console and
		// the debug handlers, are not checked).
		if exemptPath(req.URL.Path) && resp.StatusCode != http.StatusNotFound {
			return
		}
		want := http.StatusNotFound
		if err.Error() == routers.ErrMethodNotAllowed.Error() {
			want = http.StatusMethodNotAllowed
		}
		if resp.StatusCode != want {
			fail("no documented operation, so the answer must be %d", want)
			return
		}
		if err := doc.Components.Schemas["Status"].Value.VisitJSON(jsonValue(raw), validationOptions.SchemaValidationOptions...); err != nil {
			fail("a %d for an undocumented operation is not the status envelope: %v", want, err)
		}
		return
	}
	if route.Operation.Responses.Status(resp.StatusCode) == nil {
		fail("status %d is not among the operation's responses", resp.StatusCode)
		return
	}
	opts := *validationOptions
	ct := resp.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	if len(raw) > 0 && mt != "application/json" {
		// Not JSON (text, HTML, NDJSON, an event stream, a WebSocket
		// handshake error): the media type must be declared; the body is
		// not parsed.
		r := route.Operation.Responses.Status(resp.StatusCode).Value
		if r.Content.Get(ct) == nil {
			fail("Content-Type %q is not declared for this status", ct)
			return
		}
		opts.ExcludeResponseBody = true
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: lookup, PathParams: params, Route: route, Options: &opts},
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Body:                   io.NopCloser(bytes.NewReader(raw)),
		Options:                &opts,
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		fail("%v", err)
	}
}

// jsonValue decodes raw for schema validation (nil when it is not JSON).
func jsonValue(raw []byte) any {
	var v any
	if err := jsonDecode(raw, &v); err != nil {
		return string(raw)
	}
	return v
}

func jsonDecode(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return dec.Decode(v)
}
