package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// as returns v as a T, failing the test (rather than panicking) when v holds
// something else.
func as[T any](t *testing.T, v any) T {
	t.Helper()
	x, ok := v.(T)
	if !ok {
		t.Fatalf("got %T (%v), want %T", v, v, x)
	}
	return x
}

func run(t *testing.T, input string) []map[string]any {
	t.Helper()
	var out bytes.Buffer
	if err := serve(strings.NewReader(input), &out); err != nil {
		t.Fatal(err)
	}
	var answers []map[string]any
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		if line == "" {
			continue
		}
		for _, c := range []byte(line) {
			if c >= 0x80 {
				t.Fatalf("non-ASCII answer %q", line)
			}
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		answers = append(answers, m)
	}
	return answers
}

func TestLinesInOrderAndMalformedLines(t *testing.T) {
	key := "a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2U="
	in := []string{
		`{"op":"canonicalize","value":{"b":[1E21,-0.0,0.000001],"a":"\u20ac"}}`,
		`not json at all`,
		`{"op":"frobnicate"}`,
		`{"op":"action_hash","tool_call":{"tool":" GitHub ","action":"Merge","resource":null,"parameters":{}}}`,
		`{"op":"sign","body":"{\"a\":1}","signing_key":"` + key + `"}`,
		`{"op":"sign","body":"x","signing_key":"***"}`,
		`{"op":"redact","parameters":{"a":{"b":1},"c":2},"redacted_fields":["parameters.a.b"]}`,
		`{"op":"redact","parameters":{"a":1},"redacted_fields":["a"]}`,
		`{"op":"retry","status":429,"body":null,"headers":{"Retry-After":"1"}}`,
		`{"op":"retry","status":400,"body":{"reason":"BadRequest"},"headers":{}}`,
		`{"op":"outcome","response":{"decision":"require_approval"}}`,
		`{"op":"verify_receipt","receipt":{},"public_key":"AAAA"}`,
		`{"op":"canonicalize"}`,
		`{"op":"canonicalize","value":1,"value":2}`,
		`[1,2]`,
		``,
		"\xff\xfe",
		`{"op":"canonicalize","value":123456789012345678901234567890}`,
		`{"op":"canonicalize","value":1e999}`,
		`{"op":"canonicalize","value":"\ud800"}`,
		`{"op":7}`,
		`{"op":"authorize","tool_call":{"tool":"t","action":"a"}}`,
	}
	out := run(t, strings.Join(in, "\n")+"\n")
	if len(out) != len(in) {
		t.Fatalf("%d answers for %d lines", len(out), len(in))
	}
	want := map[int]string{
		0: `{"canonical":"{\"a\":\"€\",\"b\":[1e+21,0,0.000001]}"}`, 2: `{"error":"unknown_op"}`,
		4: `{"header":"sha256=` + "" + `"}`, 6: `{"parameters":{"a":{},"c":2}}`, 7: `{"error":"invalid_redaction_path"}`,
		8: `{"retry":true}`, 9: `{"retry":false}`, 10: `{"outcome":"deny"}`, 11: `{"hash_valid":false,"signature_valid":false}`,
		12: `{"error":"missing_field"}`, 13: `{"error":"duplicate_key"}`, 17: `{"canonical":"1.2345678901234568e+29"}`,
		20: `{"error":"unknown_op"}`, 21: `{"error":"no_client"}`,
	}
	for i, w := range want {
		if i == 4 {
			if h, _ := out[i]["header"].(string); !strings.HasPrefix(h, "sha256=") || len(h) != 71 {
				t.Errorf("line %d: %v", i, out[i])
			}
			continue
		}
		var wm map[string]any
		_ = json.Unmarshal([]byte(w), &wm)
		g, _ := json.Marshal(out[i])
		ww, _ := json.Marshal(wm)
		if string(g) != string(ww) {
			t.Errorf("line %d: %s want %s", i, g, ww)
		}
	}
	for _, i := range []int{1, 3, 5, 14, 15, 16, 18, 19} {
		if i == 3 {
			if h, _ := out[i]["action_hash"].(string); len(h) != 64 {
				t.Errorf("line %d: %v", i, out[i])
			}
			continue
		}
		if e, _ := out[i]["error"].(string); e == "" {
			t.Errorf("line %d: %v", i, out[i])
		}
	}
}

