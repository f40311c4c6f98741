package receipt_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"svc/canonical"
	"svc/receipt"
)

// rfc8032Seed and rfc8032Pub are TEST 1 of RFC 8032 section 7.1.
const (
	rfc8032Seed = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"
	rfc8032Pub  = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
)

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newSigner(t testing.TB, fill byte) *receipt.Signer {
	t.Helper()
	s, err := receipt.NewSigner(bytes.Repeat([]byte{fill}, ed25519.SeedSize))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var base = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// buildChain seals n receipts of tenant with s (nil: unsigned).
func buildChain(t testing.TB, tenant string, n int, s *receipt.Signer) []receipt.Receipt {
	t.Helper()
	rs := make([]receipt.Receipt, 0, n)
	prev := ""
	for i := 1; i <= n; i++ {
		decision := "allow"
		if i%3 == 0 {
			decision = "deny"
		}
		r, err := receipt.Seal(receipt.Receipt{
			ReceiptID:  fmt.Sprintf("%s-r-%04d", tenant, i),
			TenantID:   tenant,
			DecisionID: fmt.Sprintf("%s-d-%04d", tenant, i),
			Seq:        int64(i),
			ActionHash: fmt.Sprintf("%064x", i),
			Decision:   decision,
			CreatedAt:  receipt.FormatTime(base.Add(time.Duration(i) * 1500 * time.Microsecond)),
		}, prev, s)
		if err != nil {
			t.Fatalf("seal %d: %v", i, err)
		}
		rs = append(rs, r)
		prev = r.ReceiptHash
	}
	return rs
}

func clone(rs []receipt.Receipt) []receipt.Receipt {
	return append([]receipt.Receipt(nil), rs...)
}

// rehash recomputes r's hash as an attacker without the key could.
func rehash(t testing.TB, r receipt.Receipt) receipt.Receipt {
	t.Helper()
	h, err := receipt.Hash(r)
	if err != nil {
		t.Fatal(err)
	}
	r.ReceiptHash = h
	return r
}

type wantErr struct {
	index int
	err   string
}

const (
	brokenLink = "broken link: prev_receipt_hash does not match the previous receipt"
	notHead    = "chain does not start at its head"
)

func gap(n int) string { return fmt.Sprintf("sequence gap: expected seq %d", n) }

func checkErrs(t *testing.T, got []receipt.ChainError, want []wantErr) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = got[i].Index == want[i].index && (got[i].Error == want[i].err ||
			strings.HasSuffix(want[i].err, "*") && strings.HasPrefix(got[i].Error, strings.TrimSuffix(want[i].err, "*")))
	}
	if !ok {
		t.Fatalf("errors:\n got %+v\nwant %+v", got, want)
	}
}

