// Package credential mints the gateway's bearer secrets and derives the
// only form of them that is stored (CONTRACT §2): agent tokens, operator
// tokens and webhook delivery secrets are a prefix and 32 random bytes
// (43 base64url characters); the store keeps their SHA-256, and a
// presented token is looked up by its hash.
package credential

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
)

// Token prefixes (CONTRACT §2).
const (
	AgentPrefix    = "svc_agent_"
	OperatorPrefix = "svc_op_"
)

// Mint returns a fresh secret with its prefix and its hash.
func Mint(prefix string) (token string, hash []byte) {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	token = prefix + base64.RawURLEncoding.EncodeToString(b[:])
	return token, Hash(token)
}

// Hash is the stored form of a token: its SHA-256.
func Hash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}
