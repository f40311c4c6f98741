package conformance_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/canonical"
)

// sdkRoot is sdk/ at the module root.
var sdkRoot = filepath.Join("..")

// driverTimeout bounds one driver's whole run (every vector);
// SVC_SDK_DRIVER_TIMEOUT (a Go duration) overrides it.
const driverTimeout = 60 * time.Second

// driverCase is one input line and what its answer must be.
type driverCase struct {
	// what names the vector in failure reports: file and entry name.
	what string
	line []byte
	// want is the exact answer (compared as JSON values, RFC 8785);
	// nil for a malformed line, whose answer must be {"error": <non-empty
	// string>}.
	want []byte
}

// TestDrivers runs every SDK's conformance driver (CONTRACT §14), and the
// reference driver, over every vector of testdata/jcs/ and testdata/sdk/,
// plus malformed lines, and checks `svc verify-receipts` against the
// receipt vectors.
func TestDrivers(t *testing.T) {
	cases := driverCases(t)
	t.Logf("%d input lines per driver", len(cases))

	t.Run("refdriver", func(t *testing.T) {
		bin := goBuild(t, "svc/sdk/conformance/refdriver", "refdriver")
		runDriver(t, bin, ".", cases, driverDeadline(t))
	})

	found := 0
	entries, err := os.ReadDir(sdkRoot)
	if err != nil {
		t.Fatal(err)
	}
	require := os.Getenv("SVC_SDK_REQUIRE") == "1"
	for _, e := range entries {
		if !e.IsDir() || e.Name() == "conformance" || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		lang := e.Name()
		dir, err := filepath.Abs(filepath.Join(sdkRoot, lang))
		if err != nil {
			t.Fatal(err)
		}
		driver := filepath.Join(dir, "conformance-driver")
		if executable(driver) {
			found++
			t.Run("sdk/"+lang, func(t *testing.T) { runDriver(t, driver, dir, cases, driverDeadline(t)) })
			continue
		}
		_, testErr := os.Stat(filepath.Join(dir, "test.sh"))
		switch {
		case testErr == nil:
			t.Errorf("sdk/%s has a test.sh but no executable conformance-driver (CONTRACT §14; `make sdk` builds it)", lang)
		case require:
			t.Errorf("sdk/%s has no executable conformance-driver and SVC_SDK_REQUIRE=1 (CONTRACT §14; `make sdk` builds it)", lang)
		default:
			t.Run("sdk/"+lang, func(t *testing.T) {
				t.Skipf("sdk/%s has neither a conformance-driver nor a test.sh yet (an SDK being written); SVC_SDK_REQUIRE=1 makes this a failure", lang)
			})
		}
	}
	if found == 0 {
		if require {
			t.Errorf("no sdk/<language>/conformance-driver found and SVC_SDK_REQUIRE=1: every SDK must ship one (CONTRACT §14; run `make sdk` first)")
		} else {
			t.Run("sdk", func(t *testing.T) {
				t.Skip("no sdk/<language>/conformance-driver yet: only the reference driver ran; SVC_SDK_REQUIRE=1 makes this a failure")
			})
		}
	}

	t.Run("verify-receipts", testVerifyReceiptsCLI)
}

// executable reports whether path is a regular file someone may execute.
func executable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}

// goBuild builds a main package of the module into the test's temporary
// directory.
func goBuild(t *testing.T, pkg, name string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("building %s needs the go command: %v", pkg, err)
	}
	out := filepath.Join(t.TempDir(), name)
	cmd := exec.Command(goBin, "build", "-o", out, pkg)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// readVectors decodes one vector file.
func readVectors[T any](t *testing.T, path string) []T {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	var vs []T
	if err := json.Unmarshal(raw, &vs); err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	if len(vs) == 0 {
		t.Fatalf("%s holds no vectors", path)
	}
	return vs
}

// line encodes one input line (compact, HTML characters unescaped, no
// newline inside).
func line(t *testing.T, v any) []byte {
	t.Helper()
	b := mustJSON(t, v)
	if bytes.ContainsAny(b, "\r\n") {
		t.Fatalf("input line holds a line break: %s", b)
	}
	return b
}

