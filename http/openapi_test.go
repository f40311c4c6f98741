package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/hashicorp/go-hclog"

	"svc/actors"
	"svc/broadcast"
	"svc/config"
	"svc/control"
	"svc/leader"
	"svc/messages"
	"svc/persistence"
	"svc/persistence/sharedstate"
	"svc/persistence/sqlite"
)

func newTestServer(t *testing.T) *Server {
	t.Helper()
	cfg, err := config.Load(func(k string) (string, bool) {
		if k == "DATABASE_URL" {
			return "sqlite://:memory:", true
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	store, err := sqlite.Open(context.Background(), sqlite.Options{Path: ":memory:"})
	if err != nil {
		t.Fatal(err)
	}
	shared := sharedstate.NewMemory()
	t.Cleanup(func() { _ = store.Close(); _ = shared.Close() })
	sys := actors.NewSystem(hclog.NewNullLogger())
	registry := actors.NewRegistry()
	plane := control.New(control.Deps{Config: cfg, Store: store, Registry: registry})
	return New(Deps{Control: plane, Config: cfg, Store: store, Shared: shared, Registry: registry, Leader: &leader.Leadership{},
		Pool: &actors.PoolSample{}, Events: broadcast.NewEventBus(sys.Root, 8), Log: hclog.NewNullLogger(),
		Heartbeat: func(messages.Heartbeat) {}, Version: "test"})
}

// fullStore is the whole store behind s's read-only view, for a test's
// set-up (handlers only read: every change goes through s.Control).
func fullStore(s *Server) persistence.Store {
	full, ok := s.Store.(persistence.Store)
	if !ok {
		panic("the test server's store is not a persistence.Store")
	}
	return full
}

// tenantCaller creates a tenant on s and returns a function that calls s
// as its admin operator with a JSON body, answering the status and the
// decoded JSON answer.
func tenantCaller(t *testing.T, s *Server) func(method, path, body string) (int, map[string]any) {
	t.Helper()
	_, tok, err := control.NewTenant(context.Background(), fullStore(s), "acme", "test")
	if err != nil {
		t.Fatal(err)
	}
	return func(method, path, body string) (int, map[string]any) {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		var m map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &m)
		return rec.Code, m
	}
}

func TestOpenAPIDocumentIsValidAndComplete(t *testing.T) {
	s := newTestServer(t)
	for _, path := range []string{"/v1/openapi.json", "/v2/openapi.json"} {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s = %d %s", path, rec.Code, rec.Body)
		}
		loader := openapi3.NewLoader()
		doc, err := loader.LoadFromData(rec.Body.Bytes())
		if err != nil {
			t.Fatalf("%s does not load: %v", path, err)
		}
		if err := doc.Validate(context.Background()); err != nil {
			t.Fatalf("%s is not a valid OpenAPI document: %v", path, err)
		}
		if doc.OpenAPI != "3.0.3" {
			t.Fatalf("openapi = %q", doc.OpenAPI)
		}
		// The policy input is documented (CONTRACT §6): a schema with every
		// field of testdata/policy/input_example.json, described in the
		// document's description.
		in := doc.Components.Schemas["PolicyInput"]
		if in == nil || in.Value == nil {
			t.Fatalf("%s has no PolicyInput schema", path)
		}
		raw, err := os.ReadFile("../testdata/policy/input_example.json")
		if err != nil {
			t.Fatal(err)
		}
		var example map[string]any
		if err := json.Unmarshal(raw, &example); err != nil {
			t.Fatal(err)
		}
		for field := range example {
			if in.Value.Properties[field] == nil {
				t.Errorf("PolicyInput lacks %s", field)
			}
			if !strings.Contains(doc.Info.Description, "`"+field+"`") {
				t.Errorf("the description does not document the policy input's %s", field)
			}
		}
		for _, field := range []string{"server_key", "server_status", "tool_status", "risk_tier", "approval_required"} {
			if !strings.Contains(doc.Info.Description, "`"+field+"`") {
				t.Errorf("the description does not document the policy input's %s", field)
			}
		}
		// Every mounted route is documented: the static table and every
		// registered route under each prefix.
		documented := func(method, p string) bool {
			item := doc.Paths.Value(openAPIPath(p))
			return item != nil && item.GetOperation(method) != nil
		}
		for key := range s.static {
			method, p, _ := strings.Cut(key, " ")
			if !documented(method, p) {
				t.Errorf("mounted route %s %s is not in the document", method, p)
			}
		}
		for _, rt := range s.Routes() {
			paths := []string{rt.Path}
			if !rt.Unversioned {
				paths = []string{"/v1" + rt.Path, "/v2" + rt.Path}
			}
			for _, p := range paths {
				if !documented(rt.Method, p) {
					t.Errorf("route %s %s is not in the document", rt.Method, p)
				}
			}
		}
	}
}

func TestEnvelopeReasonsMapToOneStatus(t *testing.T) {
	tests := []struct {
		name   string
		reason string
		want   int
	}{
		{"bad request", "BadRequest", 400}, {"unauthorized", "Unauthorized", 401}, {"forbidden", "Forbidden", 403},
		{"not found", "NotFound", 404}, {"conflict", "Conflict", 409}, {"already exists", "AlreadyExists", 409},
		{"invalid", "Invalid", 422}, {"too many", "TooManyRequests", 429}, {"internal", "InternalError", 500},
		{"unknown", "Unknown", 500}, {"not implemented", "NotImplemented", 501}, {"timeout", "Timeout", 504},
		{"media type", "UnsupportedMediaType", 415}, {"unavailable", "ServiceUnavailable", 503},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			writeEnvelope(rec, "v2", &Error{Reason: tc.reason, Message: "m"})
			var env envelope
			if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil {
				t.Fatal(err)
			}
			if rec.Code != tc.want || env.Code != tc.want || env.Reason != tc.reason || env.Kind != "Status" ||
				env.APIVersion != "v2" || env.Status != "Failure" || env.Details == nil {
				t.Fatalf("got %d %+v", rec.Code, env)
			}
		})
	}
}