func TestHashGolden(t *testing.T) {
	r := receipt.Receipt{
		ReceiptID:   "6f1c2a4e-8b3d-4c5e-9f00-112233445566",
		TenantID:    "3d2b1a00-0000-4000-8000-000000000001",
		DecisionID:  "9a8b7c6d-5e4f-4a3b-8c2d-1e0f00000002",
		Seq:         1,
		ActionHash:  "b50ccc693e34f3d5ab7d36b9b8a3a1e4e1c0a5a6fbbf2b5e1d4c7d2e7c9a0b1c",
		Decision:    "allow",
		ReceiptHash: "ignored",
		Signature:   ptr("ignored"),
		CreatedAt:   "2026-01-02T03:04:05.123456Z",
	}
	// The svc-receipt-1 object, written out by hand in RFC 8785 order.
	want := `{"action_hash":"b50ccc693e34f3d5ab7d36b9b8a3a1e4e1c0a5a6fbbf2b5e1d4c7d2e7c9a0b1c",` +
		`"created_at":"2026-01-02T03:04:05.123456Z","decision":"allow",` +
		`"decision_id":"9a8b7c6d-5e4f-4a3b-8c2d-1e0f00000002","key_id":"","prev_receipt_hash":"",` +
		`"receipt_id":"6f1c2a4e-8b3d-4c5e-9f00-112233445566","seq":1,` +
		`"tenant_id":"3d2b1a00-0000-4000-8000-000000000001"}`
	sum := sha256.Sum256([]byte(want))
	got, err := receipt.Hash(r)
	if err != nil {
		t.Fatal(err)
	}
	if got != hex.EncodeToString(sum[:]) {
		t.Fatalf("Hash = %s, want %x", got, sum)
	}
	if receipt.HashScheme != "svc-receipt-1" {
		t.Fatalf("HashScheme = %q", receipt.HashScheme)
	}

	// Every hashed field changes the hash; receipt_hash and signature do not.
	tests := []struct {
		name    string
		mutate  func(*receipt.Receipt)
		changes bool
	}{
		{name: "receipt_id", mutate: func(r *receipt.Receipt) { r.ReceiptID += "x" }, changes: true},
		{name: "tenant_id", mutate: func(r *receipt.Receipt) { r.TenantID += "x" }, changes: true},
		{name: "decision_id", mutate: func(r *receipt.Receipt) { r.DecisionID += "x" }, changes: true},
		{name: "seq", mutate: func(r *receipt.Receipt) { r.Seq++ }, changes: true},
		{name: "action_hash", mutate: func(r *receipt.Receipt) { r.ActionHash = strings.Repeat("0", 64) }, changes: true},
		{name: "decision", mutate: func(r *receipt.Receipt) { r.Decision = "deny" }, changes: true},
		{name: "prev_receipt_hash", mutate: func(r *receipt.Receipt) { r.PrevReceiptHash = strings.Repeat("a", 64) }, changes: true},
		{name: "key_id", mutate: func(r *receipt.Receipt) { r.KeyID = "0123456789abcdef" }, changes: true},
		{name: "created_at", mutate: func(r *receipt.Receipt) { r.CreatedAt = "2026-01-02T03:04:05.123457Z" }, changes: true},
		{name: "receipt_hash", mutate: func(r *receipt.Receipt) { r.ReceiptHash = "other" }},
		{name: "signature", mutate: func(r *receipt.Receipt) { r.Signature = nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := r
			tt.mutate(&m)
			h, err := receipt.Hash(m)
			if err != nil {
				t.Fatal(err)
			}
			if (h != got) != tt.changes {
				t.Fatalf("hash changed = %v, want %v", h != got, tt.changes)
			}
		})
	}
}

func TestHashErrors(t *testing.T) {
	tests := []struct {
		name string
		r    receipt.Receipt
	}{
		{name: "invalid UTF-8", r: receipt.Receipt{TenantID: "t", Decision: "\xff"}},
		{name: "seq beyond 2^53", r: receipt.Receipt{TenantID: "t", Seq: 1<<53 + 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := receipt.Hash(tt.r); err == nil || !strings.HasPrefix(err.Error(), "receipt: ") {
				t.Fatalf("Hash error = %v, want a receipt: error", err)
			}
		})
	}
}

func TestSigner(t *testing.T) {
	s, err := receipt.NewSigner(mustHex(t, rfc8032Seed))
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(s.PublicKey()); got != rfc8032Pub {
		t.Fatalf("public key = %s, want %s (RFC 8032 TEST 1)", got, rfc8032Pub)
	}
	sum := sha256.Sum256(mustHex(t, rfc8032Pub))
	if want := hex.EncodeToString(sum[:])[:16]; s.KeyID() != want || receipt.KeyID(s.PublicKey()) != want {
		t.Fatalf("KeyID = %s, want %s", s.KeyID(), want)
	}
	if !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(s.KeyID()) {
		t.Fatalf("KeyID %q is not 16 lower-case hex characters", s.KeyID())
	}

	// PublicKey hands out a copy.
	pk := s.PublicKey()
	pk[0] ^= 0xff
	if hex.EncodeToString(s.PublicKey()) != rfc8032Pub {
		t.Fatal("PublicKey exposes the signer's key")
	}

	h := strings.Repeat("ab", 32)
	sig, err := s.Sign(h)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		t.Fatalf("signature is not standard base64: %v", err)
	}
	if !ed25519.Verify(s.PublicKey(), mustHex(t, h), raw) {
		t.Fatal("signature does not verify over the 32 raw hash bytes")
	}

	for _, bad := range []string{"", "ab", strings.Repeat("AB", 32), strings.Repeat("zz", 32), strings.Repeat("ab", 33)} {
		if _, err := s.Sign(bad); err == nil || !strings.HasPrefix(err.Error(), "receipt: ") {
			t.Errorf("Sign(%q) error = %v, want a receipt: error", bad, err)
		}
	}
}

