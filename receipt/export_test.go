package receipt_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"svc/receipt"
)

// exportLines writes an export and returns its lines (header first).
func exportLines(t *testing.T, tenant string, s *receipt.Signer, rs []receipt.Receipt) []string {
	t.Helper()
	var buf bytes.Buffer
	var head receipt.Head
	if n := len(rs); n > 0 {
		head = receipt.Head{Seq: rs[n-1].Seq, Hash: rs[n-1].ReceiptHash}
	}
	if err := receipt.WriteExport(&buf, tenant, s, head, rs); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(buf.String(), "\n") {
		t.Fatal("export does not end with a newline")
	}
	return strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
}

func join(lines []string) string { return strings.Join(lines, "\n") + "\n" }

// editJSON decodes one line into a map, lets f change it, and encodes it.
func editJSON(t *testing.T, line string, f func(map[string]any)) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestExportRoundTrip(t *testing.T) {
	s := newSigner(t, 1)
	tests := []struct {
		name   string
		signer *receipt.Signer
		n      int
	}{
		{name: "signed", signer: s, n: 20},
		{name: "unsigned", n: 20},
		{name: "empty signed", signer: s},
		{name: "empty unsigned"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var pub ed25519.PublicKey
			if tt.signer != nil {
				pub = tt.signer.PublicKey()
			}
			rs := buildChain(t, "t1", tt.n, tt.signer)
			lines := exportLines(t, "t1", tt.signer, rs)
			if len(lines) != tt.n+1 {
				t.Fatalf("%d lines, want %d", len(lines), tt.n+1)
			}

			var h map[string]any
			if err := json.Unmarshal([]byte(lines[0]), &h); err != nil {
				t.Fatal(err)
			}
			wantHead := ""
			if tt.n > 0 {
				wantHead = rs[tt.n-1].ReceiptHash
			}
			if h["format"] != "svc-receipts-export-1" || h["tenant_id"] != "t1" || h["count"] != float64(tt.n) || h["head_hash"] != wantHead {
				t.Fatalf("header %s", lines[0])
			}
			if tt.signer != nil {
				if h["key_id"] != tt.signer.KeyID() || h["public_key"] != base64.StdEncoding.EncodeToString(pub) || h["header_signature"] == nil {
					t.Fatalf("header %s", lines[0])
				}
			} else if _, signed := h["header_signature"]; h["key_id"] != "" || h["public_key"] != nil || signed {
				t.Fatalf("header %s", lines[0])
			}
			for i, line := range lines[1:] {
				var r receipt.Receipt
				if err := json.Unmarshal([]byte(line), &r); err != nil {
					t.Fatal(err)
				}
				if r.ReceiptHash != rs[i].ReceiptHash || r.Seq != rs[i].Seq {
					t.Fatalf("line %d holds %+v", i+2, r)
				}
				if tt.signer == nil && !strings.Contains(line, `"signature":null`) {
					t.Fatalf("unsigned receipt line without signature null: %s", line)
				}
			}

			rep, err := receipt.VerifyExport(strings.NewReader(join(lines)))
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Valid || len(rep.Errors) != 0 || rep.Count != tt.n || rep.Checked != tt.n || rep.TenantID != "t1" || rep.HeadHash != wantHead {
				t.Fatalf("report %+v", rep)
			}
		})
	}
}

const sigInvalid = "header signature invalid"

// headerSig returns the header_signature of an export's header line.
func headerSig(t *testing.T, header string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(header), &m); err != nil {
		t.Fatal(err)
	}
	sig, ok := m["header_signature"].(string)
	if !ok {
		t.Fatalf("header without header_signature: %s", header)
	}
	return sig
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteExportWriterError(t *testing.T) {
	err := receipt.WriteExport(failingWriter{}, "t1", nil, receipt.Head{}, buildChain(t, "t1", 3, nil))
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("error = %v", err)
	}
}

