package svcsdk

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// The receipt log (CONTRACT §17): each tenant's receipts, in seq order,
// are the leaves of an RFC 6962 Merkle tree (leaf seq-1 is SHA-256 of a
// 0x00 byte and the 32 bytes of receipt_hash). The gateway signs
// checkpoints of the tree (C2SP tlog-checkpoint signed notes) with the
// receipt key and serves each receipt's inclusion proof. The notes and
// proofs are read and checked by golang.org/x/mod/sumdb/note and tlog, the
// Go checksum database's own packages, which the gateway uses too.

// InclusionProof is a receipt's inclusion proof as GET
// /v2/receipts/:receipt_id/inclusion answers it.
type InclusionProof struct {
	LeafIndex int64    `json:"leaf_index"`
	TreeSize  int64    `json:"tree_size"`
	Hashes    []string `json:"hashes"`
}

// InclusionResult is the outcome of [VerifyInclusion].
type InclusionResult struct {
	// CheckpointValid: the checkpoint is of the receipt's tenant's log and
	// its signature by the receipt key verifies.
	CheckpointValid bool
	// ProofValid: the receipt hashes to its receipt_hash and the proof
	// leads from its leaf to the checkpoint's root.
	ProofValid bool
	Origin     string
	TreeSize   int64
	Error      string
}

// Valid is CheckpointValid && ProofValid.
func (r InclusionResult) Valid() bool { return r.CheckpointValid && r.ProofValid }

// maxProof bounds a proof's hashes (a tree of 2^63 leaves needs 63).
const maxProof = 63

// VerifyInclusion checks that receipt (CONTRACT 13's shape, as a JSON
// object or any value encoding to one) is in the receipt log that
// checkpoint (a signed note, as GET /v2/receipts/checkpoint serves it)
// signs, by proof (an [InclusionProof], or any value encoding to one),
// with the receipt key the SDK pins (standard base64).
//
// CheckpointValid: the checkpoint's origin ends in "/" and the receipt's
// tenant_id, and the note carries a signature by the receipt key named as
// that origin (the note verifier key <origin>+<key hash>+<0x01 and the key,
// base64>) that verifies; other signature lines, such as witnesses'
// cosignatures, are ignored. ProofValid: the receipt hashes to its
// receipt_hash ([ReceiptHash]), the proof is of leaf seq-1 in a tree of the
// checkpoint's size, and it leads from the receipt's leaf to the
// checkpoint's root, whether or not the signature verifies.
func VerifyInclusion(receipt any, proof any, checkpoint string, publicKeyB64 string) InclusionResult {
	origin, size, root, err := readCheckpoint(checkpoint)
	if err != nil {
		return InclusionResult{Error: err.Error()}
	}
	res := InclusionResult{Origin: origin, TreeSize: size}
	var problems []string
	jv, jerr := jsonValue(receipt)
	r, ok := jv.(map[string]any)
	if jerr != nil || !ok {
		return InclusionResult{Origin: origin, TreeSize: size, Error: "receipt is not an object"}
	}
	tenant, _ := r["tenant_id"].(string)
	pub, perr := DecodePublicKey(publicKeyB64)
	switch {
	case perr != nil:
		problems = append(problems, "no valid receipt key")
	case !strings.HasSuffix(origin, "/"+tenant) || tenant == "":
		problems = append(problems, "the checkpoint is not of the receipt's tenant's log")
	default:
		res.CheckpointValid = checkpointSigned(checkpoint, origin, pub)
		if !res.CheckpointValid {
			problems = append(problems, "the checkpoint carries no valid signature by the receipt key")
		}
	}
	if why := proofProblem(r, proof, size, root); why != "" {
		problems = append(problems, why)
	} else {
		res.ProofValid = true
	}
	res.Error = strings.Join(problems, "; ")
	return res
}

func checkpointSigned(checkpoint, origin string, pub ed25519.PublicKey) bool {
	vkey, err := note.NewEd25519VerifierKey(origin, pub)
	if err != nil {
		return false
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return false
	}
	_, err = note.Open([]byte(checkpoint), note.VerifierList(v))
	return err == nil
}

