// Package cli is the svc command line (cmd/svc is its main): serve,
// migrate, tenants create, the offline verify-receipts and verify-pack,
// version. Tests run it in process (Run), as the binary would.
package cli

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"

	"svc/config"
	"svc/control"
	"svc/evidencepack"
	"svc/node"
	"svc/persistence"
	"svc/receipt"
	"svc/receiptlog"
)

// Exit codes.
const (
	exitOK     = 0
	exitError  = 1
	exitConfig = 2
)

func usage(w io.Writer) {
	_, _ = fmt.Fprintln(w, "usage: svc [serve] | svc migrate | svc tenants create NAME | svc verify-receipts [-public-key BASE64] [-checkpoint FILE] FILE | svc verify-pack [-public-key BASE64] FILE | svc policy test DIR | svc policy simulate [flags] DIR | svc version")
}

// Run runs the command line args (without the program name) of the
// build version, writing to stdout and stderr, and returns the exit code:
// 0, 1 (an error, an invalid verification) or 2 (usage or configuration).
func Run(version string, args []string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 {
		cmd = args[0]
	}
	switch cmd {
	case "version", "--version", "-v":
		_, _ = fmt.Fprintln(stdout, "svc", version)
		return exitOK
	case "help", "--help", "-h":
		usage(stdout)
		return exitOK
	case "verify-receipts":
		return verifyReceipts(args[1:], stdout, stderr)
	case "verify-pack":
		return verifyPack(args[1:], stdout, stderr)
	case "policy":
		return policyCmd(args[1:], stdout, stderr)
	case "serve", "migrate", "tenants":
	default:
		_, _ = fmt.Fprintf(stderr, "svc: unknown command %q\n", cmd)
		usage(stderr)
		return exitConfig
	}
	if cmd == "tenants" && (len(args) != 3 || args[1] != "create" || args[2] == "") {
		_, _ = fmt.Fprintln(stderr, "usage: svc tenants create NAME")
		return exitConfig
	}
	cfg, err := config.FromEnvironment()
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "svc: invalid configuration:")
		_, _ = fmt.Fprintln(stderr, err)
		return exitConfig
	}
	log := node.NewLogger(cfg, stderr)
	ctx := context.Background()
	store, err := node.OpenStore(ctx, cfg, log, cmd == "serve")
	if err != nil {
		log.Error("cannot open the database", "backend", cfg.DBBackend, "error", err)
		return exitError
	}
	defer func() { _ = store.Close() }()
	switch cmd {
	case "migrate":
		_, _ = fmt.Fprintf(stdout, "migrations applied (%s)\n", cfg.DBBackend)
		return exitOK
	case "tenants":
		t, tok, err := control.NewTenant(ctx, store, args[2], "cli")
		if errors.Is(err, persistence.ErrConflict) {
			_, _ = fmt.Fprintf(stderr, "svc: a tenant named %q already exists\n", args[2])
			return exitError
		}
		if err != nil {
			log.Error("cannot create the tenant", "error", err)
			return exitError
		}
		_, _ = fmt.Fprintf(stdout, "tenant_id: %s\nname: %s\noperator_token: %s\n(the token is shown once; it has the admin role)\n", t.ID, t.Name, tok)
		return exitOK
	}
	if err := serve(cfg, store, log, stdout, version); err != nil {
		log.Error("gateway stopped with an error", "error", err)
		return exitError
	}
	return exitOK
}

