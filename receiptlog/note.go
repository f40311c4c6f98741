package receiptlog

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Origin is the checkpoint origin (and the note key's name) of a tenant's
// log: prefix, "/", the tenant's id. A note key name may hold no space
// and no plus sign.
func Origin(prefix, tenantID string) (string, error) {
	o := prefix + "/" + tenantID
	if o == "" || strings.ContainsAny(o, " +\t\n\r") || !isPrint(o) {
		return "", fmt.Errorf("receiptlog: origin %q is not a valid note key name", o)
	}
	return o, nil
}

func isPrint(s string) bool {
	for _, r := range s {
		if r < 0x21 || r == 0x7f {
			return false
		}
	}
	return true
}

// signer signs notes with the receipt key (note.Signer: the library
// formats and checks the note; this only names the key and signs).
type signer struct {
	name string
	hash uint32
	sign func(msg []byte) []byte
}

func (s *signer) Name() string                    { return s.name }
func (s *signer) KeyHash() uint32                 { return s.hash }
func (s *signer) Sign(msg []byte) ([]byte, error) { return s.sign(msg), nil }

// Keys are a log's signer and its verifier key (the text
// note.NewVerifier reads: name+hash+base64 key).
type Keys struct {
	Signer      note.Signer
	Verifier    note.Verifier
	VerifierKey string
}

// NewKeys makes the note keys of the log named origin from the receipt
// key: its public half, and sign, which signs a message with its private
// half (receipt.Signer.SignNote).
func NewKeys(origin string, pub ed25519.PublicKey, sign func(msg []byte) []byte) (Keys, error) {
	if len(pub) != ed25519.PublicKeySize || sign == nil {
		return Keys{}, errors.New("receiptlog: not an Ed25519 key")
	}
	vkey, err := note.NewEd25519VerifierKey(origin, pub)
	if err != nil {
		return Keys{}, err
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return Keys{}, err
	}
	return Keys{Signer: &signer{name: origin, hash: v.KeyHash(), sign: sign}, Verifier: v, VerifierKey: vkey}, nil
}

// CheckpointText is a checkpoint's body (C2SP tlog-checkpoint): the
// origin, the tree size and the base64 root hash, a line each.
func CheckpointText(origin string, size int64, root tlog.Hash) string {
	return origin + "\n" + strconv.FormatInt(size, 10) + "\n" + base64.StdEncoding.EncodeToString(root[:]) + "\n"
}

// SignCheckpoint returns the signed note of the tree head.
func SignCheckpoint(origin string, size int64, root tlog.Hash, s note.Signer) (string, error) {
	b, err := note.Sign(&note.Note{Text: CheckpointText(origin, size, root)}, s)
	return string(b), err
}

// Checkpoint is an opened checkpoint.
type Checkpoint struct {
	Origin string
	Size   int64
	Root   tlog.Hash
}

// OpenCheckpoint verifies a signed checkpoint with the verifier key vkey
// and reads its head; it must be of origin (any, when empty).
func OpenCheckpoint(signed []byte, vkey, origin string) (Checkpoint, error) {
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("receiptlog: verifier key: %w", err)
	}
	n, err := note.Open(signed, note.VerifierList(v))
	if err != nil {
		return Checkpoint{}, fmt.Errorf("receiptlog: checkpoint: %w", err)
	}
	return ParseCheckpoint(n.Text, origin)
}

// ParseCheckpoint reads a checkpoint's body (extension lines after the
// root are allowed, as C2SP allows them).
func ParseCheckpoint(text, origin string) (Checkpoint, error) {
	lines := strings.SplitAfter(text, "\n")
	if len(lines) < 4 || !strings.HasSuffix(text, "\n") {
		return Checkpoint{}, errors.New("receiptlog: a checkpoint has an origin, a size and a root, a line each")
	}
	c := Checkpoint{Origin: strings.TrimSuffix(lines[0], "\n")}
	if origin != "" && c.Origin != origin {
		return Checkpoint{}, fmt.Errorf("receiptlog: checkpoint of origin %q, want %q", c.Origin, origin)
	}
	size := strings.TrimSuffix(lines[1], "\n")
	n, err := strconv.ParseInt(size, 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != size {
		return Checkpoint{}, fmt.Errorf("receiptlog: checkpoint size %q", size)
	}
	c.Size = n
	root, err := base64.StdEncoding.DecodeString(strings.TrimSuffix(lines[2], "\n"))
	if err != nil || len(root) != tlog.HashSize {
		return Checkpoint{}, errors.New("receiptlog: checkpoint root is not a base64 SHA-256 hash")
	}
	copy(c.Root[:], root)
	return c, nil
}
