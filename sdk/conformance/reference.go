package conformance

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"svc/receipt"
)

// InvalidRedactionPath is the error code of a redaction path an SDK must
// refuse (the tool does not run): the driver answers
// {"error":"invalid_redaction_path"}.
const InvalidRedactionPath = "invalid_redaction_path"

// ErrInvalidRedactionPath is returned by [Redact] for a path it refuses.
var ErrInvalidRedactionPath = errors.New(InvalidRedactionPath)

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
// tool runs. A path is "parameters" followed by "."-separated segments:
//
//   - "parameters" alone empties the parameters to {};
//   - a segment walks an object by exact key (no normalization); on an
//     array, a segment that is a canonical decimal index (ASCII digits, no
//     sign, no leading zero: "0", "12") selects that element;
//   - the last segment removes the key from its object, or replaces the
//     array element by null (the other indexes do not shift);
//   - a path that does not resolve (a missing key, an index out of range or
//     not canonical, a walk into a scalar or null) changes nothing;
//   - paths apply in order.
//
// Every path is checked before any applies: an empty path, one that is not
// "parameters" and does not start with "parameters.", or one with an empty
// segment fails the whole call with [ErrInvalidRedactionPath] (fail
// closed: the SDK does not run the tool). A key that contains a "." cannot
// be addressed. nil parameters are {}.
func Redact(parameters map[string]any, paths []string) (map[string]any, error) {
	parsed := make([][]string, len(paths))
	for i, p := range paths {
		segs, err := parseRedactionPath(p)
		if err != nil {
			return nil, err
		}
		parsed[i] = segs
	}
	out, _ := deepCopy(parameters).(map[string]any)
	if out == nil {
		out = map[string]any{}
	}
	for _, segs := range parsed {
		if len(segs) == 0 {
			out = map[string]any{}
			continue
		}
		var cur any = out
		for _, seg := range segs[:len(segs)-1] {
			cur = step(cur, seg)
		}
		last := segs[len(segs)-1]
		switch c := cur.(type) {
		case map[string]any:
			delete(c, last)
		case []any:
			if i, ok := arrayIndex(last, len(c)); ok {
				c[i] = nil
			}
		}
	}
	return out, nil
}

// parseRedactionPath returns the segments after "parameters" (none for
// "parameters" itself).
func parseRedactionPath(p string) ([]string, error) {
	if p == "parameters" {
		return []string{}, nil
	}
	rest, ok := strings.CutPrefix(p, "parameters.")
	if !ok {
		return nil, ErrInvalidRedactionPath
	}
	segs := strings.Split(rest, ".")
	for _, s := range segs {
		if s == "" {
			return nil, ErrInvalidRedactionPath
		}
	}
	return segs, nil
}

// step walks one segment from cur; nil when it does not resolve (nil
// walks nowhere, so the rest of the path changes nothing).
func step(cur any, seg string) any {
	switch c := cur.(type) {
	case map[string]any:
		return c[seg]
	case []any:
		if i, ok := arrayIndex(seg, len(c)); ok {
			return c[i]
		}
	}
	return nil
}

// arrayIndex parses seg as a canonical decimal index below n.
func arrayIndex(seg string, n int) (int, bool) {
	if seg == "" || (len(seg) > 1 && seg[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(seg); i++ {
		if seg[i] < '0' || seg[i] > '9' {
			return 0, false
		}
	}
	i, err := strconv.Atoi(seg)
	if err != nil || i >= n {
		return 0, false
	}
	return i, true
}

// deepCopy copies a decoded JSON value (maps and slices are new; scalars are
// immutable).
func deepCopy(v any) any {
	switch c := v.(type) {
	case map[string]any:
		if c == nil {
			return map[string]any(nil)
		}
		m := make(map[string]any, len(c))
		for k, e := range c {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		if c == nil {
			return []any(nil)
		}
		s := make([]any, len(c))
		for i, e := range c {
			s[i] = deepCopy(e)
		}
		return s
	}
	return v
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
// (svc-receipt-1), signatureValid that its signature over that hash
// verifies with pub and that its key_id is pub's. An unsigned receipt, or
// one whose key_id is not pub's, has signatureValid false. It is
// [receipt.Verify] with its null signature_valid read as false.
func VerifyReceipt(r receipt.Receipt, pub ed25519.PublicKey) (hashValid, signatureValid bool) {
	c := receipt.Verify(r, pub)
	return c.HashValid, c.SignatureValid != nil && *c.SignatureValid
}