func TestVerifyExportDetectsTampering(t *testing.T) {
	const n = 20
	s := newSigner(t, 1)
	otherKey := newSigner(t, 2)
	chain := buildChain(t, "t1", n, s)
	good := exportLines(t, "t1", s, chain)
	other := exportLines(t, "t2", s, buildChain(t, "t2", n, s))
	foreign := exportLines(t, "t3", otherKey, buildChain(t, "t3", n, otherKey))
	unsignedChain := buildChain(t, "t1", n, nil)
	unsigned := exportLines(t, "t1", nil, unsignedChain)
	// The server exports up to the stored chain head: a chain whose newest
	// receipt is gone from the database still names it in the header.
	var tb bytes.Buffer
	if err := receipt.WriteExport(&tb, "t1", s, receipt.Head{Seq: chain[n-1].Seq, Hash: chain[n-1].ReceiptHash}, chain[:n-1]); err != nil {
		t.Fatal(err)
	}
	truncatedStore := tb.String()

	// rec returns the line of receipt index i.
	rec := func(i int) int { return i + 1 }
	edit := func(lines []string, f func([]string) []string) string {
		return join(f(append([]string(nil), lines...)))
	}
	// dropNewest removes the newest receipt and rewrites the header to
	// match the chain without it.
	dropNewest := func(ch []receipt.Receipt) func([]string) []string {
		return func(l []string) []string {
			l[0] = editJSON(t, l[0], func(m map[string]any) {
				m["count"] = n - 1
				m["head_seq"] = n - 1
				m["head_hash"] = ch[n-2].ReceiptHash
			})
			return l[:rec(n-1)]
		}
	}

	tests := []struct {
		name    string
		input   string
		checked int
		want    []wantErr
	}{
		{name: "intact", input: join(good), checked: n},
		{name: "intact unsigned", input: join(unsigned), checked: n},
		{name: "CRLF line endings", input: strings.ReplaceAll(join(good), "\n", "\r\n"), checked: n},
		{name: "altered decision", checked: n, input: edit(good, func(l []string) []string {
			l[rec(7)] = strings.Replace(l[rec(7)], `"decision":"allow"`, `"decision":"deny"`, 1)
			return l
		}), want: []wantErr{{7, "receipt_hash mismatch"}}},
		{name: "altered action_hash", checked: n, input: edit(good, func(l []string) []string {
			l[rec(0)] = editJSON(t, l[rec(0)], func(m map[string]any) { m["action_hash"] = strings.Repeat("f", 64) })
			return l
		}), want: []wantErr{{0, "receipt_hash mismatch"}}},
		{name: "altered seq", checked: n, input: edit(good, func(l []string) []string {
			l[rec(12)] = editJSON(t, l[rec(12)], func(m map[string]any) { m["seq"] = 99 })
			return l
		}), want: []wantErr{{12, "receipt_hash mismatch"}, {12, gap(13)}, {13, gap(100)}}},
		{name: "altered last receipt", checked: n, input: edit(good, func(l []string) []string {
			l[rec(19)] = editJSON(t, l[rec(19)], func(m map[string]any) { m["decision_id"] = "d-other" })
			return l
		}), want: []wantErr{{19, "receipt_hash mismatch"}}},
		{name: "removed first", checked: n - 1, input: edit(good, func(l []string) []string {
			return append(l[:1], l[2:]...)
		}), want: []wantErr{{0, notHead}, {-1, "count mismatch"}}},
		{name: "removed middle", checked: n - 1, input: edit(good, func(l []string) []string {
			return append(l[:rec(10)], l[rec(11):]...)
		}), want: []wantErr{{10, brokenLink}, {10, gap(11)}, {-1, "count mismatch"}}},
		{name: "removed last", checked: n - 1, input: edit(good, func(l []string) []string {
			return l[:rec(19)]
		}), want: []wantErr{{-1, "count mismatch"}, {-1, "head hash mismatch"}, {-1, "head seq mismatch"}}},
		{name: "swapped neighbours", checked: n, input: edit(good, func(l []string) []string {
			l[rec(5)], l[rec(6)] = l[rec(6)], l[rec(5)]
			return l
		}), want: []wantErr{{5, brokenLink}, {5, gap(6)}, {6, brokenLink}, {6, gap(8)}, {7, brokenLink}, {7, gap(7)}}},
		{name: "swapped last two", checked: n, input: edit(good, func(l []string) []string {
			l[rec(18)], l[rec(19)] = l[rec(19)], l[rec(18)]
			return l
		}), want: []wantErr{{18, brokenLink}, {18, gap(19)}, {19, brokenLink}, {19, gap(21)}, {-1, "head hash mismatch"}, {-1, "head seq mismatch"}}},
		{name: "spliced from another tenant's chain", checked: n, input: edit(good, func(l []string) []string {
			l[rec(9)] = other[rec(9)]
			return l
		}), want: []wantErr{{9, "tenant mismatch"}, {9, brokenLink}, {10, brokenLink}}},
		{name: "spliced from another installation", checked: n, input: edit(good, func(l []string) []string {
			l[rec(9)] = foreign[rec(9)]
			return l
		}), want: []wantErr{{9, "unknown key_id"}, {9, "tenant mismatch"}, {9, brokenLink}, {10, brokenLink}}},
		{name: "inserted foreign receipt", checked: n + 1, input: edit(good, func(l []string) []string {
			return append(l[:rec(4)], append([]string{other[rec(4)]}, l[rec(4):]...)...)
		}), want: []wantErr{{4, "tenant mismatch"}, {4, brokenLink}, {5, brokenLink}, {5, gap(6)}, {-1, "count mismatch"}}},
		{name: "tampered signature", checked: n, input: edit(good, func(l []string) []string {
			l[rec(3)] = editJSON(t, l[rec(3)], func(m map[string]any) {
				sig, ok := m["signature"].(string)
				if !ok {
					t.Fatalf("signature %v is not a string", m["signature"])
				}
				m["signature"] = flipBase64(sig)
			})
			return l
		}), want: []wantErr{{3, "invalid signature"}}},
		{name: "signature stripped", checked: n, input: edit(good, func(l []string) []string {
			l[rec(3)] = editJSON(t, l[rec(3)], func(m map[string]any) { m["signature"] = nil })
			return l
		}), want: []wantErr{{3, "missing signature"}}},
		{name: "header count lowered", checked: n, input: edit(good, func(l []string) []string {
			l[0] = editJSON(t, l[0], func(m map[string]any) { m["count"] = n - 1 })
			return l
		}), want: []wantErr{{-1, sigInvalid}, {-1, "count mismatch"}}},
		{name: "header head_hash replaced", checked: n, input: edit(good, func(l []string) []string {
			l[0] = editJSON(t, l[0], func(m map[string]any) { m["head_hash"] = chain[18].ReceiptHash })
			return l
		}), want: []wantErr{{-1, sigInvalid}, {-1, "head hash mismatch"}}},
		{name: "header head_seq replaced", checked: n, input: edit(good, func(l []string) []string {
			l[0] = editJSON(t, l[0], func(m map[string]any) { m["head_seq"] = n + 1 })
			return l
		}), want: []wantErr{{-1, sigInvalid}, {-1, "head seq mismatch"}}},
		{name: "unsigned header without head_seq (older exports)", checked: n, input: edit(unsigned, func(l []string) []string {
			l[0] = editJSON(t, l[0], func(m map[string]any) { delete(m, "head_seq") })
			return l
		})},
		{name: "signed header without head_seq", checked: n, input: edit(good, func(l []string) []string {
			l[0] = editJSON(t, l[0], func(m map[string]any) { delete(m, "head_seq") })
			return l
		}), want: []wantErr{{-1, sigInvalid}}},
		// The newest receipt dropped and the header rewritten to match:
		// every receipt and link still verifies, only the header's
		// signature shows it.
		{name: "removed last, header rewritten to match", checked: n - 1, input: edit(good, dropNewest(chain)),
			want: []wantErr{{-1, sigInvalid}}},
		{name: "header signature moved to another tenant's export", checked: n, input: edit(other, func(l []string) []string {
			l[0] = editJSON(t, l[0], func(m map[string]any) {
				m["header_signature"] = headerSig(t, good[0])
			})
			return l
		}), want: []wantErr{{-1, sigInvalid}}},
		{name: "header signature stripped", input: edit(good, func(l []string) []string {
			l[0] = editJSON(t, l[0], func(m map[string]any) { delete(m, "header_signature") })
			return l
		}), want: []wantErr{{-1, "malformed header: a signed export needs header_signature"}}},
		{name: "header signature not base64", checked: n, input: edit(good, func(l []string) []string {
			l[0] = editJSON(t, l[0], func(m map[string]any) { m["header_signature"] = "not base64!" })
			return l
		}), want: []wantErr{{-1, sigInvalid}}},
		{name: "header signature on an unsigned export", input: edit(unsigned, func(l []string) []string {
			l[0] = editJSON(t, l[0], func(m map[string]any) { m["header_signature"] = headerSig(t, good[0]) })
			return l
		}), want: []wantErr{{-1, "malformed header: header_signature without public_key"}}},
		// What an unsigned export cannot show: with no key, nothing binds
		// the header to the stored chain, so the same rewrite verifies.
		{name: "unsigned: removed last, header rewritten to match", checked: n - 1, input: edit(unsigned, dropNewest(unsignedChain))},
		{name: "stored chain missing its newest receipt", checked: n - 1, input: truncatedStore,
			want: []wantErr{{-1, "head hash mismatch"}, {-1, "head seq mismatch"}}},
		{name: "header tenant_id replaced", checked: 3, input: edit(good, func(l []string) []string {
			l[0] = editJSON(t, l[0], func(m map[string]any) {
				m["tenant_id"] = "t2"
				m["count"] = 3
				m["head_hash"] = chain[2].ReceiptHash
				m["head_seq"] = 3
			})
			return l[:4]
		}), want: []wantErr{{-1, sigInvalid}, {0, "tenant mismatch"}, {1, "tenant mismatch"}, {2, "tenant mismatch"}}},
		{name: "header key_id replaced", checked: n, input: edit(good, func(l []string) []string {
			l[0] = editJSON(t, l[0], func(m map[string]any) { m["key_id"] = otherKey.KeyID() })
			return l
		}), want: []wantErr{{-1, "header key_id does not match public_key"}, {-1, sigInvalid}}},
		{name: "header public_key replaced", checked: 2, input: edit(good, func(l []string) []string {
			l[0] = editJSON(t, l[0], func(m map[string]any) {
				m["public_key"] = base64.StdEncoding.EncodeToString(otherKey.PublicKey())
				m["key_id"] = otherKey.KeyID()
				m["count"] = 2
				m["head_hash"] = chain[1].ReceiptHash
				m["head_seq"] = 2
			})
			return l[:3]
		}), want: []wantErr{{-1, sigInvalid}, {0, "unknown key_id"}, {1, "unknown key_id"}}},
		{name: "header public_key removed", input: edit(good, func(l []string) []string {
			l[0] = editJSON(t, l[0], func(m map[string]any) { m["public_key"] = nil })
			return l
		}), want: []wantErr{{-1, "malformed header: key_id without public_key"}}},
		{name: "header public_key not a key", input: edit(good, func(l []string) []string {
			l[0] = editJSON(t, l[0], func(m map[string]any) { m["public_key"] = "AAAA" })
			return l
		}), want: []wantErr{{-1, "malformed header: public_key is not a base64 Ed25519 public key"}}},
		{name: "header format replaced", input: edit(good, func(l []string) []string {
			l[0] = editJSON(t, l[0], func(m map[string]any) { m["format"] = "svc-receipts-export-2" })
			return l
		}), want: []wantErr{{-1, `unsupported export format "svc-receipts-export-2"`}}},
		{name: "header count missing", input: edit(good, func(l []string) []string {
			l[0] = editJSON(t, l[0], func(m map[string]any) { delete(m, "count") })
			return l
		}), want: []wantErr{{-1, "malformed header: count missing or negative"}}},
		{name: "header head_hash malformed", input: edit(good, func(l []string) []string {
			l[0] = editJSON(t, l[0], func(m map[string]any) { m["head_hash"] = "xyz" })
			return l
		}), want: []wantErr{{-1, "malformed header: head_hash is not 64 lower-case hex characters"}}},
		{name: "header missing (receipts only)", input: join(good[1:]), want: []wantErr{{-1, `malformed header: unknown key "receipt_id"`}}},
		{name: "header not JSON", input: "svc export\n" + join(good[1:]), want: []wantErr{{-1, "malformed header: *"}}},
		{name: "empty input", input: "", want: []wantErr{{-1, "missing header"}}},
		{name: "blank lines only", input: "\n\n  \n", want: []wantErr{{-1, "missing header"}}},
		{name: "malformed receipt line", checked: n - 1, input: edit(good, func(l []string) []string {
			l[rec(4)] = "{not json"
			return l
		}), want: []wantErr{{4, "malformed receipt: *"}}},
		{name: "truncated last line", checked: n - 1, input: edit(good, func(l []string) []string {
			l[rec(19)] = l[rec(19)][:40]
			return l
		}), want: []wantErr{{19, "malformed receipt: *"}, {-1, "head hash mismatch"}, {-1, "head seq mismatch"}}},
		{name: "receipt field of the wrong type", checked: n - 1, input: edit(good, func(l []string) []string {
			l[rec(2)] = strings.Replace(l[rec(2)], `"seq":3`, `"seq":"3"`, 1)
			return l
		}), want: []wantErr{{2, "malformed receipt: *"}}},
		{name: "receipt line is a JSON array", checked: n - 1, input: edit(good, func(l []string) []string {
			l[rec(2)] = "[1,2,3]"
			return l
		}), want: []wantErr{{2, "malformed receipt: *"}}},
		// A repeated key: encoding/json would keep the last value, so the
		// verified receipt keeps its decision while a first-wins reader sees quarantine.
		{name: "receipt with a repeated key", checked: n - 1, input: edit(good, func(l []string) []string {
			l[rec(5)] = strings.Replace(l[rec(5)], `"decision":"`, `"decision":"quarantine","decision":"`, 1)
			return l
		}), want: []wantErr{{5, `malformed receipt: duplicate key "decision"`}}},
		// A key in another case: encoding/json v1 would read it as the
		// receipt's decision, an exact reader would not; neither is verified.
		{name: "receipt with a case-variant key", checked: n - 1, input: edit(good, func(l []string) []string {
			l[rec(5)] = strings.Replace(l[rec(5)], `"decision":"`, `"Decision":"quarantine","decision":"`, 1)
			return l
		}), want: []wantErr{{5, `malformed receipt: unknown key "Decision"`}}},
		{name: "header with a repeated key", input: edit(good, func(l []string) []string {
			l[0] = strings.Replace(l[0], `"tenant_id":"t1"`, `"tenant_id":"t2","tenant_id":"t1"`, 1)
			return l
		}), want: []wantErr{{-1, `malformed header: duplicate key "tenant_id"`}}},
		{name: "header with a case-variant key", input: edit(good, func(l []string) []string {
			l[0] = strings.Replace(l[0], `"tenant_id":"t1"`, `"Tenant_ID":"t2","tenant_id":"t1"`, 1)
			return l
		}), want: []wantErr{{-1, `malformed header: unknown key "Tenant_ID"`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := receipt.VerifyExport(strings.NewReader(tt.input))
			if err != nil {
				t.Fatalf("VerifyExport: %v", err)
			}
			checkErrs(t, rep.Errors, tt.want)
			if rep.Valid != (len(tt.want) == 0) {
				t.Fatalf("Valid = %v with errors %+v", rep.Valid, rep.Errors)
			}
			if rep.Checked != tt.checked {
				t.Fatalf("Checked = %d, want %d", rep.Checked, tt.checked)
			}
		})
	}
}

func TestVerifyExportReadErrors(t *testing.T) {
	// An over-long header is a failure of the file, not of the read.
	long := `{"format":"svc-receipts-export-1","tenant_id":"` + strings.Repeat("x", 2<<20) + `"}` + "\n"
	rep, err := receipt.VerifyExport(strings.NewReader(long))
	if err != nil {
		t.Fatalf("over-long header: error = %v", err)
	}
	checkErrs(t, rep.Errors, []wantErr{{-1, "malformed header: line longer than 1048576 bytes"}})
	if rep.Valid || rep.ErrorCount != 1 {
		t.Fatalf("over-long header: valid %v, %d errors", rep.Valid, rep.ErrorCount)
	}
	r := io.MultiReader(strings.NewReader(`{"format":"svc-receipts-export-1"`), errReader{})
	if _, err := receipt.VerifyExport(r); err == nil || !strings.Contains(err.Error(), "connection reset") {
		t.Fatalf("failing reader: error = %v", err)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }
