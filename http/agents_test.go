package httpapi

import (
	"strings"
	"testing"
)

func TestPatchAgentRejectsNullForNonNullableFields(t *testing.T) {
	s := newTestServer(t)
	call := tenantCaller(t, s)
	code, agent := call("POST", "/v2/agents", `{"name":"bot","allowed_environments":["prod"]}`)
	if code != 201 {
		t.Fatalf("create = %d %v", code, agent)
	}
	id, _ := agent["agent_id"].(string)
	path := "/v2/agents/" + id
	tests := []struct {
		name  string
		body  string
		code  int
		field string
	}{
		{name: "null name", body: `{"name":null}`, code: 400, field: "name"},
		{name: "null risk_tier", body: `{"risk_tier":null}`, code: 400, field: "risk_tier"},
		{name: "null allowed_environments clears the restriction", body: `{"allowed_environments":null}`, code: 200},
		{name: "absent fields change nothing", body: `{}`, code: 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := call("PATCH", path, tc.body)
			if code != tc.code {
				t.Fatalf("PATCH %s = %d %v", tc.body, code, body)
			}
			if tc.field != "" {
				if d, _ := body["details"].(map[string]any); d["field"] != tc.field {
					t.Fatalf("details = %v, want field %s", body["details"], tc.field)
				}
			}
		})
	}
	_, got := call("GET", path, "")
	if got["name"] != "bot" || got["allowed_environments"] != nil {
		t.Fatalf("after the patches: %v", got)
	}
}

// An environment's length is counted in characters, as the document says
// and as names are: 128 non-ASCII characters are fine, 129 are not.
func TestValidEnvironmentsCountsCharacters(t *testing.T) {
	if err := validEnvironments([]string{strings.Repeat("é", 128)}); err != nil {
		t.Errorf("128 characters (256 bytes) refused: %v", err)
	}
	if err := validEnvironments([]string{strings.Repeat("é", 129)}); err == nil {
		t.Errorf("129 characters accepted")
	}
	if err := validEnvironments([]string{"prod", " "}); err == nil {
		t.Errorf("a blank environment accepted")
	}
}
