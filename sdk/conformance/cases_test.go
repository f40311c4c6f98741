package conformance_test

import (
	"bytes"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"svc/sdk/conformance"
)

// The HMAC keys of signing.json, derived from fixed strings (README.md).
var (
	key32 = func() []byte {
		s := sha256.Sum256([]byte("svc sdk conformance: HMAC key 1 (32 bytes)"))
		return s[:]
	}()
	key64 = func() []byte {
		s := sha512.Sum512([]byte("svc sdk conformance: HMAC key 2 (64 bytes)"))
		return s[:]
	}()
	key100 = func() []byte {
		a := sha512.Sum512([]byte("svc sdk conformance: HMAC key 3 (100 bytes), part 1"))
		b := sha512.Sum512([]byte("svc sdk conformance: HMAC key 3 (100 bytes), part 2"))
		return append(a[:], b[:36]...)
	}()
	// keyPlusSlash is 33 bytes whose standard base64 is "++//" eleven
	// times: a URL-safe decoder refuses it or reads other bytes.
	keyPlusSlash = bytes.Repeat([]byte{0xfb, 0xef, 0xff}, 11)
)

const compactBody = `{"tool_call":{"tool":"codehost","action":"merge_pull_request","resource":"acme/api#42",` +
	`"parameters":{"method":"squash","delete_branch":true}},"mutates_state":true,"request_id":"0193f0c4-9b10-7000-8000-0000000000a1"}`

func signingVectors(t *testing.T) []signingVector {
	t.Helper()
	cases := []struct {
		name string
		body string
		key  []byte
	}{
		{"compact body, 32-byte key", compactBody, key32},
		{"compact body, 64-byte key", compactBody, key64},
		{"compact body, 100-byte key (longer than the HMAC block, so HMAC hashes it first)", compactBody, key100},
		{"33-byte key whose base64 uses + and /", compactBody, keyPlusSlash},
		{"empty object body", `{}`, key32},
		{"empty body (the HMAC of zero bytes)", ``, key32},
		{"the same call with its keys in another order (other bytes, other signature)",
			`{"request_id":"0193f0c4-9b10-7000-8000-0000000000a1","mutates_state":true,"tool_call":{"parameters":{"delete_branch":true,"method":"squash"},` +
				`"resource":"acme/api#42","action":"merge_pull_request","tool":"codehost"}}`, key32},
		{"pretty-printed body with unsorted keys (signed as sent, never re-serialized)",
			"{\n  \"tool_call\": {\n    \"tool\": \"codehost\",\n    \"action\": \"merge_pull_request\",\n    \"resource\": \"acme/api#42\",\n" +
				"    \"parameters\": {\"method\": \"squash\", \"delete_branch\": true}\n  },\n  \"mutates_state\": true\n}\n", key32},
		{"a trailing newline is part of the body", compactBody + "\n", key32},
		{"CRLF line ends are part of the body", "{\r\n\"tool_call\":{\"tool\":\"files\",\"action\":\"list\"}\r\n}\r\n", key32},
		{"non-ASCII text as raw UTF-8",
			`{"tool_call":{"tool":"notes","action":"create","resource":null,"parameters":{"title":"Café déjà vu","lang":"中文","mood":"😀"}}}`, key32},
		{"the same text written with \\u escapes (same JSON value, other bytes, other signature)",
			`{"tool_call":{"tool":"notes","action":"create","resource":null,"parameters":{"title":"Caf\u00e9 d\u00e9j\u00e0 vu","lang":"\u4e2d\u6587","mood":"\ud83d\ude00"}}}`, key32},
		{"NFD text is signed as sent, not normalized",
			"{\"tool_call\":{\"tool\":\"notes\",\"action\":\"create\",\"parameters\":{\"title\":\"Cafe\u0301\"}}}", key32},
		{"numbers are signed as written (1.50, 1e2, a 20-digit integer)",
			`{"tool_call":{"tool":"payments","action":"refund","resource":"order/7","parameters":{"amount":1.50,"limit":1e2,"id":12345678901234567890,"neg":-0}}}`, key32},
		{"U+2028 and U+2029 raw inside a string",
			"{\"tool_call\":{\"tool\":\"notes\",\"action\":\"create\",\"parameters\":{\"text\":\"a\u2028b\u2029c\"}}}", key32},
		{"escaped solidus and raw HTML characters",
			`{"tool_call":{"tool":"web","action":"fetch","resource":"https:\/\/example.com\/a?b=1&c=<d>","parameters":{}}}`, key64},
	}
	out := make([]signingVector, 0, len(cases))
	for _, c := range cases {
		keyB64 := base64.StdEncoding.EncodeToString(c.key)
		h, err := conformance.Sign(keyB64, c.body)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if want := conformance.SignatureHeaderValue(c.key, []byte(c.body)); h != want {
			t.Fatalf("%s: Sign and SignatureHeaderValue disagree", c.name)
		}
		out = append(out, signingVector{Name: c.name, Body: c.body, SigningKey: keyB64, Header: h})
	}
	if !strings.Contains(out[3].SigningKey, "+") || !strings.Contains(out[3].SigningKey, "/") {
		t.Fatalf("keyPlusSlash encodes as %s", out[3].SigningKey)
	}
	return out
}

