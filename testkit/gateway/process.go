package gateway

// The svc binary, for what only a process shows: signals, exit codes,
// SIGKILL, TLS on the binary's own listener.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

var binary struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// Binary is the svc binary, built once per test binary from this
// checkout (with -race when the tests run under it, so a race in the
// gateway fails the test that started it). Main removes it.
func Binary(t testing.TB) string {
	t.Helper()
	binary.once.Do(func() {
		_, here, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(here), "..", "..")
		if binary.dir, binary.err = os.MkdirTemp("", "svc-bin-"); binary.err != nil {
			return
		}
		binary.path = filepath.Join(binary.dir, "svc")
		args := []string{"build", "-o", binary.path}
		if RaceEnabled {
			args = append(args, "-race")
		}
		build := exec.Command("go", append(args, "./cmd/svc")...)
		build.Dir = root
		out, err := build.CombinedOutput()
		if err != nil {
			binary.err = fmt.Errorf("go build ./cmd/svc: %w\n%s", err, out)
		}
	})
	if binary.err != nil {
		t.Fatal(binary.err)
	}
	return binary.path
}

func removeBinary() {
	if binary.dir != "" {
		_ = os.RemoveAll(binary.dir)
	}
}

// FreeAddr is a loopback address free now (another process may take it
// before it is bound: startProcessOn retries).
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// BaseEnv is the process environment without any svc setting.
func BaseEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "SVC_") || strings.HasPrefix(kv, "DATABASE_URL=") || strings.HasPrefix(kv, "GORACE=") {
			continue
		}
		out = append(out, kv)
	}
	if RaceEnabled {
		// A race-built gateway exits (code 66) at its first data race, which
		// fails the test that started it.
		out = append(out, "GORACE=halt_on_error=1")
	}
	return out
}

// StartProcess starts the binary on a fresh database of the backend (two
// clustered processes behind the balancer for ClusterBackend).
func StartProcess(t testing.TB, backend string, env map[string]string) *Server {
	t.Helper()
	if backend == ClusterBackend {
		return startCluster(t, env, true)
	}
	return StartProcessOn(t, DBURLFor(t, backend), env)
}

// StartProcessOn starts the binary on the given database URL, on
// SVC_LISTEN_ADDR when env sets it (a restart on its predecessor's
// address).
func StartProcessOn(t testing.TB, dbURL string, env map[string]string) *Server {
	t.Helper()
	// A port found free can be taken by another test's process before this
	// one binds it: then the server exits at once, and another pair of
	// ports is tried.
	for range 4 {
		if s := tryStartProcessOn(t, dbURL, env); s != nil {
			return s
		}
	}
	t.Fatal("svc could not bind free ports in 4 tries")
	return nil
}

// tryStartProcessOn starts svc on fresh ports; it returns nil when the
// server exited because a port was taken meanwhile.
func tryStartProcessOn(t testing.TB, dbURL string, env map[string]string) *Server {
	t.Helper()
	listen, debug := env["SVC_LISTEN_ADDR"], FreeAddr(t)
	if listen == "" { // a restart passes its predecessor's address
		listen = FreeAddr(t)
	}
	vars := settings(dbURL, env)
	vars["SVC_LISTEN_ADDR"], vars["SVC_DEBUG_ADDR"] = listen, debug
	s := newServer(dbURL)
	s.Base, s.Debug = "http://"+listen, "http://"+debug
	if cert := vars["SVC_TLS_CERT"]; cert != "" {
		// Speak TLS to the server, trusting only its test certificate.
		pemBytes, err := os.ReadFile(cert)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pemBytes)
		s.Base = "https://" + listen
		s.Client.Transport = &http.Transport{MaxIdleConnsPerHost: 4, ForceAttemptHTTP2: true,
			TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	cmd := exec.Command(Binary(t), "serve")
	cmd.Env = BaseEnv()
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = s.Stdout, s.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start svc: %v", err)
	}
	s.Cmd = cmd
	go func() {
		err := cmd.Wait()
		s.Exit = 0
		if err != nil {
			s.Exit = -1
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
				s.Exit = ee.ExitCode()
			}
		}
		close(s.Done)
	}()
	t.Cleanup(func() {
		s.Stop(t)
		if t.Failed() {
			t.Logf("svc %s stdout:\n%s\nsvc stderr:\n%s", s.Base, s.Stdout.String(), s.Stderr.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case <-s.Done:
			if strings.Contains(s.Stderr.String(), "address already in use") {
				t.Logf("svc exited at startup: a port was taken meanwhile; trying others")
				return nil
			}
			t.Fatalf("svc exited during startup (code %d)\nstderr:\n%s", s.Exit, s.Stderr.String())
		default:
		}
		resp, err := s.Client.Get(s.Base + "/startupz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == 200 {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("svc did not answer /startupz 200 within 20s\nstderr:\n%s", s.Stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// RunSvc runs the binary to completion with extra environment (within
// 20 s).
func RunSvc(t testing.TB, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, Binary(t), args...)
	cmd.Env = BaseEnv()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("svc %v did not exit within 20s; stderr %s", args, errb.String())
	}
	code = 0
	if err != nil {
		code = -1
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			code = ee.ExitCode()
		}
	}
	return code, out.String(), errb.String()
}
