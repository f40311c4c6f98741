package mcpproxy

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"time"
)

// Session is everything a node needs to serve a downstream session. It
// travels sealed in the Mcp-Session-Id svc issues, so any node of an
// installation that holds the key serves it and no node keeps a session
// store: what must be shared between requests (the upstream session, the
// agent it belongs to) is in the id itself.
type Session struct {
	// ID names the session (the run of calls made in it when the client
	// names none): random, unique per initialize.
	ID        string `json:"s"`
	TenantID  string `json:"t"`
	AgentID   string `json:"a"`
	ServerKey string `json:"k"`
	// UpstreamID is the upstream's own Mcp-Session-Id, "" when the
	// upstream issued none (a stateless server).
	UpstreamID string `json:"u,omitempty"`
	// Version is the protocol version the client asked for at initialize.
	Version string `json:"v,omitempty"`
	// ElicitURL: the client declared URL-mode elicitation at initialize,
	// so an approval is offered to its user as one (approval.go).
	ElicitURL bool `json:"x,omitempty"`
	// Expires is the Unix second past which the id is refused.
	Expires int64 `json:"e"`
}

// ErrSession: the id is not one this installation sealed, or it expired.
var ErrSession = errors.New("mcpproxy: unknown or expired session")

// sessionAAD binds a sealed id to its purpose: bytes sealed with the same
// key for anything else never open as a session.
var sessionAAD = []byte("svc-mcp-proxy-session-v1")

// Sealer seals and opens session ids with AES-256-GCM.
type Sealer struct{ aead cipher.AEAD }

// DeriveKey derives a 32-byte key for purpose from an installation secret
// (HKDF-SHA256), so one stored secret serves several uses without one
// key ever doing two jobs.
func DeriveKey(secret []byte, purpose string) ([]byte, error) {
	return hkdf.Key(sha256.New, secret, nil, "svc "+purpose, 32)
}

// NewSealer returns a sealer under a 32-byte key.
func NewSealer(key []byte) (*Sealer, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	a, err := cipher.NewGCM(b)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: a}, nil
}

// Seal returns the session's id: base64url of nonce and ciphertext.
func (s *Sealer) Seal(sess Session) (string, error) {
	return s.seal(sess, sessionAAD)
}

// Open returns the session an id names, ErrSession when it is not one
// this key sealed or it expired at now.
func (s *Sealer) Open(id string, now time.Time) (Session, error) {
	var sess Session
	if err := s.open(id, sessionAAD, &sess); err != nil {
		return Session{}, err
	}
	if now.Unix() >= sess.Expires {
		return Session{}, ErrSession
	}
	return sess, nil
}

func (s *Sealer) seal(v any, aad []byte) (string, error) {
	pt, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, pt, aad)), nil
}

func (s *Sealer) open(id string, aad []byte, v any) error {
	raw, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil || len(raw) < s.aead.NonceSize()+s.aead.Overhead() {
		return ErrSession
	}
	n := s.aead.NonceSize()
	pt, err := s.aead.Open(nil, raw[:n], raw[n:], aad)
	if err != nil {
		return ErrSession
	}
	if json.Unmarshal(pt, v) != nil {
		return ErrSession
	}
	return nil
}

// credentialAAD binds sealed upstream credentials to their purpose and
// their server: a blob copied onto another server record never opens.
func credentialAAD(tenantID, serverKey string) []byte {
	return []byte("svc-mcp-upstream-credentials-v1\x00" + tenantID + "\x00" + serverKey)
}

// SealCredentials encrypts a server's upstream headers for storage.
func (s *Sealer) SealCredentials(tenantID, serverKey string, h map[string]string) ([]byte, error) {
	id, err := s.seal(h, credentialAAD(tenantID, serverKey))
	return []byte(id), err
}

// OpenCredentials decrypts what SealCredentials stored.
func (s *Sealer) OpenCredentials(tenantID, serverKey string, blob []byte) (map[string]string, error) {
	var h map[string]string
	if err := s.open(string(blob), credentialAAD(tenantID, serverKey), &h); err != nil {
		return nil, errors.New("mcpproxy: the server's upstream credentials cannot be decrypted with this installation's key")
	}
	return h, nil
}
