package httpapi

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Strict JSON (CONTRACT §10): a body means one thing to svc and to anything
// in front of it. Object keys match exactly, a duplicate key at any depth is
// malformed, text is UTF-8, and U+0000 is refused in every string (Postgres
// cannot store it, and a reader that stops at NUL would see another value).
// The Go team's go-json-experiment/json (encoding/json/v2) does the first
// three by default; this file adds the NUL rule and the error shapes.

// checkJSON reports why raw is not one strict JSON value, or nil.
func checkJSON(raw []byte) *Error {
	if !jsontext.Value(raw).IsValid() {
		return diagnoseJSON(raw)
	}
	// A JSON string holds U+0000 only as the escape \u0000; a raw NUL byte
	// is invalid JSON already. The escape may also be the text of an
	// escaped backslash ("\\u0000"), so a hit is confirmed token by token.
	if bytes.Contains(raw, []byte(`\u0000`)) {
		if field, ok := nulField(raw); ok {
			return nulError(field)
		}
	}
	return nil
}

// diagnoseJSON names what makes raw invalid: a duplicate key (with its
// path), bad UTF-8, or another syntax error.
func diagnoseJSON(raw []byte) *Error {
	if !utf8.Valid(raw) {
		// RFC 8259 §8.1: JSON between systems is UTF-8. Decoding would
		// replace the bad bytes, and the action hash and the stored call
		// would then differ from what the client sent (and signed).
		return badRequest("invalid_json", "request body is not valid UTF-8")
	}
	dec := jsontext.NewDecoder(bytes.NewReader(raw))
	var err error
	for err == nil {
		_, err = dec.ReadToken()
	}
	var se *jsontext.SyntacticError
	if errors.As(err, &se) && errors.Is(se.Err, jsontext.ErrDuplicateName) {
		path := pointerPath(se.JSONPointer)
		e := badRequest("invalid_json", "request body has the key %s twice", path)
		e.Details["reason"] = "duplicate_key"
		e.Details["path"] = path
		return e
	}
	if errors.Is(err, io.EOF) && dec.InputOffset() == 0 {
		return badRequest("invalid_json", "request body is empty")
	}
	return badRequest("invalid_json", "request body is not valid JSON")
}

// nulField returns the path of the first key or string value of raw (valid
// JSON) that holds U+0000.
func nulField(raw []byte) (string, bool) {
	dec := jsontext.NewDecoder(bytes.NewReader(raw))
	for {
		tok, err := dec.ReadToken()
		if err != nil {
			return "", false
		}
		if tok.Kind() == '"' && strings.IndexByte(tok.String(), 0) >= 0 {
			// After a key the stack pointer names that key; after a string
			// value, the member or element it is.
			return pointerPath(dec.StackPointer()), true
		}
	}
}

// nulError is the 400 for U+0000 in field (CONTRACT §10).
func nulError(field string) *Error {
	if field == "" {
		field = "(body)"
	}
	e := badRequest("nul_character", "field %s contains U+0000, which is not accepted", field)
	e.Details["field"] = field
	return e
}

// pointerPath turns a JSON Pointer (/tool_call/tool, /items/2) into the
// dotted form error details use (tool_call.tool, items.2).
func pointerPath(p jsontext.Pointer) string {
	var parts []string
	for tok := range p.Tokens() {
		parts = append(parts, tok)
	}
	return strings.Join(parts, ".")
}

// decodeStrict decodes raw (checked by checkJSON) into v, a pointer to the
// route's body type, with encoding/json/v2 semantics: case-sensitive keys,
// unknown keys ignored. A value of the wrong type, or one its field's own
// decoder refuses (a timestamp given as a number), is 400 invalid_type
// naming the field's path.
func decodeStrict(raw []byte, v any) *Error {
	err := jsonv2.Unmarshal(raw, v)
	if err == nil {
		return nil
	}
	var se *jsonv2.SemanticError
	if !errors.As(err, &se) {
		return badRequest("invalid_json", "request body is not valid JSON")
	}
	field := pointerPath(se.JSONPointer)
	if field == "" {
		return badRequest("invalid_json", "request body must be a JSON object")
	}
	var e *Error
	if se.Err == nil || errors.Is(se.Err, strconv.ErrSyntax) || errors.Is(se.Err, strconv.ErrRange) {
		// The wrong kind of value, or a number the field cannot hold (a
		// fraction for an integer).
		e = badRequest("invalid_type", "field %s must be %s", field, jsonKind(se.GoType))
	} else {
		e = badRequest("invalid_type", "field %s: %v", field, se.Err)
	}
	e.Details["field"] = field
	return e
}

func jsonKind(t reflect.Type) string {
	if t == nil {
		return "of another type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[time.Time]() {
		return "an RFC 3339 timestamp string"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Int16, reflect.Int8,
		reflect.Uint, reflect.Uint64, reflect.Uint32, reflect.Uint16, reflect.Uint8:
		return "an integer"
	case reflect.Float64, reflect.Float32:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	default:
		return "an object"
	}
}
