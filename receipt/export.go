package receipt

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/hdevalence/ed25519consensus"
)

// ExportFormat is the value of the export header's format member: the
// tenant's whole chain, from seq 1 to its stored head.
const ExportFormat = "svc-receipts-export-1"

// SelectionFormat is the format of a selection: chosen links of a chain in
// seq order (the receipts of an incident's decisions, in its evidence
// pack). Each receipt is verified whole (hash and signature, which cover
// its seq and prev_receipt_hash, so its place in the chain), links between
// receipts of consecutive seq are checked, and the header's head is the
// last receipt of the file. The format is part of the signed header, so a
// selection cannot pass for a whole chain.
const SelectionFormat = "svc-receipts-selection-1"

// maxLineBytes bounds one line of an export; a receipt line is well under
// 1 KiB. A longer line is a failure of its own, read past without being
// held.
const maxLineBytes = 1 << 20

// MaxReportedErrors bounds the receipts' failures that [VerifyExport]
// lists in Report.Errors: the first ones in file order are listed, and
// Report.ErrorCount counts them all. Listing every one would take memory
// and output in proportion to the file (20 million malformed lines once
// took 7 GiB and printed 2 GB).
const MaxReportedErrors = 100

// exportHeader is line 1 of an export.
type exportHeader struct {
	Format    string  `json:"format"`
	TenantID  string  `json:"tenant_id"`
	KeyID     string  `json:"key_id"`
	PublicKey *string `json:"public_key"`
	Count     *int    `json:"count"`
	HeadHash  string  `json:"head_hash"`
	// HeadSeq is the stored chain head's seq. It is absent in unsigned
	// exports written before it was added, whose head is then checked by
	// head_hash alone; a signed export written before header_signature was
	// added is refused (parseHeader): accepting a signed header without its
	// signature would let a rewritten header pass.
	HeadSeq *int64 `json:"head_seq,omitempty"`
	// HeaderSignature signs the header's other members (headerMessage) with
	// the receipts' key; present exactly when the export is signed. Without
	// it, dropping the newest receipts and rewriting count, head_seq and
	// head_hash would leave a file that verifies.
	HeaderSignature *string `json:"header_signature,omitempty"`
}

// headerMessage is what an export's header_signature signs: the format and
// the members that bind the file to the stored chain, NUL-separated. It is
// never 32 bytes long, so it cannot be mistaken for a receipt hash (which
// receipt signatures sign). h.Count is set (WriteExport sets it,
// parseHeader requires it); a missing head_seq signs as -1. The format
// is the header's own, so a selection cannot be relabelled a whole chain.
func headerMessage(h exportHeader) []byte {
	var seq int64 = -1
	if h.HeadSeq != nil {
		seq = *h.HeadSeq
	}
	return fmt.Appendf(nil, "%s header\x00%s\x00%s\x00%d\x00%d\x00%s", h.Format, h.TenantID, h.KeyID, *h.Count, seq, h.HeadHash)
}

// Head is a tenant's stored chain head: the seq and receipt_hash of its
// newest receipt, as the database records it apart from the receipts
// (persistence.ChainHead is this type).
type Head struct {
	Seq  int64
	Hash string
}

// Report is the result of [VerifyExport].
type Report struct {
	// TenantID and Count are the header's.
	TenantID string `json:"tenant_id"`
	Count    int    `json:"count"`
	// Checked is the number of receipts verified.
	Checked int  `json:"checked"`
	Valid   bool `json:"valid"`
	// Errors lists failures in file order: the header's (Index -1), the
	// first MaxReportedErrors of the receipts' lines (Index is the line's
	// place among them, from 0), then the file's own (Index -1: count and
	// head). Text quoted from the file is cut to a few hundred bytes.
	Errors []ChainError `json:"errors"`
	// ErrorCount is the number of failures found, those listed in Errors
	// and those past MaxReportedErrors alike; Valid is ErrorCount == 0.
	ErrorCount int `json:"error_count"`
	// HeadHash is the receipt_hash of the last receipt in the file.
	HeadHash string `json:"head_hash"`
	// KeyID and PublicKey are the header's signing key (empty and nil for
	// an unsigned export). The export names its own key, so a verifier that
	// must rule out a chain re-signed with another key compares PublicKey
	// with the key it trusts (`svc verify-receipts -public-key`).
	KeyID     string            `json:"key_id"`
	PublicKey ed25519.PublicKey `json:"-"`
}

// WriteExport writes rs, which must be tenantID's chain in seq order from
// seq 1 up to head, as an export: the header line, then one receipt per
// line. s is the signer that signed the receipts, or nil when they are
// unsigned; it also signs the header. The header's head_seq and head_hash
// are head's, not computed from rs, so that a receipt missing at the end of
// the stored chain shows when the export is verified.
func WriteExport(w io.Writer, tenantID string, s *Signer, head Head, rs []Receipt) error {
	ew, err := NewExportWriter(w, ExportFormat, tenantID, s, head, len(rs))
	if err != nil {
		return err
	}
	for i := range rs {
		if err := ew.Write(rs[i]); err != nil {
			return err
		}
	}
	return ew.Flush()
}

