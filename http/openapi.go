package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3gen"

	"svc/messages"
	"svc/rules/policy"
)

// registerOpenAPI serves the generated document.
func (s *Server) registerOpenAPI() {
	s.register(Route{Method: "GET", Path: "/openapi.json", Tag: "operations", Resp: map[string]any{},
		Summary: "This OpenAPI 3.0 document, generated from the route registrations.",
		Handle:  s.openAPIDocument})
}

// openAPIDocument serves GET /openapi.json.
func (s *Server) openAPIDocument(*Call) (any, error) {
	doc, err := s.OpenAPI()
	if err != nil {
		return nil, err
	}
	return json.RawMessage(doc), nil
}

// policyInputDescription documents the policy input (CONTRACT §6) in the
// document's description and its PolicyInput schema.
const policyInputDescription = "The input of every policy module (the embedded base set, SVC_POLICY_FILE and tenant " +
	"policies), as `input` in Rego: `tenant_id`; `agent` (`id`, `name`, `risk_tier` as the server holds it, after any " +
	"escalation, never the caller's, and `status`); `tool_call` (`tool`, `action` normalized by percent-decoding, NFC, " +
	"trimming and lower-casing, `resource` or null, `parameters`); `mutates_state`; `trust_level` (the effective, " +
	"tightened trust of this hop) and `root_trust_level`; `environment` (\"\" when not given); `skill` (the skill " +
	"registry's `key`, `description`, `action`, `risk`, `mutates_state`, `approval_required` for the call's tool and " +
	"action, or null when it is not registered); `mcp` (for tools `mcp:<server_key>`: `server_key`, `server_status`, " +
	"`tool_status`, `trust_level`; null otherwise); the skill also carries `output_trust` and `labels`. When one of the " +
	"tenant's modules refers to them, `run` and `agent_history`: what the call's run and its agent did before this " +
	"call (CONTRACT §16; every field in docs/policies.md), absent otherwise. A module (package `svc.policies.<name>`) contributes objects to the " +
	"set `results`, each with `decision` (allow, deny, require_approval, redact or quarantine), `reason`, optional " +
	"`policy` (its id in `matched_policies`, by default the module's name) and, for redact, `redact_fields` (paths such as " +
	"`parameters.card_number`). Outcomes combine as quarantine > deny > require_approval > redact > allow; no result at " +
	"all is a deny with reason `no_matching_policy`. Example input: testdata/policy/input_example.json in the repository."

// OpenAPI generates the OpenAPI 3.0 document from the routes.
func (s *Server) OpenAPI() ([]byte, error) {
	doc := baseDocument(s.Version)
	g := newSchemaGens(doc)
	statusRef, err := addComponents(doc, g)
	if err != nil {
		return nil, err
	}
	for _, rt := range s.routes {
		if err := addRoute(doc, g, rt, statusRef); err != nil {
			return nil, err
		}
	}
	return json.Marshal(doc)
}

// baseDocument is the document without its operations and components.
func baseDocument(version string) *openapi3.T {
	return &openapi3.T{
		OpenAPI: "3.0.3",
		Info: &openapi3.Info{Title: "svc authorization gateway", Version: version,
			Description: "Authorization gateway for AI agents. Every route is served under /v2 (current) and /v1 " +
				"(deprecated: responses carry `deprecation: true` and `sunset: " + Sunset + "`). On an unversioned API path " +
				"the Accept header picks the version (application/vnd.svc.v2+json: v2, anything else: v1). Errors use the " +
				"status envelope (`kind`, `apiVersion`, `status`, `message`, `reason`, `details`, `code`) with a machine-readable " +
				"`details.error`; reasons map one-to-one to statuses, plus ServiceUnavailable (503) for load shedding and, " +
				"clustered, an unreachable Valkey; a database failure is InternalError (500). A request body that does not " +
				"arrive within the server's read timeout is 408. Every GET 200 carries a quoted SHA-256 ETag and answers 304 to a matching If-None-Match.\n\n" +
				"Policy input (schema PolicyInput). " + policyInputDescription},
		Paths: openapi3.NewPaths(),
		Components: &openapi3.Components{
			Schemas:   openapi3.Schemas{},
			Responses: openapi3.ResponseBodies{},
			SecuritySchemes: openapi3.SecuritySchemes{"bearer": &openapi3.SecuritySchemeRef{Value: openapi3.NewSecurityScheme().
				WithType("http").WithScheme("bearer").WithDescription(
				"Agent token (svc_agent_...), operator token (svc_op_...) or the super-admin token (SVC_ADMIN_TOKEN, with X-Svc-Tenant-ID on tenant endpoints).")}},
		},
	}
}

