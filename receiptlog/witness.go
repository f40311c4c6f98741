package receiptlog

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	cosig "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"

	"svc/outbound"
	"svc/persistence"
)

// Witnesses (C2SP tlog-witness): a witness keeps, for each log it follows,
// the latest checkpoint it cosigned, and cosigns a new one only with a
// consistency proof from that one. A log rewritten or forked after a
// witness cosigned it can no longer get that witness's cosignature: the
// witness refuses, and the refusal is the alarm.
//
// The cosignature keys and lines are read by
// github.com/transparency-dev/formats/note (C2SP tlog-cosignature, the
// timestamped Ed25519 "cosignature/v1"), on top of golang.org/x/mod's
// sumdb/note; nothing here formats or checks a signature by hand.

// WitnessStore is what asking witnesses reads and writes.
type WitnessStore interface {
	Hashes
	RecordWitness(ctx context.Context, tenantID, id string, size int64, status, errText string, at time.Time) error
	AddCosignatures(ctx context.Context, tenantID string, size int64, lines string) error
}

// witnessTimeout bounds one request to a witness; a witness that does
// not answer in time is asked again later.
const witnessTimeout = 10 * time.Second

// Post is the transport that asks witnesses: one POST of body to target
// (outbound.Exchanger, with its guard against private targets).
type Post func(ctx context.Context, target string, body []byte) (outbound.Answer, error)

// HTTP status codes of the witness protocol.
const (
	statusOK            = 200
	statusForbidden     = 403
	statusNotFound      = 404
	statusConflict      = 409
	statusUnprocessable = 422
)

// WitnessVerifier reads a witness's key: a cosignature/v1 verifier key
// (type 0x04) or a plain Ed25519 note key (type 0x01, taken as its
// cosignature/v1 key, as tlog-cosignature allows).
func WitnessVerifier(vkey string) (note.Verifier, error) {
	v, err := cosig.NewVerifierForCosignatureV1(vkey)
	if err != nil {
		return nil, fmt.Errorf("receiptlog: witness key: %w", err)
	}
	return v, nil
}

// WitnessName is the name of a witness's key (its cosignature lines'), or
// the key itself when it is none.
func WitnessName(vkey string) string {
	if v, err := WitnessVerifier(vkey); err == nil {
		return v.Name()
	}
	return vkey
}

// RefusedError is a witness's refusal of a checkpoint as inconsistent
// with the one it cosigned before.
type RefusedError struct {
	// Size is the size of the tree the witness has cosigned, when it said.
	Size   int64
	Reason string
}

func (e *RefusedError) Error() string { return "witness refused the checkpoint: " + e.Reason }

// AskWitness asks witness w to cosign checkpoint c (the tenant's latest),
// adds the cosignature it returns to the stored checkpoint and records
// the witness's answer. It returns a *RefusedError when the witness
// refused c as inconsistent with what it cosigned before, another error
// when it could not be asked or answered wrongly (the witness is recorded
// failing), nil once c is cosigned.
func AskWitness(ctx context.Context, st WitnessStore, post Post, w persistence.ReceiptWitness, c persistence.Checkpoint,
	now time.Time) error {
	size, lines, err := cosign(ctx, st, post, w, c)
	status, text := persistence.WitnessOK, ""
	var refused *RefusedError
	switch {
	case errors.As(err, &refused):
		status, text = persistence.WitnessRefused, err.Error()
	case err != nil:
		status, text, size = persistence.WitnessFailing, err.Error(), w.Size
	}
	if err == nil {
		if aerr := st.AddCosignatures(ctx, c.TenantID, c.Size, lines); aerr != nil {
			return fmt.Errorf("receiptlog: keep cosignature: %w", aerr)
		}
	}
	if rerr := st.RecordWitness(ctx, w.TenantID, w.ID, size, status, text, now); rerr != nil && !errors.Is(rerr, persistence.ErrNotFound) {
		return errors.Join(err, rerr)
	}
	return err
}

