// Package witnesstest starts a real C2SP tlog-witness for tests:
// litewitness (filippo.io/torchwood/cmd/litewitness), on loopback, with
// its key in an ssh-agent served by this process. The binary is built
// once per machine with `go install` (the module proxy is reachable
// where tests run) and kept in the user's cache directory.
package witnesstest

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cosig "github.com/transparency-dev/formats/note"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/mod/sumdb/note"
	_ "modernc.org/sqlite" // the witness's database, written as witnessctl does
)

// Version is the litewitness release the tests run.
const Version = "v0.6.1"

// Witness is a running litewitness.
type Witness struct {
	// URL is its submission prefix.
	URL string
	// Name is its name, the name of its cosignature lines.
	Name string
	// Key is its cosignature/v1 verifier key.
	Key string
	db  string
}

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// Binary returns the path of litewitness, built on first use.
func Binary() (string, error) {
	buildOnce.Do(func() { binary, buildErr = build() })
	return binary, buildErr
}

func build() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "svc-test-tools", "litewitness-"+Version)
	bin := filepath.Join(dir, "litewitness")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	cmd := exec.Command("go", "install", "filippo.io/torchwood/cmd/litewitness@"+Version)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("witnesstest: go install litewitness: %w\n%s", err, out)
	}
	// Several test binaries may build at once: the rename is atomic, and
	// each one's build is the same program.
	if err := os.Rename(filepath.Join(tmp, "litewitness"), bin); err != nil {
		return "", err
	}
	return bin, nil
}

// Start starts a witness named name (a URL-like name such as
// "witness.test/w1") and stops it when the test ends.
func Start(t testing.TB, name string) *Witness {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sock := serveAgent(t, dir, priv)
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	w := &Witness{URL: "http://" + addr, Name: name, db: filepath.Join(dir, "litewitness.db")}
	plain, err := note.NewEd25519VerifierKey(name, pub)
	if err != nil {
		t.Fatal(err)
	}
	if w.Key, err = cosig.VKeyToCosignatureV1(plain); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "-name", name, "-db", w.db, "-ssh-agent", sock, "-key", ssh.FingerprintSHA256(sshPub),
		"-listen", addr)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 5 * time.Second
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logged := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stderr)
		var b strings.Builder
		for s.Scan() {
			b.WriteString(s.Text() + "\n")
		}
		logged <- b.String()
	}()
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("litewitness %s:\n%s", name, <-logged)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(w.URL + "/")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if !strings.Contains(string(body), w.Key) {
				t.Fatalf("witnesstest: litewitness serves a key other than %s:\n%s", w.Key, body)
			}
			return w
		}
		if time.Now().After(deadline) {
			t.Fatalf("witnesstest: litewitness did not start on %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// serveAgent serves an ssh-agent holding priv on a socket in dir.
func serveAgent(t testing.TB, dir string, priv ed25519.PrivateKey) string {
	t.Helper()
	keyring := agent.NewKeyring()
	if err := keyring.Add(agent.AddedKey{PrivateKey: priv, Comment: "witness"}); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				_ = agent.ServeAgent(keyring, c)
			}()
		}
	}()
	return sock
}

// Follow has the witness follow the log of origin, signed by vkey (a
// note verifier key), from size 0: what `witnessctl add-log` and
// `add-key` write.
func (w *Witness) Follow(t testing.TB, origin, vkey string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+w.db+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	empty := sha256.Sum256(nil)
	if _, err := db.Exec(`INSERT INTO log (origin, tree_size, tree_hash) VALUES (?, 0, ?)`, origin,
		base64.StdEncoding.EncodeToString(empty[:])); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO key (origin, key) VALUES (?, ?)`, origin, vkey); err != nil {
		t.Fatal(err)
	}
}

// Size is the size of the latest checkpoint of origin the witness has
// cosigned.
func (w *Witness) Size(t testing.TB, origin string) int64 {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+w.db+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	var n int64
	if err := db.QueryRow(`SELECT tree_size FROM log WHERE origin = ?`, origin).Scan(&n); err != nil && !errors.Is(err, sql.ErrNoRows) {
		t.Fatal(err)
	}
	return n
}

// Fork makes the witness hold another root for origin at the size it has
// cosigned: as if the log had shown it a different tree, so the log's
// next checkpoint is inconsistent with what it cosigned and is refused.
func (w *Witness) Fork(t testing.TB, origin string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+w.db+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	other := sha256.Sum256([]byte("another tree"))
	res, err := db.Exec(`UPDATE log SET tree_hash = ? WHERE origin = ? AND tree_size > 0`, base64.StdEncoding.EncodeToString(other[:]), origin)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("witnesstest: no cosigned checkpoint of %s to fork", origin)
	}
}
