package main

import (
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"svc/config"
	"svc/node"
)

// startInProcess builds the node of vars in this test process, as serve
// does (the same config, store and node.New), and starts it on its
// loopback ports. Its log goes to s.stderr, the bootstrap token to
// s.stdout. It returns nil when a port was taken meanwhile.
func startInProcess(t testing.TB, s *server, vars map[string]string) *server {
	t.Helper()
	if _, set := vars["SVC_MEMORY_LIMIT_MIB"]; !set {
		// The memory limit is process-wide, and this process is the test
		// run with its several nodes, not one gateway.
		vars["SVC_MEMORY_LIMIT_MIB"] = "0"
	}
	cfg, err := config.Load(func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		t.Fatalf("in-process node: invalid configuration: %v", err)
	}
	log := newLogger(cfg, s.stderr)
	ctx := context.Background()
	store, err := openNodeStore(ctx, cfg, log, true)
	if err != nil {
		t.Fatalf("in-process node: open the database: %v", err)
	}
	n, err := node.New(ctx, node.Options{Config: cfg, Store: store, Log: log, Stdout: s.stdout, Version: version})
	if err != nil {
		_ = store.Close()
		t.Fatalf("in-process node: %v\nlog:\n%s", err, s.stderr.String())
	}
	if err := n.Start(); err != nil {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_ = n.Shutdown(sctx)
		cancel()
		_ = store.Close()
		if strings.Contains(err.Error(), "address already in use") {
			t.Logf("in-process node: a port was taken meanwhile; trying others")
			return nil
		}
		t.Fatalf("in-process node: start: %v", err)
	}
	s.node, s.store, s.shutdownTimeout = n, store, cfg.ShutdownTimeout
	failed := n.Failed()
	go func() {
		// A listener that stops serving before stop is a failure, as the
		// binary's exit would be.
		if err := <-failed; err != nil && !s.isHalted() {
			_, _ = fmt.Fprintf(s.stderr, "in-process node: listener failed: %v\n", err)
		}
	}()
	t.Cleanup(func() {
		s.stop(t)
		if t.Failed() {
			t.Logf("in-process svc %s log:\n%s", s.base, s.stderr.String())
		}
	})
	return s
}

// stopInProcess shuts the node down within its SVC_SHUTDOWN_TIMEOUT_SECS
// and closes its store, as serve does after SIGTERM; s.exit is 0 when the
// shutdown was clean, 1 otherwise. A shutdown still running after 15 s is
// a failure, reported with the test process's goroutines.
func (s *server) stopInProcess(t testing.TB) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.shutdownTimeout)
		defer cancel()
		done <- s.node.Shutdown(ctx)
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
	s.exit = 0
	if err != nil {
		s.exit = 1
		_, _ = fmt.Fprintf(s.stderr, "in-process node: shutdown: %v\n", err)
	}
	if cerr := s.store.Close(); cerr != nil {
		_, _ = fmt.Fprintf(s.stderr, "in-process node: close the store: %v\n", cerr)
	}
	close(s.done)
}

// isHalted reports whether stop was called.
func (s *server) isHalted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.halted
}
