package conformance_test

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"svc/receipt"
	"svc/receiptlog"
	"svc/sdk/conformance"
)

// inclusionVector is an entry of inclusion.json: a receipt, its inclusion
// proof, the checkpoint it is proven against and the receipt key, with
// what an SDK's verify_inclusion answers.
type inclusionVector struct {
	Name            string                     `json:"name"`
	Receipt         json.RawMessage            `json:"receipt"`
	Proof           conformance.InclusionProof `json:"proof"`
	Checkpoint      string                     `json:"checkpoint"`
	PublicKey       string                     `json:"public_key"`
	CheckpointValid bool                       `json:"checkpoint_valid"`
	ProofValid      bool                       `json:"proof_valid"`
}

// memLog is a receipt log in memory: tlog's stored hashes of receipts'
// leaves, as receiptlog stores them.
type memLog []tlog.Hash

func (m memLog) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		out[i] = m[x]
	}
	return out, nil
}

func buildLog(t *testing.T, rs []receipt.Receipt) memLog {
	t.Helper()
	var m memLog
	for i, r := range rs {
		raw, err := hex.DecodeString(r.ReceiptHash)
		if err != nil {
			t.Fatal(err)
		}
		hs, err := tlog.StoredHashes(int64(i), raw, m)
		if err != nil {
			t.Fatal(err)
		}
		m = append(m, hs...)
	}
	return m
}

// logOrigin is the vectors' log origin: SVC_LOG_ORIGIN's default and the
// receipts' tenant.
const logOrigin = "svc/" + receiptTenant

// checkpointOf is the checkpoint of the first size leaves of m, signed by
// s named origin.
func checkpointOf(t *testing.T, m memLog, size int64, origin string, s *receipt.Signer) (string, tlog.Hash) {
	t.Helper()
	root, err := tlog.TreeHash(size, m)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := receiptlog.NewKeys(origin, s.PublicKey(), s.SignNote)
	if err != nil {
		t.Fatal(err)
	}
	signed, err := receiptlog.SignCheckpoint(origin, size, root, keys.Signer)
	if err != nil {
		t.Fatal(err)
	}
	return signed, root
}

func proveLeaf(t *testing.T, m memLog, leaf, size int64) conformance.InclusionProof {
	t.Helper()
	p, err := tlog.ProveRecord(size, leaf, m)
	if err != nil {
		t.Fatal(err)
	}
	out := conformance.InclusionProof{LeafIndex: leaf, TreeSize: size, Hashes: make([]string, len(p))}
	for i := range p {
		out.Hashes[i] = base64.StdEncoding.EncodeToString(p[i][:])
	}
	return out
}

