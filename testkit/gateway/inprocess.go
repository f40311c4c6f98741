package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"svc/config"
	"svc/node"
)

// startInProcess builds the node of vars in this test process as serve
// does (the same configuration, node.OpenStore and node.New) and serves it
// on httptest servers (node.Attach). Its log goes to s.Stderr, the
// bootstrap token to s.Stdout.
func startInProcess(t testing.TB, dbURL string, vars map[string]string) *Server {
	t.Helper()
	if _, set := vars["SVC_MEMORY_LIMIT_MIB"]; !set {
		// The memory limit is process-wide, and this process is the test
		// run with its several nodes, not one gateway.
		vars["SVC_MEMORY_LIMIT_MIB"] = "0"
	}
	listen := vars["SVC_LISTEN_ADDR"] // a restart on its predecessor's address
	if listen == "" {
		listen = "127.0.0.1:0"
		vars["SVC_LISTEN_ADDR"] = listen
	}
	if vars["SVC_DEBUG_ADDR"] == "" {
		vars["SVC_DEBUG_ADDR"] = "127.0.0.1:0"
	}
	cfg, err := config.Load(func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		t.Fatalf("in-process node: invalid configuration: %v", err)
	}
	s := newServer(dbURL)
	log := node.NewLogger(cfg, s.Stderr)
	ctx := context.Background()
	store, err := node.OpenStore(ctx, cfg, log, true)
	if err != nil {
		t.Fatalf("in-process node: open the database: %v", err)
	}
	n, err := node.New(ctx, node.Options{Config: cfg, Store: store, Log: log, Stdout: s.Stdout, Version: "dev"})
	if err != nil {
		_ = store.Close()
		t.Fatalf("in-process node: %v\nlog:\n%s", err, s.Stderr.String())
	}
	api := httptest.NewUnstartedServer(nil)
	if listen != "127.0.0.1:0" {
		ln, err := listenAgain(listen)
		if err != nil {
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_ = n.Shutdown(sctx)
			cancel()
			_ = store.Close()
			t.Fatalf("in-process node: listen on %s again: %v", listen, err)
		}
		_ = api.Listener.Close()
		api.Listener = ln
	}
	n.Attach(api.Config)
	api.Start()
	debug := httptest.NewServer(n.DebugHandler())
	s.Base, s.Debug = api.URL, debug.URL
	s.Node, s.Store, s.shutdownTimeout = n, store, cfg.ShutdownTimeout
	s.stopServing = func() { api.Close(); debug.Close() }
	t.Cleanup(func() {
		s.Stop(t)
		if t.Failed() {
			t.Logf("in-process svc %s log:\n%s", s.Base, s.Stderr.String())
		}
	})
	return s
}

// listenAgain listens on the address a stopped node served on: the
// kernel may hold it a moment longer.
func listenAgain(addr string) (net.Listener, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		ln, err := net.Listen("tcp", addr)
		if err == nil || time.Now().After(deadline) {
			return ln, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stopInProcess shuts the node down within its SVC_SHUTDOWN_TIMEOUT_SECS
// (its API server first, as after SIGTERM) and closes its store; s.Exit
// is 0 when the shutdown was clean, 1 otherwise. A shutdown still running
// after 15 s is a failure, reported with the test process's goroutines.
func (s *Server) stopInProcess(t testing.TB) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.shutdownTimeout)
		defer cancel()
		done <- s.Node.Shutdown(ctx)
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(15 * time.Second):
		var b strings.Builder
		_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
		t.Errorf("in-process node did not shut down within 15s; goroutines:\n%s", b.String())
		err = errors.New("shutdown timed out")
		go func() { <-done }()
	}
	s.stopServing()
	s.Exit = 0
	if err != nil {
		s.Exit = 1
		_, _ = fmt.Fprintf(s.Stderr, "in-process node: shutdown: %v\n", err)
	}
	if cerr := s.Store.Close(); cerr != nil {
		_, _ = fmt.Fprintf(s.Stderr, "in-process node: close the store: %v\n", cerr)
	}
	close(s.Done)
}

// IsHalted reports whether Stop was called.
func (s *Server) IsHalted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.halted
}
