package receipt

import "testing"

func TestDuplicateKey(t *testing.T) {
	cases := []struct {
		line string
		dup  bool
	}{
		{`{"a":1,"b":2}`, false},
		{`{"a":{"a":1},"b":[{"a":1},{"a":2}]}`, false},
		{`{"a":[1,{"b":2}],"c":"a"}`, false},
		{`{"a":"b","b":"a"}`, false},
		{`[{"a":1},{"a":1}]`, false},
		{`{"a":1,"a":2}`, true},
		{`{"x":{"a":1,"b":{},"a":2}}`, true},
		{`{"x":[{"a":[],"a":1}]}`, true},
		{`{"a":{"b":1},"a":{"b":1}}`, true},
		{`{"a":[1,2],"b":3,"a":4}`, true},
	}
	for _, tc := range cases {
		if err := duplicateKey([]byte(tc.line)); (err != nil) != tc.dup {
			t.Errorf("duplicateKey(%s) = %v, want duplicate %v", tc.line, err, tc.dup)
		}
	}
}
