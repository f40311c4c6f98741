package canonical

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
	"golang.org/x/text/unicode/norm"
)

// Scheme names the action hash scheme that [ActionHash] implements (SPEC
// 9.7). It changes only together with the bytes it produces.
const Scheme = "svc-jcs-1"

// JCS returns the RFC 8785 canonical bytes of the JSON text raw. It fails
// on text that is not JSON or falls outside the I-JSON subset RFC 8785
// accepts (duplicate member names, invalid UTF-8, lone surrogates, numbers
// out of the range of a double).
func JCS(raw []byte) ([]byte, error) {
	if raw == nil {
		return nil, fmt.Errorf("canonical: no JSON text")
	}
	out, err := jcs.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("canonical: %w", err)
	}
	return out, nil
}

// Marshal encodes v with encoding/json and returns the RFC 8785 canonical
// bytes of the result.
func Marshal(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("canonical: encode: %w", err)
	}
	return JCS(raw)
}

// NormalizeIdentifier applies SPEC 4.2 rule 7 to a tool or action
// identifier: percent-decode (the input is kept when it does not decode to
// valid UTF-8), Unicode NFC, trim white space, lower-case. The package
// documentation gives the exact rules.
func NormalizeIdentifier(s string) string {
	if decoded, err := url.PathUnescape(s); err == nil && utf8.ValidString(decoded) {
		s = decoded
	}
	s = norm.NFC.String(s)
	s = strings.TrimSpace(s)
	return strings.ToLower(s)
}

// ToolCall is the part of an authorize request that the action hash covers
// (SPEC 4.2: tool_call).
type ToolCall struct {
	Tool       string         `json:"tool"`
	Action     string         `json:"action"`
	Resource   *string        `json:"resource"`
	Parameters map[string]any `json:"parameters"`
}

// ActionHash returns the svc-jcs-1 action hash of tc: the lower-case hex
// SHA-256 of the JCS bytes of {"tool","action","resource","parameters"}
// with tool and action normalized by [NormalizeIdentifier], resource null
// when nil and parameters {} when nil. It fails when the parameters cannot
// be encoded as I-JSON (a NaN, a channel, a number out of range).
func ActionHash(tc ToolCall) (string, error) {
	return NormalizedActionHash(normalized(tc))
}

// NormalizedActionHash is [ActionHash] of a call whose tool and action are
// already normalized (the gateway normalizes once, SPEC 4.2 rule 7, and
// keeps the result). Normalizing again would percent-decode twice: "%2541"
// is "%41" after rule 7, not "a".
func NormalizedActionHash(tc ToolCall) (string, error) {
	b, err := normalizedActionBytes(tc)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// ActionBytes returns the canonical bytes that [ActionHash] hashes, for
// logging, debugging and the test vectors.
func ActionBytes(tc ToolCall) ([]byte, error) { return normalizedActionBytes(normalized(tc)) }

func normalized(tc ToolCall) ToolCall {
	tc.Tool, tc.Action = NormalizeIdentifier(tc.Tool), NormalizeIdentifier(tc.Action)
	return tc
}

func normalizedActionBytes(tc ToolCall) ([]byte, error) {
	params := tc.Parameters
	if params == nil {
		params = map[string]any{}
	}
	// The members in RFC 8785 order, written directly (see appendJCS).
	b := make([]byte, 0, 512)
	b = append(b, `{"action":`...)
	b = AppendString(b, coerceUTF8(tc.Action))
	b = append(b, `,"parameters":`...)
	b, err := appendJCS(b, params, 0)
	if err != nil {
		return nil, err
	}
	b = append(b, `,"resource":`...)
	if tc.Resource == nil {
		b = append(b, "null"...)
	} else {
		b = AppendString(b, coerceUTF8(*tc.Resource))
	}
	b = append(b, `,"tool":`...)
	b = AppendString(b, coerceUTF8(tc.Tool))
	return append(b, '}'), nil
}

// AppendString appends s as RFC 8785 serializes a string (ECMAScript's
// JSON.stringify): '"' and '\' escaped, the control characters below U+0020
// as \b \t \n \f \r or \u00xx, everything else as is. s must be valid UTF-8
// (the caller checks; RFC 8785 has no form for invalid text). It lets a
// caller with a fixed, all-string record write its canonical form directly
// instead of encoding and re-parsing it.
func AppendString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\t':
			b = append(b, '\\', 't')
		case '\n':
			b = append(b, '\\', 'n')
		case '\f':
			b = append(b, '\\', 'f')
		case '\r':
			b = append(b, '\\', 'r')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
