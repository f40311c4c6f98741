package svcsdk

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Scheme is the action hash scheme this SDK computes (SPEC 9.7).
const Scheme = "svc-jcs-1"

// UnicodeVersion is the Unicode version svc-jcs-1 is pinned to. When this
// toolchain's tables (unicode.Version, norm.Version) are another version, a
// local hash over non-ASCII identifiers is not authoritative and the server's
// is trusted (Decision.HashCertain false).
const UnicodeVersion = "15.0.0"

// ErrCanonical is wrapped by every error of [Canonicalize], [ParseJSON] and
// [ActionHash]: a value or text that has no RFC 8785 canonical form.
var ErrCanonical = errors.New("no canonical JSON form")

// maxDepth bounds nesting in parsing and conversion.
const maxDepth = 1000

type canonErr struct {
	code string // invalid_number, invalid_utf8, invalid_value, duplicate_key, invalid_json
	msg  string
}

func (e *canonErr) Error() string { return e.msg }
func (e *canonErr) Unwrap() error { return ErrCanonical }

func cerr(code, format string, a ...any) error {
	return &canonErr{code: code, msg: fmt.Sprintf(format, a...)}
}

func canonCode(err error) string {
	var ce *canonErr
	if errors.As(err, &ce) {
		return ce.code
	}
	return "invalid_value"
}

// ---------------------------------------------------------------------------
// Strict parsing

// ParseJSON parses JSON text strictly (I-JSON): duplicate member names at any
// depth, invalid UTF-8, NaN/Infinity and numbers beyond a double's range are
// refused. Objects are map[string]any, arrays []any, numbers json.Number
// (their text, exact), strings string. A \u escape of a lone surrogate is
// kept as its WTF-8 bytes, which no canonical form accepts.
func ParseJSON(text []byte) (any, error) {
	if !utf8.Valid(text) {
		return nil, cerr("invalid_json", "JSON text is not valid UTF-8")
	}
	p := &parser{s: text}
	p.ws()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.i != len(p.s) {
		return nil, cerr("invalid_json", "not JSON: trailing data at offset %d", p.i)
	}
	return v, nil
}

type parser struct {
	s []byte
	i int
}

func (p *parser) ws() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) bad() error {
	if p.i >= len(p.s) {
		return cerr("invalid_json", "not JSON: unexpected end of input")
	}
	return cerr("invalid_json", "not JSON: unexpected %q at offset %d", p.s[p.i], p.i)
}

func (p *parser) lit(word string, v any) (any, error) {
	if bytes.HasPrefix(p.s[p.i:], []byte(word)) {
		p.i += len(word)
		return v, nil
	}
	return nil, p.bad()
}

func (p *parser) value(depth int) (any, error) {
	if depth > maxDepth {
		return nil, cerr("invalid_json", "not JSON: nesting too deep")
	}
	if p.i >= len(p.s) {
		return nil, p.bad()
	}
	switch c := p.s[p.i]; {
	case c == '{':
		p.i++
		m := map[string]any{}
		p.ws()
		if p.i < len(p.s) && p.s[p.i] == '}' {
			p.i++
			return m, nil
		}
		for {
			p.ws()
			if p.i >= len(p.s) || p.s[p.i] != '"' {
				return nil, p.bad()
			}
			k, err := p.str()
			if err != nil {
				return nil, err
			}
			if _, dup := m[k]; dup {
				return nil, cerr("duplicate_key", "duplicate member name %q", k)
			}
			p.ws()
			if p.i >= len(p.s) || p.s[p.i] != ':' {
				return nil, p.bad()
			}
			p.i++
			p.ws()
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			m[k] = v
			p.ws()
			if p.i < len(p.s) && p.s[p.i] == ',' {
				p.i++
				continue
			}
			if p.i < len(p.s) && p.s[p.i] == '}' {
				p.i++
				return m, nil
			}
			return nil, p.bad()
		}
	case c == '[':
		p.i++
		a := []any{}
		p.ws()
		if p.i < len(p.s) && p.s[p.i] == ']' {
			p.i++
			return a, nil
		}
		for {
			p.ws()
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
			p.ws()
			if p.i < len(p.s) && p.s[p.i] == ',' {
				p.i++
				continue
			}
			if p.i < len(p.s) && p.s[p.i] == ']' {
				p.i++
				return a, nil
			}
			return nil, p.bad()
		}
	case c == '"':
		return p.str()
	case c == 't':
		return p.lit("true", true)
	case c == 'f':
		return p.lit("false", false)
	case c == 'n':
		return p.lit("null", nil)
	case c == '-' || (c >= '0' && c <= '9'):
		return p.num()
	}
	return nil, p.bad()
}

