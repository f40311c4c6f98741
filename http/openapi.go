package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3gen"

	"svc/messages"
	"svc/persistence"
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

// policyInputDescription documents the policy input (CONTRACT §6) in the
// document's description and its PolicyInput schema.
const policyInputDescription = "The input of every policy module (the embedded base set, SVC_POLICY_FILE and tenant " +
	"policies), as `input` in Rego: `tenant_id`; `agent` (`id`, `name`, `risk_tier` as the server holds it, after any " +
	"escalation, never the caller's, and `status`); `tool_call` (`tool`, `action` normalized by percent-decoding, NFC, " +
	"trimming and lower-casing, `resource` or null, `parameters`); `mutates_state`; `trust_level` (the effective, " +
	"tightened trust of this hop) and `root_trust_level`; `environment` (\"\" when not given); `skill` (the skill " +
	"registry's `key`, `description`, `action`, `risk`, `mutates_state`, `approval_required` for the call's tool and " +
	"action, or null when it is not registered); `mcp` (for tools `mcp:<server_key>`: `server_key`, `server_status`, " +
	"`tool_status`, `trust_level`; null otherwise). A module (package `svc.policies.<name>`) contributes objects to the " +
	"set `results`, each with `decision` (allow, deny, require_approval, redact or quarantine), `reason`, optional " +
	"`policy` (its id in `matched_policies`, by default the module's name) and, for redact, `redact_fields` (paths such as " +
	"`parameters.card_number`). Outcomes combine as quarantine > deny > require_approval > redact > allow; no result at " +
	"all is a deny with reason `no_matching_policy`. Example input: testdata/policy/input_example.json in the repository."

