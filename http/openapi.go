package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3gen"

	"svc/rules/policy"
)

// registerOpenAPI serves the generated document.
func (s *Server) registerOpenAPI() {
	s.register(Route{Method: "GET", Path: "/openapi.json", Tag: "operations", Resp: map[string]any{},
		Summary: "This OpenAPI 3.0 document, generated from the route registrations.",
		Handle: func(*Call) (any, error) {
			doc, err := s.OpenAPI()
			if err != nil {
				return nil, err
			}
			return json.RawMessage(doc), nil
		}})
}

// errorsFor lists the error statuses every route of an access level can
// answer, plus the route's own.
func errorsFor(rt Route) []int {
	codes := map[int]bool{500: true}
	if !rt.Unversioned {
		codes[503] = true
		codes[504] = true
	}
	if rt.Access != AccessPublic {
		codes[401], codes[403] = true, true
	}
	if rt.Access >= AccessViewer || rt.Access == AccessAgentOrViewer {
		codes[400] = true // X-Svc-Tenant-ID missing for the super-admin token
	}
	if rt.Body != nil {
		codes[400], codes[415] = true, true
	}
	if rt.Paginated {
		codes[400] = true
	}
	for _, c := range rt.Errors {
		codes[c] = true
	}
	out := make([]int, 0, len(codes))
	for c := range codes {
		out = append(out, c)
	}
	sort.Ints(out)
	return out
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
				"clustered, an unreachable Valkey; a database failure is InternalError (500). Every GET 200 carries a quoted SHA-256 ETag and answers 304 to a matching If-None-Match.\n\n" +
				"Policy input (schema PolicyInput). " + policyInputDescription},
		Paths: openapi3.NewPaths(),
		Components: &openapi3.Components{
			Schemas: openapi3.Schemas{},
			SecuritySchemes: openapi3.SecuritySchemes{"bearer": &openapi3.SecuritySchemeRef{Value: openapi3.NewSecurityScheme().
				WithType("http").WithScheme("bearer").WithDescription(
				"Agent token (svc_agent_...), operator token (svc_op_...) or the super-admin token (SVC_ADMIN_TOKEN, with X-Svc-Tenant-ID on tenant endpoints).")}},
		},
	}
	gen := openapi3gen.NewGenerator(openapi3gen.UseAllExportedFields())
	schema := func(v any) (*openapi3.SchemaRef, error) {
		ref, err := gen.NewSchemaRefForValue(v, doc.Components.Schemas)
		if err != nil {
			return nil, err
		}
		return ref, nil
	}
	env, err := schema(envelope{})
	if err != nil {
		return nil, err
	}
	doc.Components.Schemas["Status"] = env
	statusRef := &openapi3.SchemaRef{Ref: "#/components/schemas/Status"}
	// The input every policy module sees (CONTRACT §6); an example is
	// testdata/policy/input_example.json.
	in, err := schema(policy.Input{})
	if err != nil {
		return nil, err
	}
	in.Value.Description = policyInputDescription
	doc.Components.Schemas["PolicyInput"] = in

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
				op.AddParameter(openapi3.NewPathParameter(seg[1:]).WithSchema(openapi3.NewStringSchema()))
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
			sch := openapi3.NewStringSchema()
			switch q.Type {
			case "integer":
				sch = openapi3.NewIntegerSchema()
			case "boolean":
				sch = openapi3.NewBoolSchema()
			}
			op.AddParameter(openapi3.NewQueryParameter(q.Name).WithSchema(sch).WithDescription(q.Description))
		}
		if rt.Body != nil {
			ref, err := schema(rt.Body)
			if err != nil {
				return nil, fmt.Errorf("httpapi: schema of %s %s body: %w", rt.Method, rt.Path, err)
			}
			op.RequestBody = &openapi3.RequestBodyRef{Value: openapi3.NewRequestBody().
				WithRequired(!rt.OptionalBody).WithJSONSchemaRef(ref)}
		}
		resp := openapi3.NewResponse().WithDescription(http.StatusText(rt.Status))
		switch {
		case rt.RawBody != "":
			resp.WithContent(openapi3.NewContentWithSchema(openapi3.NewStringSchema(), []string{rt.RawBody}))
		case rt.Resp != nil && rt.Status != http.StatusNoContent:
			ref, err := schema(rt.Resp)
			if err != nil {
				return nil, fmt.Errorf("httpapi: schema of %s %s response: %w", rt.Method, rt.Path, err)
			}
			resp.WithJSONSchemaRef(ref)
		}
		if rt.Paginated {
			resp.Headers = openapi3.Headers{"X-Next-Cursor": &openapi3.HeaderRef{Value: &openapi3.Header{Parameter: openapi3.Parameter{
				Description: "cursor of the next page; absent at the end", Schema: openapi3.NewStringSchema().NewRef()}}}}
		}
		op.Responses = openapi3.NewResponses()
		op.Responses.Set(fmt.Sprint(rt.Status), &openapi3.ResponseRef{Value: resp})
		for _, code := range errorsFor(rt) {
			if code == rt.Status {
				continue
			}
			er := openapi3.NewResponse().WithDescription(http.StatusText(code)).WithJSONSchemaRef(statusRef)
			op.Responses.Set(fmt.Sprint(code), &openapi3.ResponseRef{Value: er})
		}
		if rt.Unversioned {
			o := *op
			o.OperationID = operationID(rt.Method, rt.Path)
			doc.AddOperation(openAPIPath(rt.Path), rt.Method, &o)
			continue
		}
		for _, v := range apiVersions {
			o := *op
			o.OperationID = operationID(rt.Method, "/"+v+rt.Path)
			o.Deprecated = v == "v1"
			doc.AddOperation(openAPIPath("/"+v+rt.Path), rt.Method, &o)
		}
	}
	return json.Marshal(doc)
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
