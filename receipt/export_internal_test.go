package receipt

import "testing"

// An export line means one thing to every reader: a key named twice (at
// any depth) or in another case than the receipt's own is not read as the
// receipt's field.
func TestDecodeLineIsStrict(t *testing.T) {
	cases := []struct {
		line string
		bad  bool
	}{
		{`{"a":1,"b":2}`, false},
		{`{"a":{"a":1},"b":[{"a":1},{"a":2}]}`, false},
		{`{"a":[1,{"b":2}],"c":"a"}`, false},
		{`{"a":"b","b":"a"}`, false},
		{`{"a":1,"a":2}`, true},
		{`{"x":{"a":1,"b":{},"a":2}}`, true},
		{`{"x":[{"a":[],"a":1}]}`, true},
		{`{"a":{"b":1},"a":{"b":1}}`, true},
		{`{"a":[1,2],"b":3,"a":4}`, true},
		{"{\"a\":\"\xff\"}", true},
	}
	for _, tc := range cases {
		var v map[string]any
		if err := decodeLine([]byte(tc.line), &v); (err != nil) != tc.bad {
			t.Errorf("decodeLine(%s) = %v, want refused %v", tc.line, err, tc.bad)
		}
	}
	var r Receipt
	if err := decodeLine([]byte(`{"decision":"deny","Decision":"allow"}`), &r); err == nil || err.Error() != `unknown key "Decision"` {
		t.Errorf("a case-variant key: %v, want refused as an unknown key", err)
	}
	var m map[string]any
	if err := decodeLine([]byte(`{"decision":"deny","Decision":"allow"}`), &m); err != nil {
		t.Errorf("a map takes any key: %v", err)
	}
}
