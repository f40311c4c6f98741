// Package canonical produces the canonical bytes and the action hash that
// svc, its SDKs and offline verifiers must compute identically: RFC 8785
// JSON Canonicalization Scheme (JCS) bytes, the identifier normalization of
// SPEC 4.2 rule 7, and the action hash scheme svc-jcs-1 (SPEC 9.7,
// CONTRACT §4).
//
// # Why a package of its own
//
// The bytes this package returns are a wire contract, not an implementation
// detail. An SDK hashes a tool call before it asks for approval, the gateway
// hashes the same call when the approval is presented, and a receipt carries
// the hash for ever; SPEC 9.5 requires that no version change alters them.
// So the code lives apart from everything that merely uses it: it is no
// actor (it holds no state and sends no messages), no policy rule (it
// decides nothing), no storage and no transport (it does no I/O). It
// depends only on the standard library, golang.org/x/text and
// github.com/gowebpki/jcs, so an offline verifier or a Go SDK can import it
// without pulling in the gateway.
//
// # Canonical JSON
//
// [JCS] hands the text to github.com/gowebpki/jcs, an RFC 8785
// implementation: object members sorted by their UTF-16 code units, no
// insignificant whitespace, numbers written as ECMAScript's
// Number.prototype.toString writes an IEEE 754 double (so -0 is 0, 1e21 is
// 1e+21, 1e-7 is 1e-7, and integers beyond 2^53 lose precision), strings
// with the minimal escaping of ECMAScript's JSON.stringify and no Unicode
// normalization. Duplicate member names, invalid UTF-8, lone surrogates,
// and out-of-range numbers are errors. [Marshal] is encoding/json followed
// by [JCS], so it inherits encoding/json's conversions: NaN and infinities
// are errors, invalid UTF-8 in a Go string becomes U+FFFD, and a
// json.Number is canonicalized like any other number.
//
// # Identifier normalization
//
// [NormalizeIdentifier] applies SPEC 4.2 rule 7 to a tool or action key, in
// this order:
//
//  1. Percent-decode once, as url.PathUnescape does ("+" stays "+"). When
//     the text is not well-formed percent-encoding, or when the decoded
//     bytes are not valid UTF-8, the input is kept as it is, so "%zz" and
//     "%FF" survive (lower-cased) instead of turning into U+FFFD.
//  2. Unicode NFC (golang.org/x/text/unicode/norm).
//  3. Trim leading and trailing white space (Unicode White_Space, as
//     strings.TrimSpace).
//  4. Lower-case code point by code point with the simple case mappings of
//     UnicodeData.txt (strings.ToLower): no SpecialCasing, so U+0130 becomes
//     "i" and a final capital sigma becomes σ, never ς. SDKs in languages
//     whose lower-casing applies SpecialCasing (JavaScript, Python) must use
//     a per-code-point mapping to match.
//
// # Action hash (svc-jcs-1)
//
// [ActionHash] is the lower-case hex SHA-256 of the JCS bytes of the object
// {"tool","action","resource","parameters"}: tool and action normalized as
// above, resource the string or null, parameters the object ({} when nil).
// Parameter values are canonicalized, never normalized: only the two
// identifiers go through rule 7.
//
// # Test vectors
//
// testdata/jcs/vectors.json (JCS input, canonical bytes, SHA-256) and
// testdata/jcs/action_hash.json (tool call, canonical bytes, action hash)
// at the module root are the reference any SDK checks itself against; the
// tests of this package check every entry of both files.
package canonical