// cosign runs the protocol: a request from the size the witness last
// cosigned and, when the witness says it is at another size (409), one
// more from that size. It returns the size the witness has cosigned and
// its verified cosignature lines.
func cosign(ctx context.Context, st Hashes, post Post, w persistence.ReceiptWitness, c persistence.Checkpoint) (int64, string, error) {
	v, err := WitnessVerifier(w.Key)
	if err != nil {
		return w.Size, "", err
	}
	old := w.Size
	for attempt := 0; ; attempt++ {
		if old > c.Size {
			return old, "", &RefusedError{Size: old, Reason: fmt.Sprintf("the witness has cosigned a tree of %d receipts, "+
				"larger than this log's latest checkpoint of %d: receipts were removed", old, c.Size)}
		}
		body, err := addCheckpointBody(ctx, st, c, old)
		if err != nil {
			return w.Size, "", err
		}
		rctx, cancel := context.WithTimeout(ctx, witnessTimeout)
		a, err := post(rctx, strings.TrimSuffix(w.URL, "/")+"/add-checkpoint", body)
		cancel()
		if err != nil {
			return w.Size, "", err
		}
		status, ctype, answer := a.Status, a.ContentType, a.Body
		switch {
		case status == statusOK:
			lines, err := cosignatures(c.Note, answer, v)
			return c.Size, lines, err
		case status == statusConflict && strings.HasPrefix(ctype, "text/x.tlog.size"):
			at, err := strconv.ParseInt(strings.TrimSpace(string(answer)), 10, 64)
			if err != nil || at < 0 {
				return w.Size, "", fmt.Errorf("witness answered 409 with a size that is not one: %.64q", answer)
			}
			switch {
			case at == old && at == c.Size:
				// Asked at the checkpoint's own size, it holds another root.
				return at, "", &RefusedError{Size: at, Reason: fmt.Sprintf("the witness has cosigned another tree of %d receipts "+
					"(another root hash): the log was forked", at)}
			case at == old || attempt > 0:
				return w.Size, "", fmt.Errorf("witness answered 409 at size %d twice", at)
			}
			// Ask again from its size: at the checkpoint's own size (it
			// cosigned this checkpoint already, say, and its answer was
			// lost) the witness cosigns again only the same root; beyond
			// it, the loop refuses.
			old = at
		case status == statusConflict && old == c.Size:
			return old, "", &RefusedError{Size: old, Reason: fmt.Sprintf("the witness has cosigned another tree of %d receipts "+
				"(another root hash): the log was forked", c.Size)}
		case status == statusConflict:
			return w.Size, "", fmt.Errorf("witness answered 409 without its size (%s): %.200s", ctype, answer)
		case status == statusUnprocessable:
			return old, "", &RefusedError{Size: old, Reason: fmt.Sprintf("the consistency proof from the %d receipts it cosigned "+
				"to this log's %d does not verify: receipts it cosigned were changed", old, c.Size)}
		case status == statusForbidden || status == statusNotFound:
			return w.Size, "", fmt.Errorf("witness answered %d: it does not know this log's origin %q or its key", status, originOf(c.Note))
		default:
			return w.Size, "", fmt.Errorf("witness answered %d: %.200s", status, answer)
		}
	}
}

// addCheckpointBody is an add-checkpoint request: "old <size>", the
// consistency proof from that size to c's (none from 0), an empty line,
// then the checkpoint.
func addCheckpointBody(ctx context.Context, st Hashes, c persistence.Checkpoint, old int64) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "old %d\n", old)
	if old > 0 && old < c.Size {
		proof, err := Consistency(ctx, st, c.TenantID, old, c.Size)
		if err != nil {
			return nil, err
		}
		for _, h := range proof {
			b.WriteString(base64.StdEncoding.EncodeToString(h[:]))
			b.WriteByte('\n')
		}
	}
	b.WriteByte('\n')
	b.WriteString(c.Note)
	return b.Bytes(), nil
}

// cosignatures returns the witness's signature lines of an add-checkpoint
// answer that verify, over the checkpoint, with its key (the answer may
// carry others: they are ignored, as tlog-witness says). None: an error.
func cosignatures(checkpoint string, answer []byte, v note.Verifier) (string, error) {
	n, err := note.Open(append([]byte(checkpoint), answer...), note.VerifierList(v))
	if err != nil {
		return "", fmt.Errorf("witness answer holds no cosignature of the checkpoint by %s that verifies: %w", v.Name(), err)
	}
	if _, err := note.Open([]byte(checkpoint), note.VerifierList(v)); err == nil {
		return "", nil // cosigned by this witness already (an earlier answer whose record was lost)
	}
	var lines strings.Builder
	for _, s := range n.Sigs {
		fmt.Fprintf(&lines, "— %s %s\n", s.Name, s.Base64)
	}
	return lines.String(), nil
}

func originOf(n string) string {
	origin, _, _ := strings.Cut(n, "\n")
	return origin
}