// OpenAPI generates the OpenAPI 3.0 document from the routes.
func (s *Server) OpenAPI() ([]byte, error) {
	doc := &openapi3.T{
		OpenAPI: "3.0.3",
		Info: &openapi3.Info{Title: "svc authorization gateway", Version: s.Version,
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
	// Request bodies and responses are generated apart: a request field is
	// required only when its tag says so, a response field whenever it is
	// not omitempty (encoding/json always writes it).
	reqGen := openapi3gen.NewGenerator(openapi3gen.UseAllExportedFields(), openapi3gen.SchemaCustomizer(customizeSchema(false)))
	respGen := openapi3gen.NewGenerator(openapi3gen.UseAllExportedFields(), openapi3gen.SchemaCustomizer(customizeSchema(true)))
	schemaOf := func(gen *openapi3gen.Generator, v any) (*openapi3.SchemaRef, error) {
		return gen.NewSchemaRefForValue(v, doc.Components.Schemas)
	}
	respSchema := func(v any) (*openapi3.SchemaRef, error) { return schemaOf(respGen, v) }
	env, err := respSchema(envelope{})
	if err != nil {
		return nil, err
	}
	doc.Components.Schemas["Status"] = env
	statusRef := &openapi3.SchemaRef{Ref: "#/components/schemas/Status"}
	failClosed, err := respSchema(messages.FailClosedBody{})
	if err != nil {
		return nil, err
	}
	doc.Components.Schemas["FailClosedDeny"] = failClosed
	feed, err := respSchema(feedFrame{})
	if err != nil {
		return nil, err
	}
	doc.Components.Schemas["FeedFrame"] = feed
	// The input every policy module sees (CONTRACT §6); an example is
	// testdata/policy/input_example.json.
	in, err := schemaOf(reqGen, policy.Input{})
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

	for _, rt := range s.routes {
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
			ref, err := schemaOf(reqGen, rt.Body)
			if err != nil {
				return nil, fmt.Errorf("httpapi: schema of %s %s body: %w", rt.Method, rt.Path, err)
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
		case rt.Stream == StreamAlways:
			// The handshake answers 101 without a body; the frames that follow
			// are FeedFrame JSON texts.
			resp.WithDescription("Switching Protocols: a WebSocket whose text frames are FeedFrame objects (#/components/schemas/FeedFrame).")
		case rt.RawBody != "":
			resp.WithContent(openapi3.NewContentWithSchema(openapi3.NewStringSchema(), []string{rt.RawBody}))
		case rt.Resp != nil && rt.Status != http.StatusNoContent:
			if respRef, err = respSchema(rt.Resp); err != nil {
				return nil, fmt.Errorf("httpapi: schema of %s %s response: %w", rt.Method, rt.Path, err)
			}
			resp.WithJSONSchemaRef(respRef)
			if rt.Stream == StreamOnWatch {
				resp.Content["text/event-stream"] = openapi3.NewMediaType().WithSchema(describedString(
					"with watch=true: server-sent events, each data line one row of the JSON array's item schema"))
			}
		}
		responses := func(version string) *openapi3.Responses {
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
			return rs
		}
		if rt.Unversioned {
			o := *op
			o.OperationID = operationID(rt.Method, rt.Path)
			o.Responses = responses("")
			doc.AddOperation(openAPIPath(rt.Path), rt.Method, &o)
			continue
		}
		for _, v := range apiVersions {
			o := *op
			o.OperationID = operationID(rt.Method, "/"+v+rt.Path)
			o.Deprecated = v == "v1"
			o.Responses = responses(v)
			doc.AddOperation(openAPIPath("/"+v+rt.Path), rt.Method, &o)
		}
	}
	return json.Marshal(doc)
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

func describedString(desc string) *openapi3.Schema {
	sch := openapi3.NewStringSchema()
	sch.Description = desc
	return sch
}

func stringHeader(desc string, required bool) *openapi3.HeaderRef {
	return &openapi3.HeaderRef{Value: &openapi3.Header{Parameter: openapi3.Parameter{
		Description: desc, Required: required, Schema: openapi3.NewStringSchema().NewRef()}}}
}

// pathParamSchema is the schema of a path parameter. Identifiers are UUID
// text (a malformed one answers 404 like an unknown one, CONTRACT §10).
func pathParamSchema(name string) *openapi3.Schema {
	switch name {
	case "agent_id", "approval_id", "decision_id", "receipt_id", "incident_id", "subscription_id", "token_id", "tenant_id":
		return openapi3.NewUUIDSchema()
	case "name", "rule_key":
		return openapi3.NewStringSchema().WithPattern(`^[a-z0-9_]{1,64}$`)
	case "skill_key", "tool_key":
		return openapi3.NewStringSchema().WithMinLength(1).WithMaxLength(128)
	}
	return openapi3.NewStringSchema()
}

// queryParamSchema is the schema of a query parameter, with the limits the
// handlers enforce.
func queryParamSchema(rt Route, q QueryParam) *openapi3.Schema {
	switch q.Name {
	case "limit", "offset":
		return openapi3.NewIntegerSchema().WithMin(0)
	case "severity":
		return openapi3.NewStringSchema().WithPattern(namedPatterns["severity"])
	case "watch":
		return openapi3.NewBoolSchema()
	case "status":
		if rt.Path == "/incidents" {
			return openapi3.NewStringSchema().WithPattern(`^([Oo][Pp][Ee][Nn]|[Cc][Ll][Oo][Ss][Ee][Dd])?$`)
		}
	}
	switch q.Type {
	case "integer":
		return openapi3.NewIntegerSchema()
	case "boolean":
		return openapi3.NewBoolSchema()
	}
	return openapi3.NewStringSchema()
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

// Schema rules from struct tags. A field's `openapi` tag is a
// comma-separated list of:
//
//	required          the request must carry the field, not null (a
//	                  response's field is required whenever it is not
//	                  omitempty)
//	notnull, nullable override the default nullability: pointers, slices,
//	                  maps and untyped values are nullable, as
//	                  encoding/json writes and reads null for them
//	enum=a|b|c        the allowed values ("" for the empty string)
//	pattern=NAME      one of namedPatterns
//	format=F          uuid, date-time, uri, ...
//	minLength=N, maxLength=N, min=X, max=X, minItems=N, maxItems=N,
//	minProperties=N   limits
//	items.R, values.R rule R for the items of an array or the values of a
//	                  map
//
// fieldRules holds the same rules for types whose declarations live
// outside package httpapi and messages.
var fieldRules = map[reflect.Type]map[string]string{
	reflect.TypeFor[persistence.SkillAction](): {"risk": "required,enum=low|medium|high|critical"},
}

// namedPatterns are the patterns the tags may name (ECMA 262 syntax, which
// kin-openapi translates for Go).
var namedPatterns = map[string]string{
	// nonblank: at least one character that strings.TrimSpace keeps.
	"nonblank": `[^\t\n\v\f\r \u0085\u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000]`,
	// key: a policy name or rule key.
	"key": `^[a-z0-9_]{1,64}$`,
	// severity: INFO, LOW, MEDIUM or HIGH in any case.
	"severity": `^([Ii][Nn][Ff][Oo]|[Ll][Oo][Ww]|[Mm][Ee][Dd][Ii][Uu][Mm]|[Hh][Ii][Gg][Hh])$`,
	// webhook_severity and webhook_format: info or high, json or cef, in
	// any case, surrounding white space ignored.
	"webhook_severity": `^\s*([Ii][Nn][Ff][Oo]|[Hh][Ii][Gg][Hh])\s*$`,
	"webhook_format":   `^\s*([Jj][Ss][Oo][Nn]|[Cc][Ee][Ff])\s*$`,
	// http_url: an absolute http or https URL without white space.
	"http_url": `^[Hh][Tt][Tt][Pp][Ss]?://[^\s/?#]+[^\s]*$`,
	// signing_key: "generate" or standard base64 of at least 32 bytes (44
	// characters).
	"signing_key": `^(generate|([A-Za-z0-9+/]{4}){10}([A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4}|([A-Za-z0-9+/]{4})+([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})))$`,
}

// customizeSchema applies the tag rules to each struct's properties.
func customizeSchema(response bool) openapi3gen.SchemaCustomizerFn {
	return func(_ string, t reflect.Type, _ reflect.StructTag, schema *openapi3.Schema) error {
		if t.Kind() == reflect.Interface || t == reflect.TypeFor[json.RawMessage]() {
			// Any JSON value, null included (a map's any values, a raw
			// message); a struct field may still say notnull.
			schema.Nullable = true
		}
		if t.Kind() != reflect.Struct || schema.Properties == nil {
			return nil
		}
		for _, f := range jsonFields(t) {
			prop := schema.Properties[f.name]
			if prop == nil || prop.Value == nil {
				continue
			}
			ps := prop.Value
			switch f.typ.Kind() {
			case reflect.Slice, reflect.Map, reflect.Interface, reflect.Pointer:
				ps.Nullable = true
			}
			if response && !f.omitempty {
				schema.Required = append(schema.Required, f.name)
			}
			rules := f.tag
			if extra := fieldRules[t][f.name]; extra != "" {
				rules = extra
			}
			if rules == "" {
				continue
			}
			for _, rule := range strings.Split(rules, ",") {
				if rule == "required" && !response {
					schema.Required = append(schema.Required, f.name)
				}
				if err := applyRule(ps, rule); err != nil {
					return fmt.Errorf("httpapi: %s.%s: %w", t.Name(), f.name, err)
				}
			}
		}
		sort.Strings(schema.Required)
		return nil
	}
}

// applyRule applies one tag rule to a property's schema.
func applyRule(ps *openapi3.Schema, rule string) error {
	key, val, _ := strings.Cut(rule, "=")
	if sub, rest, ok := strings.Cut(key, "."); ok && (sub == "items" || sub == "values") {
		var target *openapi3.SchemaRef
		if sub == "items" {
			target = ps.Items
		} else {
			target = ps.AdditionalProperties.Schema
		}
		if target == nil || target.Value == nil {
			return fmt.Errorf("rule %q: no %s schema", rule, sub)
		}
		return applyRule(target.Value, rest+strings.TrimPrefix(rule, key))
	}
	num := func() (uint64, error) { return strconv.ParseUint(val, 10, 64) }
	switch key {
	case "required", "notnull":
		ps.Nullable = false
	case "nullable":
		ps.Nullable = true
	case "enum":
		for _, v := range strings.Split(val, "|") {
			ps.Enum = append(ps.Enum, v)
		}
	case "pattern":
		p, ok := namedPatterns[val]
		if !ok {
			return fmt.Errorf("unknown pattern %q", val)
		}
		ps.Pattern = p
	case "format":
		ps.Format = val
	case "minLength", "maxLength", "minItems", "maxItems", "minProperties":
		n, err := num()
		if err != nil {
			return fmt.Errorf("rule %q: %w", rule, err)
		}
		switch key {
		case "minLength":
			ps.MinLength = n
		case "maxLength":
			ps.MaxLength = &n
		case "minItems":
			ps.MinItems = n
		case "maxItems":
			ps.MaxItems = &n
		case "minProperties":
			ps.MinProps = n
		}
	case "min", "max":
		x, err := strconv.ParseFloat(val, 64)
		if err != nil {
			return fmt.Errorf("rule %q: %w", rule, err)
		}
		if key == "min" {
			ps.Min = &x
		} else {
			ps.Max = &x
		}
	default:
		return fmt.Errorf("unknown rule %q", rule)
	}
	return nil
}

// jsonField is one member of a struct's JSON object.
type jsonField struct {
	name      string
	typ       reflect.Type
	omitempty bool
	tag       string
}

// jsonFields lists the members encoding/json writes for struct type t,
// embedded structs' promoted fields included (the shallowest wins).
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	depth := map[string]int{}
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			continue // promoted: its fields are listed on their own
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if d, seen := depth[name]; seen && d <= len(f.Index) {
			continue
		}
		depth[name] = len(f.Index)
		jf := jsonField{name: name, typ: ft, omitempty: strings.Contains(","+opts+",", ",omitempty,"), tag: f.Tag.Get("openapi")}
		replaced := false
		for i := range out {
			if out[i].name == name {
				out[i], replaced = jf, true
			}
		}
		if !replaced {
			out = append(out, jf)
		}
	}
	return out
}
