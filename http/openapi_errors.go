package httpapi

// The error responses of the OpenAPI document: which statuses each route
// can answer, and the status envelope they carry.

import (
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// errorsFor lists the error statuses a route can answer: the ones every
// route of its kind has (by access level, body, path parameters, version
// prefix and stream mode), plus the route's own (Route.Errors and
// routeErrors).
func errorsFor(rt Route) []int {
	// 400: a query value or path segment with U+0000, a malformed
	// parameter; 408: a request body that does not arrive in time; 500:
	// anything unexpected.
	codes := map[int]bool{400: true, 408: true, 500: true}
	if !rt.Unversioned {
		codes[503], codes[504] = true, true // load shedding, shared state; the request timeout
	}
	if rt.Access != AccessPublic {
		codes[401], codes[403] = true, true
		if !rt.Unversioned && rt.Stream != StreamAlways {
			codes[429] = true // the tenant's share of the node is in use (tenant_concurrency)
		}
	}
	if rt.Access >= AccessViewer {
		// X-Svc-Tenant-ID missing (400) or naming an unknown tenant (404)
		// for the super-admin token.
		codes[400], codes[404] = true, true
	}
	if strings.Contains(rt.Path, "/:") {
		codes[404] = true // a malformed or unknown id in the path
	}
	if rt.Body != nil || (!rt.OwnBody && rt.Method != http.MethodGet && rt.Method != http.MethodHead) {
		// A body, even one a route does not use, is checked: over the size
		// cap or malformed 400, another content type 415.
		codes[400], codes[415] = true, true
	}
	if rt.Stream != StreamNever {
		codes[401], codes[503] = true, true // a bad ?ticket=; too_many_streams
	}
	for _, c := range rt.Errors {
		codes[c] = true
	}
	for _, c := range routeErrors[rt.Method+" "+rt.Path] {
		codes[c] = true
	}
	out := make([]int, 0, len(codes))
	for c := range codes {
		if c != rt.Status {
			out = append(out, c)
		}
	}
	sort.Ints(out)
	return out
}

// routeErrors are statuses a route answers besides the ones errorsFor
// derives and its registration lists.
var routeErrors = map[string][]int{
	// The WebSocket handshake: 426 without an upgrade, 400 for a bad
	// Sec-WebSocket-Key or version, 403 for a cross-origin browser, 501 when
	// the connection cannot be hijacked (all text/plain).
	"GET /ws/events": {400, 403, 426, 501},
	// 403: an environment the agent may not use, a tool outside its
	// bindings; 409: the same request_id still being decided; 503 also the
	// fail-closed deny body.
	"POST /authorize":                    {403, 409, 429, 503},
	"POST /stream-tickets":               {503},
	"GET /receipts/public-key":           {404},
	"POST /soc/rules/:rule_key/backtest": {404},
}

// errorStatuses are the statuses of the envelope's reasons.
func errorStatuses() map[int][]string {
	out := map[int][]string{}
	for reason, code := range reasonStatus {
		out[code] = append(out[code], reason)
	}
	for _, rs := range out {
		sort.Strings(rs)
	}
	return out
}

func errorResponseName(code int, version string) string {
	if version == "v1" {
		return fmt.Sprintf("Error%dV1", code)
	}
	return fmt.Sprintf("Error%d", code)
}

// errorResponse is the envelope answer for one status: code is the status,
// reason one of the reasons that map to it; 429 and 503 carry Retry-After.
func errorResponse(code int, statusRef *openapi3.SchemaRef, version string) *openapi3.Response {
	reasons := errorStatuses()[code]
	enum := make([]any, len(reasons))
	for i, r := range reasons {
		enum[i] = r
	}
	narrow := openapi3.NewObjectSchema()
	narrow.Properties = openapi3.Schemas{
		"code":   openapi3.NewIntegerSchema().WithEnum(code).NewRef(),
		"reason": openapi3.NewStringSchema().WithEnum(enum...).NewRef(),
	}
	sch := openapi3.NewAllOfSchema(statusRef.Value, narrow)
	sch.AllOf[0] = &openapi3.SchemaRef{Ref: statusRef.Ref}
	r := openapi3.NewResponse().WithDescription(http.StatusText(code) + " (status envelope)").WithJSONSchema(sch)
	r.Headers = versionHeaders(version)
	if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
		r.Headers["Retry-After"] = &openapi3.HeaderRef{Value: &openapi3.Header{Parameter: openapi3.Parameter{
			Description: "seconds to wait before retrying", Required: code == http.StatusTooManyRequests,
			Schema: openapi3.NewIntegerSchema().WithMin(0).NewRef()}}}
	}
	return r
}

// errorResponseFor is the response of rt for an error status: the shared
// envelope answer, or one that also admits the route's own body (the
// probes' 503, the fail-closed deny of authorize) or the WebSocket
// handshake's plain-text errors.
func errorResponseFor(rt Route, code int, version string, statusRef, own *openapi3.SchemaRef) *openapi3.ResponseRef {
	if _, ok := errorStatuses()[code]; !ok {
		// A status no reason maps to (426): the handshake's text.
		r := openapi3.NewResponse().WithDescription(http.StatusText(code)).
			WithContent(openapi3.NewContentWithSchema(openapi3.NewStringSchema(), []string{"text/plain"}))
		r.Headers = versionHeaders(version)
		return &openapi3.ResponseRef{Value: r}
	}
	var alt *openapi3.SchemaRef
	switch {
	case rt.Stream == StreamAlways && code != http.StatusServiceUnavailable && code != http.StatusUnauthorized:
		r := errorResponse(code, statusRef, version)
		r.Content["text/plain"] = openapi3.NewMediaType().WithSchema(describedString("a WebSocket handshake error"))
		return &openapi3.ResponseRef{Value: r}
	case rt.Method == http.MethodPost && rt.Path == "/authorize" && code == http.StatusServiceUnavailable:
		alt = &openapi3.SchemaRef{Ref: "#/components/schemas/FailClosedDeny"}
	case rt.Unversioned && code == http.StatusServiceUnavailable && own != nil:
		alt = own
	default:
		return &openapi3.ResponseRef{Ref: "#/components/responses/" + errorResponseName(code, version)}
	}
	r := errorResponse(code, statusRef, version)
	sch := openapi3.NewAnyOfSchema(r.Content["application/json"].Schema.Value, alt.Value)
	sch.AnyOf[1] = alt
	r.Content = openapi3.NewContentWithJSONSchema(sch)
	r.WithDescription(http.StatusText(code) + " (the status envelope or the route's own body)")
	return &openapi3.ResponseRef{Value: r}
}