// driverCases reads every vector file and makes the input lines, with
// malformed lines among them.
func driverCases(t *testing.T) []driverCase {
	t.Helper()
	jcsDir := filepath.Join("..", "..", "testdata", "jcs")
	var cs []driverCase
	add := func(what string, in any, want any) {
		cs = append(cs, driverCase{what: what, line: line(t, in), want: mustJSON(t, want)})
	}
	type obj = map[string]any

	for _, v := range readVectors[jcsVector](t, filepath.Join(jcsDir, "vectors.json")) {
		// The raw input text, compacted onto the line: number forms and
		// escapes reach the driver as written.
		add("jcs/vectors.json "+v.Name, obj{"op": "canonicalize", "value": v.Input}, obj{"canonical": v.Canonical})
	}
	for _, v := range readVectors[actionVector](t, filepath.Join(jcsDir, "action_hash.json")) {
		add("jcs/action_hash.json "+v.Name, obj{"op": "action_hash", "tool_call": v.ToolCall}, obj{"action_hash": v.ActionHash})
	}
	malformed := func(what, text string) {
		cs = append(cs, driverCase{what: "malformed line: " + what, line: []byte(text)})
	}
	malformed("not JSON", `this is not JSON`)
	malformed("unknown op", `{"op":"no_such_op","value":1}`)
	for _, v := range readVectors[unicodeVector](t, filepath.Join(vectorDir, "action_hash_unicode.json")) {
		add("sdk/action_hash_unicode.json "+v.Name, obj{"op": "action_hash", "tool_call": v.ToolCall}, obj{"action_hash": v.ActionHash})
	}
	for _, v := range readVectors[signingVector](t, filepath.Join(vectorDir, "signing.json")) {
		add("sdk/signing.json "+v.Name, obj{"op": "sign", "body": v.Body, "signing_key": v.SigningKey}, obj{"header": v.Header})
	}
	malformed("a JSON array, not an object", `["op","sign"]`)
	malformed("no op", `{"body":"{}","signing_key":"AAAA"}`)
	malformed("sign without signing_key", `{"op":"sign","body":"{}"}`)
	malformed("sign without body", `{"op":"sign","signing_key":"7pMA1jXT55HbOCcEprmJ8mw92Zroy/OXbdP6FEunn5c="}`)
	for _, v := range readVectors[redactionVector](t, filepath.Join(vectorDir, "redaction.json")) {
		in := obj{"op": "redact", "parameters": v.Parameters, "redacted_fields": v.RedactedFields}
		if v.Error != "" {
			add("sdk/redaction.json "+v.Name, in, obj{"error": v.Error})
		} else {
			add("sdk/redaction.json "+v.Name, in, obj{"parameters": v.ParametersAfter})
		}
	}
	malformed("canonicalize without value", `{"op":"canonicalize"}`)
	malformed("action_hash without tool_call", `{"op":"action_hash"}`)
	for _, v := range readVectors[receiptVector](t, filepath.Join(vectorDir, "receipts.json")) {
		add("sdk/receipts.json "+v.Name, obj{"op": "verify_receipt", "receipt": v.Receipt, "public_key": v.PublicKey},
			obj{"hash_valid": v.HashValid, "signature_valid": v.SignatureValid})
	}
	malformed("verify_receipt without receipt", `{"op":"verify_receipt","public_key":"ZgtVC861YLyEilnN1dHSqoiP00RiapePcL45/RpnQKc="}`)
	for _, v := range readVectors[inclusionVector](t, filepath.Join(vectorDir, "inclusion.json")) {
		add("sdk/inclusion.json "+v.Name, obj{"op": "verify_inclusion", "receipt": v.Receipt, "proof": v.Proof, "checkpoint": v.Checkpoint,
			"public_key": v.PublicKey}, obj{"checkpoint_valid": v.CheckpointValid, "proof_valid": v.ProofValid})
	}
	malformed("verify_inclusion without proof", `{"op":"verify_inclusion","receipt":{},"checkpoint":"","public_key":"ZgtVC861YLyEilnN1dHSqoiP00RiapePcL45/RpnQKc="}`)
	for _, v := range readVectors[retryVector](t, filepath.Join(vectorDir, "retry.json")) {
		body := v.Body
		if len(body) == 0 {
			body = json.RawMessage("null")
		}
		add("sdk/retry.json "+v.Name, obj{"op": "retry", "status": v.Status, "body": body, "headers": v.Headers}, obj{"retry": v.Retry})
	}
	malformed("retry without status", `{"op":"retry","body":null,"headers":{}}`)
	malformed("op is not a string", `{"op":7}`)
	malformed("not JSON, at the end", `{"op":"canonicalize","value":`)
	return cs
}

// driverDeadline is driverTimeout, or SVC_SDK_DRIVER_TIMEOUT.
func driverDeadline(t *testing.T) time.Duration {
	t.Helper()
	s := os.Getenv("SVC_SDK_DRIVER_TIMEOUT")
	if s == "" {
		return driverTimeout
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("SVC_SDK_DRIVER_TIMEOUT=%q is not a positive Go duration", s)
	}
	return d
}

// reporter is what runDriver reports to: a *testing.T, or the recorder of
// the runner's own test.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	Failed() bool
}