// readCheckpoint reads a signed checkpoint's head without checking a
// signature: origin, size, base64 root, then any extension lines.
func readCheckpoint(signed string) (string, int64, tlog.Hash, error) {
	_, err := note.Open([]byte(signed), note.VerifierList())
	var un *note.UnverifiedNoteError
	if !errors.As(err, &un) {
		return "", 0, tlog.Hash{}, errors.New("not a signed note")
	}
	lines := strings.Split(un.Note.Text, "\n")
	if len(lines) < 4 || lines[0] == "" {
		return "", 0, tlog.Hash{}, errors.New("not a checkpoint: origin, size and root lines expected")
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 || strconv.FormatInt(size, 10) != lines[1] {
		return "", 0, tlog.Hash{}, errors.New("not a checkpoint: the size is not a decimal number")
	}
	raw := strictB64(lines[2])
	if len(raw) != tlog.HashSize {
		return "", 0, tlog.Hash{}, errors.New("the checkpoint's root is not a base64 SHA-256 hash")
	}
	var root tlog.Hash
	copy(root[:], raw)
	return lines[0], size, root, nil
}

// proofProblem says why the proof does not prove r in the tree of size
// with root, "" when it does.
func proofProblem(r map[string]any, proof any, size int64, root tlog.Hash) string {
	computed, err := ReceiptHash(r)
	if err != nil {
		return err.Error()
	}
	stored, _ := r["receipt_hash"].(string)
	seq, serr := strconv.ParseInt(fmt.Sprint(r["seq"]), 10, 64)
	if computed != stored || serr != nil {
		return "receipt_hash mismatch"
	}
	b, err := json.Marshal(proof)
	if err != nil {
		return "malformed proof"
	}
	var p InclusionProof
	if err := json.Unmarshal(b, &p); err != nil || len(p.Hashes) > maxProof {
		return "malformed proof"
	}
	if p.TreeSize != size || p.LeafIndex != seq-1 {
		return fmt.Sprintf("the proof is of leaf %d in a tree of %d; the receipt is leaf %d, the checkpoint's tree %d", p.LeafIndex, p.TreeSize, seq-1, size)
	}
	path := make(tlog.RecordProof, len(p.Hashes))
	for i, h := range p.Hashes {
		raw := strictB64(h)
		if len(raw) != tlog.HashSize {
			return "a proof hash is not a base64 SHA-256 hash"
		}
		copy(path[i][:], raw)
	}
	leaf, _ := hex.DecodeString(stored)
	if tlog.CheckRecord(path, size, root, p.LeafIndex, tlog.RecordHash(leaf)) != nil {
		return "the proof does not lead to the checkpoint's root"
	}
	return ""
}

// GetCheckpoint reads GET /v2/receipts/checkpoint: the latest signed
// checkpoint of the tenant's receipt log (CONTRACT §17), as text.
func (c *Client) GetCheckpoint(ctx context.Context) (string, error) {
	resp, err := c.call(ctx, http.MethodGet, "/receipts/checkpoint", time.Now().Add(c.timeout), nil, false)
	if err != nil {
		return "", err
	}
	if resp.status != 200 {
		return "", fromResponse(resp.status, resp.JSON(), resp.header, "svc: checkpoint: ")
	}
	return string(resp.body), nil
}

// GetInclusionProof reads GET /v2/receipts/:receipt_id/inclusion, in the
// tree of treeSize (the latest checkpoint's when 0).
func (c *Client) GetInclusionProof(ctx context.Context, receiptID string, treeSize int64) (InclusionProof, error) {
	path := "/receipts/" + url.PathEscape(receiptID) + "/inclusion"
	if treeSize > 0 {
		path += "?tree_size=" + strconv.FormatInt(treeSize, 10)
	}
	m, err := c.getObject(ctx, path, fmt.Sprintf("svc: inclusion of %s: ", receiptID))
	if err != nil {
		return InclusionProof{}, err
	}
	var p InclusionProof
	b, _ := json.Marshal(m)
	if err := json.Unmarshal(b, &p); err != nil {
		return InclusionProof{}, &SvcError{ErrorCode: "invalid_answer", Status: 200, Message: "svc: the inclusion proof is malformed: " + err.Error()}
	}
	return p, nil
}

// VerifyInclusion proves the receipt of receiptID is in the gateway's
// receipt log: it fetches the receipt, the latest checkpoint and the
// receipt's inclusion proof in its tree, and checks both with the pinned
// receipt key (WithReceiptPublicKey; [VerifyInclusion]). It returns
// *ReceiptInvalid with ErrorCode "inclusion_invalid" when a check fails,
// or "receipt_not_logged" when the receipt is newer than the latest
// checkpoint (one is signed every SVC_CHECKPOINT_INTERVAL_SECS: try again
// then).
func (c *Client) VerifyInclusion(ctx context.Context, receiptID string) (InclusionResult, error) {
	if c.receiptKey == "" {
		return InclusionResult{}, &SvcError{ErrorCode: "no_receipt_key", Message: "svc: no receipt public key is set (WithReceiptPublicKey)"}
	}
	r, err := c.GetReceipt(ctx, receiptID)
	if err != nil {
		return InclusionResult{}, err
	}
	checkpoint, err := c.GetCheckpoint(ctx)
	if err != nil {
		var se *SvcError
		if errors.As(err, &se) && se.Status == 404 {
			return InclusionResult{}, &ReceiptInvalid{SvcError: SvcError{ErrorCode: "receipt_not_logged", Status: 404, Err: err,
				Message: "svc: no receipt log checkpoint yet"}, Receipt: r}
		}
		return InclusionResult{}, err
	}
	_, size, _, perr := readCheckpoint(checkpoint)
	if perr != nil {
		return InclusionResult{}, &ReceiptInvalid{SvcError: SvcError{ErrorCode: "inclusion_invalid", Message: "svc: " + perr.Error()}, Receipt: r}
	}
	if seq, err := strconv.ParseInt(fmt.Sprint(r["seq"]), 10, 64); err == nil && seq > size {
		return InclusionResult{}, &ReceiptInvalid{SvcError: SvcError{ErrorCode: "receipt_not_logged",
			Message: fmt.Sprintf("svc: receipt %s (seq %d) is newer than the latest checkpoint (%d receipts)", receiptID, seq, size)}, Receipt: r}
	}
	proof, err := c.GetInclusionProof(ctx, receiptID, size)
	if err != nil {
		return InclusionResult{}, err
	}
	res := VerifyInclusion(r, proof, checkpoint, c.receiptKey)
	if !res.Valid() {
		return res, &ReceiptInvalid{SvcError: SvcError{ErrorCode: "inclusion_invalid",
			Message: fmt.Sprintf("svc: receipt %s is not proven in the receipt log: %s", receiptID, res.Error)}, Receipt: r, Inclusion: &res}
	}
	return res, nil
}
