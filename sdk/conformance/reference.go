package conformance

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"

	"golang.org/x/mod/sumdb/tlog"

	"svc/canonical"
	"svc/receipt"
	"svc/receiptlog"
)

// InvalidRedactionPath is the error code of a redaction path an SDK must
// refuse (the tool does not run): the driver answers
// {"error":"invalid_redaction_path"}.
const InvalidRedactionPath = "invalid_redaction_path"

// ErrInvalidRedactionPath is returned by [Redact] for a path it refuses.
var ErrInvalidRedactionPath = canonical.ErrInvalidRedactionPath

// The typed errors an SDK raises for a final non-2xx answer ([ErrorClass]).
const (
	ClassAuth        = "SvcAuthError"
	ClassUnavailable = "SvcUnavailable"
	ClassError       = "SvcError"
)

// The outcomes of a 200 authorize answer ([Outcome]).
const (
	OutcomeRun          = "run"
	OutcomeRunRedacted  = "run_redacted"
	OutcomeDeny         = "deny"
	OutcomeWaitApproval = "wait_approval"
)

// SignatureHeaderValue is the X-Svc-Request-Signature value for body under
// key: "sha256=" and the lower-case hex HMAC-SHA256 of the body's bytes,
// exactly as sent. key is the agent's signing_key decoded from base64
// (CONTRACT §13), of any length (HMAC hashes a key longer than its 64-byte
// block first).
func SignatureHeaderValue(key, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// Sign is [SignatureHeaderValue] with the key as the agent receives it:
// standard base64 with padding. It fails on anything else.
func Sign(signingKey, body string) (string, error) {
	key, err := DecodeBase64(signingKey)
	if err != nil {
		return "", err
	}
	return SignatureHeaderValue(key, []byte(body)), nil
}

// DecodeBase64 decodes standard base64 with padding, strictly: no URL-safe
// alphabet, no missing padding, no non-zero padding bits.
func DecodeBase64(s string) ([]byte, error) {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || base64.StdEncoding.EncodeToString(b) != s {
		return nil, errors.New("not standard base64")
	}
	return b, nil
}

// Redact returns a deep copy of parameters with every path of paths
// removed, as an SDK applies a redact decision's redacted_fields before the
// tool runs (canonical.Redact, which the gateway's MCP proxy applies too).
func Redact(parameters map[string]any, paths []string) (map[string]any, error) {
	return canonical.Redact(parameters, paths)
}

// Retries reports whether an SDK sends a call again after this HTTP status
// (with the same request_id, inside its deadline): 429 (after Retry-After
// when present, bounded by the deadline), 502, 503 and 504. Nothing else
// is retried: not 2xx, not 4xx, not 500 or 501. The body and the headers do
// not change the answer; Retry-After only changes how long the SDK waits.
func Retries(status int) bool {
	switch status {
	case 429, 502, 503, 504:
		return true
	}
	return false
}

// ErrorClass names the typed error an SDK raises when an answer with this
// status is final (not retried, or retried until the deadline): "" for a
// 2xx answer, [ClassAuth] for 401 and 403, [ClassUnavailable] for 429, 502,
// 503 and 504, [ClassError] for every other status.
func ErrorClass(status int) string {
	switch {
	case status >= 200 && status < 300:
		return ""
	case status == 401 || status == 403:
		return ClassAuth
	case Retries(status):
		return ClassUnavailable
	}
	return ClassError
}

// Outcome is what an SDK does with a 200 authorize answer body: [OutcomeRun]
// for decision "allow", [OutcomeRunRedacted] for "redact" (the tool runs
// with redacted_fields removed, [Redact]), [OutcomeWaitApproval] for
// "require_approval" that carries a non-empty approval_id, and
// [OutcomeDeny] for everything else: "deny", "quarantine",
// "require_approval" without an approval_id, a decision that is missing,
// not a string or not one of these exact values (SPEC: an unknown decision
// is a deny), and a body that is not a JSON object.
func Outcome(body []byte) string {
	var resp map[string]any
	if err := json.Unmarshal(body, &resp); err != nil || resp == nil {
		return OutcomeDeny
	}
	decision, _ := resp["decision"].(string)
	switch decision {
	case "allow":
		return OutcomeRun
	case "redact":
		return OutcomeRunRedacted
	case "require_approval":
		if id, _ := resp["approval_id"].(string); id != "" {
			return OutcomeWaitApproval
		}
	}
	return OutcomeDeny
}

// VerifyReceipt checks one receipt with the pinned public key, as an SDK
// does: hashValid says that the receipt's fields hash to its receipt_hash
// (svc-receipt-1, or svc-receipt-2 for a receipt with context_hash; false
// for a malformed context_hash), signatureValid that its signature over
// that hash verifies with pub and that its key_id is pub's. An unsigned
// receipt, or one whose key_id is not pub's, has signatureValid false. It is
// [receipt.Verify] with its null signature_valid read as false.
func VerifyReceipt(r receipt.Receipt, pub ed25519.PublicKey) (hashValid, signatureValid bool) {
	c := receipt.Verify(r, pub)
	return c.HashValid, c.SignatureValid != nil && *c.SignatureValid
}

// InclusionProof is a receipt's inclusion proof as GET
// /v2/receipts/:receipt_id/inclusion answers it (CONTRACT §17).
type InclusionProof struct {
	LeafIndex int64    `json:"leaf_index"`
	TreeSize  int64    `json:"tree_size"`
	Hashes    []string `json:"hashes"`
}

// VerifyInclusion checks that receipt r is in the receipt log that
// checkpoint (a signed note, as GET /v2/receipts/checkpoint serves it)
// signs, by proof, as an SDK does with the pinned receipt key pub:
//
//   - checkpointValid: the checkpoint is of r's tenant's log (its origin
//     ends in "/" and r's tenant_id) and carries a signature by pub, named
//     as its origin, that verifies (the note verifier key is
//     <origin>+<key hash>+<0x01 and pub, base64>; other signature lines,
//     such as witnesses' cosignatures, are ignored);
//   - proofValid: r hashes to its receipt_hash (hashValid of
//     [VerifyReceipt]), the proof is of leaf seq-1 in a tree of the
//     checkpoint's size, and its hashes lead from r's leaf (SHA-256 of 0x00
//     and the 32 bytes of receipt_hash) to the checkpoint's root (RFC 6962),
//     whether or not the checkpoint's signature verifies.
//
// It is svc's own code: receiptlog (golang.org/x/mod/sumdb/note and tlog).
func VerifyInclusion(r receipt.Receipt, proof InclusionProof, checkpoint string, pub ed25519.PublicKey) (checkpointValid, proofValid bool) {
	cp, err := receiptlog.ReadCheckpoint([]byte(checkpoint))
	if err != nil {
		return false, false
	}
	if vkey, err := receiptlog.VerifierKeyFor(cp.Origin, pub); err == nil && strings.HasSuffix(cp.Origin, "/"+r.TenantID) {
		_, err := receiptlog.OpenCheckpoint([]byte(checkpoint), vkey, cp.Origin)
		checkpointValid = err == nil
	}
	hashValid, _ := VerifyReceipt(r, pub)
	if !hashValid || proof.TreeSize != cp.Size || proof.LeafIndex != r.Seq-1 {
		return checkpointValid, false
	}
	hashes := make(tlog.RecordProof, len(proof.Hashes))
	for i, h := range proof.Hashes {
		b, err := DecodeBase64(h)
		if err != nil || len(b) != tlog.HashSize {
			return checkpointValid, false
		}
		copy(hashes[i][:], b)
	}
	leaf, err := receiptlog.LeafHash(r.ReceiptHash)
	if err != nil {
		return checkpointValid, false
	}
	return checkpointValid, tlog.CheckRecord(hashes, cp.Size, cp.Root, proof.LeafIndex, leaf) == nil
}
