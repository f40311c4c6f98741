package persistence

import (
	"context"
	"encoding/hex"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// slowTokens is a Store whose token lookup counts its calls and blocks
// until released; every other method is unused (nil embedded Store).
type slowTokens struct {
	Store
	calls   atomic.Int32
	release chan struct{}
	agent   Agent
}

func (s *slowTokens) LookupAgentToken(ctx context.Context, hash []byte) (Agent, error) {
	s.calls.Add(1)
	select {
	case <-s.release:
		return s.agent, nil
	case <-ctx.Done():
		return Agent{}, ctx.Err()
	}
}

// Concurrent misses of one token share one database read; a caller whose
// context ends stops waiting without failing the others; a write that
// bumps the generation starts a new read for the callers after it.
func TestCachedStoreOneReadPerMiss(t *testing.T) {
	inner := &slowTokens{release: make(chan struct{}), agent: Agent{ID: "a1", TenantID: "t1"}}
	c := NewCachedStore(inner, 10)
	const callers = 64
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := c.LookupAgentToken(context.Background(), []byte("tok"))
			if err == nil && a.ID != "a1" {
				err = errors.New("wrong agent " + a.ID)
			}
			errs <- err
		}()
	}
	// One impatient caller gives up; the read it may have started goes on.
	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := c.LookupAgentToken(short, []byte("tok")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("impatient caller: %v, want its deadline", err)
	}
	time.Sleep(20 * time.Millisecond)
	close(inner.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := inner.calls.Load(); n != 1 {
		t.Fatalf("%d database reads for %d concurrent misses, want 1", n, callers+1)
	}
	if _, err := c.LookupAgentToken(context.Background(), []byte("tok")); err != nil || inner.calls.Load() != 1 {
		t.Fatalf("cached read: %v, %d reads", err, inner.calls.Load())
	}
	c.bump() // a write through the cache
	if _, err := c.LookupAgentToken(context.Background(), []byte("tok")); err != nil || inner.calls.Load() != 2 {
		t.Fatalf("after a write: %v, %d reads, want a new read", err, inner.calls.Load())
	}
}

// Entries past their lifetime are swept once a lifetime has passed, so
// the cache holds only the agents active within it and a full cache takes
// new agents again.
func TestCachedStoreSweepsExpiredEntries(t *testing.T) {
	inner := &slowTokens{release: make(chan struct{}), agent: Agent{ID: "a1", TenantID: "t1"}}
	close(inner.release)
	clock := time.Unix(1_000_000, 0)
	c := NewCachedStoreWithLifetime(inner, 3, 2*time.Second, func() time.Time { return clock })
	ctx := context.Background()
	for _, tok := range []string{"a", "b", "c"} {
		if _, err := c.LookupAgentToken(ctx, []byte(tok)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.LookupAgentToken(ctx, []byte("d")); err != nil || len(c.tokens) != 3 {
		t.Fatalf("full cache: %v, %d entries, want 3 (d not cached)", err, len(c.tokens))
	}
	clock = clock.Add(2 * time.Second)
	if _, err := c.LookupAgentToken(ctx, []byte("d")); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.tokens[hex.EncodeToString([]byte("d"))]; !ok || len(c.tokens) != 1 {
		t.Fatalf("after a lifetime: %d entries (d cached: %v), want only d", len(c.tokens), ok)
	}
	reads := inner.calls.Load()
	if _, err := c.LookupAgentToken(ctx, []byte("d")); err != nil || inner.calls.Load() != reads {
		t.Fatalf("d served from the cache: %v, reads %d -> %d", err, reads, inner.calls.Load())
	}
}
