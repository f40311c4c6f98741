package httpapi

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"svc/control"
	"svc/persistence"
)

// A skill stored under a key that is not normalized (registered before
// keys were) can still be read and removed by that key; a normalized
// spelling of it names no other skill.
func TestSkillStoredUnnormalizedCanBeReadAndDeleted(t *testing.T) {
	s := newTestServer(t)
	ctx := context.Background()
	tenant, tok, err := control.NewTenant(ctx, fullStore(s), "acme", "test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fullStore(s).PutSkill(ctx, persistence.Skill{TenantID: tenant.ID, Key: "Danger", Description: "old",
		Actions: map[string]persistence.SkillAction{}}); err != nil {
		t.Fatal(err)
	}
	call := func(method, path string) (int, map[string]any) {
		req := httptest.NewRequest(method, path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		var m map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &m)
		return rec.Code, m
	}
	if code, body := call("GET", "/v2/skills/Danger"); code != 200 || body["skill_key"] != "Danger" {
		t.Fatalf("GET the stored spelling = %d %v", code, body)
	}
	if code, body := call("GET", "/v2/skills/danger"); code != 404 {
		t.Fatalf("GET the normalized spelling = %d %v, want 404 (no such skill)", code, body)
	}
	if code, body := call("DELETE", "/v2/skills/Danger"); code != 204 {
		t.Fatalf("DELETE the stored spelling = %d %v", code, body)
	}
	if code, body := call("GET", "/v2/skills/Danger"); code != 404 {
		t.Fatalf("GET after the delete = %d %v", code, body)
	}
}