// schemaGens generate the schemas of the document's components. Request
// bodies and responses are generated apart: a request field is required
// only when its tag says so, a response field whenever it is not
// omitempty (encoding/json always writes it).
type schemaGens struct {
	schemas openapi3.Schemas
	reqGen  *openapi3gen.Generator
	respGen *openapi3gen.Generator
}

func newSchemaGens(doc *openapi3.T) schemaGens {
	return schemaGens{schemas: doc.Components.Schemas,
		reqGen:  openapi3gen.NewGenerator(openapi3gen.UseAllExportedFields(), openapi3gen.SchemaCustomizer(customizeSchema(false))),
		respGen: openapi3gen.NewGenerator(openapi3gen.UseAllExportedFields(), openapi3gen.SchemaCustomizer(customizeSchema(true)))}
}

func (g schemaGens) req(v any) (*openapi3.SchemaRef, error) {
	return g.reqGen.NewSchemaRefForValue(v, g.schemas)
}

func (g schemaGens) resp(v any) (*openapi3.SchemaRef, error) {
	return g.respGen.NewSchemaRefForValue(v, g.schemas)
}

// addComponents adds the shared schemas and error responses, and returns
// the reference of the status envelope.
func addComponents(doc *openapi3.T, g schemaGens) (*openapi3.SchemaRef, error) {
	env, err := g.resp(envelope{})
	if err != nil {
		return nil, err
	}
	doc.Components.Schemas["Status"] = env
	statusRef := &openapi3.SchemaRef{Ref: "#/components/schemas/Status"}
	failClosed, err := g.resp(messages.FailClosedBody{})
	if err != nil {
		return nil, err
	}
	doc.Components.Schemas["FailClosedDeny"] = failClosed
	feed, err := g.resp(feedFrame{})
	if err != nil {
		return nil, err
	}
	doc.Components.Schemas["FeedFrame"] = feed
	// The input every policy module sees (CONTRACT §6); an example is
	// testdata/policy/input_example.json.
	in, err := g.req(policy.Input{})
	if err != nil {
		return nil, err
	}
	in.Value.Description = policyInputDescription
	doc.Components.Schemas["PolicyInput"] = in
	// One shared response per error status: the envelope with that code and
	// the reasons that map to it.
	for code := range errorStatuses() {
		doc.Components.Responses[errorResponseName(code, "")] = &openapi3.ResponseRef{Value: errorResponse(code, statusRef, "")}
		doc.Components.Responses[errorResponseName(code, "v1")] = &openapi3.ResponseRef{Value: errorResponse(code, statusRef, "v1")}
	}
	return statusRef, nil
}