func TestNewSignerRejectsBadSeeds(t *testing.T) {
	tests := []struct {
		name string
		seed []byte
	}{
		{name: "nil", seed: nil},
		{name: "empty", seed: []byte{}},
		{name: "16 bytes", seed: make([]byte, 16)},
		{name: "31 bytes", seed: make([]byte, 31)},
		{name: "33 bytes", seed: make([]byte, 33)},
		{name: "64-byte private key", seed: make([]byte, 64)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := receipt.NewSigner(tt.seed)
			if err == nil || s != nil || !strings.HasPrefix(err.Error(), "receipt: ") {
				t.Fatalf("NewSigner(%d bytes) = %v, %v; want nil and a receipt: error", len(tt.seed), s, err)
			}
		})
	}
}

func TestSeal(t *testing.T) {
	s := newSigner(t, 1)
	r := receipt.Receipt{ReceiptID: "r1", TenantID: "t1", DecisionID: "d1", Seq: 1,
		ActionHash: strings.Repeat("c", 64), Decision: "allow", CreatedAt: "2026-03-01T12:00:00.000000Z"}
	got, err := receipt.Seal(r, "", s)
	if err != nil {
		t.Fatal(err)
	}
	if got.KeyID != s.KeyID() || got.Signature == nil || got.PrevReceiptHash != "" {
		t.Fatalf("sealed receipt %+v", got)
	}
	if h, _ := receipt.Hash(got); h != got.ReceiptHash {
		t.Fatalf("receipt_hash %s, recomputed %s", got.ReceiptHash, h)
	}
	c := receipt.Verify(got, s.PublicKey())
	if !c.Valid || !c.HashValid || c.SignatureValid == nil || !*c.SignatureValid || c.Error != "" || c.ReceiptID != "r1" {
		t.Fatalf("Verify = %+v", c)
	}

	unsigned, err := receipt.Seal(got, "", nil) // resealing drops the old key and signature
	if err != nil {
		t.Fatal(err)
	}
	if unsigned.KeyID != "" || unsigned.Signature != nil {
		t.Fatalf("unsigned seal kept key_id %q / signature %v", unsigned.KeyID, unsigned.Signature)
	}

	prev := strings.Repeat("0a", 32)
	tests := []struct {
		name   string
		mutate func(*receipt.Receipt)
		prev   string
	}{
		{name: "no tenant", mutate: func(r *receipt.Receipt) { r.TenantID = "" }},
		{name: "no receipt id", mutate: func(r *receipt.Receipt) { r.ReceiptID = "" }},
		{name: "seq 0", mutate: func(r *receipt.Receipt) { r.Seq = 0 }},
		{name: "head with a previous hash", prev: prev},
		{name: "seq 2 without a previous hash", mutate: func(r *receipt.Receipt) { r.Seq = 2 }},
		{name: "seq 2 with an upper-case previous hash", mutate: func(r *receipt.Receipt) { r.Seq = 2 }, prev: strings.ToUpper(prev)},
		{name: "seq 2 with a short previous hash", mutate: func(r *receipt.Receipt) { r.Seq = 2 }, prev: prev[:62]},
		{name: "created_at without microseconds", mutate: func(r *receipt.Receipt) { r.CreatedAt = "2026-03-01T12:00:00Z" }},
		{name: "created_at not in UTC", mutate: func(r *receipt.Receipt) { r.CreatedAt = "2026-03-01T13:00:00.000000+01:00" }},
		{name: "created_at as the database default", mutate: func(r *receipt.Receipt) { r.CreatedAt = "2026-03-01 12:00:00" }},
		{name: "created_at empty", mutate: func(r *receipt.Receipt) { r.CreatedAt = "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := r
			if tt.mutate != nil {
				tt.mutate(&m)
			}
			if _, err := receipt.Seal(m, tt.prev, s); err == nil || !strings.HasPrefix(err.Error(), "receipt: ") {
				t.Fatalf("Seal error = %v, want a receipt: error", err)
			}
		})
	}
}