// serve runs a node until SIGTERM or SIGINT, or until a listener fails,
// then shuts it down within SVC_SHUTDOWN_TIMEOUT_SECS.
func serve(cfg *config.Config, store persistence.Store, log hclog.Logger, stdout io.Writer, version string) error {
	n, err := node.New(context.Background(), node.Options{Config: cfg, Store: store, Log: log, Stdout: stdout, Version: version})
	if err != nil {
		return err
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	var runErr error
	if runErr = n.Start(); runErr == nil {
		select {
		case sig := <-sigs:
			log.Info("shutting down", "signal", sig.String())
		case err := <-n.Failed():
			if !errors.Is(err, http.ErrServerClosed) {
				runErr = err
				log.Error("listener failed; shutting down", "error", err)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	_ = n.Shutdown(ctx) // what did not stop cleanly is logged
	return runErr
}

// verifyReceipts is `svc verify-receipts [-public-key BASE64] FILE`: it verifies an export of
// GET /v1/receipts/export offline (no server, no database) and exits 0 when
// every receipt, link, count and the head hash check out, 1 otherwise. It
// reads the file as a stream: memory and output stay bounded whatever its
// size, listing the first receipt.MaxReportedErrors failures and counting
// them all.
func verifyReceipts(args []string, stdout, stderr io.Writer) int {
	want, f, code, checkpointFile := openVerified("verify-receipts", "the receipts", "the export is checked against the key its own header names", args, stderr)
	if f == nil {
		return code
	}
	defer func() { _ = f.Close() }()
	var fold *receiptlog.Fold
	var cp receiptlog.Checkpoint
	var signedCP []byte
	if checkpointFile != "" {
		var err error
		if signedCP, err = os.ReadFile(checkpointFile); err != nil {
			_, _ = fmt.Fprintf(stderr, "svc: %v\n", err)
			return exitError
		}
		if cp, err = receiptlog.ReadCheckpoint(signedCP); err != nil {
			_, _ = fmt.Fprintf(stderr, "svc: -checkpoint: %v\n", err)
			return exitConfig
		}
		fold = receiptlog.NewFold(cp)
	}
	var each func(receipt.Receipt)
	if fold != nil {
		each = func(r receipt.Receipt) { fold.Add(r.Seq, r.ReceiptHash) }
	}
	rep, err := receipt.VerifyExportEach(f, each)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "svc: %v\n", err)
		return exitError
	}
	keyID := rep.KeyID
	if keyID == "" {
		keyID = "(unsigned)"
	}
	_, _ = fmt.Fprintf(stdout, "tenant_id: %s\nreceipts: %d\nchecked: %d\nhead_hash: %s\nkey_id: %s\n",
		printable(rep.TenantID), rep.Count, rep.Checked, printable(rep.HeadHash), printable(keyID))
	for _, e := range rep.Errors {
		_, _ = fmt.Fprintf(stdout, "error: index %d receipt %s: %s\n", e.Index, printable(e.ReceiptID), printable(e.Error))
	}
	valid := rep.Valid
	listed, total := len(rep.Errors), rep.ErrorCount
	if want != nil && !want.Equal(rep.PublicKey) {
		_, _ = fmt.Fprintf(stdout, "error: the export is signed with key_id %s, not with the -public-key given (key_id %s)\n", printable(keyID), receipt.KeyID(want))
		valid = false
		listed++
		total++
	}
	if fold != nil {
		_, _ = fmt.Fprintf(stdout, "checkpoint: %s, %d receipts\n", printable(cp.Origin), cp.Size)
		for _, problem := range checkpointProblems(fold, signedCP, cp.Origin, want, rep.PublicKey) {
			_, _ = fmt.Fprintf(stdout, "error: checkpoint: %s\n", printable(problem))
			valid = false
			listed++
			total++
		}
	}
	if listed < total {
		_, _ = fmt.Fprintf(stdout, "errors: %d (the first %d of the receipts' are listed)\n", total, receipt.MaxReportedErrors)
	} else {
		_, _ = fmt.Fprintf(stdout, "errors: %d\n", total)
	}
	if !valid {
		_, _ = fmt.Fprintln(stdout, "INVALID")
		return exitError
	}
	_, _ = fmt.Fprintln(stdout, "VALID")
	return exitOK
}

// checkpointProblems checks a checkpoint against the export folded into
// fold: its signature, with the -public-key given or else the key the
// export's header names (the log's note key is the receipt key), and its
// tree.
func checkpointProblems(fold *receiptlog.Fold, signed []byte, origin string, pinned, header ed25519.PublicKey) []string {
	var out []string
	key := pinned
	if key == nil {
		key = header
	}
	if key == nil {
		out = append(out, "an unsigned export names no key to check the checkpoint's signature with: give -public-key")
	} else if vkey, err := receiptlog.VerifierKeyFor(origin, key); err != nil {
		out = append(out, err.Error())
	} else if _, err := receiptlog.OpenCheckpoint(signed, vkey, origin); err != nil {
		out = append(out, "its signature does not verify with the receipt key: "+err.Error())
	}
	if err := fold.Result(); err != nil {
		out = append(out, err.Error())
	}
	return out
}

// verifyPack checks an evidence pack offline: its manifest, its kind's
// files, every file's SHA-256 and size, no unlisted file, no member name
// that leaves the directory it is unpacked into, the manifest's
// signature, and the receipt log checkpoint it carries (its signature,
// and its receipts in its tree). A valid pack's origin line says what the verdict proves: an
// unsigned pack, its integrity only.
func verifyPack(args []string, stdout, stderr io.Writer) int {
	want, f, code, _ := openVerified("verify-pack", "the pack", "a signed pack is checked against the key its own manifest names", args, stderr)
	if f == nil {
		return code
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "svc: %v\n", err)
		return exitError
	}
	rep, err := evidencepack.Verify(f, st.Size(), want)
	if err != nil {
		_, _ = fmt.Fprintf(stdout, "error: %v\nINVALID\n", err)
		return exitError
	}
	keyID := rep.KeyID
	if !rep.Signed {
		keyID = "(unsigned)"
	}
	_, _ = fmt.Fprintf(stdout, "kind: %s\ntenant_id: %s\nfiles: %d\nkey_id: %s\n", printable(rep.Kind), printable(rep.TenantID), rep.Files, printable(keyID))
	if c := rep.Checkpoint; c != nil {
		_, _ = fmt.Fprintf(stdout, "checkpoint: %s, %d receipts; %d of the pack's receipts proven in its tree\n", printable(c.Origin), c.Size, c.Proven)
		if len(c.Cosigners) > 0 {
			names := make([]string, len(c.Cosigners))
			for i, n := range c.Cosigners {
				names[i] = printable(n)
			}
			_, _ = fmt.Fprintf(stdout, "cosigned by: %s (not checked offline: check them with the witnesses' keys)\n", strings.Join(names, ", "))
		}
	}
	for _, p := range rep.Problems {
		_, _ = fmt.Fprintf(stdout, "error: %s\n", printable(p))
	}
	if !rep.Valid() {
		_, _ = fmt.Fprintln(stdout, "INVALID")
		return exitError
	}
	switch {
	case !rep.Signed:
		_, _ = fmt.Fprintln(stdout, "origin: NOT PROVEN: the pack is unsigned, so VALID shows its integrity only "+
			"(its files are those its manifest lists, unchanged); anyone can make such a pack, and nothing in it shows who made it")
	case rep.Pinned:
		_, _ = fmt.Fprintf(stdout, "origin: signed with the -public-key given (key_id %s)\n", printable(rep.KeyID))
	default:
		_, _ = fmt.Fprintf(stdout, "origin: signed with key_id %s, the key its own manifest names; "+
			"only -public-key (GET /v2/receipts/public-key) shows that key is the gateway's\n", printable(rep.KeyID))
	}
	_, _ = fmt.Fprintln(stdout, "VALID")
	return exitOK
}

// printable returns s as it is when every rune of it is printable (no
// control character, no line break, valid UTF-8), quoted otherwise: text
// from the file being verified never prints a line of its own, such as a
// "VALID" above an INVALID verdict.
func printable(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return !strconv.IsPrint(r) }) {
		return s
	}
	return strconv.Quote(s)
}

