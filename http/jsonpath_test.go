package httpapi

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"
)

// The field named in a 400 invalid_type is the exact path of the value
// encoding/json refused, map keys and array indexes included.
func TestJSONPathAtNamesTheRefusedValue(t *testing.T) {
	type action struct {
		Risk    string `json:"risk"`
		Mutates bool   `json:"mutates_state"`
	}
	type body struct {
		ToolCall struct {
			Tool string `json:"tool"`
		} `json:"tool_call"`
		Actions map[string]action `json:"actions"`
		Items   []struct {
			Name string `json:"name"`
		} `json:"items"`
		IDs   []string `json:"ids"`
		Count int      `json:"count"`
	}
	cases := []struct{ raw, want string }{
		{`{"count":"3"}`, "count"},
		{`{"tool_call":{"tool":5}}`, "tool_call.tool"},
		{` { "tool_call" : { "tool" : true } } `, "tool_call.tool"},
		{`{"tool_call":{"tool":{"x":1}}}`, "tool_call.tool"},
		{`{"tool_call":{"tool":[1,2]}}`, "tool_call.tool"},
		{`{"actions":{"a":{"risk":"low","mutates_state":"yes"}}}`, "actions.a.mutates_state"},
		{`{"actions":{"a":"low"}}`, "actions.a"},
		{`{"actions":{"a":{"risk":"low"},"b":{"risk":[1]}}}`, "actions.b.risk"},
		{`{"tool_call":{"tool":"x"},"actions":{"a.b":{"risk":7}}}`, "actions.a.b.risk"},
		{`{"items":[{"name":"x"},{"name":true}]}`, "items.1.name"},
		{`{"ids":["a",3]}`, "ids.1"},
		{`{"ids":[["a"]]}`, "ids.0"},
		{`{"items":[{"name":"x"}],"ids":"a","count":1}`, "ids"},
	}
	for _, tc := range cases {
		var v body
		err := json.Unmarshal([]byte(tc.raw), &v)
		var te *json.UnmarshalTypeError
		if !errors.As(err, &te) {
			t.Fatalf("%s: error %v, want an UnmarshalTypeError", tc.raw, err)
		}
		if got := jsonPathAt([]byte(tc.raw), te.Offset); got != tc.want {
			t.Errorf("%s: path %q (encoding/json's Field %q, offset %d), want %q", tc.raw, got, te.Field, te.Offset, tc.want)
		}
	}
}

// A field whose own decoder refuses its value (a timestamp as a number or
// in another format) is named too.
func TestRefusedFieldNamesTheField(t *testing.T) {
	type window struct {
		From *time.Time `json:"from"`
	}
	type body struct {
		Name   string    `json:"name"`
		Window window    `json:"window"`
		At     time.Time `json:"at"`
	}
	cases := []struct{ raw, want string }{
		{`{"at":5}`, "at"},
		{`{"name":"x","at":"2026-11-20"}`, "at"},
		{`{"window":{"from":true}}`, "window.from"},
		{`{"window":{"from":"2026-11-20T00:00:00Z"},"at":"yesterday"}`, "at"},
		{`{"name":"x"}`, ""},
		{`[1]`, ""},
	}
	for _, tc := range cases {
		got, err := refusedField([]byte(tc.raw), reflect.TypeFor[body](), "")
		if got != tc.want || (got != "") != (err != nil) {
			t.Errorf("%s: field %q (%v), want %q", tc.raw, got, err, tc.want)
		}
	}
}

// The invalid_type message names the kind the field takes: a fraction
// given for an integer field is refused as "must be an integer", not as
// "must be a number" (which it is).
func TestJSONKindSaysInteger(t *testing.T) {
	cases := []struct {
		v    any
		want string
	}{
		{int64(0), "an integer"}, {uint32(0), "an integer"}, {new(int), "an integer"},
		{0.5, "a number"}, {float32(0), "a number"},
		{"", "a string"}, {true, "a boolean"}, {[]string{}, "an array"}, {map[string]int{}, "an object"},
	}
	for _, tc := range cases {
		if got := jsonKind(reflect.TypeOf(tc.v)); got != tc.want {
			t.Errorf("jsonKind(%T) = %q, want %q", tc.v, got, tc.want)
		}
	}
}
