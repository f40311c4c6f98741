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
	"svc/config"
	"svc/messages"
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
	return New(Deps{Config: cfg, Store: store, Shared: shared, Registry: actors.NewRegistry(), Leader: &actors.Leadership{},
		Pool: &actors.PoolSample{}, Events: actors.NewEventBus(sys.Root, 8), Log: hclog.NewNullLogger(),
		Heartbeat: func(messages.Heartbeat) {}, Version: "test"})
}

// tenantCaller creates a tenant on s and returns a function that calls s
// as its admin operator with a JSON body, answering the status and the
// decoded JSON answer.
func tenantCaller(t *testing.T, s *Server) func(method, path, body string) (int, map[string]any) {
	t.Helper()
	_, tok, err := NewTenant(context.Background(), s.Store, "acme", "test")
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
	for i := 0; i < cap(s.adm.slots); i++ {
		s.adm.slots <- struct{}{} // every slot busy
	}
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