func (p *parser) num() (any, error) {
	start := p.i
	if p.s[p.i] == '-' {
		p.i++
	}
	digits := func() int {
		n := 0
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.i < len(p.s) && p.s[p.i] == '0' {
		p.i++
	} else if digits() == 0 {
		return nil, p.bad()
	}
	if p.i < len(p.s) && p.s[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return nil, p.bad()
		}
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return nil, p.bad()
		}
	}
	text := string(p.s[start:p.i])
	if f, _ := strconv.ParseFloat(text, 64); math.IsInf(f, 0) {
		return nil, cerr("invalid_json", "number %.40s is out of the range of a double", text)
	}
	return json.Number(text), nil
}

func hexVal(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			return 0, false
		}
	}
	return r, true
}

// appendWTF8 writes r as UTF-8, or a lone surrogate as its 3-byte WTF-8 form.
func appendWTF8(b []byte, r rune) []byte {
	if r >= 0xD800 && r <= 0xDFFF {
		// r is in [0xD800, 0xDFFF]: 0xE0|r>>12 is 0xED, the others are 6-bit masks.
		return append(b, byte(0xE0|r>>12), byte(0x80|(r>>6)&0x3F), byte(0x80|r&0x3F)) //nolint:gosec // each value fits a byte (see above)
	}
	return utf8.AppendRune(b, r)
}

func (p *parser) str() (string, error) {
	p.i++ // opening quote
	var b []byte
	for {
		if p.i >= len(p.s) {
			return "", p.bad()
		}
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return string(b), nil
		case c < 0x20:
			return "", cerr("invalid_json", "not JSON: control character in a string at offset %d", p.i)
		case c == '\\':
			p.i++
			if p.i >= len(p.s) {
				return "", p.bad()
			}
			e := p.s[p.i]
			p.i++
			switch e {
			case '"', '\\', '/':
				b = append(b, e)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r, ok := hexVal(p.s[p.i:])
				if !ok {
					return "", cerr("invalid_json", "not JSON: bad \\u escape at offset %d", p.i)
				}
				p.i += 4
				if utf16.IsSurrogate(r) && r < 0xDC00 && p.i+6 <= len(p.s) && p.s[p.i] == '\\' && p.s[p.i+1] == 'u' {
					if r2, ok := hexVal(p.s[p.i+2:]); ok && r2 >= 0xDC00 && r2 <= 0xDFFF {
						p.i += 6
						b = utf8.AppendRune(b, utf16.DecodeRune(r, r2))
						continue
					}
				}
				b = appendWTF8(b, r)
			default:
				return "", cerr("invalid_json", "not JSON: bad escape at offset %d", p.i-1)
			}
		default:
			b = append(b, c)
			p.i++
		}
	}
}

// ---------------------------------------------------------------------------
// Conversion of Go values to JSON values

// jsonValue converts v to the generic JSON value tree this package works on
// (map[string]any, []any, string, json.Number, float64, bool, nil), checking
// what has no JSON form: NaN and infinities (invalid_number), strings that
// are not UTF-8 (invalid_utf8), values json cannot encode (invalid_value).
// Maps and slices are always copied.
func jsonValue(v any) (any, error) { return jsonValueDepth(v, 0) }

