package httpapi

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"svc/messages"
)

// FuzzAuthorizeBody drives the authorize body decoder (checkJSON, then
// decodeStrict into messages.AuthorizeRequest) and checks what it accepts
// against an independent reading with encoding/json v1's tokenizer: an
// accepted body is valid UTF-8 JSON with no key twice in any object and no
// U+0000 anywhere, and decodes to a value without U+0000; a body the
// tokenizer finds a duplicate key or a NUL in is refused.
func FuzzAuthorizeBody(f *testing.F) {
	for _, seed := range []string{
		`{"tool_call":{"tool":"github","action":"list_issues","parameters":{}},"source_trust":"trusted_internal_signed"}`,
		`{"tool_call":{"tool":"github","action":"create_issue"},"mutates_state":true,"source_trust":"untrusted_external","Source_Trust":"trusted_internal_unsigned"}`,
		`{"source_trust":"untrusted_external","source_trust":"trusted_internal_signed"}`,
		`{"tool_call":{"tool":"a","action":"b","parameters":{"x":[{"k":1,"k":2}]}}}`,
		`{"resource":"a\u0000b","trace":{"run_id":"r"}}`,
		`{"resource":"\\u0000 is text"}`,
		`{"nonce":"12345678","request_id":"r-1","environment":"prod","trace":{"root_trust_level":"unknown"}}`,
		`{"tool_call":{"tool":5}}`,
		`[1,2]`, `{"a":"\ud800"}`, "{\"a\":\"\xff\"}", `{"a":1}x`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		dup, nul, tokOK := v1Scan(raw)
		e := checkJSON(raw)
		if e == nil {
			if !tokOK || !utf8.Valid(raw) {
				t.Fatalf("accepted what encoding/json does not read as one UTF-8 value: %q", raw)
			}
			if dup {
				t.Fatalf("accepted a duplicate key: %q", raw)
			}
			if nul {
				t.Fatalf("accepted U+0000: %q", raw)
			}
			var req messages.AuthorizeRequest
			if de := decodeStrict(raw, &req); de == nil {
				if p := nulIn(reflect.ValueOf(req)); p {
					t.Fatalf("decoded a U+0000 from %q", raw)
				}
			} else if de.Status() != 400 {
				t.Fatalf("decode error %d for %q", de.Status(), raw)
			}
			return
		}
		if e.Status() != 400 {
			t.Fatalf("status %d for %q", e.Status(), raw)
		}
		switch e.Details["error"] {
		case "nul_character":
			if !nul {
				t.Fatalf("nul_character for a body without U+0000: %q", raw)
			}
		case "invalid_json":
			if e.Details["reason"] == "duplicate_key" && !dup {
				t.Fatalf("duplicate_key for a body without one: %q (%v)", raw, e.Details)
			}
		default:
			t.Fatalf("unexpected error %v for %q", e.Details, raw)
		}
	})
}

// v1Scan reads raw with encoding/json v1's tokenizer: whether some object
// names a key twice, whether a key or string holds U+0000, and whether raw
// is exactly one JSON value.
func v1Scan(raw []byte) (dup, nul, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	type frame struct {
		object  bool
		keyNext bool
		keys    map[string]bool
	}
	var stack []*frame
	values := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return dup, nul, err.Error() == "EOF" && values == 1 && len(stack) == 0
		}
		if len(stack) == 0 {
			values++
		}
		top := (*frame)(nil)
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				stack = append(stack, &frame{object: true, keyNext: true, keys: map[string]bool{}})
			case '[':
				stack = append(stack, &frame{})
			default:
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].object {
					stack[len(stack)-1].keyNext = true
				}
			}
			continue
		case string:
			if strings.IndexByte(v, 0) >= 0 {
				nul = true
			}
			if top != nil && top.object && top.keyNext {
				if top.keys[v] {
					dup = true
				}
				top.keys[v] = true
				top.keyNext = false
				continue
			}
		}
		if top != nil && top.object {
			top.keyNext = true
		}
	}
}

func nulIn(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String:
		return strings.IndexByte(v.String(), 0) >= 0
	case reflect.Pointer, reflect.Interface:
		return !v.IsNil() && nulIn(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() && nulIn(v.Field(i)) {
				return true
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			return bytes.Contains(v.Bytes(), []byte(`\u0000`)) && json.Valid(v.Bytes()) && nulInJSON(v.Bytes())
		}
		for i := range v.Len() {
			if nulIn(v.Index(i)) {
				return true
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if nulIn(it.Key()) || nulIn(it.Value()) {
				return true
			}
		}
	}
	return false
}

func nulInJSON(b []byte) bool {
	var doc any
	return json.Unmarshal(b, &doc) == nil && nulIn(reflect.ValueOf(&doc).Elem())
}
