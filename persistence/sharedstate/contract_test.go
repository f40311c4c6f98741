package sharedstate_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"svc/persistence/sharedstate"
	"svc/testkit"
)

const notRun = "*** SVC_TEST_VALKEY_URL is not set: Valkey integration test NOT RUN ***"

func TestMemory(t *testing.T) {
	runContract(t, func(t *testing.T) sharedstate.State {
		s := sharedstate.NewMemory()
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

// valkeyURL returns SVC_TEST_VALKEY_URL, or fails (CI) or skips the test
// loudly when it is unset.
func valkeyURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("SVC_TEST_VALKEY_URL")
	if u == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal(notRun + " (required when CI=true)")
		}
		t.Skip(notRun)
	}
	return u
}

func TestValkey(t *testing.T) {
	u := valkeyURL(t)
	runContract(t, func(t *testing.T) sharedstate.State {
		return newValkey(t, u)
	})
}

// newValkey connects with a random key prefix and removes every key under
// it when the test ends.
func newValkey(t *testing.T, u string, opts ...sharedstate.ValkeyOption) *sharedstate.Valkey {
	t.Helper()
	prefix := "svctest:" + randHex(t) + ":"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := sharedstate.NewValkey(ctx, u, append([]sharedstate.ValkeyOption{sharedstate.WithKeyPrefix(prefix)}, opts...)...)
	if err != nil {
		t.Fatalf("NewValkey: %v", err)
	}
	t.Cleanup(func() {
		_ = s.Close()
		deletePrefix(t, u, prefix)
	})
	return s
}

// deletePrefix removes the keys a test left under prefix.
func deletePrefix(t *testing.T, u, prefix string) {
	t.Helper()
	opt, err := valkey.ParseURL(u)
	if err != nil {
		t.Errorf("cleanup: %v", err)
		return
	}
	opt.DisableCache = true
	c, err := valkey.NewClient(opt)
	if err != nil {
		t.Errorf("cleanup: %v", err)
		return
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var cursor uint64
	for {
		e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Match(prefix+"*").Count(1000).Build()).AsScanEntry()
		if err != nil {
			t.Errorf("cleanup scan: %v", err)
			return
		}
		if len(e.Elements) > 0 {
			if err := c.Do(ctx, c.B().Del().Key(e.Elements...).Build()).Error(); err != nil {
				t.Errorf("cleanup del: %v", err)
				return
			}
		}
		if cursor = e.Cursor; cursor == 0 {
			return
		}
	}
}

func randHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// recv waits for one message on ch.
func recv(t *testing.T, ch <-chan []byte, timeout time.Duration) []byte {
	t.Helper()
	select {
	case m, ok := <-ch:
		if !ok {
			t.Fatal("subscription closed, want a message")
		}
		return m
	case <-time.After(timeout):
		t.Fatalf("no message within %v", timeout)
		return nil
	}
}

// waitClosed drains ch until it is closed.
func waitClosed(t *testing.T, ch <-chan []byte, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatalf("subscription not closed within %v", timeout)
		}
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// race runs n goroutines that start together and returns when all are done.
func race(n int, fn func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			fn(i)
		}()
	}
	close(start)
	wg.Wait()
}

