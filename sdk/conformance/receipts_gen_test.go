package conformance_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"svc/canonical"
	"svc/receipt"
	"svc/sdk/conformance"
)

// The receipt keys: Ed25519 seeds derived from fixed strings (README.md).
var (
	seedA = sha256.Sum256([]byte("svc sdk conformance: receipt signing key A"))
	seedB = sha256.Sum256([]byte("svc sdk conformance: receipt signing key B"))
)

const receiptTenant = "0193f0c4-7a2e-7c3b-9d41-5e6f7a8b9c0d"

func newSigner(t *testing.T, seed [32]byte) *receipt.Signer {
	t.Helper()
	s, err := receipt.NewSigner(seed[:])
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// chain seals receipts for the calls given, from seq 1; signers[i] seals
// receipt i (nil: unsigned). Every receipt is svc-receipt-1.
func chain(t *testing.T, first int, signers ...*receipt.Signer) []receipt.Receipt {
	t.Helper()
	return contextChain(t, first, nil, signers...)
}

// contextChain is chain with run context: receipt i carries the context
// hash contexts[i] (svc-receipt-2), or none when it is "" or i is past
// the end of contexts (svc-receipt-1).
func contextChain(t *testing.T, first int, contexts []string, signers ...*receipt.Signer) []receipt.Receipt {
	t.Helper()
	calls := []canonical.ToolCall{
		{Tool: "codehost", Action: "merge_pull_request", Resource: ptr("acme/api#42"), Parameters: map[string]any{"method": "squash"}},
		{Tool: "payments", Action: "refund", Resource: ptr("order/7"), Parameters: map[string]any{"amount": 15}},
		{Tool: "files", Action: "delete", Resource: ptr("/srv/data/old.log"), Parameters: map[string]any{}},
	}
	decisions := []string{"allow", "require_approval", "deny"}
	var out []receipt.Receipt
	prev := ""
	for i, s := range signers {
		n := first + i
		h, err := canonical.ActionHash(calls[i%len(calls)])
		if err != nil {
			t.Fatal(err)
		}
		r := receipt.Receipt{
			ReceiptID:  fmt.Sprintf("0193f0c4-9b10-7000-8000-%012x", n),
			TenantID:   receiptTenant,
			DecisionID: fmt.Sprintf("0193f0c4-9b0f-7000-8000-%012x", n),
			Seq:        int64(i + 1),
			ActionHash: h,
			Decision:   decisions[i%len(decisions)],
			CreatedAt:  fmt.Sprintf("2026-11-27T10:00:%02d.%06dZ", n%60, n),
		}
		if i < len(contexts) {
			r.ContextHash = contexts[i]
		}
		sealed, err := receipt.Seal(r, prev, s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, sealed)
		prev = sealed.ReceiptHash
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// export writes the svc-receipts-export-1 file of prefix (the receipts
// before the one checked, as sealed) and r (the receipt checked, at the
// position of orig), with the header the gateway wrote for the chain up
// to orig, signed by s (nil: an unsigned export).
func export(t *testing.T, s *receipt.Signer, prefix []receipt.Receipt, orig, r receipt.Receipt) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := receipt.NewExportWriter(&buf, receipt.ExportFormat, receiptTenant, s, receipt.Head{Seq: orig.Seq, Hash: orig.ReceiptHash}, len(prefix)+1)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range append(append([]receipt.Receipt(nil), prefix...), r) {
		if err := w.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// exportLine is export with the receipt checked given as its line (a
// receipt the Receipt type cannot write, such as one with an empty
// context_hash member).
func exportLine(t *testing.T, s *receipt.Signer, prefix []receipt.Receipt, orig receipt.Receipt, line []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := receipt.NewExportWriter(&buf, receipt.ExportFormat, receiptTenant, s, receipt.Head{Seq: orig.Seq, Hash: orig.ReceiptHash}, len(prefix)+1)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range prefix {
		if err := w.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	buf.Write(line)
	buf.WriteByte('\n')
	return buf.Bytes()
}

// contextHash is the context_hash of a run context given as JSON text: the
// lower-case hex SHA-256 of its RFC 8785 bytes.
func contextHash(t *testing.T, runContext string) string {
	t.Helper()
	c, err := canonical.JCS([]byte(runContext))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:])
}

// hashAsGiven is the receipt_hash a verifier that skips the check of
// context_hash's form computes: svc-receipt-2's object with context_hash as
// it stands. receipt.Hash refuses a malformed context_hash; a vector made
// with this hash (and signed over it) shows whether an SDK refuses it too.
func hashAsGiven(t *testing.T, r receipt.Receipt) string {
	t.Helper()
	b, err := canonical.Marshal(map[string]any{
		"receipt_id": r.ReceiptID, "tenant_id": r.TenantID, "decision_id": r.DecisionID, "seq": r.Seq,
		"action_hash": r.ActionHash, "decision": r.Decision, "prev_receipt_hash": r.PrevReceiptHash,
		"key_id": r.KeyID, "created_at": r.CreatedAt, "context_hash": r.ContextHash,
	})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// withEmptyContextHash adds the member "context_hash": "" to a receipt's
// JSON (the Receipt type omits an empty one).
func withEmptyContextHash(raw json.RawMessage) json.RawMessage {
	b := bytes.TrimSuffix(bytes.TrimSpace(raw), []byte("}"))
	return json.RawMessage(append(b, `,"context_hash":""}`...))
}

// cliValid is what `svc verify-receipts -public-key pub FILE` concludes
// (cmd/svc: VerifyExport's verdict, and the export's key must be pub).
func cliValid(t *testing.T, file []byte, pub ed25519.PublicKey) bool {
	t.Helper()
	rep, err := receipt.VerifyExport(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	return rep.Valid && pub.Equal(rep.PublicKey)
}

func slug(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}

// exp is what a receipt vector expects: hash_valid, signature_valid and
// verify_receipts_valid.
type exp struct{ hash, sig, cli bool }

// rcase is one receipt vector to generate.
type rcase struct {
	name string
	// chain, the position checked, the export's signer and the pinned key.
	chain  []receipt.Receipt
	pos    int
	signer *receipt.Signer
	pub    ed25519.PublicKey
	alter  func(r *receipt.Receipt)
	// rewrite, when set, rewrites the altered receipt's JSON (the vector's
	// receipt and the export's last line).
	rewrite func(raw json.RawMessage) json.RawMessage
	want    exp
}

func receiptVectors(t *testing.T) ([]receiptVector, []generated) {
	t.Helper()
	sa, sb := newSigner(t, seedA), newSigner(t, seedB)
	pubA, pubB := sa.PublicKey(), sb.PublicKey()
	a := chain(t, 1, sa, sa, sa)  // the gateway's chain, signed with key A
	b := chain(t, 0x21, sb)       // a chain another gateway key B sealed
	u := chain(t, 0x41, nil, nil) // an unsigned chain
	m := chain(t, 0x61, nil, sa)  // unsigned, then signed: a key set later
	r2 := a[1]                    // the receipt most cases alter
	sigA2 := *r2.Signature        // its signature
	rawSig, err := base64.StdEncoding.DecodeString(sigA2)
	if err != nil {
		t.Fatal(err)
	}

	set := func(f func(r *receipt.Receipt)) func(r *receipt.Receipt) { return f }
	sig := func(s string) func(r *receipt.Receipt) { return func(r *receipt.Receipt) { r.Signature = &s } }

	flipped := append([]byte(nil), rawSig...)
	flipped[10] ^= 0x01
	otherKeySig, err := sb.Sign(r2.ReceiptHash)
	if err != nil {
		t.Fatal(err)
	}
	// Non-zero padding bits: 64 bytes are 86 base64 digits and "==";
	// the last digit carries 2 bits of data and 4 bits that must be 0.
	padBits := []byte(sigA2)
	const digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	padBits[85] = digits[strings.IndexByte(digits, padBits[85])|0x01]

	cases := []rcase{
		{name: "valid chain head (seq 1)", chain: a, pos: 0, signer: sa, pub: pubA, want: exp{true, true, true}},
		{name: "valid receipt at seq 2", chain: a, pos: 1, signer: sa, pub: pubA, want: exp{true, true, true}},
		{name: "valid receipt at seq 3", chain: a, pos: 2, signer: sa, pub: pubA, want: exp{true, true, true}},
		{name: "decision changed", chain: a, pos: 1, signer: sa, pub: pubA, alter: set(func(r *receipt.Receipt) { r.Decision = "allow" }), want: exp{false, true, false}},
		{name: "action_hash changed", chain: a, pos: 1, signer: sa, pub: pubA, alter: set(func(r *receipt.Receipt) { r.ActionHash = a[0].ActionHash }), want: exp{false, true, false}},
		{name: "created_at changed by one microsecond", chain: a, pos: 1, signer: sa, pub: pubA,
			alter: set(func(r *receipt.Receipt) { r.CreatedAt = strings.Replace(r.CreatedAt, ".000002Z", ".000003Z", 1) }), want: exp{false, true, false}},
		{name: "created_at written as the same instant with +00:00", chain: a, pos: 1, signer: sa, pub: pubA,
			alter: set(func(r *receipt.Receipt) { r.CreatedAt = strings.Replace(r.CreatedAt, "Z", "+00:00", 1) }), want: exp{false, true, false}},
		{name: "seq changed", chain: a, pos: 1, signer: sa, pub: pubA, alter: set(func(r *receipt.Receipt) { r.Seq = 3 }), want: exp{false, true, false}},
		{name: "tenant_id changed", chain: a, pos: 1, signer: sa, pub: pubA,
			alter: set(func(r *receipt.Receipt) { r.TenantID = "0193f0c4-7a2e-7c3b-9d41-5e6f7a8b9c0e" }), want: exp{false, true, false}},
		{name: "prev_receipt_hash changed", chain: a, pos: 1, signer: sa, pub: pubA,
			alter: set(func(r *receipt.Receipt) { r.PrevReceiptHash = a[2].ReceiptHash }), want: exp{false, true, false}},
		{name: "prev_receipt_hash emptied", chain: a, pos: 1, signer: sa, pub: pubA, alter: set(func(r *receipt.Receipt) { r.PrevReceiptHash = "" }), want: exp{false, true, false}},
		{name: "decision_id changed", chain: a, pos: 1, signer: sa, pub: pubA,
			alter: set(func(r *receipt.Receipt) { r.DecisionID = a[0].DecisionID }), want: exp{false, true, false}},
		{name: "key_id changed", chain: a, pos: 1, signer: sa, pub: pubA, alter: set(func(r *receipt.Receipt) { r.KeyID = "0123456789abcdef" }), want: exp{false, false, false}},
		{name: "decision changed and receipt_hash recomputed", chain: a, pos: 1, signer: sa, pub: pubA,
			alter: set(func(r *receipt.Receipt) {
				r.Decision = "allow"
				h, err := receipt.Hash(*r)
				if err != nil {
					t.Fatal(err)
				}
				r.ReceiptHash = h
			}), want: exp{true, false, false}},
		{name: "receipt_hash in upper-case hex", chain: a, pos: 1, signer: sa, pub: pubA,
			alter: set(func(r *receipt.Receipt) { r.ReceiptHash = strings.ToUpper(r.ReceiptHash) }), want: exp{false, false, false}},
		{name: "signature with one bit flipped", chain: a, pos: 1, signer: sa, pub: pubA, alter: sig(base64.StdEncoding.EncodeToString(flipped)), want: exp{true, false, false}},
		{name: "signature made by another key, under this key's key_id", chain: a, pos: 1, signer: sa, pub: pubA, alter: sig(otherKeySig), want: exp{true, false, false}},
		{name: "receipt sealed by another key, checked with the pinned key", chain: b, pos: 0, signer: sb, pub: pubA, want: exp{true, false, false}},
		{name: "receipt sealed by another key, checked with that key", chain: b, pos: 0, signer: sb, pub: pubB, want: exp{true, true, true}},
		{name: "unsigned receipt (chain head)", chain: u, pos: 0, signer: nil, pub: pubA, want: exp{true, false, false}},
		{name: "unsigned receipt (seq 2)", chain: u, pos: 1, signer: nil, pub: pubA, want: exp{true, false, false}},
		{name: "unsigned receipt from before a signing key was set, in a signed export", chain: m, pos: 0, signer: sa, pub: pubA, want: exp{true, false, true}},
		{name: "signed receipt after an unsigned one, in a signed export", chain: m, pos: 1, signer: sa, pub: pubA, want: exp{true, true, true}},
		{name: "signature dropped (null), key_id kept", chain: a, pos: 1, signer: sa, pub: pubA, alter: set(func(r *receipt.Receipt) { r.Signature = nil }), want: exp{true, false, false}},
		{name: "signature dropped and key_id emptied (passed off as unsigned)", chain: a, pos: 1, signer: sa, pub: pubA,
			alter: set(func(r *receipt.Receipt) { r.Signature, r.KeyID = nil, "" }), want: exp{false, false, false}},
		{name: "signature is an empty string", chain: a, pos: 1, signer: sa, pub: pubA, alter: sig(""), want: exp{true, false, false}},
		{name: "signature is not base64", chain: a, pos: 1, signer: sa, pub: pubA, alter: sig("not base64!"), want: exp{true, false, false}},
		{name: "signature of the wrong length (63 bytes)", chain: a, pos: 1, signer: sa, pub: pubA,
			alter: sig(base64.StdEncoding.EncodeToString(rawSig[:63])), want: exp{true, false, false}},
		{name: "signature base64 without its padding", chain: a, pos: 1, signer: sa, pub: pubA, alter: sig(strings.TrimRight(sigA2, "=")), want: exp{true, false, false}},
		{name: "signature base64 with non-zero padding bits (decodes to the same bytes leniently)", chain: a, pos: 1, signer: sa, pub: pubA,
			alter: sig(string(padBits)), want: exp{true, false, false}},
	}
	// URL-safe base64 differs from standard only where the signature
	// holds + or /: use the first receipt of a whose signature does.
	for i, r := range a {
		if strings.ContainsAny(*r.Signature, "+/") {
			cases = append(cases, rcase{name: "signature in URL-safe base64", chain: a, pos: i, signer: sa, pub: pubA,
				alter: sig(strings.NewReplacer("+", "-", "/", "_").Replace(*r.Signature)), want: exp{true, false, false}})
			break
		}
	}

	cases = append(cases, contextCases(t, a, sa, pubA)...)

	var vs []receiptVector
	var files []generated
	paths := map[string]bool{}
	for _, c := range cases {
		orig := c.chain[c.pos]
		r := orig
		if r.Signature != nil {
			s := *r.Signature
			r.Signature = &s
		}
		if c.alter != nil {
			c.alter(&r)
		}
		raw := mustJSON(t, r)
		file := export(t, c.signer, c.chain[:c.pos], orig, r)
		if c.rewrite != nil {
			raw = c.rewrite(raw)
			file = exportLine(t, c.signer, c.chain[:c.pos], orig, raw)
		}
		// What the vector holds is the receipt checked: it reads back
		// (strictly, as the reference driver reads it) as r.
		var back receipt.Receipt
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&back); err != nil || !reflect.DeepEqual(back, r) {
			t.Fatalf("%s: the receipt's JSON %s does not read back as the receipt checked (%v)", c.name, raw, err)
		}
		hv, sv := conformance.VerifyReceipt(r, c.pub)
		cv := cliValid(t, file, c.pub)
		if got := (exp{hv, sv, cv}); got != c.want {
			t.Fatalf("%s: the Go reference gives hash_valid %v, signature_valid %v, verify-receipts %v; the case says %+v",
				c.name, hv, sv, cv, c.want)
		}
		// The reference is receipt.Verify with a null signature_valid read
		// as false.
		chk := receipt.Verify(r, c.pub)
		if chk.HashValid != hv || (chk.SignatureValid != nil && *chk.SignatureValid != sv) || (chk.SignatureValid == nil && sv) {
			t.Fatalf("%s: VerifyReceipt disagrees with receipt.Verify", c.name)
		}
		path := "receipts/" + slug(c.name) + ".jsonl"
		if paths[path] {
			t.Fatalf("%s: another vector's export is %s", c.name, path)
		}
		paths[path] = true
		vs = append(vs, receiptVector{Name: c.name, Receipt: raw, PublicKey: base64.StdEncoding.EncodeToString(c.pub),
			HashValid: hv, SignatureValid: sv, VerifyReceiptsValid: cv, Export: path})
		files = append(files, generated{path: path, data: file})
	}
	return vs, files
}

// contextCases are the vectors of svc-receipt-2 (a receipt made under run
// context carries context_hash, which its receipt_hash covers), added after
// the svc-receipt-1 ones: a receipt with context_hash verifies, signed or
// not; one chain mixes both schemes; dropping, adding, emptying or
// changing context_hash breaks the hash; a context_hash that is not 64
// lower-case hex characters makes the hash invalid whatever receipt_hash
// says. a is the svc-receipt-1 chain signed with sa (pubA's key).
func contextCases(t *testing.T, a []receipt.Receipt, sa *receipt.Signer, pubA ed25519.PublicKey) []rcase {
	t.Helper()
	// Run contexts as a decision keeps them ({"agent_history": ..., "run":
	// ...}, the members the policies read).
	ctx1 := contextHash(t, `{"run":{"sums":{"payments/refund.amount":15},"tools":{"payments":{"refund":{"attempts":1}}},"trust":{"min":"trusted","untrusted_seen":false}}}`)
	ctx2 := contextHash(t, `{"agent_history":{"consecutive_denies":0,"window":{"w1h":{"calls":3}}},"run":{"trust":{"min":"untrusted_external","untrusted_seen":true}}}`)
	ctx3 := contextHash(t, `{"run":{"tools":{"web":{"fetch":{"attempts":1}},"email":{"send":{"attempts":1}}},"trust":{"min":"untrusted_external","untrusted_seen":true}}}`)
	c := contextChain(t, 0x81, []string{ctx1, ctx2, ctx3}, sa, sa, sa) // svc-receipt-2 throughout, signed
	cu := contextChain(t, 0xa1, []string{ctx1, ctx2}, nil, nil)        // svc-receipt-2, unsigned
	mx := contextChain(t, 0xc1, []string{"", ctx1, "", ctx2}, sa, sa, sa, sa)
	for _, r := range append(append(append([]receipt.Receipt(nil), c...), cu...), mx...) {
		if want := map[bool]string{true: receipt.HashSchemeContext, false: receipt.HashScheme}[r.ContextHash != ""]; receipt.Scheme(r) != want {
			t.Fatalf("receipt %s: scheme %s, want %s", r.ReceiptID, receipt.Scheme(r), want)
		}
		if r.ContextHash != "" && hashAsGiven(t, r) != r.ReceiptHash {
			t.Fatalf("receipt %s: hashAsGiven is not svc-receipt-2 on a well-formed context_hash", r.ReceiptID)
		}
	}
	set := func(f func(r *receipt.Receipt)) func(r *receipt.Receipt) { return f }
	// asGiven sets context_hash to h, then receipt_hash to hashAsGiven and
	// the signature to sa's over it: what a gateway that did not check the
	// field's form would have sealed.
	asGiven := func(h string) func(r *receipt.Receipt) {
		return func(r *receipt.Receipt) {
			r.ContextHash = h
			r.ReceiptHash = hashAsGiven(t, *r)
			s, err := sa.Sign(r.ReceiptHash)
			if err != nil {
				t.Fatal(err)
			}
			r.Signature = &s
		}
	}
	return []rcase{
		{name: "svc-receipt-2: valid receipt with context_hash (chain head)", chain: c, pos: 0, signer: sa, pub: pubA, want: exp{true, true, true}},
		{name: "svc-receipt-2: valid receipt with context_hash at seq 2", chain: c, pos: 1, signer: sa, pub: pubA, want: exp{true, true, true}},
		{name: "svc-receipt-2: unsigned receipt with context_hash (seq 2)", chain: cu, pos: 1, signer: nil, pub: pubA, want: exp{true, false, false}},
		{name: "chain mixing schemes: svc-receipt-2 receipt after an svc-receipt-1 chain head", chain: mx, pos: 1, signer: sa, pub: pubA, want: exp{true, true, true}},
		{name: "chain mixing schemes: svc-receipt-1 receipt after an svc-receipt-2 one", chain: mx, pos: 2, signer: sa, pub: pubA, want: exp{true, true, true}},
		{name: "chain mixing schemes: svc-receipt-2 receipt at seq 4", chain: mx, pos: 3, signer: sa, pub: pubA, want: exp{true, true, true}},
		{name: "svc-receipt-2: context_hash changed", chain: c, pos: 1, signer: sa, pub: pubA,
			alter: set(func(r *receipt.Receipt) { r.ContextHash = ctx3 }), want: exp{false, true, false}},
		{name: "svc-receipt-2: context_hash removed", chain: c, pos: 1, signer: sa, pub: pubA,
			alter: set(func(r *receipt.Receipt) { r.ContextHash = "" }), want: exp{false, true, false}},
		{name: "svc-receipt-2: context_hash emptied (an empty string reads as absent)", chain: c, pos: 1, signer: sa, pub: pubA,
			alter: set(func(r *receipt.Receipt) { r.ContextHash = "" }), rewrite: withEmptyContextHash, want: exp{false, true, false}},
		{name: "svc-receipt-2: context_hash changed and receipt_hash recomputed", chain: c, pos: 1, signer: sa, pub: pubA,
			alter: set(func(r *receipt.Receipt) {
				r.ContextHash = ctx3
				h, err := receipt.Hash(*r)
				if err != nil {
					t.Fatal(err)
				}
				r.ReceiptHash = h
			}), want: exp{true, false, false}},
		{name: "svc-receipt-1: context_hash added", chain: a, pos: 1, signer: sa, pub: pubA,
			alter: set(func(r *receipt.Receipt) { r.ContextHash = ctx1 }), want: exp{false, true, false}},
		{name: "svc-receipt-1: valid receipt with an empty context_hash (read as absent)", chain: a, pos: 1, signer: sa, pub: pubA,
			rewrite: withEmptyContextHash, want: exp{true, true, true}},
		{name: "svc-receipt-2: context_hash in upper-case hex", chain: c, pos: 1, signer: sa, pub: pubA,
			alter: set(func(r *receipt.Receipt) { r.ContextHash = strings.ToUpper(r.ContextHash) }), want: exp{false, true, false}},
		{name: "svc-receipt-2: malformed context_hash (upper-case hex), receipt_hash and signature made over it", chain: c, pos: 1, signer: sa, pub: pubA,
			alter: asGiven(strings.ToUpper(c[1].ContextHash)), want: exp{false, true, false}},
		{name: "svc-receipt-2: malformed context_hash (63 hex characters), receipt_hash and signature made over it", chain: c, pos: 1, signer: sa, pub: pubA,
			alter: asGiven(c[1].ContextHash[:63]), want: exp{false, true, false}},
		{name: "svc-receipt-2: malformed context_hash (not hex), receipt_hash and signature made over it", chain: c, pos: 1, signer: sa, pub: pubA,
			alter: asGiven("z" + c[1].ContextHash[1:]), want: exp{false, true, false}},
	}
}
