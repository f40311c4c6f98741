package httpapi

import (
	"reflect"
	"testing"
	"time"
)

// A duplicate key at any depth is invalid_json with reason duplicate_key
// and its path; bad UTF-8 and broken syntax are invalid_json too.
func TestCheckJSONRefusesDuplicateKeysAtAnyDepth(t *testing.T) {
	cases := []struct{ raw, path string }{
		{`{"source_trust":"untrusted_external","source_trust":"trusted_internal_signed"}`, "source_trust"},
		{`{"tool_call":{"tool":"a","action":"b","tool":"c"}}`, "tool_call.tool"},
		{`{"items":[{"n":1},{"n":1,"n":2}]}`, "items.1.n"},
		{`{"a":{"b":{"c":{"d":1,"d":1}}}}`, "a.b.c.d"},
		{`{"x":1,"x":1}`, "x"},
	}
	for _, tc := range cases {
		e := checkJSON([]byte(tc.raw))
		if e == nil || e.Details["error"] != "invalid_json" || e.Details["reason"] != "duplicate_key" || e.Details["path"] != tc.path {
			t.Errorf("%s: got %+v, want invalid_json duplicate_key at %s", tc.raw, e, tc.path)
		}
	}
	for _, raw := range []string{`{"a":`, `{"a":1}x`, "{\"a\":\"\xff\"}", `{"a":"\ud800"}`, ``, `{'a':1}`} {
		e := checkJSON([]byte(raw))
		if e == nil || e.Details["error"] != "invalid_json" || e.Details["reason"] != nil {
			t.Errorf("%q: got %+v, want plain invalid_json", raw, e)
		}
	}
	// Keys that differ only in case are two keys, not a duplicate.
	if e := checkJSON([]byte(`{"source_trust":"unknown","Source_Trust":"trusted_internal_signed"}`)); e != nil {
		t.Errorf("case-variant keys refused: %+v", e)
	}
}

// U+0000 in any key or string value is nul_character naming the field; an
// escaped backslash followed by "u0000" is text, not NUL.
func TestCheckJSONRefusesNUL(t *testing.T) {
	cases := []struct{ raw, field string }{
		{`{"resource":"a\u0000b"}`, "resource"},
		{`{"trace":{"run_id":"\u0000"}}`, "trace.run_id"},
		{`{"tool_call":{"params":{"k":["x","y\u0000"]}}}`, "tool_call.params.k.1"},
		{`{"a\u0000b":1}`, "a\u0000b"},
		{`"\u0000"`, "(body)"},
		{`{"ok":"\\u0000","bad":"\u0000"}`, "bad"},
	}
	for _, tc := range cases {
		e := checkJSON([]byte(tc.raw))
		if e == nil || e.Status() != 400 || e.Details["error"] != "nul_character" || e.Details["field"] != tc.field {
			t.Errorf("%s: got %+v, want nul_character at %q", tc.raw, e, tc.field)
		}
	}
	for _, raw := range []string{`{"a":"\\u0000"}`, `{"a":"\\\\u0000"}`, `{"a":"u0000"}`, `{"a":"\u0001"}`} {
		if e := checkJSON([]byte(raw)); e != nil {
			t.Errorf("%s: refused %+v", raw, e)
		}
	}
}

// Keys match exactly: a case variant of a field is an unknown key, ignored.
func TestDecodeStrictMatchesKeysExactly(t *testing.T) {
	type body struct {
		SourceTrust string `json:"source_trust"`
	}
	var v body
	if e := decodeStrict([]byte(`{"Source_Trust":"trusted_internal_signed"}`), &v); e != nil || v.SourceTrust != "" {
		t.Fatalf("case variant matched: %+v %+v", v, e)
	}
	if e := decodeStrict([]byte(`{"source_trust":"unknown"}`), &v); e != nil || v.SourceTrust != "unknown" {
		t.Fatalf("exact key not matched: %+v %+v", v, e)
	}
}

