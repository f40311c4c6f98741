package persistence

import (
	"context"
	"encoding/hex"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
)

// CachedStore keeps the two reads every authorize call makes, the agent
// behind a token and the agent's tool bindings, in memory, for a lone node.
//
// # Invalidation
//
// Every write that can change an agent, its token, its bindings or its
// tenant goes through this Store and bumps one generation counter; a cached
// entry is valid only while its generation is current. The generation is
// read before the database read that fills an entry, so a write racing
// with a fill leaves the entry stale, never wrong. Writes are rare next to
// authorize calls, so one counter for everything costs little.
//
// # One read per miss
//
// Concurrent misses of one entry share one database read
// (golang.org/x/sync/singleflight), keyed by the entry and the generation
// the callers read, so a burst of calls with a token not yet cached (a
// flood of one agent's calls, or every call once an entry expires) costs
// one pooled connection instead of one each. A write that bumps the
// generation starts a new flight for the callers that come after it.
//
// # Scope
//
// Only writes made through this process invalidate, so a node shares the
// database with no other node when it uses it (SVC_CLUSTER=false); a
// cluster reads through to the database. As a bound on a misconfiguration
// (two nodes on one database without SVC_CLUSTER=true), every entry also
// expires after a short lifetime, so another node's revocation reaches this
// one within it.
type CachedStore struct {
	Store
	gen   atomic.Uint64
	limit int
	ttl   time.Duration
	now   func() time.Time

	mu     sync.Mutex
	tokens map[string]entry[Agent]
	perms  map[string]entry[[]Permission]
	swept  time.Time // the last sweep of entries that can no longer serve
	reads  singleflight.Group
}

// entry is a cached read: its value, the generation it was read at and
// when.
type entry[V any] struct {
	gen uint64
	at  time.Time
	val V
}

// CacheLifetime bounds how long an entry serves without a database read.
const CacheLifetime = 2 * time.Second

var _ Store = (*CachedStore)(nil)

// NewCachedStore wraps s, caching at most limit entries of each kind.
func NewCachedStore(s Store, limit int) *CachedStore {
	return NewCachedStoreWithLifetime(s, limit, CacheLifetime, time.Now)
}

// NewCachedStoreWithLifetime is NewCachedStore with the entry lifetime and
// the clock given (tests).
func NewCachedStoreWithLifetime(s Store, limit int, ttl time.Duration, now func() time.Time) *CachedStore {
	return &CachedStore{Store: s, limit: max(limit, 1), ttl: ttl, now: now, tokens: map[string]entry[Agent]{}, perms: map[string]entry[[]Permission]{}}
}

func (c *CachedStore) fresh(gen uint64, at time.Time) bool {
	return gen == c.gen.Load() && c.now().Sub(at) < c.ttl
}

func (c *CachedStore) bump() {
	c.gen.Add(1)
	c.mu.Lock()
	// Everything is stale now; drop it so memory follows the live entries.
	c.tokens = map[string]entry[Agent]{}
	c.perms = map[string]entry[[]Permission]{}
	c.mu.Unlock()
}

// after bumps the generation once a write has been attempted (whatever its
// outcome: a failed write may still have committed) and passes its error on.
func (c *CachedStore) after(err error) error {
	c.bump()
	return err
}

// LookupAgentToken implements AgentStore through the cache.
func (c *CachedStore) LookupAgentToken(ctx context.Context, hash []byte) (Agent, error) {
	return readThrough(ctx, c, &c.tokens, "t", hex.EncodeToString(hash), func(ctx context.Context) (Agent, error) {
		return c.Store.LookupAgentToken(ctx, hash)
	})
}

// ListPermissions implements AgentStore through the cache.
func (c *CachedStore) ListPermissions(ctx context.Context, tenantID, agentID string) ([]Permission, error) {
	return readThrough(ctx, c, &c.perms, "p", tenantID+"/"+agentID, func(ctx context.Context) ([]Permission, error) {
		return c.Store.ListPermissions(ctx, tenantID, agentID)
	})
}

// readThrough answers key from *m while its entry can serve; otherwise it
// reads once for the concurrent misses (shared, the flight named by kind
// and key) and caches what it read, unless the map is full. m points at
// the field, since a sweep may replace the map.
func readThrough[V any](ctx context.Context, c *CachedStore, m *map[string]entry[V], kind, key string,
	read func(context.Context) (V, error)) (V, error) {
	gen := c.gen.Load()
	c.mu.Lock()
	e, ok := (*m)[key]
	c.mu.Unlock()
	if ok && e.gen == gen && c.fresh(e.gen, e.at) {
		return e.val, nil
	}
	v, err := c.shared(ctx, kind+key, gen, func(ctx context.Context) (any, error) {
		at := c.now()
		val, err := read(ctx)
		if err != nil {
			return val, err
		}
		c.mu.Lock()
		c.sweepLocked()
		if _, had := (*m)[key]; len(*m) < c.limit || had {
			(*m)[key] = entry[V]{gen: gen, at: at, val: val}
		}
		c.mu.Unlock()
		return val, nil
	})
	val, _ := v.(V)
	return val, err
}

