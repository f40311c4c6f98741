package svcsdk

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
)

// SignatureHeader is the header that carries the request signature.
const SignatureHeader = "X-Svc-Request-Signature"

// DecodeSigningKey decodes an agent's signing key: standard base64 with
// padding, non-empty.
func DecodeSigningKey(b64 string) ([]byte, error) {
	s := strings.TrimSpace(b64)
	if strings.ContainsAny(s, "\r\n") {
		return nil, errors.New("signing key is not standard base64")
	}
	key, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, errors.New("signing key is not standard base64: " + err.Error())
	}
	if len(key) == 0 {
		return nil, errors.New("signing key is empty")
	}
	return key, nil
}

// Sign returns the X-Svc-Request-Signature value for body under the agent's
// signing key (standard base64): "sha256=" and the lower-case hex
// HMAC-SHA256 of exactly these bytes. Sign the bytes you send.
func Sign(body []byte, signingKeyB64 string) (string, error) {
	key, err := DecodeSigningKey(signingKeyB64)
	if err != nil {
		return "", err
	}
	return signWith(key, body), nil
}

func signWith(key, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}