// The field named in a 400 invalid_type is the exact path of the refused
// value, map keys and array indexes included, and the message names the
// kind the field takes.
func TestDecodeStrictNamesTheRefusedValue(t *testing.T) {
	type action struct {
		Risk    string `json:"risk"`
		Mutates bool   `json:"mutates_state"`
	}
	type window struct {
		From *time.Time `json:"from"`
	}
	type body struct {
		ToolCall struct {
			Tool string `json:"tool"`
		} `json:"tool_call"`
		Actions map[string]action `json:"actions"`
		Items   []struct {
			Name string `json:"name"`
		} `json:"items"`
		IDs    []string  `json:"ids"`
		Count  int       `json:"count"`
		Window window    `json:"window"`
		At     time.Time `json:"at"`
	}
	cases := []struct{ raw, field, msg string }{
		{`{"count":"3"}`, "count", "field count must be an integer"},
		{`{"count":1.5}`, "count", "field count must be an integer"},
		{`{"tool_call":{"tool":5}}`, "tool_call.tool", "field tool_call.tool must be a string"},
		{` { "tool_call" : { "tool" : true } } `, "tool_call.tool", ""},
		{`{"tool_call":{"tool":{"x":1}}}`, "tool_call.tool", ""},
		{`{"actions":{"a":{"risk":"low","mutates_state":"yes"}}}`, "actions.a.mutates_state", "field actions.a.mutates_state must be a boolean"},
		{`{"actions":{"a":"low"}}`, "actions.a", ""},
		{`{"tool_call":{"tool":"x"},"actions":{"a.b":{"risk":7}}}`, "actions.a.b.risk", ""},
		{`{"items":[{"name":"x"},{"name":true}]}`, "items.1.name", ""},
		{`{"ids":["a",3]}`, "ids.1", ""},
		{`{"items":[{"name":"x"}],"ids":"a","count":1}`, "ids", "field ids must be an array"},
		{`{"at":5}`, "at", "field at must be an RFC 3339 timestamp string"},
		{`{"at":"2026-11-20"}`, "at", ""},
		{`{"window":{"from":true}}`, "window.from", ""},
	}
	for _, tc := range cases {
		var v body
		e := decodeStrict([]byte(tc.raw), &v)
		if e == nil || e.Details["error"] != "invalid_type" || e.Details["field"] != tc.field {
			t.Errorf("%s: got %+v, want invalid_type at %s", tc.raw, e, tc.field)
			continue
		}
		if tc.msg != "" && e.Message != tc.msg {
			t.Errorf("%s: message %q, want %q", tc.raw, e.Message, tc.msg)
		}
	}
	for _, raw := range []string{`[1]`, `"x"`, `3`} {
		var v body
		if e := decodeStrict([]byte(raw), &v); e == nil || e.Details["error"] != "invalid_json" {
			t.Errorf("%s: got %+v, want invalid_json (not an object)", raw, e)
		}
	}
}

func TestJSONKindSaysInteger(t *testing.T) {
	cases := []struct {
		v    any
		want string
	}{
		{int64(0), "an integer"}, {uint32(0), "an integer"}, {new(int), "an integer"},
		{0.5, "a number"}, {float32(0), "a number"},
		{"", "a string"}, {true, "a boolean"}, {[]string{}, "an array"}, {map[string]int{}, "an object"},
		{time.Time{}, "an RFC 3339 timestamp string"},
	}
	for _, tc := range cases {
		if got := jsonKind(reflect.TypeOf(tc.v)); got != tc.want {
			t.Errorf("jsonKind(%T) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

// Keys match exactly, so every field of a request body type must name its
// key: an untagged field would take only its Go name, capital letters and
// all.
func TestRequestBodyFieldsAreTagged(t *testing.T) {
	s := newTestServer(t)
	seen := map[reflect.Type]bool{}
	var walk func(path string, ty reflect.Type)
	walk = func(path string, ty reflect.Type) {
		for ty.Kind() == reflect.Pointer || ty.Kind() == reflect.Slice || ty.Kind() == reflect.Map {
			ty = ty.Elem()
		}
		if ty.Kind() != reflect.Struct || seen[ty] || ty == reflect.TypeFor[time.Time]() {
			return
		}
		seen[ty] = true
		for f := range ty.Fields() {
			if !f.IsExported() {
				continue
			}
			if f.Tag.Get("json") == "" {
				t.Errorf("%s: field %s.%s has no json tag", path, ty.Name(), f.Name)
			}
			walk(path+"."+f.Name, f.Type)
		}
	}
	for _, rt := range s.Routes() {
		if rt.Body != nil {
			walk(rt.Method+" "+rt.Path, reflect.TypeOf(rt.Body))
		}
	}
	if len(seen) < 10 {
		t.Fatalf("only %d body types walked", len(seen))
	}
}
