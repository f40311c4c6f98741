// Package testkit is what every test package shares: polling with a
// deadline (Eventually), JSON decoding that fails the test (Obj, Arr,
// Str), random names, and a goroutine-safe buffer. It imports nothing of
// svc, so any package's tests can use it (the gateway harness is
// testkit/gateway).
package testkit

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"sync"
	"testing"
	"time"
)

// SyncBuf is a goroutine-safe output buffer.
type SyncBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func Obj(t testing.TB, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("decode object: %v; body %s", err, raw)
	}
	return m
}

func Arr(t testing.TB, raw []byte) []map[string]any {
	t.Helper()
	var a []map[string]any
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("decode array: %v; body %s", err, raw)
	}
	return a
}

func Str(t testing.TB, m map[string]any, key string) string {
	t.Helper()
	v, ok := m[key].(string)
	if !ok || v == "" {
		t.Fatalf("field %q missing or not a non-empty string in %v", key, m)
	}
	return v
}

// Eventually polls cond until it holds, failing the test when within
// passes first: a condition that converges (a stream, a standby, another
// node, a background flush) is waited for with a deadline, never judged by
// its first answer. It polls every 5 ms at first, backing off to every
// 100 ms, so a fast condition is seen at once and a slow one costs little.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	pause := 5 * time.Millisecond
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(pause)
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// Uniq returns a short random suffix for names.
func Uniq() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// RandomUUID returns a random UUID v4 text.
func RandomUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