// ExportWriter writes an export one receipt at a time, so that a chain of
// any length is exported without holding it in memory. The header, written
// first, states how many receipts follow (count) and the head they end at;
// a verifier holds the file to both.
type ExportWriter struct {
	bw  *bufio.Writer
	enc *json.Encoder
}

// NewExportWriter writes the header of an export of format ExportFormat
// (tenantID's whole chain: count receipts from seq 1 to head) or
// SelectionFormat (count chosen links of the chain in seq order, the last
// of which is head) and returns the writer of its receipts.
func NewExportWriter(w io.Writer, format, tenantID string, s *Signer, head Head, count int) (*ExportWriter, error) {
	if format != ExportFormat && format != SelectionFormat {
		return nil, fmt.Errorf("receipt: export: unknown format %q", format)
	}
	h := exportHeader{Format: format, TenantID: tenantID}
	h.Count = &count
	h.HeadHash = head.Hash
	h.HeadSeq = &head.Seq
	if s != nil {
		k := base64.StdEncoding.EncodeToString(s.pub)
		h.PublicKey = &k
		h.KeyID = s.keyID
		sig := base64.StdEncoding.EncodeToString(ed25519.Sign(s.priv, headerMessage(h)))
		h.HeaderSignature = &sig
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(h); err != nil {
		return nil, fmt.Errorf("receipt: export: %w", err)
	}
	return &ExportWriter{bw: bw, enc: enc}, nil
}

// Write adds one receipt line.
func (e *ExportWriter) Write(r Receipt) error {
	if err := e.enc.Encode(r); err != nil {
		return fmt.Errorf("receipt: export: %w", err)
	}
	return nil
}

// Flush writes what is buffered; call it after the last receipt.
func (e *ExportWriter) Flush() error {
	if err := e.bw.Flush(); err != nil {
		return fmt.Errorf("receipt: export: %w", err)
	}
	return nil
}

// VerifyExport reads an export and verifies it: the header, every receipt,
// every link from the chain head, every tenant_id against the header's, the
// receipt count and the head hash, with signatures checked against the
// header's public key. Problems with the content (a line longer than 1 MiB
// among them) are failures in the report, of which the first
// MaxReportedErrors are listed and all are counted; the error result is
// only for a reader that fails. Memory is bounded whatever the input's
// size: one line of at most 1 MiB, one batch of signatures, and the
// failures listed.
func VerifyExport(r io.Reader) (Report, error) { return VerifyExportEach(r, nil) }

// VerifyExportEach is VerifyExport, calling each (when not nil) with every
// well-formed receipt line in file order, whether it verifies or not (what
// a check of the receipt log's checkpoint folds, receiptlog).
func VerifyExportEach(r io.Reader, each func(Receipt)) (Report, error) {
	var rep Report
	lr := newLineReader(r, maxLineBytes)
	// nextLine returns the next line that is not blank, trimmed, or
	// tooLong; ok is false at the end of the input or on a read error.
	var readErr error
	nextLine := func() (line []byte, tooLong, ok bool) {
		for {
			l, long, err := lr.next()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					readErr = err
				}
				return nil, false, false
			}
			if long {
				return nil, true, true
			}
			if l = bytes.TrimSpace(l); len(l) > 0 {
				return l, false, true
			}
		}
	}
	fileErr := func(msg string) {
		rep.Errors = append(rep.Errors, ChainError{Index: -1, Error: msg})
		rep.ErrorCount++
	}
	finish := func() (Report, error) {
		if readErr != nil {
			return Report{}, fmt.Errorf("receipt: read export: %w", readErr)
		}
		rep.Valid = rep.ErrorCount == 0
		return rep, nil
	}

	// Line 1: the header.
	line, tooLong, ok := nextLine()
	switch {
	case !ok:
		fileErr("missing header")
		return finish()
	case tooLong:
		fileErr(fmt.Sprintf("malformed header: line longer than %d bytes", maxLineBytes))
		return finish()
	}
	h, pub, err := parseHeader(line)
	if err != nil {
		fileErr(clip(err.Error()))
		return finish()
	}
	rep.TenantID = h.TenantID
	rep.Count = *h.Count
	rep.KeyID, rep.PublicKey = h.KeyID, pub
	if pub != nil && KeyID(pub) != h.KeyID {
		fileErr("header key_id does not match public_key")
	}
	if pub != nil && !verifyHeader(h, pub) {
		fileErr("header signature invalid")
	}

	// The receipts, from the chain head.
	v := chainVerifier{pub: pub, tenant: h.TenantID, expectHead: h.Format == ExportFormat, gaps: h.Format == SelectionFormat,
		keep: MaxReportedErrors}
	lines, headHash, lastSeq := verifyReceiptLines(&v, nextLine, each)
	rep.HeadHash = headHash
	v.finish()
	rep.Checked = v.checked
	rep.Errors = append(rep.Errors, v.errs...)
	rep.ErrorCount += v.total
	if lines != rep.Count {
		fileErr("count mismatch")
	}
	if rep.HeadHash != h.HeadHash {
		fileErr("head hash mismatch")
	}
	if h.HeadSeq != nil && lastSeq != *h.HeadSeq {
		fileErr("head seq mismatch")
	}
	return finish()
}

