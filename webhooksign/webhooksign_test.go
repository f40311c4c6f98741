package webhooksign

import "testing"

// The signature is RFC 4231's test case 2 (key "Jefe"), in the form
// receivers compare: "sha256=" and lower-case hex.
func TestSign(t *testing.T) {
	got := Sign("Jefe", []byte("what do ya want for nothing?"))
	want := "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
	if got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
}
