package sharedstate

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// memoryShards is how many independently locked maps a Memory spreads its
// keys over.
const memoryShards = 64

// sweepInterval is how often the sweep goroutine removes expired keys.
const sweepInterval = time.Second

// Memory is the in-process [State] of a node that runs alone. It is safe for
// concurrent use. Keys expire lazily when touched and in a sweep every
// second, so memory holds live keys only. Publish reaches this process's
// subscribers only.
type Memory struct {
	seed    maphash.Seed
	shards  [memoryShards]memShard
	dropped atomic.Uint64
	closed  atomic.Bool
	stop    chan struct{}
	swept   chan struct{} // closed when the sweep goroutine has returned
	once    sync.Once

	psMu   sync.Mutex
	topics map[string]*fanout
}

var (
	_ State       = (*Memory)(nil)
	_ DropCounter = (*Memory)(nil)
)

type memShard struct {
	mu sync.Mutex
	m  map[string]*memEntry
}

type memKind uint8

const (
	kindString memKind = iota // Get/Set/SetNX values and Incr counters
	kindBucket                // TakeToken
	kindWindow                // WindowAdd
)

// memEntry is one key. Which fields are used depends on kind.
type memEntry struct {
	kind    memKind
	expires time.Time // zero: no expiry

	// kindString: a counter keeps num (isNum); any other value keeps str.
	str   string
	num   int64
	isNum bool

	// kindBucket
	tokens float64
	last   time.Time

	// kindWindow: member -> score (Unix microseconds)
	window map[string]int64
}

func (e *memEntry) expired(now time.Time) bool {
	return !e.expires.IsZero() && !now.Before(e.expires)
}

// ttl is the time left, 0 without expiry.
func (e *memEntry) ttl(now time.Time) time.Duration {
	if e.expires.IsZero() {
		return 0
	}
	return e.expires.Sub(now)
}

// NewMemory returns an empty in-process State and starts its sweep
// goroutine; Close stops it.
func NewMemory() *Memory {
	m := &Memory{
		seed:   maphash.MakeSeed(),
		stop:   make(chan struct{}),
		swept:  make(chan struct{}),
		topics: make(map[string]*fanout),
	}
	for i := range m.shards {
		m.shards[i].m = make(map[string]*memEntry)
	}
	go m.sweepLoop()
	return m
}

func (m *Memory) sweepLoop() {
	defer close(m.swept)
	t := time.NewTicker(sweepInterval)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case now := <-t.C:
			m.sweep(now)
		}
	}
}

// sweep removes expired keys, one shard at a time.
func (m *Memory) sweep(now time.Time) {
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		for k, e := range sh.m {
			if e.expired(now) {
				delete(sh.m, k)
			}
		}
		sh.mu.Unlock()
	}
}

func (m *Memory) shard(key string) *memShard {
	return &m.shards[maphash.String(m.seed, key)%memoryShards]
}

// lookup returns the live entry at key, removing it when expired. The shard
// lock must be held.
func (sh *memShard) lookup(key string, now time.Time) *memEntry {
	e := sh.m[key]
	if e != nil && e.expired(now) {
		delete(sh.m, key)
		return nil
	}
	return e
}

// check refuses calls after Close and with a context that is done.
func (m *Memory) check(ctx context.Context, op string) error {
	if m.closed.Load() {
		return fmt.Errorf("%w: %s", ErrClosed, op)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, op, err)
	}
	return nil
}

func wrongType(op, key string) error {
	return fmt.Errorf("%w: %s %q", ErrWrongType, op, key)
}

// Incr implements [State].
func (m *Memory) Incr(ctx context.Context, key string, window time.Duration) (int64, time.Duration, error) {
	if err := m.check(ctx, "incr"); err != nil {
		return 0, 0, err
	}
	if err := validWindow("incr", window); err != nil {
		return 0, 0, err
	}
	window = time.Duration(millis(window)) * time.Millisecond
	now := time.Now()
	sh := m.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.lookup(key, now)
	if e == nil {
		sh.m[key] = &memEntry{kind: kindString, num: 1, isNum: true, expires: now.Add(window)}
		return 1, window, nil
	}
	if e.kind != kindString {
		return 0, 0, wrongType("incr", key)
	}
	if !e.isNum {
		n, err := strconv.ParseInt(e.str, 10, 64)
		if err != nil {
			return 0, 0, wrongType("incr", key)
		}
		e.num, e.isNum, e.str = n, true, ""
	}
	if e.num == math.MaxInt64 {
		return 0, 0, wrongType("incr", key) // would overflow, as INCR refuses
	}
	e.num++
	if e.expires.IsZero() {
		e.expires = now.Add(window)
	}
	return e.num, e.ttl(now), nil
}

// Count implements [State].
func (m *Memory) Count(ctx context.Context, key string) (int64, time.Duration, error) {
	if err := m.check(ctx, "count"); err != nil {
		return 0, 0, err
	}
	now := time.Now()
	sh := m.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.lookup(key, now)
	if e == nil {
		return 0, 0, nil
	}
	if e.kind != kindString {
		return 0, 0, wrongType("count", key)
	}
	n := e.num
	if !e.isNum {
		var err error
		if n, err = strconv.ParseInt(e.str, 10, 64); err != nil {
			return 0, 0, wrongType("count", key)
		}
	}
	return n, e.ttl(now), nil
}