func TestLoadSheddingAnswers503(t *testing.T) {
	s := newTestServer(t)
	s.adm.held = s.adm.total // every slot busy
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/v2/version", nil))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" ||
		!strings.Contains(rec.Body.String(), `"ServiceUnavailable"`) {
		t.Fatalf("got %d %s", rec.Code, rec.Body)
	}
	// Probes are not shed: an orchestrator must still see the node.
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/livez", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/livez under load = %d", rec.Code)
	}
}

// loadDoc generates and loads the document of a test server.
func loadDoc(t *testing.T) *openapi3.T {
	t.Helper()
	raw, err := newTestServer(t).OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return doc
}

func TestOpenAPIDeclaresWhatHandlersEnforce(t *testing.T) {
	doc := loadDoc(t)
	op := func(method, path string) *openapi3.Operation {
		t.Helper()
		item := doc.Paths.Value(path)
		if item == nil || item.GetOperation(method) == nil {
			t.Fatalf("%s %s is not documented", method, path)
		}
		return item.GetOperation(method)
	}
	body := func(method, path string) *openapi3.Schema {
		t.Helper()
		rb := op(method, path).RequestBody
		if rb == nil || rb.Value.Content.Get("application/json") == nil {
			t.Fatalf("%s %s has no JSON request body", method, path)
		}
		return rb.Value.Content.Get("application/json").Schema.Value
	}
	respSchema := func(method, path, status string) *openapi3.Schema {
		t.Helper()
		r := op(method, path).Responses.Value(status)
		if r == nil || r.Value.Content.Get("application/json") == nil {
			t.Fatalf("%s %s has no JSON %s response", method, path, status)
		}
		return r.Value.Content.Get("application/json").Schema.Value
	}
	has := func(list []string, v string) bool {
		for _, x := range list {
			if x == v {
				return true
			}
		}
		return false
	}
	enumHas := func(s *openapi3.Schema, v string) bool {
		for _, x := range s.Enum {
			if x == v {
				return true
			}
		}
		return false
	}

	t.Run("authorize request", func(t *testing.T) {
		b := body("POST", "/v2/authorize")
		if !has(b.Required, "tool_call") {
			t.Errorf("tool_call not required: %v", b.Required)
		}
		tc := b.Properties["tool_call"].Value
		if !has(tc.Required, "tool") || !has(tc.Required, "action") || tc.Nullable {
			t.Errorf("tool_call: required %v, nullable %v", tc.Required, tc.Nullable)
		}
		if tc.Properties["tool"].Value.Pattern == "" {
			t.Errorf("tool_call.tool may be blank")
		}
		st := b.Properties["source_trust"].Value
		for _, v := range []string{"", "trusted_internal_signed", "unknown", "malicious_suspected"} {
			if !enumHas(st, v) {
				t.Errorf("source_trust enum %v lacks %q", st.Enum, v)
			}
		}
		if enumHas(st, "trusted") {
			t.Errorf("source_trust enum %v admits a value the handler refuses", st.Enum)
		}
		n := b.Properties["nonce"].Value
		if n.MinLength != 8 || n.MaxLength == nil || *n.MaxLength != 128 || !n.Nullable {
			t.Errorf("nonce: minLength %d maxLength %v nullable %v", n.MinLength, n.MaxLength, n.Nullable)
		}
		// The document refuses what the handler refuses, and admits a
		// well-formed call.
		for _, tc := range []struct {
			name string
			body string
			ok   bool
		}{
			{"minimal", `{"tool_call":{"tool":"email","action":"send"}}`, true},
			{"full", `{"tool_call":{"tool":"email","action":"send","resource":null,"parameters":{"to":"a"}},"source_trust":"unknown",` +
				`"trace":{"root_trust_level":"trusted_internal_signed"},"nonce":"12345678","request_id":"r1"}`, true},
			{"no tool_call", `{}`, false},
			{"blank tool", `{"tool_call":{"tool":"  ","action":"send"}}`, false},
			{"bad trust", `{"tool_call":{"tool":"t","action":"a"},"source_trust":"trusted"}`, false},
			{"short nonce", `{"tool_call":{"tool":"t","action":"a"},"nonce":"1234567"}`, false},
			{"empty request_id", `{"tool_call":{"tool":"t","action":"a"},"request_id":""}`, false},
		} {
			var v any
			if err := json.Unmarshal([]byte(tc.body), &v); err != nil {
				t.Fatal(err)
			}
			err := b.VisitJSON(v)
			if (err == nil) != tc.ok {
				t.Errorf("%s: valid by the document = %v, want %v (%v)", tc.name, err == nil, tc.ok, err)
			}
		}
	})

	t.Run("enums and limits", func(t *testing.T) {
		ag := body("POST", "/v2/agents")
		if !has(ag.Required, "name") || ag.Properties["name"].Value.MaxLength == nil || *ag.Properties["name"].Value.MaxLength != 128 {
			t.Errorf("agent name: required %v, maxLength %v", ag.Required, ag.Properties["name"].Value.MaxLength)
		}
		if !enumHas(ag.Properties["risk_tier"].Value, "high") || enumHas(ag.Properties["risk_tier"].Value, "critical") {
			t.Errorf("risk_tier enum %v", ag.Properties["risk_tier"].Value.Enum)
		}
		ot := body("POST", "/v2/operator-tokens")
		if !has(ot.Required, "role") || !enumHas(ot.Properties["role"].Value, "approver") {
			t.Errorf("operator token role: required %v, enum %v", ot.Required, ot.Properties["role"].Value.Enum)
		}
		esc := body("PUT", "/v2/tenants/risk-escalation").Properties["window_minutes"].Value
		if esc.Min == nil || *esc.Min != 1 || esc.Max == nil || *esc.Max != 10080 || esc.Nullable {
			t.Errorf("window_minutes: min %v max %v nullable %v", esc.Min, esc.Max, esc.Nullable)
		}
		dec := respSchema("GET", "/v2/decisions/{decision_id}", "200")
		if !enumHas(dec.Properties["decision"].Value, "require_approval") || dec.Properties["created_at"].Value.Format != "date-time" ||
			dec.Properties["decision_id"].Value.Format != "uuid" || !has(dec.Required, "decision") {
			t.Errorf("decision view: %+v", dec.Properties["decision"].Value)
		}
		if p := op("GET", "/v2/agents/{agent_id}").Parameters.GetByInAndName("path", "agent_id"); p == nil || p.Schema.Value.Format != "uuid" {
			t.Errorf("agent_id path parameter is not a uuid")
		}
	})

	t.Run("agent allowed_environments is nullable", func(t *testing.T) {
		for _, s := range []*openapi3.Schema{respSchema("GET", "/v2/agents/{agent_id}", "200"),
			respSchema("GET", "/v1/agents", "200").Items.Value, respSchema("POST", "/v2/agents", "201"),
			respSchema("PATCH", "/v2/agents/{agent_id}", "200")} {
			env := s.Properties["allowed_environments"]
			if env == nil || !env.Value.Nullable {
				t.Errorf("allowed_environments is not nullable in %v", s.Properties)
			}
			agent := map[string]any{"agent_id": "0b9c6a4e-8d3f-4b61-9a55-2f1e8c7d6b5a", "name": "a", "status": "active",
				"risk_tier": "low", "allowed_environments": nil, "has_signing_key": false, "created_at": "2026-01-02T03:04:05Z",
				"updated_at": "2026-01-02T03:04:05Z", "last_seen_at": nil, "agent_token": "svc_agent_x"}
			if err := s.VisitJSON(agent, openapi3.MultiErrors()); err != nil {
				t.Errorf("an agent with null allowed_environments is refused: %.300v", err)
			}
		}
	})

	t.Run("statuses", func(t *testing.T) {
		for _, v := range []string{"v1", "v2"} {
			ws := op("GET", "/"+v+"/ws/events").Responses
			for _, code := range []string{"101", "401", "403", "426", "503"} {
				if ws.Value(code) == nil {
					t.Errorf("/%s/ws/events does not list %s", v, code)
				}
			}
			if ws.Value("426").Value.Content.Get("text/plain") == nil {
				t.Errorf("/%s/ws/events 426 is not text/plain", v)
			}
		}
		for path, item := range doc.Paths.Map() {
			for method, o := range item.Operations() {
				if o.Responses.Value("408") == nil || o.Responses.Value("500") == nil {
					t.Errorf("%s %s does not list 408 and 500", method, path)
				}
				if o.RequestBody != nil && (o.Responses.Value("400") == nil || o.Responses.Value("415") == nil) {
					t.Errorf("%s %s takes a body but does not list 400 and 415", method, path)
				}
				if method == "GET" && o.Responses.Value("200") != nil && o.Responses.Value("304") == nil {
					t.Errorf("GET %s does not list 304", path)
				}
				if strings.HasPrefix(path, "/v1/") {
					for code, r := range o.Responses.Map() {
						if r.Value.Headers["Deprecation"] == nil || r.Value.Headers["Sunset"] == nil {
							t.Errorf("%s %s %s does not declare Deprecation and Sunset", method, path, code)
						}
					}
				}
			}
		}
		if op("POST", "/v2/authorize").Responses.Value("429") == nil || op("POST", "/v2/authorize").Responses.Value("409") == nil {
			t.Errorf("authorize does not list 409 and 429")
		}
		// The 503 of authorize is the envelope or the fail-closed deny.
		fc := op("POST", "/v2/authorize").Responses.Value("503").Value.Content.Get("application/json").Schema.Value
		if err := fc.VisitJSON(map[string]any{"decision": "deny", "reason": "audit_writer_unavailable"}); err != nil {
			t.Errorf("fail-closed deny does not match the 503 schema: %v", err)
		}
		// An error response pins code and reason to its status.
		conflict := op("POST", "/v2/agents").Responses.Value("409").Value.Content.Get("application/json").Schema.Value
		env := func(code int, reason string) map[string]any {
			return map[string]any{"kind": "Status", "apiVersion": "v2", "status": "Failure", "message": "m", "reason": reason,
				"details": map[string]any{}, "code": float64(code)}
		}
		if err := conflict.VisitJSON(env(409, "AlreadyExists")); err != nil {
			t.Errorf("a 409 envelope does not validate: %v", err)
		}
		if conflict.VisitJSON(env(400, "BadRequest")) == nil {
			t.Errorf("a 400 envelope validates as the 409 response")
		}
	})
}

func TestEmptyLimitOrOffsetIs400(t *testing.T) {
	s := newTestServer(t)
	call := tenantCaller(t, s)
	for _, tc := range []struct {
		query, code string
		status      int
	}{
		{"limit=", "invalid_limit", 400}, {"offset=", "invalid_offset", 400}, {"limit=&offset=1", "invalid_limit", 400},
		{"limit=-1", "invalid_limit", 400}, {"offset=x", "invalid_offset", 400},
		{"limit=5&offset=0", "", 200}, {"", "", 200},
	} {
		status, body := call("GET", "/v2/agents?"+tc.query, "")
		if status != tc.status {
			t.Errorf("?%s: status %d, want %d (%v)", tc.query, status, tc.status, body)
			continue
		}
		if tc.code != "" {
			if d, _ := body["details"].(map[string]any); d["error"] != tc.code {
				t.Errorf("?%s: details %v, want error %s", tc.query, body["details"], tc.code)
			}
		}
	}
}
