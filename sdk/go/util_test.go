package svcsdk

import (
	"encoding/json"
	"errors"
	"testing"
)

type jsonNum = json.Number

func asErr[T error](err error, target *T) bool { return errors.As(err, target) }

func jsonNumber(s string) any { return jsonNum(s) }

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