func expiry(now time.Time, ttl time.Duration) time.Time {
	if ttl == 0 {
		return time.Time{}
	}
	return now.Add(time.Duration(millis(ttl)) * time.Millisecond)
}

// SetNX implements [State].
func (m *Memory) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	if err := m.check(ctx, "setnx"); err != nil {
		return false, err
	}
	if err := validTTL("setnx", ttl); err != nil {
		return false, err
	}
	now := time.Now()
	sh := m.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.lookup(key, now) != nil {
		return false, nil
	}
	sh.m[key] = &memEntry{kind: kindString, str: value, expires: expiry(now, ttl)}
	return true, nil
}

// Get implements [State].
func (m *Memory) Get(ctx context.Context, key string) (string, bool, error) {
	if err := m.check(ctx, "get"); err != nil {
		return "", false, err
	}
	sh := m.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.lookup(key, time.Now()).stringValue("get", key)
}

// stringValue is a string entry's value (a counter's in decimal) and
// whether it exists; another kind of entry is ErrWrongType.
func (e *memEntry) stringValue(op, key string) (string, bool, error) {
	switch {
	case e == nil:
		return "", false, nil
	case e.kind != kindString:
		return "", false, wrongType(op, key)
	case e.isNum:
		return strconv.FormatInt(e.num, 10), true, nil
	default:
		return e.str, true, nil
	}
}

// Set implements [State].
func (m *Memory) Set(ctx context.Context, key, value string, ttl time.Duration) error {
	if err := m.check(ctx, "set"); err != nil {
		return err
	}
	if err := validTTL("set", ttl); err != nil {
		return err
	}
	now := time.Now()
	sh := m.shard(key)
	sh.mu.Lock()
	sh.m[key] = &memEntry{kind: kindString, str: value, expires: expiry(now, ttl)}
	sh.mu.Unlock()
	return nil
}

// Del implements [State].
func (m *Memory) Del(ctx context.Context, keys ...string) error {
	if err := m.check(ctx, "del"); err != nil {
		return err
	}
	for _, key := range keys {
		sh := m.shard(key)
		sh.mu.Lock()
		delete(sh.m, key)
		sh.mu.Unlock()
	}
	return nil
}

// TakeToken implements [State]. The bucket refills on the process clock.
func (m *Memory) TakeToken(ctx context.Context, key string, capacity, refillPerSec, cost float64) (bool, time.Duration, error) {
	if err := m.check(ctx, "take token"); err != nil {
		return false, 0, err
	}
	if err := validBucket(capacity, refillPerSec, cost); err != nil {
		return false, 0, err
	}
	now := time.Now()
	sh := m.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.lookup(key, now)
	if e == nil {
		e = &memEntry{kind: kindBucket, tokens: capacity, last: now}
		sh.m[key] = e
	} else if e.kind != kindBucket {
		return false, 0, wrongType("take token", key)
	}
	if elapsed := now.Sub(e.last); elapsed > 0 {
		e.tokens = min(capacity, e.tokens+elapsed.Seconds()*refillPerSec)
		e.last = now
	}
	e.tokens = min(e.tokens, capacity) // the capacity may have shrunk
	ok := e.tokens >= cost
	var wait time.Duration
	if ok {
		e.tokens -= cost
	} else {
		wait = retryAfter(e.tokens, refillPerSec, cost)
	}
	e.expires = now.Add(idleTTL(capacity, e.tokens, refillPerSec))
	return ok, wait, nil
}

// CompareAndSwap implements [State].
func (m *Memory) CompareAndSwap(ctx context.Context, key, old, value string, ttl time.Duration) (bool, string, error) {
	if err := m.check(ctx, "compare and swap"); err != nil {
		return false, "", err
	}
	if err := validSwap(value, ttl); err != nil {
		return false, "", err
	}
	now := time.Now()
	sh := m.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	cur, _, err := sh.lookup(key, now).stringValue("compare and swap", key)
	if err != nil {
		return false, "", err
	}
	if cur != old {
		return false, cur, nil
	}
	sh.m[key] = &memEntry{kind: kindString, str: value, expires: expiry(now, ttl)}
	return true, "", nil
}

// Dropped returns how many messages were dropped because a subscriber's
// buffer was full (see [DropCounter]).
func (m *Memory) Dropped() uint64 { return m.dropped.Load() }

// Ping implements [State]; it fails only after Close or with a done context.
func (m *Memory) Ping(ctx context.Context) error { return m.check(ctx, "ping") }

// Backend implements [State].
func (m *Memory) Backend() string { return "memory" }

// Close stops the sweep goroutine, ends every subscription and drops all
// keys. Later calls return [ErrClosed]. Close is idempotent.
func (m *Memory) Close() error {
	m.once.Do(func() {
		m.closed.Store(true)
		close(m.stop)
		<-m.swept
		m.psMu.Lock()
		for ch, f := range m.topics {
			f.closeAll()
			delete(m.topics, ch)
		}
		m.psMu.Unlock()
		for i := range m.shards {
			sh := &m.shards[i]
			sh.mu.Lock()
			clear(sh.m)
			sh.mu.Unlock()
		}
	})
	return nil
}