func jsonValueDepth(v any, depth int) (any, error) {
	if depth > maxDepth {
		return nil, cerr("invalid_value", "the value is nested too deeply")
	}
	switch x := v.(type) {
	case nil:
		return nil, nil
	case string:
		if !utf8.ValidString(x) {
			return nil, cerr("invalid_utf8", "a string is not valid UTF-8 (or holds a lone surrogate)")
		}
		return x, nil
	case bool:
		return x, nil
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) || !validNumber(string(x)) {
			return nil, cerr("invalid_value", "%q is not a JSON number", string(x))
		}
		if math.IsInf(f, 0) {
			return nil, cerr("invalid_number", "number %.40s is out of the range of a double", string(x))
		}
		return x, nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, cerr("invalid_number", "NaN and infinities have no JSON form")
		}
		return x, nil
	case float32:
		return jsonValueDepth(float64(x), depth)
	case int:
		return json.Number(strconv.FormatInt(int64(x), 10)), nil
	case int8, int16, int32, int64:
		return json.Number(strconv.FormatInt(reflect.ValueOf(x).Int(), 10)), nil
	case uint, uint8, uint16, uint32, uint64, uintptr:
		return json.Number(strconv.FormatUint(reflect.ValueOf(x).Uint(), 10)), nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if !utf8.ValidString(k) {
				return nil, cerr("invalid_utf8", "a member name is not valid UTF-8")
			}
			c, err := jsonValueDepth(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			c, err := jsonValueDepth(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case []string:
		out := make([]any, len(x))
		for i, e := range x {
			c, err := jsonValueDepth(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case json.RawMessage:
		return ParseJSON(x)
	}
	if err := scanUTF8(reflect.ValueOf(v), 0); err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		var uv *json.UnsupportedValueError
		if errors.As(err, &uv) && strings.Contains(uv.Str, "NaN") || errors.As(err, &uv) && strings.Contains(uv.Str, "Inf") {
			return nil, cerr("invalid_number", "NaN and infinities have no JSON form: %v", err)
		}
		return nil, cerr("invalid_value", "the value has no JSON form: %v", err)
	}
	return ParseJSON(b)
}

// scanUTF8 refuses strings that are not UTF-8 anywhere inside v (encoding/json
// would silently replace them).
func scanUTF8(v reflect.Value, depth int) error {
	if depth > maxDepth || !v.IsValid() {
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		if !utf8.ValidString(v.String()) {
			return cerr("invalid_utf8", "a string is not valid UTF-8")
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return scanUTF8(v.Elem(), depth+1)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				if err := scanUTF8(v.Field(i), depth+1); err != nil {
					return err
				}
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			return nil // []byte is base64
		}
		for i := 0; i < v.Len(); i++ {
			if err := scanUTF8(v.Index(i), depth+1); err != nil {
				return err
			}
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			if err := scanUTF8(it.Key(), depth+1); err != nil {
				return err
			}
			if err := scanUTF8(it.Value(), depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

func validNumber(s string) bool {
	if s == "" {
		return false
	}
	p := &parser{s: []byte(s)}
	_, err := p.num()
	return p.i == len(s) && (err == nil || strings.Contains(err.Error(), "range"))
}

// ---------------------------------------------------------------------------
// RFC 8785

// Canonicalize returns the RFC 8785 (JCS) canonical bytes of v: a JSON value
// as [ParseJSON] returns it, or any Go value encoding/json can encode.
// Members are sorted by the UTF-16 code units of their names, numbers written
// as ECMAScript's Number.prototype.toString writes the double, strings with
// JSON.stringify's minimal escaping. NaN, infinities, invalid UTF-8 and lone
// surrogates are refused (the error wraps [ErrCanonical]).
func Canonicalize(v any) ([]byte, error) {
	jv, err := jsonValue(v)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := writeJCS(&b, jv); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// CanonicalizeText is Canonicalize(ParseJSON(text)).
func CanonicalizeText(text []byte) ([]byte, error) {
	v, err := ParseJSON(text)
	if err != nil {
		return nil, err
	}
	return Canonicalize(v)
}

func writeJCS(b *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case string:
		return writeJCSString(b, x)
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return cerr("invalid_value", "%q is not a number", string(x))
		}
		s, err := FormatNumber(f)
		if err != nil {
			return err
		}
		b.WriteString(s)
	case float64:
		s, err := FormatNumber(x)
		if err != nil {
			return err
		}
		b.WriteString(s)
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return utf16Less(keys[i], keys[j]) })
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJCSString(b, k); err != nil {
				return err
			}
			b.WriteByte(':')
			if err := writeJCS(b, x[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJCS(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	default:
		return cerr("invalid_value", "%T has no JSON form", v)
	}
	return nil
}

func utf16Less(a, b string) bool {
	ua, ub := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	for i := 0; i < len(ua) && i < len(ub); i++ {
		if ua[i] != ub[i] {
			return ua[i] < ub[i]
		}
	}
	return len(ua) < len(ub)
}

func writeJCSString(b *bytes.Buffer, s string) error {
	if !utf8.ValidString(s) {
		return cerr("invalid_utf8", "a string is not valid UTF-8 (or holds a lone surrogate)")
	}
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if c < 0x20 {
				fmt.Fprintf(b, `\u%04x`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return nil
}

// FormatNumber writes f as ECMAScript's Number.prototype.toString does (RFC
// 8785 section 3.2.2.3): shortest round-trip digits, -0 as 0, exponent form
// below 1e-6 and from 1e21. NaN and infinities are refused.
func FormatNumber(f float64) (string, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "", cerr("invalid_number", "NaN and infinities have no JSON form")
	}
	if f == 0 {
		return "0", nil
	}
	sign := ""
	if f < 0 {
		sign, f = "-", -f
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddddde±XX
	mant, exps, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(exps)
	digits := strings.Replace(mant, ".", "", 1)
	digits = strings.TrimRight(digits, "0")
	if digits == "" {
		digits = "0"
	}
	k := len(digits)
	n := exp + 1 // value = 0.digits * 10^n
	var out string
	switch {
	case k <= n && n <= 21:
		out = digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		out = digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		out = "0." + strings.Repeat("0", -n) + digits
	default:
		ee := n - 1
		es := "+"
		if ee < 0 {
			es = "-"
			ee = -ee
		}
		es += strconv.Itoa(ee)
		if k == 1 {
			out = digits + "e" + es
		} else {
			out = digits[:1] + "." + digits[1:] + "e" + es
		}
	}
	return sign + out, nil
}

// ---------------------------------------------------------------------------
// Rule 7 and svc-jcs-1

// NormalizeIdentifier is SPEC 4.2 rule 7 on a tool or action key, exactly as
// the gateway applies it: percent-decode once (kept only when the whole
// string decodes and the result is UTF-8; "+" stays "+"), NFC, trim Unicode
// White_Space, lower-case code point by code point (U+0130 gives "i").
func NormalizeIdentifier(s string) string {
	if decoded, err := url.PathUnescape(s); err == nil && utf8.ValidString(decoded) {
		s = decoded
	}
	s = norm.NFC.String(s)
	s = strings.TrimSpace(s)
	return strings.ToLower(s)
}

// tablesPinned reports whether this toolchain's Unicode tables are the ones
// svc-jcs-1 is defined on.
var tablesPinned = unicode.Version == UnicodeVersion && norm.Version == UnicodeVersion

// IdentifierIsCertain reports whether this SDK's normalization of s is known
// to equal the gateway's: always with Unicode 15.0.0 tables; with other
// tables, only for identifiers that are ASCII once percent-decoded.
func IdentifierIsCertain(s string) bool {
	if tablesPinned {
		return true
	}
	if decoded, err := url.PathUnescape(s); err == nil {
		if !isASCII(decoded) {
			return false
		}
	}
	return isASCII(s)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// ToolCall is the call an agent asks about: the part of the authorize request
// the action hash covers. Resource nil is JSON null; Parameters nil is {}.
type ToolCall struct {
	Tool       string         `json:"tool"`
	Action     string         `json:"action"`
	Resource   *string        `json:"resource"`
	Parameters map[string]any `json:"parameters"`
}

// Str returns a pointer to s (for ToolCall.Resource).
func Str(s string) *string { return &s }

func (tc ToolCall) certain() bool {
	return IdentifierIsCertain(tc.Tool) && IdentifierIsCertain(tc.Action)
}

// hashedObject is the object svc-jcs-1 hashes, as a JSON value.
func hashedObject(tc ToolCall, normalize bool) (map[string]any, error) {
	params, err := jsonValue(tc.Parameters)
	if err != nil {
		return nil, err
	}
	if params == nil {
		params = map[string]any{}
	}
	tool, action := tc.Tool, tc.Action
	if normalize {
		tool, action = NormalizeIdentifier(tool), NormalizeIdentifier(action)
	}
	var res any
	if tc.Resource != nil {
		res = *tc.Resource
	}
	return map[string]any{"tool": tool, "action": action, "resource": res, "parameters": params}, nil
}

// ActionBytes returns the canonical bytes [ActionHash] hashes.
func ActionBytes(tc ToolCall) ([]byte, error) {
	o, err := hashedObject(tc, true)
	if err != nil {
		return nil, err
	}
	return Canonicalize(o)
}

// ActionHash is svc-jcs-1: the lower-case hex SHA-256 of the RFC 8785 bytes
// of {"tool","action","resource","parameters"} with tool and action
// normalized by [NormalizeIdentifier].
func ActionHash(tc ToolCall) (string, error) {
	b, err := ActionBytes(tc)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// NormalizedActionHash is [ActionHash] of a call whose tool and action are
// already normalized (an approval's stored tool_call): rule 7 is not applied
// twice.
func NormalizedActionHash(tc ToolCall) (string, error) {
	o, err := hashedObject(tc, false)
	if err != nil {
		return "", err
	}
	b, err := Canonicalize(o)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// sameJSON reports whether a and b have the same canonical form.
func sameJSON(a, b any) bool {
	ca, err1 := Canonicalize(a)
	cb, err2 := Canonicalize(b)
	return err1 == nil && err2 == nil && bytes.Equal(ca, cb)
}