// sweepLocked drops the entries that can no longer serve (past their
// lifetime, or of an older generation), at most once a lifetime, so the
// maps hold only entries that may still be used: memory follows the
// agents active within the last lifetime, and a full map makes room for
// new agents. A map left mostly empty is rebuilt, since Go maps keep their
// largest size. c.mu is held.
func (c *CachedStore) sweepLocked() {
	now := c.now()
	if now.Sub(c.swept) < c.ttl {
		return
	}
	c.swept = now
	gen := c.gen.Load()
	c.tokens = sweep(c.tokens, gen, now, c.ttl)
	c.perms = sweep(c.perms, gen, now, c.ttl)
}

// sweep keeps the entries of m that can still serve (of generation gen,
// read less than ttl before now); it returns a new, smaller map when
// fewer than half of them can.
func sweep[V any](m map[string]entry[V], gen uint64, now time.Time, ttl time.Duration) map[string]entry[V] {
	live := func(e entry[V]) bool { return e.gen == gen && now.Sub(e.at) < ttl }
	dead := 0
	for _, e := range m {
		if !live(e) {
			dead++
		}
	}
	if dead == 0 {
		return m
	}
	if dead*2 < len(m) {
		for k, e := range m {
			if !live(e) {
				delete(m, k)
			}
		}
		return m
	}
	kept := make(map[string]entry[V], len(m)-dead)
	for k, e := range m {
		if live(e) {
			kept[k] = e
		}
	}
	return kept
}

// sharedReadTimeout bounds a read shared by concurrent misses: it is not
// bound by the deadline of the caller that happened to start it, which
// may be shorter than the others'.
const sharedReadTimeout = 10 * time.Second

// shared runs read once for the concurrent misses of key at generation
// gen. The read is not cancelled with the caller that started it (the
// others still wait for it); each caller stops waiting when its own
// context ends.
func (c *CachedStore) shared(ctx context.Context, key string, gen uint64, read func(context.Context) (any, error)) (any, error) {
	ch := c.reads.DoChan(key+"@"+strconv.FormatUint(gen, 10), func() (any, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sharedReadTimeout)
		defer cancel()
		return read(rctx)
	})
	select {
	case r := <-ch:
		return r.Val, r.Err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// The writes that invalidate.

// DeleteTenant implements TenantStore and invalidates.
func (c *CachedStore) DeleteTenant(ctx context.Context, id string) error {
	return c.after(c.Store.DeleteTenant(ctx, id))
}

// UpdateAgent implements AgentStore and invalidates.
func (c *CachedStore) UpdateAgent(ctx context.Context, tenantID, id string, p AgentPatch, audit ...AuditEvent) (Agent, error) {
	a, err := c.Store.UpdateAgent(ctx, tenantID, id, p, audit...)
	return a, c.after(err)
}

// TransitionAgent implements AgentStore and invalidates.
func (c *CachedStore) TransitionAgent(ctx context.Context, tenantID, id string, from []string, to string, audit ...AuditEvent) (Agent, error) {
	a, err := c.Store.TransitionAgent(ctx, tenantID, id, from, to, audit...)
	return a, c.after(err)
}

// RotateAgentToken implements AgentStore and invalidates.
func (c *CachedStore) RotateAgentToken(ctx context.Context, tenantID, id string, newHash []byte, audit ...AuditEvent) (Agent, error) {
	a, err := c.Store.RotateAgentToken(ctx, tenantID, id, newHash, audit...)
	return a, c.after(err)
}

// AddPermission implements AgentStore and invalidates.
func (c *CachedStore) AddPermission(ctx context.Context, p Permission, audit ...AuditEvent) error {
	return c.after(c.Store.AddPermission(ctx, p, audit...))
}

// DeletePermission implements AgentStore and invalidates.
func (c *CachedStore) DeletePermission(ctx context.Context, tenantID, agentID, toolKey string, audit ...AuditEvent) error {
	return c.after(c.Store.DeletePermission(ctx, tenantID, agentID, toolKey, audit...))
}

// EscalateTier implements RiskStore and invalidates (the tier is part of
// the cached agent).
func (c *CachedStore) EscalateTier(ctx context.Context, tenantID, agentID, from, to string, audit ...AuditEvent) (bool, error) {
	moved, err := c.Store.EscalateTier(ctx, tenantID, agentID, from, to, audit...)
	return moved, c.after(err)
}