// addRoute adds a route's operations: under /v2 and /v1, or once for an
// unversioned path.
func addRoute(doc *openapi3.T, g schemaGens, rt Route, statusRef *openapi3.SchemaRef) error {
	op := openapi3.NewOperation()
	op.Summary = rt.Summary
	op.Tags = []string{rt.Tag}
	if rt.Access != AccessPublic {
		op.Security = &openapi3.SecurityRequirements{{"bearer": []string{}}}
		op.Description = "Access: " + accessName(rt.Access) + "."
	}
	for _, seg := range strings.Split(rt.Path, "/") {
		if strings.HasPrefix(seg, ":") {
			op.AddParameter(openapi3.NewPathParameter(seg[1:]).WithSchema(pathParamSchema(seg[1:])))
		}
	}
	if rt.Access >= AccessViewer {
		op.AddParameter(openapi3.NewHeaderParameter(TenantHeader).WithSchema(openapi3.NewStringSchema()).
			WithDescription("tenant for the super-admin token; with an operator token it must name the token's own tenant"))
	}
	params := rt.Query
	if rt.Paginated {
		params = append(append([]QueryParam{}, params...), pageQuery...)
	}
	for _, q := range params {
		op.AddParameter(openapi3.NewQueryParameter(q.Name).WithSchema(queryParamSchema(rt, q)).WithDescription(q.Description))
	}
	if rt.Body != nil {
		ref, err := g.req(rt.Body)
		if err != nil {
			return fmt.Errorf("httpapi: schema of %s %s body: %w", rt.Method, rt.Path, err)
		}
		types := []string{"application/json"}
		if rt.AcceptYAML {
			types = append(types, "application/yaml")
		}
		op.RequestBody = &openapi3.RequestBodyRef{Value: openapi3.NewRequestBody().
			WithRequired(!rt.OptionalBody).WithSchemaRef(ref, types)}
	}
	resp := openapi3.NewResponse().WithDescription(http.StatusText(rt.Status))
	var respRef *openapi3.SchemaRef
	switch {
	case rt.Proxy != nil && rt.Status == http.StatusNoContent:
		resp.WithDescription("No Content: the session ended on every node")
	case rt.Proxy != nil:
		// The MCP proxy relays JSON-RPC: one message as a JSON body, or an
		// event stream whose data lines are messages.
		resp.WithDescription("OK: a JSON-RPC message, or an event stream whose data lines are JSON-RPC messages (Streamable HTTP)")
		resp.WithContent(openapi3.Content{"application/json": openapi3.NewMediaType().WithSchema(describedObject("a JSON-RPC message")),
			"text/event-stream": openapi3.NewMediaType().WithSchema(describedString("server-sent events, each data line one JSON-RPC message"))})
		if rt.Method == http.MethodPost {
			op.RequestBody = &openapi3.RequestBodyRef{Value: openapi3.NewRequestBody().WithRequired(true).
				WithSchema(describedObject("one JSON-RPC message (request, notification or response); batches are refused"), []string{"application/json"})}
		}
	case rt.Stream == StreamAlways:
		// The handshake answers 101 without a body; the frames that follow
		// are FeedFrame JSON texts.
		resp.WithDescription("Switching Protocols: a WebSocket whose text frames are FeedFrame objects (#/components/schemas/FeedFrame).")
	case rt.RawBody != "":
		resp.WithContent(openapi3.NewContentWithSchema(openapi3.NewStringSchema(), []string{rt.RawBody}))
	case rt.Resp != nil && rt.Status != http.StatusNoContent:
		var err error
		if respRef, err = g.resp(rt.Resp); err != nil {
			return fmt.Errorf("httpapi: schema of %s %s response: %w", rt.Method, rt.Path, err)
		}
		resp.WithJSONSchemaRef(respRef)
		if rt.AltBody != "" {
			resp.Content[rt.AltBody] = openapi3.NewMediaType().WithSchema(describedString(
				"the same rows in another format, when the query asks for it (see the format parameter)"))
		}
		if rt.Stream == StreamOnWatch {
			resp.Content["text/event-stream"] = openapi3.NewMediaType().WithSchema(describedString(
				"with watch=true: server-sent events, each data line one row of the JSON array's item schema"))
		}
	}
	if rt.Unversioned {
		o := *op
		o.OperationID = operationID(rt.Method, rt.Path)
		o.Responses = routeResponses(rt, resp, "", statusRef, respRef)
		doc.AddOperation(openAPIPath(rt.Path), rt.Method, &o)
		return nil
	}
	for _, v := range apiVersions {
		o := *op
		o.OperationID = operationID(rt.Method, "/"+v+rt.Path)
		o.Deprecated = v == "v1"
		o.Responses = routeResponses(rt, resp, v, statusRef, respRef)
		doc.AddOperation(openAPIPath("/"+v+rt.Path), rt.Method, &o)
	}
	return nil
}

// routeResponses are a route's responses in one API version: its success
// (with the version's headers, the cursor of a paginated list, the ETag of
// a GET), 304 for a GET, every error status it can answer, and the MCP
// proxy's own.
func routeResponses(rt Route, resp *openapi3.Response, version string, statusRef, respRef *openapi3.SchemaRef) *openapi3.Responses {
	ok := *resp
	ok.Headers = versionHeaders(version)
	if rt.Paginated {
		ok.Headers["X-Next-Cursor"] = stringHeader("cursor of the next page; absent at the end", false)
	}
	if rt.Method == http.MethodGet && rt.Status == http.StatusOK {
		ok.Headers["ETag"] = stringHeader("quoted SHA-256 of the body (not on a stream)", false)
	}
	rs := openapi3.NewResponses()
	rs.Set(fmt.Sprint(rt.Status), &openapi3.ResponseRef{Value: &ok})
	if rt.Method == http.MethodGet && rt.Status == http.StatusOK {
		h := versionHeaders(version)
		h["ETag"] = stringHeader("the matching ETag", false)
		nm := openapi3.NewResponse().WithDescription("Not Modified: If-None-Match matched the ETag")
		nm.Headers = h
		rs.Set("304", &openapi3.ResponseRef{Value: nm})
	}
	for _, code := range errorsFor(rt) {
		rs.Set(fmt.Sprint(code), errorResponseFor(rt, code, version, statusRef, respRef))
	}
	if rt.Proxy != nil {
		proxyResponses(rs, rt, version, statusRef)
	}
	return rs
}