// redactionParams is the parameters object most redaction cases start from.
const redactionParams = `{
  "title": "Quarterly report",
  "token": "secret-1",
  "Token": "secret-2",
  "auth": {"user": "ada", "password": "hunter2", "mfa": {"code": "123456", "method": "totp"}},
  "items": [
    {"id": 1, "secret": "a"},
    {"id": 2, "secret": "b"},
    "plain",
    null,
    [10, 11, 12]
  ],
  "*": "a key literally named star",
  "a.b": "a key that holds a dot",
  "a": {"b": "reached by parameters.a.b"},
  "0": "a key named zero",
  "empty": {},
  "nothing": null,
  "count": 3,
  "clé": "NFC key",
  "cle\u0301": "NFD key",
  "🔑": "emoji key",
  "with space": "a key with a space",
  "parameters": "a key named parameters",
  "__proto__": {"polluted": true},
  "constructor": "a key named constructor"
}`

func redactionVectors(t *testing.T) []redactionVector {
	t.Helper()
	P := redactionParams
	cases := []struct {
		name   string
		params string
		fields []string
		// want: the parameters after, written out by hand for the keys
		// that change (the reference must agree), or "" with invalid.
		remove  []string // top-level keys of P gone (want is then P without them), when want is ""
		want    string
		invalid bool
	}{
		{name: "one top-level key", params: `{"path":"/etc/hosts","token":"t"}`, fields: []string{"parameters.token"}, want: `{"path":"/etc/hosts"}`},
		{name: "several top-level keys", params: P, fields: []string{"parameters.token", "parameters.title"}, remove: []string{"token", "title"}},
		{name: "a nested key", params: `{"auth":{"user":"ada","password":"hunter2"},"x":1}`, fields: []string{"parameters.auth.password"}, want: `{"auth":{"user":"ada"},"x":1}`},
		{name: "a key three levels down", params: `{"auth":{"mfa":{"code":"123456","method":"totp"}}}`, fields: []string{"parameters.auth.mfa.code"}, want: `{"auth":{"mfa":{"method":"totp"}}}`},
		{name: "a whole nested object", params: `{"auth":{"user":"ada","mfa":{"code":"1"}},"x":1}`, fields: []string{"parameters.auth"}, want: `{"x":1}`},
		{name: "parameters alone empties the parameters", params: P, fields: []string{"parameters"}, want: `{}`},
		{name: "parameters alone on empty parameters", params: `{}`, fields: []string{"parameters"}, want: `{}`},
		{name: "empty redacted_fields change nothing", params: P, fields: []string{}, remove: []string{}},
		{name: "a missing key changes nothing", params: P, fields: []string{"parameters.no_such_key"}, remove: []string{}},
		{name: "a missing key on the way changes nothing", params: P, fields: []string{"parameters.no_such_key.password"}, remove: []string{}},
		{name: "keys match exactly: case matters", params: `{"Token":"x","token":"y"}`, fields: []string{"parameters.token"}, want: `{"Token":"x"}`},
		{name: "keys match exactly: no Unicode normalization (NFC path, NFD key kept)", params: "{\"cl\u00e9\":1,\"cle\u0301\":2}", fields: []string{"parameters.cl\u00e9"}, want: "{\"cle\u0301\":2}"},
		{name: "keys match exactly: NFD path removes only the NFD key", params: "{\"cl\u00e9\":1,\"cle\u0301\":2}", fields: []string{"parameters.cle\u0301"}, want: "{\"cl\u00e9\":1}"},
		{name: "emoji key", params: `{"🔑":"k","x":1}`, fields: []string{"parameters.🔑"}, want: `{"x":1}`},
		{name: "key with a space", params: `{"with space":1,"with":2}`, fields: []string{"parameters.with space"}, want: `{"with":2}`},
		{name: "segments are not trimmed", params: `{"a":1," a":2}`, fields: []string{"parameters. a"}, want: `{"a":1}`},
		{name: "a key literally named * removes only that key (no wildcard)", params: `{"*":1,"a":2,"b":{"*":3,"c":4}}`, fields: []string{"parameters.*", "parameters.b.*"}, want: `{"a":2,"b":{"c":4}}`},
		{name: "a key holding a dot cannot be addressed: the path walks a then b", params: `{"a.b":1,"a":{"b":2,"c":3}}`, fields: []string{"parameters.a.b"}, want: `{"a.b":1,"a":{"c":3}}`},
		{name: "a key named parameters", params: `{"parameters":1,"x":2}`, fields: []string{"parameters.parameters"}, want: `{"x":2}`},
		{name: "JavaScript prototype names are ordinary keys", params: `{"__proto__":{"polluted":true},"constructor":"c","toString":"s","x":1}`,
			fields: []string{"parameters.__proto__", "parameters.constructor", "parameters.toString"}, want: `{"x":1}`},
		{name: "a prototype name that is not a key changes nothing", params: `{"x":1}`, fields: []string{"parameters.__proto__", "parameters.constructor.name", "parameters.hasOwnProperty"}, want: `{"x":1}`},
		{name: "a key whose value is null is removed", params: `{"nothing":null,"x":1}`, fields: []string{"parameters.nothing"}, want: `{"x":1}`},
		{name: "a key whose value is an empty object is removed", params: `{"empty":{},"x":1}`, fields: []string{"parameters.empty"}, want: `{"x":1}`},
		{name: "walking into a string changes nothing", params: `{"title":"Quarterly","x":1}`, fields: []string{"parameters.title.length"}, want: `{"title":"Quarterly","x":1}`},
		{name: "walking into a number changes nothing", params: `{"count":3}`, fields: []string{"parameters.count.0"}, want: `{"count":3}`},
		{name: "walking into null changes nothing", params: `{"nothing":null}`, fields: []string{"parameters.nothing.x"}, want: `{"nothing":null}`},
		{name: "walking into a boolean changes nothing", params: `{"flag":true}`, fields: []string{"parameters.flag.x"}, want: `{"flag":true}`},
		{name: "an array element becomes null", params: `{"tags":["a","b","c"]}`, fields: []string{"parameters.tags.1"}, want: `{"tags":["a",null,"c"]}`},
		{name: "array elements keep their indexes: 0 then 1 both become null", params: `{"tags":["a","b","c"]}`, fields: []string{"parameters.tags.0", "parameters.tags.1"}, want: `{"tags":[null,null,"c"]}`},
		{name: "a key inside an array element", params: `{"items":[{"id":1,"secret":"a"},{"id":2,"secret":"b"}]}`, fields: []string{"parameters.items.1.secret"}, want: `{"items":[{"id":1,"secret":"a"},{"id":2}]}`},
		{name: "an element of a nested array", params: `{"m":[[1,2],[3,4]]}`, fields: []string{"parameters.m.1.0"}, want: `{"m":[[1,2],[null,4]]}`},
		{name: "a whole array", params: `{"tags":["a"],"x":1}`, fields: []string{"parameters.tags"}, want: `{"x":1}`},
		{name: "an index out of range changes nothing", params: `{"tags":["a","b"]}`, fields: []string{"parameters.tags.2"}, want: `{"tags":["a","b"]}`},
		{name: "an index far out of range changes nothing (no overflow)", params: `{"tags":["a","b"]}`, fields: []string{"parameters.tags.99999999999999999999999"}, want: `{"tags":["a","b"]}`},
		{name: "indexes are canonical decimals: leading zero, sign, exponent and spaces do not select", params: `{"tags":["a","b"]}`,
			fields: []string{"parameters.tags.01", "parameters.tags.-1", "parameters.tags.+1", "parameters.tags.1e0", "parameters.tags. 1", "parameters.tags.1 ", "parameters.tags.0x1"}, want: `{"tags":["a","b"]}`},
		{name: "indexes are ASCII digits only (ARABIC-INDIC DIGIT ONE and FULLWIDTH DIGIT ONE do not select)", params: `{"tags":["a","b"]}`,
			fields: []string{"parameters.tags.\u0661", "parameters.tags.\uff11"}, want: `{"tags":["a","b"]}`},
		{name: "a non-index segment on an array changes nothing", params: `{"tags":["a","b"]}`, fields: []string{"parameters.tags.length", "parameters.tags.*"}, want: `{"tags":["a","b"]}`},
		{name: "bracket syntax is not an index: items[0] is a key", params: `{"items":["a"],"items[0]":"k"}`, fields: []string{"parameters.items[0]"}, want: `{"items":["a"]}`},
		{name: "on an object, a numeric segment is a key", params: `{"0":"zero","1":"one"}`, fields: []string{"parameters.0"}, want: `{"1":"one"}`},
		{name: "on an object, a non-canonical numeric key is matched exactly", params: `{"01":"a","1":"b"}`, fields: []string{"parameters.01"}, want: `{"1":"b"}`},
		{name: "duplicate paths act once", params: `{"token":"t","x":1}`, fields: []string{"parameters.token", "parameters.token"}, want: `{"x":1}`},
		{name: "duplicate index paths", params: `{"tags":["a","b"]}`, fields: []string{"parameters.tags.0", "parameters.tags.0"}, want: `{"tags":[null,"b"]}`},
		{name: "paths apply in order: an element nulled first is then walked into as null", params: `{"items":[{"secret":"a","id":1}]}`,
			fields: []string{"parameters.items.0", "parameters.items.0.secret"}, want: `{"items":[null]}`},
		{name: "paths apply in order: a parent removed first, then its child changes nothing", params: `{"auth":{"password":"p"},"x":1}`,
			fields: []string{"parameters.auth", "parameters.auth.password"}, want: `{"x":1}`},
		{name: "paths apply in order: parameters after a key", params: `{"a":1,"b":2}`, fields: []string{"parameters.a", "parameters"}, want: `{}`},
		{name: "paths apply in order: a key after parameters", params: `{"a":1,"b":2}`, fields: []string{"parameters", "parameters.a"}, want: `{}`},
		{name: "values of every JSON type are kept as they are", params: `{"s":"x","n":-1.5,"i":42,"t":true,"f":false,"z":null,"o":{"k":[1,{"d":2}]},"drop":1}`,
			fields: []string{"parameters.drop"}, want: `{"s":"x","n":-1.5,"i":42,"t":true,"f":false,"z":null,"o":{"k":[1,{"d":2}]}}`},
		{name: "the full example with several paths", params: P,
			fields: []string{"parameters.auth.password", "parameters.auth.mfa.code", "parameters.items.0.secret", "parameters.items.4.1", "parameters.*", "parameters.Token"},
			want:   ""},

		{name: "refused: empty path", params: P, fields: []string{""}, invalid: true},
		{name: "refused: trailing dot", params: P, fields: []string{"parameters."}, invalid: true},
		{name: "refused: trailing dot after a key", params: P, fields: []string{"parameters.auth."}, invalid: true},
		{name: "refused: empty segment", params: P, fields: []string{"parameters..auth"}, invalid: true},
		{name: "refused: leading dot", params: P, fields: []string{".parameters.auth"}, invalid: true},
		{name: "refused: another root", params: P, fields: []string{"params.auth"}, invalid: true},
		{name: "refused: root is case-sensitive", params: P, fields: []string{"Parameters.auth"}, invalid: true},
		{name: "refused: a bare key without the parameters root", params: P, fields: []string{"token"}, invalid: true},
		{name: "refused: root with a suffix", params: P, fields: []string{"parametersx"}, invalid: true},
		{name: "refused: root followed by a bracket", params: P, fields: []string{"parameters[0]"}, invalid: true},
		{name: "refused: JSONPath syntax", params: P, fields: []string{"$.parameters.auth"}, invalid: true},
		{name: "refused: a space before the root", params: P, fields: []string{" parameters.auth"}, invalid: true},
		{name: "refused: a space after the root", params: P, fields: []string{"parameters .auth"}, invalid: true},
		{name: "refused: one bad path refuses the whole list, even after good ones", params: P, fields: []string{"parameters.token", "parameters.auth.password", "parameters.."}, invalid: true},
		{name: "refused: a bad path before good ones", params: P, fields: []string{"token", "parameters.token"}, invalid: true},
	}
	out := make([]redactionVector, 0, len(cases))
	for _, c := range cases {
		params := rawJSON(t, c.params)
		var decoded map[string]any
		dec := json.NewDecoder(bytes.NewReader(params))
		dec.UseNumber()
		if err := dec.Decode(&decoded); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got, err := conformance.Redact(decoded, c.fields)
		v := redactionVector{Name: c.name, Parameters: params, RedactedFields: c.fields}
		if c.invalid {
			if !errors.Is(err, conformance.ErrInvalidRedactionPath) {
				t.Fatalf("%s: Redact = %v, %v; want invalid_redaction_path", c.name, got, err)
			}
			v.Error = conformance.InvalidRedactionPath
			out = append(out, v)
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		v.ParametersAfter = mustJSON(t, got)
		want := c.want
		switch {
		case c.remove != nil:
			var m map[string]any
			dec := json.NewDecoder(strings.NewReader(c.params))
			dec.UseNumber()
			if err := dec.Decode(&m); err != nil {
				t.Fatal(err)
			}
			for _, k := range c.remove {
				delete(m, k)
			}
			want = string(mustJSON(t, m))
		case want == "":
			want = fullExampleAfter
		}
		if !jcsEqual(t, v.ParametersAfter, []byte(want)) {
			t.Fatalf("%s: reference Redact gives %s, the case says %s", c.name, v.ParametersAfter, want)
		}
		// The caller's value is not changed.
		if !jcsEqual(t, mustJSON(t, decoded), params) {
			t.Fatalf("%s: Redact changed its input", c.name)
		}
		out = append(out, v)
	}
	return out
}

// fullExampleAfter is redactionParams after the "full example" paths.
const fullExampleAfter = `{
  "title": "Quarterly report",
  "token": "secret-1",
  "auth": {"user": "ada", "mfa": {"method": "totp"}},
  "items": [
    {"id": 1},
    {"id": 2, "secret": "b"},
    "plain",
    null,
    [10, null, 12]
  ],
  "a.b": "a key that holds a dot",
  "a": {"b": "reached by parameters.a.b"},
  "0": "a key named zero",
  "empty": {},
  "nothing": null,
  "count": 3,
  "clé": "NFC key",
  "cle\u0301": "NFD key",
  "🔑": "emoji key",
  "with space": "a key with a space",
  "parameters": "a key named parameters",
  "__proto__": {"polluted": true},
  "constructor": "a key named constructor"
}`

// envelope is a CONTRACT §10 error body as svc writes it.
func envelope(t *testing.T, version string, status int, reason, code, message string, details map[string]any) json.RawMessage {
	t.Helper()
	d := map[string]any{}
	if code != "" {
		d["error"] = code
	}
	for k, v := range details {
		d[k] = v
	}
	return mustJSON(t, struct {
		Kind       string         `json:"kind"`
		APIVersion string         `json:"apiVersion"`
		Status     string         `json:"status"`
		Message    string         `json:"message"`
		Reason     string         `json:"reason"`
		Details    map[string]any `json:"details"`
		Code       int            `json:"code"`
	}{"Status", version, "Failure", message, reason, d, status})
}

func retryVectors(t *testing.T) []retryVector {
	t.Helper()
	jsonCT := map[string]string{"Content-Type": "application/json"}
	withRetryAfter := func(s string) map[string]string {
		return map[string]string{"Content-Type": "application/json", "Retry-After": s}
	}
	env := func(status int, reason, code, msg string, details map[string]any) json.RawMessage {
		return envelope(t, "v2", status, reason, code, msg, details)
	}
	allow := rawJSON(t, `{"decision":"allow","reason":"policy allow-reads matched","composite_risk_score":12,"root_trust_level":"unknown",`+
		`"redacted_fields":[],"dry_run":false,"decision_id":"0193f0c4-9b0f-7000-8000-0000000000b1","action_hash":"b50ccc693e34b9806f94c976f47257df3f17249ea67717084967c26aa71ac42b",`+
		`"risk_score":12,"matched_policies":["allow-reads"],"receipt_id":"0193f0c4-9b10-7000-8000-0000000000b1","receipt_hash":"6c1b0a3e8f7d2c5b4a6978e1d0c3b2a5f4e7d6c9b8a1f0e3d2c5b4a7968e1d0c"}`)
	deny := rawJSON(t, `{"decision":"deny","reason":"policy deny-prod-deletes matched","composite_risk_score":80,"root_trust_level":"unknown",`+
		`"redacted_fields":[],"dry_run":false,"decision_id":"0193f0c4-9b0f-7000-8000-0000000000b2","action_hash":"b50ccc693e34b9806f94c976f47257df3f17249ea67717084967c26aa71ac42b",`+
		`"risk_score":80,"matched_policies":["deny-prod-deletes"]}`)
	frozen := rawJSON(t, `{"decision":"deny","reason":"agent_frozen","composite_risk_score":0,"root_trust_level":"unknown","redacted_fields":[],"dry_run":false,`+
		`"decision_id":"0193f0c4-9b0f-7000-8000-0000000000b3","action_hash":"b50ccc693e34b9806f94c976f47257df3f17249ea67717084967c26aa71ac42b","risk_score":0,"matched_policies":[]}`)
	approval := rawJSON(t, `{"approval_id":"0193f0c4-9b11-7000-8000-0000000000b4","tenant_id":"0193f0c4-7a2e-7c3b-9d41-5e6f7a8b9c0d","decision_id":"0193f0c4-9b0f-7000-8000-0000000000b4",`+
		`"agent_id":"0193f0c4-7a2e-7c3b-9d41-00000000a9e1","tool_call":{"tool":"codehost","action":"merge_pull_request","resource":"acme/api#42","parameters":{"method":"squash"}},`+
		`"action_hash":"b50ccc693e34b9806f94c976f47257df3f17249ea67717084967c26aa71ac42b","status":"PENDING","reason":"","approver_user_id":"",`+
		`"created_at":"2026-11-27T10:00:00Z","decided_at":null,"expires_at":"2026-11-27T10:15:00Z","consumed_at":null}`)
	failClosed := rawJSON(t, `{"decision":"deny","reason":"audit_writer_unavailable"}`)
	null := json.RawMessage("null")

	cases := []struct {
		name    string
		status  int
		body    json.RawMessage
		headers map[string]string
		retry   bool
		class   string
	}{
		{"200 authorize allow", 200, allow, jsonCT, false, ""},
		{"200 authorize deny (a decision, not an error)", 200, deny, jsonCT, false, ""},
		{"200 authorize deny agent_frozen", 200, frozen, jsonCT, false, ""},
		{"200 approval still PENDING after a wait, with Retry-After (the waiter bound was reached)", 200, approval, withRetryAfter("1"), false, ""},
		{"400 invalid_json (not JSON)", 400, env(400, "BadRequest", "invalid_json", "request body is not valid JSON", nil), jsonCT, false, conformance.ClassError},
		{"400 invalid_json (empty body)", 400, env(400, "BadRequest", "invalid_json", "request body is empty", nil), jsonCT, false, conformance.ClassError},
		{"400 invalid_json (not UTF-8)", 400, env(400, "BadRequest", "invalid_json", "request body is not valid UTF-8", nil), jsonCT, false, conformance.ClassError},
		{"400 invalid_json duplicate_key", 400, env(400, "BadRequest", "invalid_json", "request body has the key tool_call.tool twice",
			map[string]any{"reason": "duplicate_key", "path": "tool_call.tool"}), jsonCT, false, conformance.ClassError},
		{"400 nul_character", 400, env(400, "BadRequest", "nul_character", "field tool_call.parameters.q contains U+0000, which is not accepted",
			map[string]any{"field": "tool_call.parameters.q"}), jsonCT, false, conformance.ClassError},
		{"400 body_too_large", 400, env(400, "BadRequest", "body_too_large", "request body exceeds 1048576 bytes", nil), jsonCT, false, conformance.ClassError},
		{"400 invalid_field (tool_call.tool is required)", 400, env(400, "BadRequest", "invalid_field", "tool_call.tool: is required",
			map[string]any{"field": "tool_call.tool"}), jsonCT, false, conformance.ClassError},
		{"400 invalid_field (nonce length)", 400, env(400, "BadRequest", "invalid_field", "nonce: must be 8 to 128 characters",
			map[string]any{"field": "nonce"}), jsonCT, false, conformance.ClassError},
		{"400 invalid_type", 400, env(400, "BadRequest", "invalid_type", "field mutates_state must be a boolean",
			map[string]any{"field": "mutates_state"}), jsonCT, false, conformance.ClassError},
		{"400 invalid_tool_call", 400, env(400, "BadRequest", "invalid_tool_call", "tool_call cannot be canonicalized: canonical: number out of range", nil),
			jsonCT, false, conformance.ClassError},
		{"400 invalid_wait (approval GET)", 400, env(400, "BadRequest", "invalid_wait", `wait must be an integer number of seconds from 0 to 25 (larger values mean 25), not "x"`, nil),
			jsonCT, false, conformance.ClassError},
		{"400 nul_character in a query parameter (approval GET)", 400, env(400, "BadRequest", "nul_character", `query parameter "wait" contains U+0000, which is not accepted`,
			map[string]any{"field": "wait"}), jsonCT, false, conformance.ClassError},
		{"400 invalid_query (approval GET)", 400, env(400, "BadRequest", "invalid_query", `query parameter "wait" is not valid UTF-8`,
			map[string]any{"field": "wait"}), jsonCT, false, conformance.ClassError},
		{"400 invalid_input", 400, env(400, "BadRequest", "invalid_input", "a value in the request cannot be stored", nil), jsonCT, false, conformance.ClassError},
		{"404 not_found for a malformed approval id", 404, env(404, "NotFound", "not_found", "resource not found", nil), jsonCT, false, conformance.ClassError},
		{"401 missing bearer token", 401, env(401, "Unauthorized", "unauthorized", "missing bearer token", nil), jsonCT, false, conformance.ClassAuth},
		{"401 invalid agent token", 401, env(401, "Unauthorized", "unauthorized", "invalid agent token", nil), jsonCT, false, conformance.ClassAuth},
		{"401 invalid_signature", 401, env(401, "Unauthorized", "invalid_signature", "missing or invalid X-Svc-Request-Signature", nil), jsonCT, false, conformance.ClassAuth},
		{"401 on a v1 path", 401, envelope(t, "v1", 401, "Unauthorized", "unauthorized", "invalid agent token", nil),
			map[string]string{"Content-Type": "application/json", "Deprecation": "true", "Sunset": "Sat, 01 May 2027 00:00:00 GMT"}, false, conformance.ClassAuth},
		{"403 FORBIDDEN (tool not in the agent's bindings)", 403, env(403, "Forbidden", "FORBIDDEN", "tool not in the agent's permission bindings", nil), jsonCT, false, conformance.ClassAuth},
		{"403 FORBIDDEN (environment not allowed)", 403, env(403, "Forbidden", "FORBIDDEN", "environment not allowed for this agent", nil), jsonCT, false, conformance.ClassAuth},
		{"403 FORBIDDEN (an operator token on authorize)", 403, env(403, "Forbidden", "FORBIDDEN", "authorize requires an agent token", nil), jsonCT, false, conformance.ClassAuth},
		{"404 not_found (approval)", 404, env(404, "NotFound", "not_found", "approval not found", nil), jsonCT, false, conformance.ClassError},
		{"405 method_not_allowed", 405, env(405, "MethodNotAllowed", "method_not_allowed", "GET is not a method of /v2/authorize; it takes POST", nil),
			map[string]string{"Content-Type": "application/json", "Allow": "POST"}, false, conformance.ClassError},
		{"408 body_timeout", 408, env(408, "RequestTimeout", "body_timeout", "the request body did not arrive within 10s (SVC_BODY_READ_TIMEOUT_SECS)", nil),
			jsonCT, false, conformance.ClassError},
		{"409 request_in_flight", 409, env(409, "Conflict", "request_in_flight", "a call with this request_id is still being decided", nil), jsonCT, false, conformance.ClassError},
		{"409 approval_conflict", 409, env(409, "Conflict", "approval_conflict", "the approval is already decided or has expired", nil), jsonCT, false, conformance.ClassError},
		{"413 from a proxy in front of svc, no envelope", 413, null, map[string]string{"Content-Type": "text/html"}, false, conformance.ClassError},
		{"415 unsupported_media_type", 415, env(415, "UnsupportedMediaType", "unsupported_media_type", "Content-Type must be application/json", nil),
			jsonCT, false, conformance.ClassError},
		{"422 Invalid", 422, env(422, "Invalid", "invalid", "the request is invalid", nil), jsonCT, false, conformance.ClassError},
		{"429 rate_limited with Retry-After", 429, env(429, "TooManyRequests", "rate_limited", "rate limit exceeded", nil), withRetryAfter("2"), true, conformance.ClassUnavailable},
		{"429 quota_exceeded with a long Retry-After (past any deadline)", 429, env(429, "TooManyRequests", "quota_exceeded", "quota exhausted for this window", nil),
			withRetryAfter("3600"), true, conformance.ClassUnavailable},
		{"429 agent_concurrency", 429, env(429, "TooManyRequests", "agent_concurrency",
			"this agent token has 10 authorize calls in flight on this node, its rate limit's burst (SVC_RATE_LIMIT_CAPACITY); retry later", nil),
			withRetryAfter("1"), true, conformance.ClassUnavailable},
		{"429 tenant_concurrency", 429, env(429, "TooManyRequests", "tenant_concurrency",
			"this tenant has 100 requests, its share of this node (SVC_MAX_CONCURRENT_PER_TENANT); retry later", nil),
			withRetryAfter("1"), true, conformance.ClassUnavailable},
		{"429 auth_locked", 429, env(429, "TooManyRequests", "auth_locked", "too many failed token attempts from this address; retry later", nil),
			withRetryAfter("60"), true, conformance.ClassUnavailable},
		{"429 approval_ip_limited", 429, env(429, "TooManyRequests", "approval_ip_limited", "too many approval calls from this address; retry later", nil),
			withRetryAfter("1"), true, conformance.ClassUnavailable},
		{"429 approval_attempts_exceeded", 429, env(429, "TooManyRequests", "approval_attempts_exceeded", "too many failed attempts on this approval; retry later", nil),
			withRetryAfter("30"), true, conformance.ClassUnavailable},
		{"429 without Retry-After", 429, env(429, "TooManyRequests", "rate_limited", "rate limit exceeded", nil), jsonCT, true, conformance.ClassUnavailable},
		{"429 with Retry-After as an HTTP date", 429, env(429, "TooManyRequests", "rate_limited", "rate limit exceeded", nil),
			map[string]string{"Content-Type": "application/json", "Retry-After": "Fri, 27 Nov 2026 10:00:05 GMT"}, true, conformance.ClassUnavailable},
		{"429 with a lower-case retry-after header (HTTP/2)", 429, env(429, "TooManyRequests", "rate_limited", "rate limit exceeded", nil),
			map[string]string{"content-type": "application/json", "retry-after": "1"}, true, conformance.ClassUnavailable},
		{"500 internal", 500, env(500, "InternalError", "internal", "internal error", nil), jsonCT, false, conformance.ClassError},
		{"500 database_unavailable (not retried, although it carries Retry-After)", 500, env(500, "InternalError", "database_unavailable", "the database is unavailable", nil),
			withRetryAfter("1"), false, conformance.ClassError},
		{"500 Unknown", 500, env(500, "Unknown", "unknown", "unknown", nil), jsonCT, false, conformance.ClassError},
		{"501 NotImplemented", 501, env(501, "NotImplemented", "not_implemented", "not implemented", nil), jsonCT, false, conformance.ClassError},
		{"502 from a proxy, no body", 502, null, map[string]string{}, true, conformance.ClassUnavailable},
		{"503 audit_writer_unavailable (the fail-closed deny body)", 503, failClosed, jsonCT, true, conformance.ClassUnavailable},
		{"503 shared_state_unavailable (authorize)", 503, env(503, "ServiceUnavailable", "shared_state_unavailable", "shared state is unavailable; the call is refused (fail closed)", nil),
			withRetryAfter("1"), true, conformance.ClassUnavailable},
		{"503 shared_state_unavailable (approval route)", 503, env(503, "ServiceUnavailable", "shared_state_unavailable", "shared state is unavailable; the call is refused (fail closed)", nil),
			withRetryAfter("1"), true, conformance.ClassUnavailable},
		{"503 agent_unavailable", 503, env(503, "ServiceUnavailable", "agent_unavailable", "the agent's actor did not answer: timeout", nil),
			withRetryAfter("1"), true, conformance.ClassUnavailable},
		{"503 overloaded", 503, env(503, "ServiceUnavailable", "overloaded", "too many concurrent requests; retry later", nil), withRetryAfter("1"), true, conformance.ClassUnavailable},
		{"503 from a proxy, no body", 503, null, map[string]string{}, true, conformance.ClassUnavailable},
		{"504 timeout", 504, env(504, "Timeout", "timeout", "the request took longer than the server's timeout", nil), jsonCT, true, conformance.ClassUnavailable},
		{"504 from a proxy, no body", 504, null, map[string]string{}, true, conformance.ClassUnavailable},
	}
	out := make([]retryVector, 0, len(cases))
	for _, c := range cases {
		if got := conformance.Retries(c.status); got != c.retry {
			t.Fatalf("%s: Retries(%d) = %v, the case says %v", c.name, c.status, got, c.retry)
		}
		got := conformance.ErrorClass(c.status)
		if got != c.class {
			t.Fatalf("%s: ErrorClass(%d) = %q, the case says %q", c.name, c.status, got, c.class)
		}
		v := retryVector{Name: c.name, Status: c.status, Body: c.body, Headers: c.headers, Retry: c.retry}
		if got != "" {
			v.Error = &got
		}
		out = append(out, v)
	}
	return out
}

func outcomeVectors(t *testing.T) []outcomeVector {
	t.Helper()
	const common = `"composite_risk_score":20,"root_trust_level":"unknown","dry_run":false,"decision_id":"0193f0c4-9b0f-7000-8000-0000000000c1",` +
		`"action_hash":"b50ccc693e34b9806f94c976f47257df3f17249ea67717084967c26aa71ac42b","risk_score":20`
	cases := []struct {
		name, response, outcome string
	}{
		{"allow", `{"decision":"allow","reason":"policy allow-reads matched","redacted_fields":[],"matched_policies":["allow-reads"],` + common + `}`, conformance.OutcomeRun},
		{"allow with a receipt", `{"decision":"allow","reason":"ok","redacted_fields":[],"matched_policies":[],` + common +
			`,"receipt_id":"0193f0c4-9b10-7000-8000-0000000000c1","receipt_hash":"0b8e1c3f2a4d6b5c7e9f1a3b2c4d6e5f7a9b1c3d2e4f6a5b7c9d1e3f2a4b6c5d"}`, conformance.OutcomeRun},
		{"allow with unknown extra members (ignored)", `{"decision":"allow","reason":"ok","redacted_fields":[],"matched_policies":[],"future_member":{"x":1},` + common + `}`, conformance.OutcomeRun},
		{"redact", `{"decision":"redact","reason":"policy redact-secrets matched","redacted_fields":["parameters.token","parameters.auth.password"],"matched_policies":["redact-secrets"],` + common + `}`,
			conformance.OutcomeRunRedacted},
		{"redact with empty redacted_fields", `{"decision":"redact","reason":"r","redacted_fields":[],"matched_policies":[],` + common + `}`, conformance.OutcomeRunRedacted},
		{"deny", `{"decision":"deny","reason":"policy deny-prod-deletes matched","redacted_fields":[],"matched_policies":["deny-prod-deletes"],` + common + `}`, conformance.OutcomeDeny},
		{"deny agent_frozen", `{"decision":"deny","reason":"agent_frozen","redacted_fields":[],"matched_policies":[],` + common + `}`, conformance.OutcomeDeny},
		{"deny replay_nonce_reused", `{"decision":"deny","reason":"replay_nonce_reused","redacted_fields":[],"matched_policies":[],` + common + `}`, conformance.OutcomeDeny},
		{"quarantine", `{"decision":"quarantine","reason":"policy quarantine-exfil matched","redacted_fields":[],"matched_policies":["quarantine-exfil"],` + common + `}`, conformance.OutcomeDeny},
		{"require_approval with approval_id", `{"decision":"require_approval","reason":"policy approve-merges matched","redacted_fields":[],"matched_policies":["approve-merges"],` + common +
			`,"approval_id":"0193f0c4-9b11-7000-8000-0000000000c1","approval_expires_at":"2026-11-27T10:15:00Z"}`, conformance.OutcomeWaitApproval},
		{"require_approval without approval_id (a dry run, or a broken answer) is a deny", `{"decision":"require_approval","reason":"r","redacted_fields":[],"matched_policies":[],` + common + `}`,
			conformance.OutcomeDeny},
		{"require_approval with an empty approval_id is a deny", `{"decision":"require_approval","reason":"r","approval_id":"","redacted_fields":[],"matched_policies":[],` + common + `}`,
			conformance.OutcomeDeny},
		{"require_approval with a null approval_id is a deny", `{"decision":"require_approval","reason":"r","approval_id":null,"redacted_fields":[],"matched_policies":[],` + common + `}`,
			conformance.OutcomeDeny},
		{"require_approval with a numeric approval_id is a deny", `{"decision":"require_approval","reason":"r","approval_id":42,"redacted_fields":[],"matched_policies":[],` + common + `}`,
			conformance.OutcomeDeny},
		{"unknown decision is a deny", `{"decision":"escalate","reason":"r","redacted_fields":[],"matched_policies":[],` + common + `}`, conformance.OutcomeDeny},
		{"decision in upper case is unknown: deny", `{"decision":"ALLOW","reason":"r","redacted_fields":[],"matched_policies":[],` + common + `}`, conformance.OutcomeDeny},
		{"decision with surrounding space is unknown: deny", `{"decision":" allow","reason":"r","redacted_fields":[],"matched_policies":[],` + common + `}`, conformance.OutcomeDeny},
		{"decision empty string: deny", `{"decision":"","reason":"r","redacted_fields":[],"matched_policies":[],` + common + `}`, conformance.OutcomeDeny},
		{"decision null: deny", `{"decision":null,"reason":"r","redacted_fields":[],"matched_policies":[],` + common + `}`, conformance.OutcomeDeny},
		{"decision missing: deny", `{"reason":"r","redacted_fields":[],"matched_policies":[],` + common + `}`, conformance.OutcomeDeny},
		{"decision not a string: deny", `{"decision":true,"reason":"r","redacted_fields":[],"matched_policies":[],` + common + `}`, conformance.OutcomeDeny},
		{"decision an array: deny", `{"decision":["allow"],"reason":"r","redacted_fields":[],"matched_policies":[],` + common + `}`, conformance.OutcomeDeny},
		{"the fail-closed body is a deny", `{"decision":"deny","reason":"audit_writer_unavailable"}`, conformance.OutcomeDeny},
		{"an empty object is a deny", `{}`, conformance.OutcomeDeny},
	}
	out := make([]outcomeVector, 0, len(cases))
	for _, c := range cases {
		raw := rawJSON(t, c.response)
		if got := conformance.Outcome(raw); got != c.outcome {
			t.Fatalf("%s: Outcome = %s, the case says %s", c.name, got, c.outcome)
		}
		out = append(out, outcomeVector{Name: c.name, Response: raw, Outcome: c.outcome})
	}
	return out
}
