// Package webhooksign signs the bodies the gateway POSTs to receivers that
// share a secret with it: webhook exports (SPEC 6.5, under the
// subscription's delivery secret) and approval callbacks (CONTRACT §14,
// under the agent's secret) carry the same signature header, so a
// receiver verifies both alike. It is a package of its own (DESIGN §6)
// because two services sign, the exporter actor (actors/) and the
// approval callbacks (approvalcallback/), and neither imports the other.
package webhooksign

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// Header carries a body's signature (Sign).
const Header = "X-Svc-Signature"

// Sign is the value of Header for body: "sha256=" and the hex HMAC-SHA256
// of the exact body bytes under secret (its UTF-8 bytes, as shown at
// creation).
func Sign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}