// openVerified parses the flags of an offline verification command
// (-public-key, verify-receipts' -checkpoint, and one FILE) and opens the
// file. A nil file comes with the exit code, the problem written to
// stderr.
func openVerified(cmd, what, without string, args []string, stderr io.Writer) (ed25519.PublicKey, *os.File, int, string) {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	pinned := fs.String("public-key", "", "base64 Ed25519 public key "+what+" must be signed with (GET /v2/receipts/public-key); without it "+without)
	checkpoint := new(string)
	if cmd == "verify-receipts" {
		checkpoint = fs.String("checkpoint", "", "a receipt log checkpoint (GET /v2/receipts/checkpoint, saved): its signature is checked, and the export's "+
			"first receipts must be the tree it signs (CONTRACT §17)")
	}
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		_, _ = fmt.Fprintf(stderr, "usage: svc %s [-public-key BASE64]%s FILE\n", cmd, map[bool]string{true: " [-checkpoint FILE]"}[cmd == "verify-receipts"])
		return nil, nil, exitConfig, ""
	}
	var want ed25519.PublicKey
	if *pinned != "" {
		raw, err := base64.StdEncoding.DecodeString(*pinned)
		if err != nil || len(raw) != ed25519.PublicKeySize {
			_, _ = fmt.Fprintln(stderr, "svc: -public-key must be the base64 of a 32-byte Ed25519 public key")
			return nil, nil, exitConfig, ""
		}
		want = raw
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "svc: %v\n", err)
		return nil, nil, exitError, ""
	}
	return want, f, exitOK, *checkpoint
}