// runContract runs the contract every State implementation must meet.
// newState returns a fresh, empty State whose cleanup is registered on t.
func runContract(t *testing.T, newState func(t *testing.T) sharedstate.State) {
	tests := []struct {
		name string
		run  func(t *testing.T, s sharedstate.State)
	}{
		{name: "Incr counts within a fixed window", run: func(t *testing.T, s sharedstate.State) {
			ctx := ctxT(t)
			const window = 2 * time.Second
			n, ttl1, err := s.Incr(ctx, "c", window)
			must(t, err)
			if n != 1 || ttl1 <= window-500*time.Millisecond || ttl1 > window {
				t.Fatalf("first Incr = %d, %v; want 1, about %v", n, ttl1, window)
			}
			time.Sleep(60 * time.Millisecond)
			for want := int64(2); want <= 3; want++ {
				n, ttl, err := s.Incr(ctx, "c", window)
				must(t, err)
				if n != want {
					t.Fatalf("Incr = %d, want %d", n, want)
				}
				// Fixed window: later increments do not extend the TTL.
				if ttl > ttl1-40*time.Millisecond || ttl <= 0 {
					t.Fatalf("ttl after %d increments = %v, first was %v: window was extended", want, ttl, ttl1)
				}
			}
		}},
		{name: "Incr window expires and a new one starts at 1", run: func(t *testing.T, s sharedstate.State) {
			ctx := ctxT(t)
			const window = 200 * time.Millisecond
			for range 3 {
				_, _, err := s.Incr(ctx, "c", window)
				must(t, err)
			}
			testkit.Eventually(t, 2*time.Second, "counter expired", func() bool {
				n, _, err := s.Count(ctx, "c")
				must(t, err)
				return n == 0
			})
			n, ttl, err := s.Incr(ctx, "c", window)
			must(t, err)
			if n != 1 || ttl <= 0 || ttl > window {
				t.Fatalf("Incr after expiry = %d, %v; want 1 and a fresh window", n, ttl)
			}
		}},
		{name: "Count reads without changing", run: func(t *testing.T, s sharedstate.State) {
			ctx := ctxT(t)
			n, ttl, err := s.Count(ctx, "absent")
			must(t, err)
			if n != 0 || ttl != 0 {
				t.Fatalf("Count(absent) = %d, %v; want 0, 0", n, ttl)
			}
			for range 4 {
				_, _, err := s.Incr(ctx, "c", time.Minute)
				must(t, err)
			}
			for range 2 {
				n, ttl, err = s.Count(ctx, "c")
				must(t, err)
				if n != 4 || ttl <= 50*time.Second || ttl > time.Minute {
					t.Fatalf("Count = %d, %v; want 4, about 1m", n, ttl)
				}
			}
		}},
		{name: "Incr on a value that is not a counter is ErrWrongType", run: func(t *testing.T, s sharedstate.State) {
			ctx := ctxT(t)
			must(t, s.Set(ctx, "k", "not a number", 0))
			if _, _, err := s.Incr(ctx, "k", time.Second); !errors.Is(err, sharedstate.ErrWrongType) {
				t.Fatalf("Incr = %v, want ErrWrongType", err)
			}
			if _, _, err := s.Count(ctx, "k"); !errors.Is(err, sharedstate.ErrWrongType) {
				t.Fatalf("Count = %v, want ErrWrongType", err)
			}
			if _, _, err := s.TakeToken(ctx, "k", 1, 1, 1); !errors.Is(err, sharedstate.ErrWrongType) {
				t.Fatalf("TakeToken = %v, want ErrWrongType", err)
			}
			if _, err := s.WindowAdd(ctx, "k", "m", time.Now(), time.Second); !errors.Is(err, sharedstate.ErrWrongType) {
				t.Fatalf("WindowAdd = %v, want ErrWrongType", err)
			}
			_, _, err := s.TakeToken(ctx, "bucket", 1, 1, 1)
			must(t, err)
			if _, _, err := s.Get(ctx, "bucket"); !errors.Is(err, sharedstate.ErrWrongType) {
				t.Fatalf("Get(bucket) = %v, want ErrWrongType", err)
			}
		}},
		{name: "a counter reads as its decimal value", run: func(t *testing.T, s sharedstate.State) {
			ctx := ctxT(t)
			must(t, s.Set(ctx, "c", "41", 0))
			n, ttl, err := s.Incr(ctx, "c", time.Minute)
			must(t, err)
			// A counter without expiry is given one, so it cannot stick.
			if n != 42 || ttl <= 0 {
				t.Fatalf("Incr = %d, %v; want 42 with a TTL", n, ttl)
			}
			v, ok, err := s.Get(ctx, "c")
			must(t, err)
			if !ok || v != "42" {
				t.Fatalf("Get = %q, %v; want 42", v, ok)
			}
		}},
		{name: "invalid arguments are ErrInvalidArgument", run: func(t *testing.T, s sharedstate.State) {
			ctx := ctxT(t)
			check := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, sharedstate.ErrInvalidArgument) {
					t.Errorf("%s = %v, want ErrInvalidArgument", what, err)
				}
			}
			_, _, err := s.Incr(ctx, "c", 0)
			check("Incr window 0", err)
			_, err = s.SetNX(ctx, "k", "v", -time.Second)
			check("SetNX negative ttl", err)
			check("Set negative ttl", s.Set(ctx, "k", "v", -time.Second))
			_, _, err = s.TakeToken(ctx, "b", 10, 1, 11)
			check("TakeToken cost > capacity", err)
			_, _, err = s.TakeToken(ctx, "b", 10, 0, 1)
			check("TakeToken refill 0", err)
			_, _, err = s.TakeToken(ctx, "b", 0, 1, 0)
			check("TakeToken capacity 0", err)
			_, err = s.WindowAdd(ctx, "w", "m", time.Now(), 0)
			check("WindowAdd window 0", err)
		}},
		{name: "SetNX stores only when absent", run: func(t *testing.T, s sharedstate.State) {
			ctx := ctxT(t)
			ok, err := s.SetNX(ctx, "nonce", "first", time.Minute)
			must(t, err)
			if !ok {
				t.Fatal("first SetNX = false, want true")
			}
			ok, err = s.SetNX(ctx, "nonce", "second", time.Minute)
			must(t, err)
			if ok {
				t.Fatal("second SetNX = true, want false")
			}
			v, found, err := s.Get(ctx, "nonce")
			must(t, err)
			if !found || v != "first" {
				t.Fatalf("Get = %q, %v; want first", v, found)
			}
		}},
		{name: "SetNX is exactly once under 200 concurrent callers", run: func(t *testing.T, s sharedstate.State) {
			ctx := ctxT(t)
			var wins atomic.Int64
			var winner atomic.Value
			errs := make(chan error, 200)
			race(200, func(i int) {
				v := fmt.Sprint("caller-", i)
				ok, err := s.SetNX(ctx, "idem", v, time.Minute)
				if err != nil {
					errs <- err
					return
				}
				if ok {
					wins.Add(1)
					winner.Store(v)
				}
			})
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if n := wins.Load(); n != 1 {
				t.Fatalf("%d SetNX calls stored, want exactly 1", n)
			}
			v, _, err := s.Get(ctx, "idem")
			must(t, err)
			if v != winner.Load() {
				t.Fatalf("stored %q, the winner was %q", v, winner.Load())
			}
		}},
		{name: "Get Set Del", run: func(t *testing.T, s sharedstate.State) {
			ctx := ctxT(t)
			if v, ok, err := s.Get(ctx, "a"); err != nil || ok || v != "" {
				t.Fatalf("Get(absent) = %q, %v, %v", v, ok, err)
			}
			must(t, s.Set(ctx, "a", "1", 0))
			must(t, s.Set(ctx, "b", "", time.Minute))
			must(t, s.Set(ctx, "a", "2", 0)) // overwrites
			if v, ok, err := s.Get(ctx, "a"); err != nil || !ok || v != "2" {
				t.Fatalf("Get(a) = %q, %v, %v; want 2", v, ok, err)
			}
			if v, ok, err := s.Get(ctx, "b"); err != nil || !ok || v != "" {
				t.Fatalf("Get(b) = %q, %v, %v; want empty and present", v, ok, err)
			}
			must(t, s.Del(ctx, "a", "b", "never-there"))
			must(t, s.Del(ctx))
			for _, k := range []string{"a", "b"} {
				if _, ok, err := s.Get(ctx, k); err != nil || ok {
					t.Fatalf("Get(%s) after Del = %v, %v", k, ok, err)
				}
			}
			// A deleted nonce can be stored again.
			ok, err := s.SetNX(ctx, "a", "3", 0)
			must(t, err)
			if !ok {
				t.Fatal("SetNX after Del = false")
			}
		}},
		{name: "keys expire after their TTL", run: func(t *testing.T, s sharedstate.State) {
			ctx := ctxT(t)
			must(t, s.Set(ctx, "short", "x", 150*time.Millisecond))
			must(t, s.Set(ctx, "forever", "y", 0))
			ok, err := s.SetNX(ctx, "nonce", "z", 150*time.Millisecond)
			must(t, err)
			if !ok {
				t.Fatal("SetNX = false")
			}
			if _, ok, _ := s.Get(ctx, "short"); !ok {
				t.Fatal("key gone before its TTL")
			}
			testkit.Eventually(t, 2*time.Second, "short key expired", func() bool {
				_, ok, err := s.Get(ctx, "short")
				must(t, err)
				return !ok
			})
			testkit.Eventually(t, 2*time.Second, "nonce expired and can be stored again", func() bool {
				ok, err := s.SetNX(ctx, "nonce", "z2", time.Minute)
				must(t, err)
				return ok
			})
			if v, ok, err := s.Get(ctx, "forever"); err != nil || !ok || v != "y" {
				t.Fatalf("key without TTL = %q, %v, %v", v, ok, err)
			}
		}},
		{name: "TakeToken exhausts the capacity and says when to retry", run: func(t *testing.T, s sharedstate.State) {
			ctx := ctxT(t)
			const capacity, refill, cost = 10, 4, 2 // 5 takes, then 0.5s per take
			for i := range 5 {
				ok, wait, err := s.TakeToken(ctx, "b", capacity, refill, cost)
				must(t, err)
				if !ok || wait != 0 {
					t.Fatalf("take %d = %v, %v; want ok", i+1, ok, wait)
				}
			}
			ok, wait, err := s.TakeToken(ctx, "b", capacity, refill, cost)
			must(t, err)
			if ok {
				t.Fatal("take 6 = ok, want refused")
			}
			// About cost/refill = 500ms, less what refilled meanwhile.
			if wait < 250*time.Millisecond || wait > 500*time.Millisecond {
				t.Fatalf("retryAfter = %v, want about 500ms", wait)
			}
			// Another bucket is independent.
			ok, _, err = s.TakeToken(ctx, "other", capacity, refill, cost)
			must(t, err)
			if !ok {
				t.Fatal("another bucket refused")
			}
		}},
		{name: "TakeToken refills over time", run: func(t *testing.T, s sharedstate.State) {
			ctx := ctxT(t)
			// A token every 250ms: slow enough that a loaded machine's
			// scheduling between two takes does not refill one (a token
			// every 50ms did, under the whole suite's load).
			const capacity, refill, cost = 2, 4, 1
			for range 2 {
				ok, _, err := s.TakeToken(ctx, "b", capacity, refill, cost)
				must(t, err)
				if !ok {
					t.Fatal("full bucket refused")
				}
			}
			ok, wait, err := s.TakeToken(ctx, "b", capacity, refill, cost)
			must(t, err)
			if ok || wait <= 0 || wait > 250*time.Millisecond {
				t.Fatalf("empty bucket = %v, %v; want refused with retryAfter about 250ms", ok, wait)
			}
			time.Sleep(wait)
			testkit.Eventually(t, time.Second, "token refilled", func() bool {
				ok, _, err := s.TakeToken(ctx, "b", capacity, refill, cost)
				must(t, err)
				return ok
			})
			// After a long pause the bucket is full again, never fuller.
			time.Sleep(750 * time.Millisecond)
			taken := 0
			for range 4 {
				ok, _, err := s.TakeToken(ctx, "b", capacity, refill, cost)
				must(t, err)
				if ok {
					taken++
				}
			}
			if taken != capacity {
				t.Fatalf("after refilling, %d taken, want capacity %d", taken, capacity)
			}
		}},
		{name: "TakeToken hands out exactly the capacity to 200 concurrent takers", run: func(t *testing.T, s sharedstate.State) {
			ctx := ctxT(t)
			var taken, refused atomic.Int64
			errs := make(chan error, 200)
			race(200, func(int) {
				ok, wait, err := s.TakeToken(ctx, "hot", 50, 0.0001, 1)
				switch {
				case err != nil:
					errs <- err
				case ok:
					taken.Add(1)
				case wait <= 0:
					errs <- fmt.Errorf("refused with retryAfter %v", wait)
				default:
					refused.Add(1)
				}
			})
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if taken.Load() != 50 || refused.Load() != 150 {
				t.Fatalf("taken %d, refused %d; want 50 and 150", taken.Load(), refused.Load())
			}
		}},
		{name: "WindowAdd slides", run: func(t *testing.T, s sharedstate.State) {
			ctx := ctxT(t)
			const window = time.Second
			t0 := time.Now()
			steps := []struct {
				member string
				at     time.Duration
				want   int64
			}{
				{"a", 0, 1},
				{"b", 100 * time.Millisecond, 2},
				{"c", 900 * time.Millisecond, 3},
				{"c", 900 * time.Millisecond, 3},                    // members are unique
				{"d", 1100 * time.Millisecond, 3},                   // a falls out; b sits on the edge and stays
				{"e", 1101 * time.Millisecond, 3},                   // b falls out
				{"f", 3 * time.Second, 1},                           // all older ones fall out
				{"g", 3*time.Second - window, 2},                    // a late event counts, drops nothing newer
				{"h", 3*time.Second + window + time.Millisecond, 1}, // f and g fall out
			}
			for _, st := range steps {
				n, err := s.WindowAdd(ctx, "w", st.member, t0.Add(st.at), window)
				must(t, err)
				if n != st.want {
					t.Fatalf("WindowAdd(%s at +%v) = %d, want %d", st.member, st.at, n, st.want)
				}
			}
		}},
		{name: "WindowAdd key expires a window after the last event", run: func(t *testing.T, s sharedstate.State) {
			ctx := ctxT(t)
			_, err := s.WindowAdd(ctx, "w", "m", time.Now(), 150*time.Millisecond)
			must(t, err)
			testkit.Eventually(t, 2*time.Second, "window expired", func() bool {
				ok, err := s.SetNX(ctx, "w", "free", 0)
				if errors.Is(err, sharedstate.ErrWrongType) {
					return false
				}
				must(t, err)
				return ok
			})
		}},
		{name: "Publish reaches every subscriber", run: func(t *testing.T, s sharedstate.State) {
			ctx := ctxT(t)
			a, err := s.Subscribe(ctx, "feed")
			must(t, err)
			b, err := s.Subscribe(ctx, "feed")
			must(t, err)
			other, err := s.Subscribe(ctx, "other")
			must(t, err)
			must(t, s.Publish(ctx, "feed", []byte("hello")))
			must(t, s.Publish(ctx, "other", []byte("elsewhere")))
			must(t, s.Publish(ctx, "nobody-listens", []byte("lost")))
			for _, ch := range []<-chan []byte{a, b} {
				if m := recv(t, ch, 2*time.Second); string(m) != "hello" {
					t.Fatalf("got %q, want hello", m)
				}
			}
			if m := recv(t, other, 2*time.Second); string(m) != "elsewhere" {
				t.Fatalf("other channel got %q, want only its own message", m)
			}
		}},
		{name: "subscribers get their own copy of a message", run: func(t *testing.T, s sharedstate.State) {
			ctx := ctxT(t)
			a, err := s.Subscribe(ctx, "feed")
			must(t, err)
			b, err := s.Subscribe(ctx, "feed")
			must(t, err)
			msg := []byte("original")
			must(t, s.Publish(ctx, "feed", msg))
			copy(msg, "XXXXXXXX") // the publisher reuses its buffer
			ma := recv(t, a, 2*time.Second)
			copy(ma, "YYYYYYYY") // one subscriber scribbles on its copy
			if mb := recv(t, b, 2*time.Second); string(mb) != "original" {
				t.Fatalf("got %q, want original", mb)
			}
		}},
		{name: "Subscribe ends when its context ends", run: func(t *testing.T, s sharedstate.State) {
			ctx := ctxT(t)
			actx, cancel := context.WithCancel(ctx)
			a, err := s.Subscribe(actx, "feed")
			must(t, err)
			b, err := s.Subscribe(ctx, "feed")
			must(t, err)
			cancel()
			waitClosed(t, a, 2*time.Second)
			// The other subscriber of the channel is unaffected.
			must(t, s.Publish(ctx, "feed", []byte("still here")))
			if m := recv(t, b, 2*time.Second); string(m) != "still here" {
				t.Fatalf("got %q", m)
			}
			// A context already done is refused.
			if _, err := s.Subscribe(actx, "feed"); err == nil {
				t.Fatal("Subscribe with a done context succeeded")
			}
		}},
		{name: "a channel can be subscribed again after its last subscriber left", run: func(t *testing.T, s sharedstate.State) {
			ctx := ctxT(t)
			for i := range 3 {
				sctx, cancel := context.WithCancel(ctx)
				ch, err := s.Subscribe(sctx, "feed")
				must(t, err)
				msg := fmt.Sprint("round ", i)
				must(t, s.Publish(ctx, "feed", []byte(msg)))
				if m := recv(t, ch, 2*time.Second); string(m) != msg {
					t.Fatalf("got %q, want %q", m, msg)
				}
				cancel()
				waitClosed(t, ch, 2*time.Second)
			}
		}},
		{name: "a slow subscriber does not block Publish", run: func(t *testing.T, s sharedstate.State) {
			ctx := ctxT(t)
			dc, ok := s.(sharedstate.DropCounter)
			if !ok {
				t.Fatalf("%T does not count drops", s)
			}
			before := dc.Dropped()
			slow, err := s.Subscribe(ctx, "feed") // never read until the end
			must(t, err)
			fast, err := s.Subscribe(ctx, "feed")
			must(t, err)
			var got atomic.Int64
			readerDone := make(chan struct{})
			go func() {
				defer close(readerDone)
				for range fast {
					got.Add(1)
				}
			}()
			const n = 5000
			start := time.Now()
			for i := range n {
				must(t, s.Publish(ctx, "feed", fmt.Appendf(nil, "m%d", i)))
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Fatalf("%d publishes took %v", n, took)
			}
			testkit.Eventually(t, 5*time.Second, "slow subscriber's buffer full and drops counted", func() bool {
				return len(slow) == sharedstate.SubscriberBuffer && dc.Dropped()-before >= n-sharedstate.SubscriberBuffer
			})
			// The buffer kept the oldest messages, in order.
			if m := recv(t, slow, time.Second); string(m) != "m0" {
				t.Fatalf("slow subscriber's first message = %q, want m0", m)
			}
			testkit.Eventually(t, 5*time.Second, "fast subscriber kept up", func() bool {
				return uint64(got.Load())+(dc.Dropped()-before) >= uint64(2*n-sharedstate.SubscriberBuffer) //nolint:gosec // small non-negative counts
			})
			t.Logf("%d publishes in %v; fast reader got %d; dropped %d", n, time.Since(start), got.Load(), dc.Dropped()-before)
		}},
		{name: "CompareAndSwap swaps only from the value it was given", run: func(t *testing.T, s sharedstate.State) {
			ctx := ctxT(t)
			ok, cur, err := s.CompareAndSwap(ctx, "cas", "", "v1", time.Minute)
			must(t, err)
			if !ok || cur != "" {
				t.Fatalf("swap from absent = %v, %q; want true", ok, cur)
			}
			if ok, cur, err = s.CompareAndSwap(ctx, "cas", "", "v2", time.Minute); err != nil || ok || cur != "v1" {
				t.Fatalf("swap from absent over v1 = %v, %q, %v; want false, v1", ok, cur, err)
			}
			if ok, cur, err = s.CompareAndSwap(ctx, "cas", "v0", "v2", time.Minute); err != nil || ok || cur != "v1" {
				t.Fatalf("swap from a stale value = %v, %q, %v; want false, v1", ok, cur, err)
			}
			if ok, _, err = s.CompareAndSwap(ctx, "cas", "v1", "v2", 0); err != nil || !ok {
				t.Fatalf("swap from the current value = %v, %v; want true", ok, err)
			}
			if v, found, err := s.Get(ctx, "cas"); err != nil || !found || v != "v2" {
				t.Fatalf("Get after swap = %q, %v, %v; want v2", v, found, err)
			}
			// The TTL is the last swap's.
			must(t, s.Del(ctx, "cas"))
			if ok, _, err = s.CompareAndSwap(ctx, "cas", "", "short", 300*time.Millisecond); err != nil || !ok {
				t.Fatalf("swap with a TTL = %v, %v", ok, err)
			}
			testkit.Eventually(t, 3*time.Second, "the swapped value to expire", func() bool {
				_, found, err := s.Get(ctx, "cas")
				return err == nil && !found
			})
			if _, _, err := s.CompareAndSwap(ctx, "cas", "", "", time.Minute); !errors.Is(err, sharedstate.ErrInvalidArgument) {
				t.Fatalf("empty value: %v, want ErrInvalidArgument", err)
			}
			if _, _, err := s.CompareAndSwap(ctx, "cas", "", "x", -time.Second); !errors.Is(err, sharedstate.ErrInvalidArgument) {
				t.Fatalf("negative TTL: %v, want ErrInvalidArgument", err)
			}
			_, _, err = s.TakeToken(ctx, "bucket", 5, 1, 1)
			must(t, err)
			if _, _, err := s.CompareAndSwap(ctx, "bucket", "", "x", time.Minute); !errors.Is(err, sharedstate.ErrWrongType) {
				t.Fatalf("swap over a bucket: %v, want ErrWrongType", err)
			}
		}},
		{name: "CompareAndSwap: of racing swappers from one value, exactly one wins", run: func(t *testing.T, s sharedstate.State) {
			ctx := ctxT(t)
			// Each worker adds its increments with a read, modify, swap
			// loop; no increment is lost.
			const workers, each = 8, 25
			race(workers, func(int) {
				for range each {
					cur, _, err := s.Get(ctx, "sum")
					if err != nil {
						t.Error(err)
						return
					}
					for {
						n := 0
						if cur != "" {
							_, _ = fmt.Sscan(cur, &n)
						}
						ok, now, err := s.CompareAndSwap(ctx, "sum", cur, fmt.Sprint(n+1), time.Minute)
						if err != nil {
							t.Error(err)
							return
						}
						if ok {
							break
						}
						cur = now
					}
				}
			})
			if v, _, err := s.Get(ctx, "sum"); err != nil || v != fmt.Sprint(workers*each) {
				t.Fatalf("sum = %q, %v; want %d", v, err, workers*each)
			}
		}},
		{name: "MarkSeen reports a member's first mark and keeps the most recent", run: func(t *testing.T, s sharedstate.State) {
			ctx := ctxT(t)
			t0 := time.Now()
			mark := func(member string, at time.Time) bool {
				t.Helper()
				added, err := s.MarkSeen(ctx, "seen", member, at, 3, time.Minute)
				must(t, err)
				return added
			}
			if !mark("a", t0) || !mark("b", t0.Add(time.Second)) || !mark("c", t0.Add(2*time.Second)) {
				t.Fatal("first marks of a, b, c not reported as new")
			}
			if mark("a", t0.Add(3*time.Second)) { // a is now the most recent
				t.Fatal("a second mark of a reported as new")
			}
			if mark("b", t0) { // an older mark does not make b less recent
				t.Fatal("a second mark of b reported as new")
			}
			// d goes over the limit of 3: b, the least recent, is forgotten.
			if !mark("d", t0.Add(4*time.Second)) {
				t.Fatal("d not new")
			}
			if mark("a", t0.Add(5*time.Second)) || mark("c", t0.Add(5*time.Second)) {
				t.Fatal("a or c forgotten instead of b")
			}
			if !mark("b", t0.Add(6*time.Second)) {
				t.Fatal("b, dropped over the limit, not new again")
			}
			// Seen lists them most recent first, ties in reverse member order.
			if got, err := s.Seen(ctx, "seen"); err != nil || !slices.Equal(got, []string{"b", "c", "a"}) {
				t.Fatalf("Seen = %v, %v; want [b c a]", got, err)
			}
			if got, err := s.Seen(ctx, "never-marked"); err != nil || len(got) != 0 {
				t.Fatalf("Seen of an absent set = %v, %v", got, err)
			}
			// Ties drop in member order.
			for _, m := range []string{"y", "x", "z"} {
				if _, err := s.MarkSeen(ctx, "ties", m, t0, 2, time.Minute); err != nil {
					t.Fatal(err)
				}
			}
			if added, err := s.MarkSeen(ctx, "ties", "x", t0, 2, time.Minute); err != nil || !added {
				t.Fatalf("x (first of three tied) kept: %v, %v", added, err)
			}
			if _, err := s.MarkSeen(ctx, "seen", "e", t0, 0, time.Minute); !errors.Is(err, sharedstate.ErrInvalidArgument) {
				t.Fatalf("limit 0: %v, want ErrInvalidArgument", err)
			}
			if _, err := s.MarkSeen(ctx, "seen", "e", t0, 3, 0); !errors.Is(err, sharedstate.ErrInvalidArgument) {
				t.Fatalf("ttl 0: %v, want ErrInvalidArgument", err)
			}
			must(t, s.Set(ctx, "str", "x", time.Minute))
			if _, err := s.MarkSeen(ctx, "str", "e", t0, 3, time.Minute); !errors.Is(err, sharedstate.ErrWrongType) {
				t.Fatalf("mark over a string: %v, want ErrWrongType", err)
			}
			if _, err := s.Seen(ctx, "str"); !errors.Is(err, sharedstate.ErrWrongType) {
				t.Fatalf("Seen of a string: %v, want ErrWrongType", err)
			}
		}},
		{name: "MarkSeen: of racing first marks, exactly one is new; the set expires", run: func(t *testing.T, s sharedstate.State) {
			ctx := ctxT(t)
			var news atomic.Int64
			race(16, func(int) {
				added, err := s.MarkSeen(ctx, "race", "tool.action", time.Now(), 1024, 400*time.Millisecond)
				if err != nil {
					t.Error(err)
				}
				if added {
					news.Add(1)
				}
			})
			if n := news.Load(); n != 1 {
				t.Fatalf("%d callers told the member was new, want 1", n)
			}
			// Unmarked for longer than its TTL, the set is gone: the member
			// is new again.
			time.Sleep(time.Second)
			if added, err := s.MarkSeen(ctx, "race", "tool.action", time.Now(), 1024, time.Minute); err != nil || !added {
				t.Fatalf("after the TTL: %v, %v; want new again", added, err)
			}
		}},
		{name: "Ping and Backend", run: func(t *testing.T, s sharedstate.State) {
			ctx := ctxT(t)
			must(t, s.Ping(ctx))
			if b := s.Backend(); b != "memory" && b != "valkey" {
				t.Fatalf("Backend = %q", b)
			}
			done, cancel := context.WithCancel(ctx)
			cancel()
			if err := s.Ping(done); !errors.Is(err, sharedstate.ErrUnavailable) || !errors.Is(err, context.Canceled) {
				t.Fatalf("Ping(done ctx) = %v, want ErrUnavailable and context.Canceled", err)
			}
		}},
		{name: "Close ends subscriptions and refuses later calls", run: func(t *testing.T, s sharedstate.State) {
			ctx := ctxT(t)
			ch, err := s.Subscribe(ctx, "feed")
			must(t, err)
			must(t, s.Close())
			waitClosed(t, ch, 3*time.Second)
			must(t, s.Close()) // idempotent
			if _, _, err := s.Incr(ctx, "c", time.Second); !errors.Is(err, sharedstate.ErrClosed) {
				t.Fatalf("Incr after Close = %v, want ErrClosed", err)
			}
			if _, err := s.Subscribe(ctx, "feed"); !errors.Is(err, sharedstate.ErrClosed) {
				t.Fatalf("Subscribe after Close = %v, want ErrClosed", err)
			}
			if err := s.Publish(ctx, "feed", nil); !errors.Is(err, sharedstate.ErrClosed) {
				t.Fatalf("Publish after Close = %v, want ErrClosed", err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newState(t))
		})
	}
}

// TestValkeyUnreachable needs no server: nothing listens on the port.
func TestValkeyUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := sharedstate.NewValkey(ctx, "redis://127.0.0.1:1/0")
	if !errors.Is(err, sharedstate.ErrUnavailable) {
		t.Fatalf("NewValkey(nothing listening) = %v, want ErrUnavailable", err)
	}
	_, err = sharedstate.NewValkey(ctx, "redis://user:s3cret@[::1/0")
	if !errors.Is(err, sharedstate.ErrInvalidArgument) {
		t.Fatalf("NewValkey(bad URL) = %v, want ErrInvalidArgument", err)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("error repeats the password: %v", err)
	}
}
