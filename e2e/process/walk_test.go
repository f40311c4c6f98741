package process

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"svc/testkit"
	"svc/testkit/gateway"
)

// walkBlocks are the shell blocks of README.md's section "A first approved
// call, in five minutes" that a test can run: all but the first two (which
// start the gateway and export the token it printed), dedented.
func walkBlocks(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	start := strings.Index(text, "## A first approved call, in five minutes")
	if start < 0 {
		t.Fatal("README.md has no section \"A first approved call, in five minutes\"")
	}
	section := text[start:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)\n( *)```sh\n(.*?)\n *```").FindAllStringSubmatch(section, -1) {
		indent := m[1]
		var b strings.Builder
		for _, line := range strings.Split(m[2], "\n") {
			b.WriteString(strings.TrimPrefix(line, indent))
			b.WriteByte('\n')
		}
		blocks = append(blocks, b.String())
	}
	if len(blocks) < 3 || !strings.Contains(blocks[0], "make run") || !strings.Contains(blocks[1], "export OP=") {
		t.Fatalf("the walk's first two blocks are not make run and the token's export: %q", blocks)
	}
	return blocks[2:]
}

// The README's walk, run as written against a gateway started as `make run`
// starts it (SVC_BOOTSTRAP_TENANT=default, SQLite) with a receipt key: an
// agent registered, a policy asking for approval, the call, its approval,
// the approved call allowed once, and the receipts verified offline by
// `svc verify-receipts` with the public key, then against the signed
// checkpoint of the receipt log.
func TestE2EReadmeWalk(t *testing.T) {
	t.Parallel()
	seed := make([]byte, 32)
	for i := range seed {
		seed[i] = byte(i + 7)
	}
	s := gateway.StartProcessOn(t, gateway.DBURLFor(t, "sqlite"), map[string]string{"SVC_BOOTSTRAP_TENANT": "default",
		"SVC_RECEIPT_SIGNING_KEY": base64.StdEncoding.EncodeToString(seed), "SVC_CHECKPOINT_INTERVAL_SECS": "1"})
	var op string
	testkit.Eventually(t, 10*time.Second, "the bootstrap token on stdout", func() bool {
		op = regexp.MustCompile(`svc_op_[A-Za-z0-9_-]{20,}`).FindString(s.Stdout.String())
		return op != ""
	})
	script := "set -euo pipefail\n" + strings.Join(walkBlocks(t), "\n")
	script = strings.ReplaceAll(script, "http://127.0.0.1:8080", s.Base)
	script = strings.ReplaceAll(script, "./bin/svc ", gateway.Binary(t)+" ")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "OP="+op)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("the walk failed: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
	}
	got := out.String()
	for _, want := range []string{`"decision":"require_approval"`, `"reason":"payments_need_a_human"`, `"approval_id":"`,
		`"status":"APPROVED"`, `"decision":"allow"`, `"reason":"approved"`, `"reason":"approval_consumed"`, "VALID", "errors: 0",
		"checkpoint: svc/"} {
		if !strings.Contains(got, want) {
			t.Errorf("the walk's output lacks %s:\n%s", want, got)
		}
	}
	if strings.Contains(got, "(unsigned)") {
		t.Errorf("the walk's receipts are unsigned:\n%s", got)
	}
	if _, err := os.Stat(filepath.Join(cmd.Dir, "receipts.jsonl")); err != nil {
		t.Errorf("the walk wrote no receipts.jsonl: %v", err)
	}
}
