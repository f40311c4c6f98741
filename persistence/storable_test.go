package persistence

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestStorableFindsTextNoBackendHoldsAlike(t *testing.T) {
	str := func(s string) *string { return &s }
	good := func() DecisionWrite {
		return DecisionWrite{
			Decision: Decision{ID: "d", TenantID: "t", Tool: "github", Action: "list", Resource: str("repo/main"),
				MatchedPolicyIDs: []string{"p"}, ToolCall: json.RawMessage(`{"tool":"github","q":"\\u0000 is text here"}`), CreatedAt: time.Now()},
			Receipt:  &Receipt{ID: "r"},
			Approval: &Approval{ID: "ap", ToolCall: json.RawMessage(`{"k":["v",{"n":1}]}`)},
		}
	}
	w := good()
	if err := Storable(&w); err != nil {
		t.Fatalf("clean write refused: %v", err)
	}
	bad := map[string]func(*DecisionWrite){
		"resource":      func(w *DecisionWrite) { w.Decision.Resource = str("a\x00b") },
		"run id":        func(w *DecisionWrite) { w.Decision.RunID = str("\x00") },
		"bad utf-8":     func(w *DecisionWrite) { w.Decision.Tool = "git\xffhub" },
		"policy id":     func(w *DecisionWrite) { w.Decision.MatchedPolicyIDs = []string{"p", "q\x00"} },
		"tool call":     func(w *DecisionWrite) { w.Decision.ToolCall = json.RawMessage(`{"q":"\u0000"}`) },
		"audit id":      func(w *DecisionWrite) { w.Decision.AuditID = "\x00" },
		"approval call": func(w *DecisionWrite) { w.Approval.ToolCall = json.RawMessage(`{"k":["v",{"n":"\u0000"}]}`) },
		"receipt":       func(w *DecisionWrite) { w.Receipt.ActionHash = "\x00" },
	}
	for name, spoil := range bad {
		w := good()
		spoil(&w)
		if err := Storable(&w); err == nil {
			t.Errorf("%s: not refused", name)
		} else if !strings.Contains(err.Error(), "U+0000") {
			t.Errorf("%s: error %v", name, err)
		}
	}
}

func BenchmarkStorable(b *testing.B) {
	str := func(s string) *string { return &s }
	w := DecisionWrite{
		Decision: Decision{ID: "0190e2b4-0000-7000-8000-000000000000", TenantID: "t", Tool: "github", Action: "list", Resource: str("repo/main"),
			MatchedPolicyIDs: []string{"default_allow_read"}, ToolCall: json.RawMessage(`{"tool":"github","action":"list","parameters":{"q":"x"}}`)},
		Receipt: &Receipt{ID: "r"},
	}
	for b.Loop() {
		if Storable(&w) != nil {
			b.Fatal("refused")
		}
	}
}