func TestVerifySingle(t *testing.T) {
	s := newSigner(t, 1)
	other := newSigner(t, 2)
	signed := buildChain(t, "t1", 2, s)[1]
	unsigned := buildChain(t, "t1", 2, nil)[1]

	altered := signed
	altered.Decision = "deny"
	rehashed := rehash(t, altered)
	badSig := signed
	badSig.Signature = ptr(flipBase64(*signed.Signature))
	notBase64 := signed
	notBase64.Signature = ptr("!!!")
	shortSig := signed
	shortSig.Signature = ptr(base64.StdEncoding.EncodeToString([]byte("short")))
	stripped := signed
	stripped.Signature = nil
	noKeyID := signed
	noKeyID.KeyID = ""
	noKeyID = rehash(t, noKeyID)
	// Signed by another key, presented under s's key_id.
	forged := signed
	sig, err := other.Sign(forged.ReceiptHash)
	if err != nil {
		t.Fatal(err)
	}
	forged.Signature = &sig

	tru, fals := true, false
	tests := []struct {
		name      string
		r         receipt.Receipt
		pub       ed25519.PublicKey
		valid     bool
		hashValid bool
		sigValid  *bool
		err       string
	}{
		{name: "signed", r: signed, pub: s.PublicKey(), valid: true, hashValid: true, sigValid: &tru},
		{name: "unsigned", r: unsigned, pub: s.PublicKey(), valid: true, hashValid: true},
		{name: "unsigned without a key", r: unsigned, valid: true, hashValid: true},
		{name: "altered field", r: altered, pub: s.PublicKey(), hashValid: false, sigValid: &tru, err: "receipt_hash mismatch"},
		{name: "altered field, hash recomputed", r: rehashed, pub: s.PublicKey(), hashValid: true, sigValid: &fals, err: "invalid signature"},
		{name: "wrong public key", r: signed, pub: other.PublicKey(), hashValid: true, sigValid: &fals, err: "unknown key_id"},
		{name: "no public key", r: signed, hashValid: true, sigValid: &fals, err: "unknown key_id"},
		{name: "public key of the wrong length", r: signed, pub: ed25519.PublicKey{1, 2, 3}, hashValid: true, sigValid: &fals, err: "unknown key_id"},
		{name: "tampered signature", r: badSig, pub: s.PublicKey(), hashValid: true, sigValid: &fals, err: "invalid signature"},
		{name: "signature not base64", r: notBase64, pub: s.PublicKey(), hashValid: true, sigValid: &fals, err: "invalid signature"},
		{name: "signature too short", r: shortSig, pub: s.PublicKey(), hashValid: true, sigValid: &fals, err: "invalid signature"},
		{name: "signature by another key", r: forged, pub: s.PublicKey(), hashValid: true, sigValid: &fals, err: "invalid signature"},
		{name: "signature stripped", r: stripped, pub: s.PublicKey(), hashValid: true, sigValid: &fals, err: "missing signature"},
		{name: "key_id removed and hash recomputed", r: noKeyID, pub: s.PublicKey(), hashValid: true, sigValid: &fals, err: "unknown key_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := receipt.Verify(tt.r, tt.pub)
			if c.Valid != tt.valid || c.HashValid != tt.hashValid || c.Error != tt.err || c.ReceiptID != tt.r.ReceiptID {
				t.Fatalf("Verify = %+v, want valid %v hash_valid %v error %q", c, tt.valid, tt.hashValid, tt.err)
			}
			if (c.SignatureValid == nil) != (tt.sigValid == nil) || (c.SignatureValid != nil && *c.SignatureValid != *tt.sigValid) {
				t.Fatalf("SignatureValid = %v, want %v", fmtBoolPtr(c.SignatureValid), fmtBoolPtr(tt.sigValid))
			}
		})
	}
}

