// Command refdriver is the reference SDK conformance driver (CONTRACT §14):
// it answers every operation of the driver protocol with svc's own Go code
// (svc/canonical, svc/receipt and the reference functions of
// svc/sdk/conformance). TestDrivers runs it over every vector, which shows
// that the vectors, the runner and the Go reference agree; an SDK author can
// also read it as a worked example of the protocol.
//
// It reads one JSON object a line on standard input and writes one JSON
// object a line on standard output, in order, and exits 0 at the end of
// its input. A line it cannot handle is answered {"error": "<code>"}; it
// never stops early.
package main

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"svc/canonical"
	"svc/receipt"
	"svc/sdk/conformance"
)

// maxLine bounds one input line; the vectors' lines are a few KiB.
const maxLine = 16 << 20

func main() {
	if err := serve(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "refdriver:", err)
		os.Exit(1)
	}
}

// serve answers every line of in on out.
func serve(in io.Reader, out io.Writer) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for sc.Scan() {
		if err := enc.Encode(answer(sc.Bytes())); err != nil {
			return err
		}
		// One answer a line as it is computed: a runner may read each answer
		// before it writes the next input.
		if err := w.Flush(); err != nil {
			return err
		}
	}
	return sc.Err()
}

// request is one input line; the fields an operation does not use are
// ignored. A field that is absent stays nil.
type request struct {
	Op             string          `json:"op"`
	Value          json.RawMessage `json:"value"`
	ToolCall       json.RawMessage `json:"tool_call"`
	Body           json.RawMessage `json:"body"`
	SigningKey     *string         `json:"signing_key"`
	Parameters     json.RawMessage `json:"parameters"`
	RedactedFields *[]string       `json:"redacted_fields"`
	Receipt        json.RawMessage `json:"receipt"`
	PublicKey      *string         `json:"public_key"`
	Status         *int            `json:"status"`
	Headers        json.RawMessage `json:"headers"`
	Proof          json.RawMessage `json:"proof"`
	Checkpoint     *string         `json:"checkpoint"`
}

// failure is the answer to a line the driver cannot handle.
type failure struct {
	Error string `json:"error"`
}

func fail(code string) failure { return failure{Error: code} }

// answer handles one line.
func answer(line []byte) any {
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		return fail("invalid_request")
	}
	switch req.Op {
	case "canonicalize":
		if req.Value == nil {
			return fail("missing_field")
		}
		b, err := canonical.JCS(req.Value)
		if err != nil {
			return fail("invalid_json")
		}
		return map[string]string{"canonical": string(b)}
	case "action_hash":
		if req.ToolCall == nil {
			return fail("missing_field")
		}
		var tc canonical.ToolCall
		if err := json.Unmarshal(req.ToolCall, &tc); err != nil {
			return fail("invalid_tool_call")
		}
		h, err := canonical.ActionHash(tc)
		if err != nil {
			return fail("invalid_tool_call")
		}
		return map[string]string{"action_hash": h}
	case "sign":
		var body string
		if req.Body == nil || req.SigningKey == nil || json.Unmarshal(req.Body, &body) != nil {
			return fail("missing_field")
		}
		h, err := conformance.Sign(*req.SigningKey, body)
		if err != nil {
			return fail("invalid_signing_key")
		}
		return map[string]string{"header": h}
	case "redact":
		var params map[string]any
		if req.Parameters == nil || req.RedactedFields == nil || json.Unmarshal(req.Parameters, &params) != nil {
			return fail("missing_field")
		}
		out, err := conformance.Redact(params, *req.RedactedFields)
		if errors.Is(err, conformance.ErrInvalidRedactionPath) {
			return fail(conformance.InvalidRedactionPath)
		}
		if err != nil {
			return fail("internal")
		}
		return map[string]any{"parameters": out}
	case "verify_receipt":
		var r receipt.Receipt
		if req.Receipt == nil || req.PublicKey == nil || decodeStrict(req.Receipt, &r) != nil {
			return fail("missing_field")
		}
		pub, err := conformance.DecodeBase64(*req.PublicKey)
		if err != nil {
			return fail("invalid_public_key")
		}
		hashValid, sigValid := conformance.VerifyReceipt(r, pub)
		return map[string]bool{"hash_valid": hashValid, "signature_valid": sigValid}
	case "verify_inclusion":
		var r receipt.Receipt
		var proof conformance.InclusionProof
		if req.Receipt == nil || req.PublicKey == nil || req.Proof == nil || req.Checkpoint == nil ||
			decodeStrict(req.Receipt, &r) != nil || decodeStrict(req.Proof, &proof) != nil {
			return fail("missing_field")
		}
		pub, err := conformance.DecodeBase64(*req.PublicKey)
		if err != nil || len(pub) != ed25519.PublicKeySize {
			return fail("invalid_public_key")
		}
		cpValid, proofValid := conformance.VerifyInclusion(r, proof, *req.Checkpoint, pub)
		return map[string]bool{"checkpoint_valid": cpValid, "proof_valid": proofValid}
	case "retry":
		if req.Status == nil {
			return fail("missing_field")
		}
		return map[string]bool{"retry": conformance.Retries(*req.Status)}
	}
	return fail("unknown_op")
}

// decodeStrict decodes a JSON object into v, refusing members v does not
// define.
func decodeStrict(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