func TestEmptyInputAndNoTrailingNewline(t *testing.T) {
	if out := run(t, ""); len(out) != 0 {
		t.Error(out)
	}
	out := run(t, `{"op":"canonicalize","value":[]}`)
	if len(out) != 1 || out[0]["canonical"] != "[]" {
		t.Error(out)
	}
	out = run(t, "{\"op\":\"canonicalize\",\"value\":[]}\r\n{\"op\":\"canonica")
	if len(out) != 2 || out[0]["canonical"] != "[]" || out[1]["error"] == nil {
		t.Error(out)
	}
}

func TestLiveOps(t *testing.T) {
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.Path)
		switch {
		case strings.HasSuffix(r.URL.Path, "/authorize"):
			w.Header().Set("Deprecation", "true")
			_, _ = w.Write([]byte(`{"decision":"redact","reason":"r","redacted_fields":["parameters.card"],"decision_id":"d1"}`))
		case strings.Contains(r.URL.Path, "/approvals/"):
			_, _ = w.Write([]byte(`{"approval_id":"ap1","status":"REJECTED","reason":"no","tool_call":{}}`))
		default:
			w.WriteHeader(404)
			_, _ = w.Write([]byte(`{"kind":"Status","reason":"NotFound","message":"nope","details":{"error":"not_found"},"code":404}`))
		}
	}))
	defer srv.Close()
	lines := []string{
		`{"op":"client","base_url":"` + srv.URL + `","agent_token":"tok","timeout":2,"retries":1,"signing_key":null,"fail_open_tools":["x",["k","l"]]}`,
		`{"op":"authorize","tool_call":{"tool":"pay","action":"charge","resource":null,"parameters":{"card":"4242","n":12345678901234567890}}}`,
		`{"op":"run","tool_call":{"tool":"pay","action":"charge","parameters":{"card":"4242","n":1}},"mask":"[m]"}`,
		`{"op":"guard","tool":"pay","action":"charge","resource":"r","mutates_state":false,"arguments":{"card":"4242","n":1.5}}`,
		`{"op":"wait_for_approval","approval_id":"ap1","timeout":2}`,
		`{"op":"get_receipt","receipt_id":"r1"}`,
		`{"op":"stats"}`,
		`{"op":"run","tool_call":{"tool":"","action":"a"}}`,
	}
	out := run(t, strings.Join(lines, "\n"))
	if len(out) != len(lines) || out[0]["ok"] != true {
		t.Fatal(out)
	}
	d := as[map[string]any](t, out[1]["decision"])
	if d["decision"] != "redact" || d["decision_id"] != "d1" || d["approval_id"] != nil || d["status"] != float64(200) {
		t.Error(d)
	}
	if ws := as[[]any](t, out[1]["warnings"]); len(ws) != 1 || as[map[string]any](t, ws[0])["kind"] != "deprecation" {
		t.Error(ws)
	}
	if ws := as[[]any](t, out[2]["warnings"]); len(ws) != 0 {
		t.Error("deprecation warned twice", ws)
	}
	if p := as[map[string]any](t, out[2]["parameters"]); out[2]["ran"] != true || p["card"] != "[m]" {
		t.Error(out[2])
	}
	if p := as[map[string]any](t, out[3]["parameters"]); out[3]["ran"] != true || p["card"] != nil || p["n"] != 1.5 {
		t.Error(out[3])
	}
	if e := as[map[string]any](t, out[4]["raised"]); e["type"] != "ApprovalRejected" || as[map[string]any](t, e["approval"])["status"] != "REJECTED" {
		t.Error(out[4])
	}
	if e := as[map[string]any](t, out[5]["raised"]); e["type"] != "SvcError" || e["status"] != float64(404) || e["error_code"] != "not_found" {
		t.Error(out[5])
	}
	if out[6]["fail_open_count"] != float64(0) {
		t.Error(out[6])
	}
	if e := as[map[string]any](t, out[7]["raised"]); e["type"] != "InvalidRequest" || out[7]["ran"] != false {
		t.Error(out[7])
	}
}
