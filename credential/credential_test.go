package credential

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
)

func TestMint(t *testing.T) {
	a, ha := Mint(AgentPrefix)
	b, hb := Mint(AgentPrefix)
	if !strings.HasPrefix(a, AgentPrefix) || len(a) != len(AgentPrefix)+43 || a == b || bytes.Equal(ha, hb) {
		t.Fatalf("tokens %q %q", a, b)
	}
	if !bytes.Equal(ha, Hash(a)) {
		t.Fatal("the minted hash is not the token's")
	}
	// SHA-256 of "abc".
	if got := hex.EncodeToString(Hash("abc")); got != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Fatalf("Hash(abc) = %s", got)
	}
}
