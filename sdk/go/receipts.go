package svcsdk

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strings"
)

// ReceiptScheme is the receipt hashing scheme of a receipt without
// context_hash: the SHA-256 of the RFC 8785 bytes of [ReceiptHashedFields].
const ReceiptScheme = "svc-receipt-1"

// ReceiptSchemeContext is the receipt hashing scheme of a receipt made under
// run context, which carries a non-empty context_hash (64 lower-case hex: the
// SHA-256 of the run context the policy saw): svc-receipt-1's object plus
// the member context_hash. One chain may mix both schemes; [ReceiptHash]
// picks one by the field.
const ReceiptSchemeContext = "svc-receipt-2"

// ReceiptHashedFields are the members of a receipt its receipt_hash covers
// under svc-receipt-1; svc-receipt-2 adds context_hash.
var ReceiptHashedFields = []string{"receipt_id", "tenant_id", "decision_id", "seq", "action_hash", "decision",
	"prev_receipt_hash", "key_id", "created_at"}

var hexHash = regexp.MustCompile(`^[0-9a-f]{64}$`)

// VerifyResult is the outcome of [VerifyReceipt]. The two checks are
// independent: HashValid (the fields hash to receipt_hash) and
// SignatureValid (signed, by the pinned key's key_id, and the Ed25519
// signature over the 32 raw bytes of receipt_hash verifies).
type VerifyResult struct {
	HashValid      bool
	SignatureValid bool
	KeyIDMatches   bool
	Signed         bool
	KeyID          string // the pinned key's key_id
	ComputedHash   string
	Error          string
}

// Valid is HashValid && SignatureValid.
func (r VerifyResult) Valid() bool { return r.HashValid && r.SignatureValid }

// KeyID is the key id of an Ed25519 public key: the first 16 hex characters
// of the SHA-256 of its 32 bytes.
func KeyID(pub []byte) string {
	if len(pub) != ed25519.PublicKeySize {
		return ""
	}
	s := sha256.Sum256(pub)
	return hex.EncodeToString(s[:])[:16]
}

// DecodePublicKey decodes a standard-base64 32-byte Ed25519 public key.
func DecodePublicKey(b64 string) (ed25519.PublicKey, error) {
	s := strings.TrimSpace(b64)
	if strings.ContainsAny(s, "\r\n") {
		return nil, errors.New("public key is not standard base64")
	}
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("public key is not standard base64: %w", err)
	}
	if len(raw) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("an Ed25519 public key is 32 bytes, got %d", len(raw))
	}
	return ed25519.PublicKey(raw), nil
}

var maxSeq = new(big.Int).Lsh(big.NewInt(1), 53)

// ReceiptHash computes the hash of a receipt (its receipt_hash and signature
// are ignored): svc-receipt-2 ([ReceiptSchemeContext]) when it carries a
// non-empty context_hash, else svc-receipt-1 ([ReceiptScheme]). A missing
// field counts as "" (seq as 0), and a context_hash that is absent, null or
// "" as none. It fails when a field has the wrong type, seq is beyond 2^53
// in magnitude, or context_hash is not 64 lower-case hex characters.
func ReceiptHash(receipt map[string]any) (string, error) {
	obj := map[string]any{}
	for _, name := range ReceiptHashedFields {
		v := receipt[name]
		if name == "seq" {
			if v == nil {
				v = json.Number("0")
			}
			n, ok := v.(json.Number)
			if !ok || strings.ContainsAny(string(n), ".eE") {
				return "", errors.New("seq must be an integer")
			}
			b, ok := new(big.Int).SetString(string(n), 10)
			if !ok {
				return "", errors.New("seq must be an integer")
			}
			if new(big.Int).Abs(b).Cmp(maxSeq) > 0 {
				return "", fmt.Errorf("seq %s is out of range", n)
			}
			obj[name] = n
			continue
		}
		if v == nil {
			v = ""
		}
		if _, ok := v.(string); !ok {
			return "", fmt.Errorf("%s must be a string", name)
		}
		obj[name] = v
	}
	switch v := receipt["context_hash"].(type) {
	case nil: // absent or null: svc-receipt-1
	case string:
		if v != "" {
			if !hexHash.MatchString(v) {
				return "", errors.New("context_hash is not 64 lower-case hex characters")
			}
			obj["context_hash"] = v
		}
	default:
		return "", errors.New("context_hash must be a string")
	}
	b, err := Canonicalize(obj)
	if err != nil {
		return "", err
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:]), nil
}

func strictB64(s string) []byte {
	raw, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || base64.StdEncoding.EncodeToString(raw) != s {
		return nil
	}
	return raw
}

// VerifyReceipt verifies one receipt (CONTRACT 13's shape, as a JSON object
// or any value encoding to one) against the gateway's public key (standard
// base64). HashValid follows [ReceiptHash] (svc-receipt-1, or svc-receipt-2
// for a receipt with context_hash; false for a malformed context_hash).
// SignatureValid is false for an unsigned receipt and for a key_id other
// than the key's.
func VerifyReceipt(receipt any, publicKeyB64 string) VerifyResult {
	jv, err := jsonValue(receipt)
	r, ok := jv.(map[string]any)
	if err != nil || !ok {
		return VerifyResult{Error: "receipt is not an object"}
	}
	var pub ed25519.PublicKey
	if p, err := DecodePublicKey(publicKeyB64); err == nil {
		pub = p
	}
	kid := KeyID(pub)
	res := VerifyResult{KeyID: kid}
	computed, herr := ReceiptHash(r)
	if herr != nil {
		res.Error = herr.Error()
	} else {
		res.ComputedHash = computed
	}
	stored, storedOK := r["receipt_hash"].(string)
	res.HashValid = herr == nil && storedOK && computed == stored
	if herr == nil && !res.HashValid {
		res.Error = "receipt_hash mismatch"
	}
	sig, hasSig := r["signature"]
	if sig == nil {
		hasSig = false
	}
	rkid, _ := r["key_id"].(string)
	res.Signed = hasSig || rkid != ""
	res.KeyIDMatches = kid != "" && rkid == kid
	why := ""
	switch {
	case !res.Signed:
		why = "unsigned receipt"
	case !hasSig:
		why = "missing signature"
	case !res.KeyIDMatches:
		why = "unknown key_id"
	default:
		s, ok := sig.(string)
		var raw, msg []byte
		if ok {
			raw = strictB64(s)
		}
		if storedOK && hexHash.MatchString(stored) {
			msg, _ = hex.DecodeString(stored)
		}
		if !ok || len(raw) != ed25519.SignatureSize || msg == nil || pub == nil {
			why = "invalid signature"
		} else if ed25519.Verify(pub, msg, raw) {
			res.SignatureValid = true
		} else {
			why = "invalid signature"
		}
	}
	if res.Error == "" && why != "" {
		res.Error = why
	}
	return res
}
