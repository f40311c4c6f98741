package httpapi

import (
	"net/http/httptest"
	"testing"
	"time"
)

func TestWaitParam(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  time.Duration
		bad   bool
	}{
		{"", 0, false},
		{"?wait=0", 0, false},
		{"?wait=5", 5 * time.Second, false},
		{"?wait=05", 5 * time.Second, false},
		{"?wait=25", 25 * time.Second, false},
		{"?wait=26", 25 * time.Second, false},
		{"?wait=99999999999999999999999", 25 * time.Second, false},
		{"?wait=", 0, true},
		{"?wait=-1", 0, true},
		{"?wait=%2B1", 0, true},
		{"?wait=1.5", 0, true},
		{"?wait=%201", 0, true},
		{"?wait=abc", 0, true},
		{"?wait=%EF%BC%91", 0, true}, // a full-width digit one
	} {
		c := &Call{R: httptest.NewRequest("GET", "/v2/approvals/x"+tc.query, nil)}
		got, err := waitParam(c)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("%q: %v, %v; want %v (error %v)", tc.query, got, err, tc.want, tc.bad)
		}
	}
}