// versionHeaders are the headers every response of the version carries:
// Deprecation and Sunset on /v1.
func versionHeaders(version string) openapi3.Headers {
	h := openapi3.Headers{}
	if version == "v1" {
		h["Deprecation"] = &openapi3.HeaderRef{Value: &openapi3.Header{Parameter: openapi3.Parameter{
			Description: "true: /v1 is deprecated", Required: true, Schema: openapi3.NewStringSchema().WithEnum("true").NewRef()}}}
		h["Sunset"] = &openapi3.HeaderRef{Value: &openapi3.Header{Parameter: openapi3.Parameter{
			Description: "when /v1 is retired", Required: true, Schema: openapi3.NewStringSchema().WithEnum(Sunset).NewRef()}}}
	}
	return h
}

func accessName(a Access) string {
	return map[Access]string{AccessSuperAdmin: "super-admin token", AccessAgent: "agent token",
		AccessViewer: "operator token, any role", AccessApprover: "operator token, role approver or admin",
		AccessAdmin: "operator token, role admin", AccessAgentOrViewer: "agent token (own resources) or operator token",
		AccessAgentOrAdmin: "agent token (own resources) or operator token, role admin"}[a]
}

func openAPIPath(p string) string {
	parts := strings.Split(p, "/")
	for i, seg := range parts {
		if strings.HasPrefix(seg, ":") {
			parts[i] = "{" + seg[1:] + "}"
		}
	}
	return strings.Join(parts, "/")
}

func operationID(method, path string) string {
	r := strings.NewReplacer("/", "_", ":", "", "-", "_", ".", "_")
	return strings.ToLower(method) + r.Replace(path)
}

// proxyStatuses are the statuses the MCP proxy answers itself, beside the
// API's: 202 for a notification or a client's answer, 204 for DELETE,
// and the transport's errors, whose body is a JSON-RPC error response.
var proxyStatuses = map[int]string{
	http.StatusAccepted:              "Accepted: a notification or an answer to the upstream, relayed",
	http.StatusBadRequest:            "Bad Request: not one JSON-RPC message, or no Mcp-Session-Id where one is needed",
	http.StatusNotFound:              "Not Found: an unknown server (the envelope), or a session that is unknown, ended, another agent's or expired (JSON-RPC)",
	http.StatusMethodNotAllowed:      "Method Not Allowed: the upstream offers no event stream on GET",
	http.StatusNotAcceptable:         "Not Acceptable: Accept lacks application/json or text/event-stream",
	http.StatusRequestEntityTooLarge: "Content Too Large: the message is over SVC_MCP_PROXY_MAX_MESSAGE_BYTES",
	http.StatusUnsupportedMediaType:  "Unsupported Media Type: the body is not application/json",
	http.StatusBadGateway:            "Bad Gateway: the upstream failed a message that is not a request",
	http.StatusServiceUnavailable:    "Service Unavailable: the envelope, or the session could not be checked (JSON-RPC)",
}

// proxyResponses declares the MCP proxy's own answers.
func proxyResponses(rs *openapi3.Responses, rt Route, version string, statusRef *openapi3.SchemaRef) {
	codes := map[string][]int{
		http.MethodPost:   {202, 400, 404, 406, 413, 415, 502, 503},
		http.MethodGet:    {400, 404, 405, 406, 502, 503},
		http.MethodDelete: {400, 404, 503},
	}[rt.Method]
	for _, code := range codes {
		desc := proxyStatuses[code]
		r := openapi3.NewResponse().WithDescription(desc)
		r.Headers = versionHeaders(version)
		if code >= 400 {
			env := errorResponse(code, statusRef, version).Content["application/json"].Schema
			sch := openapi3.NewAnyOfSchema(env.Value, describedObject("a JSON-RPC error response"))
			sch.AnyOf[0] = env
			r.Content = openapi3.NewContentWithJSONSchema(sch)
		}
		rs.Set(fmt.Sprint(code), &openapi3.ResponseRef{Value: r})
	}
}

// describedObject is an object schema with a description.
func describedObject(desc string) *openapi3.Schema {
	s := openapi3.NewObjectSchema()
	s.Description = desc
	return s
}