func TestVerifyChain(t *testing.T) {
	const n = 20
	s := newSigner(t, 1)
	otherKey := newSigner(t, 2)
	chain := buildChain(t, "t1", n, s)
	unsignedChain := buildChain(t, "t1", n, nil)
	otherTenant := buildChain(t, "t2", n, s)
	otherInstall := buildChain(t, "t3", n, otherKey)

	tests := []struct {
		name       string
		rs         func() []receipt.Receipt
		pub        ed25519.PublicKey
		expectHead bool
		want       []wantErr
	}{
		{name: "intact signed chain", rs: func() []receipt.Receipt { return chain }, pub: s.PublicKey(), expectHead: true},
		{name: "intact unsigned chain", rs: func() []receipt.Receipt { return unsignedChain }, expectHead: true},
		{name: "unsigned chain with a key given", rs: func() []receipt.Receipt { return unsignedChain }, pub: s.PublicKey(), expectHead: true},
		{name: "middle segment without head", rs: func() []receipt.Receipt { return chain[5:12] }, pub: s.PublicKey()},
		{name: "empty", rs: func() []receipt.Receipt { return nil }, expectHead: true},
		{name: "altered field", rs: func() []receipt.Receipt {
			rs := clone(chain)
			rs[7].Decision = "allow_all"
			return rs
		}, pub: s.PublicKey(), expectHead: true, want: []wantErr{{7, "receipt_hash mismatch"}}},
		{name: "altered field, hash recomputed", rs: func() []receipt.Receipt {
			rs := clone(chain)
			rs[7].Decision = "allow_all"
			rs[7] = rehash(t, rs[7])
			return rs
		}, pub: s.PublicKey(), expectHead: true, want: []wantErr{{7, "invalid signature"}, {8, brokenLink}}},
		{name: "unsigned: altered field, hash recomputed", rs: func() []receipt.Receipt {
			rs := clone(unsignedChain)
			rs[7].Decision = "allow_all"
			rs[7] = rehash(t, rs[7])
			return rs
		}, expectHead: true, want: []wantErr{{8, brokenLink}}},
		{name: "altered created_at", rs: func() []receipt.Receipt {
			rs := clone(chain)
			rs[19].CreatedAt = receipt.FormatTime(base)
			return rs
		}, pub: s.PublicKey(), expectHead: true, want: []wantErr{{19, "receipt_hash mismatch"}}},
		{name: "altered receipt_hash", rs: func() []receipt.Receipt {
			rs := clone(chain)
			rs[4].ReceiptHash = strings.Repeat("0", 64)
			return rs
		}, pub: s.PublicKey(), expectHead: true, want: []wantErr{{4, "receipt_hash mismatch"}, {5, brokenLink}}},
		{name: "removed first", rs: func() []receipt.Receipt { return clone(chain[1:]) },
			pub: s.PublicKey(), expectHead: true, want: []wantErr{{0, notHead}}},
		{name: "removed middle", rs: func() []receipt.Receipt {
			return append(clone(chain[:10]), chain[11:]...)
		}, pub: s.PublicKey(), expectHead: true, want: []wantErr{{10, brokenLink}, {10, gap(11)}}},
		{name: "removed two in the middle", rs: func() []receipt.Receipt {
			return append(clone(chain[:3]), chain[5:]...)
		}, pub: s.PublicKey(), expectHead: true, want: []wantErr{{3, brokenLink}, {3, gap(4)}}},
		{name: "swapped neighbours", rs: func() []receipt.Receipt {
			rs := clone(chain)
			rs[5], rs[6] = rs[6], rs[5]
			return rs
		}, pub: s.PublicKey(), expectHead: true, want: []wantErr{
			{5, brokenLink}, {5, gap(6)}, {6, brokenLink}, {6, gap(8)}, {7, brokenLink}, {7, gap(7)},
		}},
		{name: "spliced from another tenant's chain", rs: func() []receipt.Receipt {
			rs := clone(chain)
			rs[9] = otherTenant[9]
			return rs
		}, pub: s.PublicKey(), expectHead: true, want: []wantErr{{9, "tenant mismatch"}, {9, brokenLink}, {10, brokenLink}}},
		{name: "spliced from another installation", rs: func() []receipt.Receipt {
			rs := clone(chain)
			rs[9] = otherInstall[9]
			return rs
		}, pub: s.PublicKey(), expectHead: true, want: []wantErr{
			{9, "unknown key_id"}, {9, "tenant mismatch"}, {9, brokenLink}, {10, brokenLink},
		}},
		{name: "duplicated receipt", rs: func() []receipt.Receipt {
			return append(clone(chain[:8]), chain[7:]...)
		}, pub: s.PublicKey(), expectHead: true, want: []wantErr{{8, brokenLink}, {8, gap(9)}}},
		{name: "tampered signature", rs: func() []receipt.Receipt {
			rs := clone(chain)
			rs[3].Signature = ptr(flipBase64(*rs[3].Signature))
			return rs
		}, pub: s.PublicKey(), expectHead: true, want: []wantErr{{3, "invalid signature"}}},
		{name: "signature stripped", rs: func() []receipt.Receipt {
			rs := clone(chain)
			rs[3].Signature = nil
			return rs
		}, pub: s.PublicKey(), expectHead: true, want: []wantErr{{3, "missing signature"}}},
		{name: "wrong public key", rs: func() []receipt.Receipt { return chain[:3] }, pub: otherKey.PublicKey(), expectHead: true,
			want: []wantErr{{0, "unknown key_id"}, {1, "unknown key_id"}, {2, "unknown key_id"}}},
		{name: "segment checked as if it were the head", rs: func() []receipt.Receipt { return chain[5:8] }, pub: s.PublicKey(), expectHead: true,
			want: []wantErr{{0, notHead}}},
		{name: "segment starting with a fake head", rs: func() []receipt.Receipt {
			rs := clone(chain[5:8])
			rs[0].PrevReceiptHash = ""
			return rs
		}, pub: s.PublicKey(), want: []wantErr{
			{0, "receipt_hash mismatch"}, {0, "prev_receipt_hash must be empty exactly at seq 1"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := tt.rs()
			checked, errs := receipt.VerifyChain(rs, tt.pub, tt.expectHead)
			if checked != len(rs) {
				t.Fatalf("checked = %d, want %d", checked, len(rs))
			}
			checkErrs(t, errs, tt.want)
			for _, e := range errs {
				if e.ReceiptID != rs[e.Index].ReceiptID {
					t.Fatalf("error %+v names receipt %q, want %q", e, e.ReceiptID, rs[e.Index].ReceiptID)
				}
			}
		})
	}
}

func TestUnsignedChainSignatureValidNil(t *testing.T) {
	for i, r := range buildChain(t, "t1", 20, nil) {
		if r.Signature != nil || r.KeyID != "" {
			t.Fatalf("receipt %d: signature %v key_id %q", i, r.Signature, r.KeyID)
		}
		c := receipt.Verify(r, nil)
		if !c.Valid || !c.HashValid || c.SignatureValid != nil || c.Error != "" {
			t.Fatalf("receipt %d: %+v", i, c)
		}
	}
}

// flipBase64 changes the first character of a base64 text, which changes a
// significant bit.
func flipBase64(s string) string {
	c := byte('A')
	if s[0] == 'A' {
		c = 'B'
	}
	return string(c) + s[1:]
}

func ptr(s string) *string { return &s }

func fmtBoolPtr(b *bool) string {
	if b == nil {
		return "nil"
	}
	return fmt.Sprint(*b)
}

func BenchmarkHash(b *testing.B) {
	r := buildChain(b, "3d2b1a00-0000-4000-8000-000000000001", 2, nil)[1]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := receipt.Hash(r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSeal(b *testing.B) {
	s := newSigner(b, 1)
	r := buildChain(b, "3d2b1a00-0000-4000-8000-000000000001", 2, nil)[1]
	prev := r.PrevReceiptHash
	b.ReportAllocs()
	for b.Loop() {
		if _, err := receipt.Seal(r, prev, s); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	s := newSigner(b, 1)
	r := buildChain(b, "3d2b1a00-0000-4000-8000-000000000001", 2, s)[1]
	pub := s.PublicKey()
	b.ReportAllocs()
	for b.Loop() {
		if c := receipt.Verify(r, pub); !c.Valid {
			b.Fatal(c.Error)
		}
	}
}

// Signatures are checked in batches: a bad signature in any batch (here
// in the first, and the last of a later one) is named at its index, among
// the other errors in index order, exactly as receipt-by-receipt
// verification finds it; a good chain longer than a batch verifies.
func TestVerifyChainBatches(t *testing.T) {
	s := newSigner(t, 3)
	rs := buildChain(t, "3d2b1a00-0000-4000-8000-000000000009", 200, s)
	if n, errs := receipt.VerifyChain(rs, s.PublicKey(), true); n != 200 || len(errs) != 0 {
		t.Fatalf("good chain: checked %d, errors %v", n, errs)
	}
	other := newSigner(t, 4)
	for _, i := range []int{5, 127, 199} {
		sig, err := other.Sign(rs[i].ReceiptHash)
		if err != nil {
			t.Fatal(err)
		}
		rs[i].Signature = &sig // the right key_id, a signature by another key
	}
	rs[60].ReceiptHash = rs[61].ReceiptHash // a hash error, and a broken link at 61
	var want []receipt.ChainError
	for i, r := range rs {
		if c := receipt.Verify(r, s.PublicKey()); !c.Valid {
			want = append(want, receipt.ChainError{Index: i, ReceiptID: r.ReceiptID, Error: c.Error})
		}
		if i == 61 {
			want = append(want, receipt.ChainError{Index: i, ReceiptID: r.ReceiptID,
				Error: "broken link: prev_receipt_hash does not match the previous receipt"})
		}
	}
	_, got := receipt.VerifyChain(rs, s.PublicKey(), true)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("errors\n got %v\nwant %v", got, want)
	}
	if len(want) != 5 || want[0].Index != 5 || want[0].Error != "invalid signature" {
		t.Fatalf("reference errors %v", want)
	}
}

// A chain may mix receipts with and without run context: each verifies
// under its own scheme, and dropping or changing a context hash breaks it.
func TestContextHashScheme(t *testing.T) {
	s, err := receipt.NewSigner(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	ctx := strings.Repeat("ab", 32)
	var chain []receipt.Receipt
	prev := ""
	for i, c := range []string{"", ctx, "", ctx} {
		r, err := receipt.Seal(receipt.Receipt{ReceiptID: fmt.Sprint("r", i), TenantID: "t", DecisionID: fmt.Sprint("d", i), Seq: int64(i + 1),
			ActionHash: strings.Repeat("0", 64), Decision: "allow", CreatedAt: "2026-11-28T00:00:00.000000Z", ContextHash: c}, prev, s)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]string{false: receipt.HashScheme, true: receipt.HashSchemeContext}[c != ""]; receipt.Scheme(r) != want {
			t.Fatalf("receipt %d: scheme %s, want %s", i, receipt.Scheme(r), want)
		}
		chain = append(chain, r)
		prev = r.ReceiptHash
	}
	if _, errs := receipt.VerifyChain(chain, s.PublicKey(), false); len(errs) != 0 {
		t.Fatalf("a mixed chain does not verify: %v", errs)
	}
	same := chain[1]
	same.ContextHash = ""
	if h, _ := receipt.Hash(same); h == chain[1].ReceiptHash {
		t.Fatal("dropping the context hash keeps the receipt hash")
	}
	for _, bad := range []string{strings.Repeat("cd", 32), "ABAB", strings.Repeat("AB", 32)} {
		r := chain[3]
		r.ContextHash = bad
		if c := receipt.Verify(r, s.PublicKey()); c.Valid || c.HashValid {
			t.Fatalf("context hash %q verifies: %+v", bad, c)
		}
	}
	// svc-receipt-2 hashes svc-receipt-1's object plus context_hash.
	want, err := canonical.Marshal(map[string]any{"receipt_id": "r1", "tenant_id": "t", "decision_id": "d1", "seq": 2,
		"action_hash": strings.Repeat("0", 64), "decision": "allow", "prev_receipt_hash": chain[0].ReceiptHash, "key_id": s.KeyID(),
		"created_at": "2026-11-28T00:00:00.000000Z", "context_hash": ctx})
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(want); hex.EncodeToString(sum[:]) != chain[1].ReceiptHash {
		t.Fatalf("svc-receipt-2 is not SHA-256 of %s", want)
	}
}