// verifyReceiptLines adds every receipt line after the header to v, a
// malformed one (or one longer than maxLineBytes) as a failure. It returns
// how many lines there were, the receipt_hash of the last one ("" when the
// last line was malformed) and the seq of the last well-formed one.
func verifyReceiptLines(v *chainVerifier, nextLine func() (line []byte, tooLong, ok bool), each func(Receipt)) (lines int, headHash string, lastSeq int64) {
	for {
		line, tooLong, ok := nextLine()
		if !ok {
			break
		}
		i := lines
		lines++
		var rec Receipt
		var err error
		if tooLong {
			err = fmt.Errorf("line longer than %d bytes", maxLineBytes)
		} else {
			err = decodeLine(line, &rec)
		}
		if err != nil {
			v.failLazy(i, "", 0, func() string { return "malformed receipt: " + err.Error() })
			v.skip()
			headHash = ""
			continue
		}
		if each != nil {
			each(rec)
		}
		v.add(i, rec)
		headHash, lastSeq = rec.ReceiptHash, rec.Seq
	}
	return lines, headHash, lastSeq
}

// parseHeader decodes and checks an export's header line. pub is nil when
// the export is unsigned.
func parseHeader(line []byte) (exportHeader, ed25519.PublicKey, error) {
	var h exportHeader
	if err := decodeLine(line, &h); err != nil {
		return h, nil, fmt.Errorf("malformed header: %w", err)
	}
	switch {
	case h.Format != ExportFormat && h.Format != SelectionFormat:
		return h, nil, fmt.Errorf("unsupported export format %q", h.Format)
	case h.TenantID == "":
		return h, nil, errors.New("malformed header: tenant_id missing")
	case h.Count == nil || *h.Count < 0:
		return h, nil, errors.New("malformed header: count missing or negative")
	case h.HeadHash != "" && !isHash(h.HeadHash):
		return h, nil, errors.New("malformed header: head_hash is not 64 lower-case hex characters")
	}
	if h.PublicKey == nil {
		switch {
		case h.KeyID != "":
			return h, nil, errors.New("malformed header: key_id without public_key")
		case h.HeaderSignature != nil:
			return h, nil, errors.New("malformed header: header_signature without public_key")
		}
		return h, nil, nil
	}
	if h.HeaderSignature == nil {
		return h, nil, errors.New("malformed header: a signed export needs header_signature")
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(*h.PublicKey)
	if err != nil || len(raw) != ed25519.PublicKeySize {
		return h, nil, errors.New("malformed header: public_key is not a base64 Ed25519 public key")
	}
	return h, ed25519.PublicKey(raw), nil
}

// verifyHeader checks h's header_signature against pub.
func verifyHeader(h exportHeader, pub ed25519.PublicKey) bool {
	sig, err := base64.StdEncoding.Strict().DecodeString(*h.HeaderSignature)
	return err == nil && len(sig) == ed25519.SignatureSize && ed25519consensus.Verify(pub, headerMessage(h), sig)
}

// decodeLine decodes one export line strictly (encoding/json/v2
// semantics, go-json-experiment/json): keys match exactly, an object that
// names a key twice is malformed, a key the format does not define is
// malformed, and the text must be UTF-8. encoding/json v1 keeps the last
// of two equal keys and matches "Decision" to "decision"; a reader that
// keeps the first, or matches exactly (jq, Python, JavaScript), would read
// another receipt than the one verified.
func decodeLine(line []byte, v any) error {
	err := jsonv2.Unmarshal(line, v, jsonv2.RejectUnknownMembers(true))
	var se *jsontext.SyntacticError
	var me *jsonv2.SemanticError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se) && errors.Is(se.Err, jsontext.ErrDuplicateName):
		return fmt.Errorf("duplicate key %q", se.JSONPointer.LastToken())
	case errors.As(err, &me) && errors.Is(me.Err, jsonv2.ErrUnknownName):
		return fmt.Errorf("unknown key %q", me.JSONPointer.LastToken())
	}
	return err
}