// inclusionVectors are inclusion.json's entries, from a chain of seven
// receipts signed with key A (the fourth made under run context), its
// log built with tlog and checkpoints signed by receiptlog.
func inclusionVectors(t *testing.T) []inclusionVector {
	t.Helper()
	a, b := newSigner(t, seedA), newSigner(t, seedB)
	rs := contextChain(t, 200, []string{"", "", "", strings.Repeat("c4", 32)}, a, a, a, a, a, a, a)
	m := buildLog(t, rs)
	pubA := base64.StdEncoding.EncodeToString(a.PublicKey())
	cp7, root7 := checkpointOf(t, m, 7, logOrigin, a)
	cp5, _ := checkpointOf(t, m, 5, logOrigin, a)
	cp1, _ := checkpointOf(t, m, 1, logOrigin, a)
	asJSON := func(r receipt.Receipt) json.RawMessage {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	vec := func(name string, r receipt.Receipt, p conformance.InclusionProof, cp string, cpValid, proofValid bool) inclusionVector {
		return inclusionVector{Name: name, Receipt: asJSON(r), Proof: p, Checkpoint: cp, PublicKey: pubA,
			CheckpointValid: cpValid, ProofValid: proofValid}
	}
	changedHash := proveLeaf(t, m, 2, 7)
	changedHash.Hashes = append([]string(nil), changedHash.Hashes...)
	another := sha256.Sum256([]byte("another subtree"))
	changedHash.Hashes[1] = base64.StdEncoding.EncodeToString(another[:])
	longer := proveLeaf(t, m, 2, 7)
	longer.Hashes = append(append([]string(nil), longer.Hashes...), longer.Hashes[0])
	shorter := proveLeaf(t, m, 2, 7)
	shorter.Hashes = shorter.Hashes[:len(shorter.Hashes)-1]
	otherLeaf := proveLeaf(t, m, 4, 7)
	otherLeaf.LeafIndex = 2
	notBase64 := proveLeaf(t, m, 2, 7)
	notBase64.Hashes = append([]string(nil), notBase64.Hashes...)
	notBase64.Hashes[0] = strings.TrimRight(notBase64.Hashes[0], "=")
	changed := rs[2]
	changed.Decision = "allow"
	if changed.Decision == rs[2].Decision {
		changed.Decision = "deny"
	}
	rehashed := changed
	rehashed.ReceiptHash = rehash(t, rehashed)
	unsigned := rs[2]
	unsigned.Signature = nil

	// Checkpoints that are not what they claim.
	byB, _ := checkpointOf(t, m, 7, logOrigin, b)
	otherTenant, _ := checkpointOf(t, m, 7, "svc/0193f0c4-7a2e-7c3b-9d41-000000000000", a)
	altered := strings.Replace(cp7, base64.StdEncoding.EncodeToString(root7[:]), base64.StdEncoding.EncodeToString(make([]byte, 32)), 1)
	cosigned := cp7 + cosignature(t, cp7)
	unsignedNote := receiptlog.CheckpointText(logOrigin, 7, root7)

	out := []inclusionVector{
		vec("the first receipt of seven", rs[0], proveLeaf(t, m, 0, 7), cp7, true, true),
		vec("the last receipt of seven", rs[6], proveLeaf(t, m, 6, 7), cp7, true, true),
		vec("a receipt in the middle", rs[2], proveLeaf(t, m, 2, 7), cp7, true, true),
		vec("a receipt made under run context (svc-receipt-2)", rs[3], proveLeaf(t, m, 3, 7), cp7, true, true),
		vec("the only receipt of a tree of one (an empty proof)", rs[0], proveLeaf(t, m, 0, 1), cp1, true, true),
		vec("an earlier checkpoint of five", rs[4], proveLeaf(t, m, 4, 5), cp5, true, true),
		vec("a receipt without its signature (the leaf is its receipt_hash)", unsigned, proveLeaf(t, m, 2, 7), cp7, true, true),
		vec("a checkpoint cosigned by a witness", rs[1], proveLeaf(t, m, 1, 7), cosigned, true, true),
		vec("a proof hash changed", rs[2], changedHash, cp7, true, false),
		vec("a proof hash too many", rs[2], longer, cp7, true, false),
		vec("a proof hash too few", rs[2], shorter, cp7, true, false),
		vec("a proof hash that is not standard base64", rs[2], notBase64, cp7, true, false),
		vec("the proof of another leaf", rs[2], otherLeaf, cp7, true, false),
		vec("a leaf_index other than seq - 1", rs[2], proveLeaf(t, m, 3, 7), cp7, true, false),
		vec("a proof in a tree of another size than the checkpoint's", rs[4], proveLeaf(t, m, 4, 5), cp7, true, false),
		vec("a receipt changed after it was hashed", changed, proveLeaf(t, m, 2, 7), cp7, true, false),
		vec("a receipt changed and hashed again", rehashed, proveLeaf(t, m, 2, 7), cp7, true, false),
		vec("a checkpoint signed with another key", rs[2], proveLeaf(t, m, 2, 7), byB, false, true),
		vec("a checkpoint of another tenant's log", rs[2], proveLeaf(t, m, 2, 7), otherTenant, false, true),
		vec("a checkpoint whose root was changed after signing", rs[2], proveLeaf(t, m, 2, 7), altered, false, false),
		vec("a checkpoint without a signature", rs[2], proveLeaf(t, m, 2, 7), unsignedNote, false, false),
		vec("not a checkpoint", rs[2], proveLeaf(t, m, 2, 7), "svc\nseven\n\n", false, false),
	}
	// The hand-written expectations above, against svc's own code.
	pub := a.PublicKey()
	for _, v := range out {
		var r receipt.Receipt
		if err := json.Unmarshal(v.Receipt, &r); err != nil {
			t.Fatal(err)
		}
		cpValid, proofValid := conformance.VerifyInclusion(r, v.Proof, v.Checkpoint, pub)
		if cpValid != v.CheckpointValid || proofValid != v.ProofValid {
			t.Errorf("inclusion vector %q: the reference says checkpoint %v, proof %v; the case says %v, %v",
				v.Name, cpValid, proofValid, v.CheckpointValid, v.ProofValid)
		}
	}
	return out
}

// rehash is r's receipt_hash computed again over its fields.
func rehash(t *testing.T, r receipt.Receipt) string {
	t.Helper()
	h, err := receipt.Hash(r)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// cosignature is a witness's signature line over checkpoint, as a
// tlog-witness answer adds one (here a plain Ed25519 note signature by a
// key the SDK does not know, which it must ignore).
func cosignature(t *testing.T, checkpoint string) string {
	t.Helper()
	seed := sha256.Sum256([]byte("svc sdk conformance: witness key"))
	key := ed25519.NewKeyFromSeed(seed[:])
	pub, ok := key.Public().(ed25519.PublicKey)
	if !ok {
		t.Fatal("not an Ed25519 key")
	}
	w, err := receiptlog.NewKeys("witness.example/w1", pub, func(m []byte) []byte { return ed25519.Sign(key, m) })
	if err != nil {
		t.Fatal(err)
	}
	text, _, ok := strings.Cut(checkpoint, "\n\n")
	if !ok {
		t.Fatalf("the checkpoint is not a note: %q", checkpoint)
	}
	signed, err := note.Sign(&note.Note{Text: text + "\n"}, w.Signer)
	if err != nil {
		t.Fatal(err)
	}
	_, sig, _ := strings.Cut(string(signed), "\n\n")
	return sig
}