// runDriver starts the driver once in dir, writes every case's line,
// reads one answer line per input in order, and checks them, within
// timeout for the whole run. Every mismatch is reported, by vector name.
func runDriver(t reporter, driver, dir string, cases []driverCase, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, driver)
	cmd.Dir = dir
	killGroup(cmd)
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatalf("%v", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("%v", err)
	}
	var stderr tailBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", driver, err)
	}

	// Write every line while the answers are read, so that neither side
	// waits on a full pipe; then close stdin (end of input).
	var wg sync.WaitGroup
	var writeErr error
	wg.Go(func() {
		w := bufio.NewWriter(stdin)
		for _, c := range cases {
			if _, err := w.Write(append(c.line, '\n')); err != nil {
				writeErr = err
				break
			}
		}
		if err := w.Flush(); err != nil && writeErr == nil {
			writeErr = err
		}
		_ = stdin.Close()
	})

	r := bufio.NewReaderSize(stdout, 1<<20)
	answered := 0
	for _, c := range cases {
		ans, err := r.ReadBytes('\n')
		// A last answer without its newline is still an answer.
		if err != nil && (!errors.Is(err, io.EOF) || len(bytes.TrimSpace(ans)) == 0) {
			t.Errorf("the driver stopped answering after %d of %d lines (next: %s): %v", answered, len(cases), c.what, readFailure(ctx, err))
			break
		}
		answered++
		checkAnswer(t, c, bytes.TrimRight(ans, "\r\n"))
	}
	if answered == len(cases) {
		extra, _ := io.ReadAll(r)
		if len(bytes.TrimSpace(extra)) > 0 {
			t.Errorf("the driver wrote more lines than it was given: %q", clipText(extra))
		}
	} else {
		cancel()
	}
	// Wait closes stdin once the driver is gone, which ends a write still
	// blocked on it.
	waitErr := cmd.Wait()
	wg.Wait()
	switch {
	case ctx.Err() != nil && answered == len(cases):
		t.Errorf("the driver did not exit within %s of its start: %v", timeout, waitErr)
	case ctx.Err() == nil && waitErr != nil:
		t.Errorf("the driver exited with %v (it must exit 0 at the end of its input)", waitErr)
	case writeErr != nil && answered == len(cases):
		t.Errorf("writing to the driver: %v", writeErr)
	}
	if t.Failed() && stderr.Len() > 0 {
		t.Logf("driver stderr (the end of it):\n%s", stderr.String())
	}
}

func readFailure(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (the run's deadline passed: the driver was stopped)", ctx.Err())
	}
	return err
}

// checkAnswer compares one answer line with what the case wants.
func checkAnswer(t reporter, c driverCase, ans []byte) {
	t.Helper()
	got, err := canonical.JCS(ans)
	if err != nil {
		t.Errorf("%s: the answer is not one JSON value (%v): %q", c.what, err, clipText(ans))
		return
	}
	if c.want == nil {
		var e struct {
			Error *string `json:"error"`
		}
		if json.Unmarshal(got, &e) != nil || e.Error == nil || *e.Error == "" {
			t.Errorf("%s: want an {\"error\": <code>} answer, got %s", c.what, clipText(got))
		}
		return
	}
	want, err := canonical.JCS(c.want)
	if err != nil {
		t.Fatalf("%s: the expected answer is not JSON: %v", c.what, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s:\n  got  %s\n  want %s", c.what, clipText(got), want)
	}
}

func clipText(b []byte) string {
	const limit = 2000
	if len(b) > limit {
		return string(b[:limit]) + "..."
	}
	return string(b)
}

// tailBuffer keeps the last 64 KiB written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	const keep = 64 << 10
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > keep {
		b.buf = append([]byte(nil), b.buf[len(b.buf)-keep:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.buf)
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// testVerifyReceiptsCLI runs `svc verify-receipts -public-key KEY EXPORT`
// on every receipt vector's export and requires its verdict (exit 0 VALID,
// 1 INVALID) to be verify_receipts_valid. The binary is $SVC_BIN, or built
// from this module.
func testVerifyReceiptsCLI(t *testing.T) {
	bin := os.Getenv("SVC_BIN")
	if bin == "" {
		if testing.Short() {
			t.Skip("-short: building cmd/svc is skipped; set SVC_BIN to check verify-receipts")
		}
		bin = goBuild(t, "svc/cmd/svc", "svc")
	}
	for _, v := range readVectors[receiptVector](t, filepath.Join(vectorDir, "receipts.json")) {
		file := filepath.Join(vectorDir, filepath.FromSlash(v.Export))
		if _, err := os.Stat(file); err != nil {
			t.Errorf("%s: export %s: %v", v.Name, v.Export, err)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		//nolint:gosec // G702: the binary is $SVC_BIN or the one this test built; the arguments come from the committed vectors
		out, err := exec.CommandContext(ctx, bin, "verify-receipts", "-public-key", v.PublicKey, file).CombinedOutput()
		cancel()
		var exit *exec.ExitError
		valid := err == nil
		switch {
		case err == nil:
		case errors.As(err, &exit) && exit.ExitCode() == 1:
		default:
			t.Errorf("%s: svc verify-receipts: %v\n%s", v.Name, err, out)
			continue
		}
		if valid != v.VerifyReceiptsValid {
			t.Errorf("%s: svc verify-receipts says valid=%v, the vector says %v\n%s", v.Name, valid, v.VerifyReceiptsValid, out)
		}
		last := "INVALID"
		if valid {
			last = "VALID"
		}
		if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); lines[len(lines)-1] != last {
			t.Errorf("%s: exit status and the last line (%q) disagree", v.Name, lines[len(lines)-1])
		}
	}
}
