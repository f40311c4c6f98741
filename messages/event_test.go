package messages

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestAseEventJSON(t *testing.T) {
	tests := []struct {
		name  string
		event AseEvent
		want  []string
	}{
		{
			name: "defaults: schema 1, empty arrays, null objects, UTC time",
			event: AseEvent{EventID: "e1", OccurredAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600)),
				TenantID: "t", Kind: KindAgentTokenLeakDetected, AgentID: "a", Decision: "allow"},
			want: []string{`"schema_version":1`, `"matched_policies":[]`, `"redacted_fields":[]`, `"evidence":null`,
				`"prompt_injection":null`, `"occurred_at":"2026-01-02T02:04:05Z"`, `"resource":null`, `"run_id":null`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := json.Marshal(tc.event)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(raw), w) {
					t.Errorf("%s lacks %s", raw, w)
				}
			}
			var back AseEvent
			if err := json.Unmarshal(raw, &back); err != nil {
				t.Fatal(err)
			}
			if back.EventID != tc.event.EventID || back.SchemaVersion != 1 || !back.OccurredAt.Equal(tc.event.OccurredAt) {
				t.Errorf("round trip = %+v", back)
			}
		})
	}
}

func TestMissingSchemaVersionReadsAsOne(t *testing.T) {
	var e AseEvent
	if err := json.Unmarshal([]byte(`{"event_id":"x","kind":"authorize_decision"}`), &e); err != nil {
		t.Fatal(err)
	}
	if e.SchemaVersion != 1 {
		t.Fatalf("schema_version = %d", e.SchemaVersion)
	}
}
