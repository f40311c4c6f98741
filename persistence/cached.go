package persistence

import (
	"context"
	"encoding/hex"
	"sync"
	"sync/atomic"
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
// # Scope
//
// Only writes made through this process invalidate, so a node shares the
// database with no other node when it uses it (SVC_CLUSTER=false); a
// cluster reads through to the database.
type CachedStore struct {
	Store
	gen   atomic.Uint64
	limit int

	mu     sync.Mutex
	tokens map[string]cachedAgent
	perms  map[string]cachedPerms
}

type cachedAgent struct {
	gen   uint64
	agent Agent
}

type cachedPerms struct {
	gen   uint64
	perms []Permission
}

var _ Store = (*CachedStore)(nil)

// NewCachedStore wraps s, caching at most limit entries of each kind.
func NewCachedStore(s Store, limit int) *CachedStore {
	return &CachedStore{Store: s, limit: max(limit, 1), tokens: map[string]cachedAgent{}, perms: map[string]cachedPerms{}}
}

func (c *CachedStore) bump() {
	c.gen.Add(1)
	c.mu.Lock()
	// Everything is stale now; drop it so memory follows the live entries.
	c.tokens = map[string]cachedAgent{}
	c.perms = map[string]cachedPerms{}
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
	key := hex.EncodeToString(hash)
	gen := c.gen.Load()
	c.mu.Lock()
	e, ok := c.tokens[key]
	c.mu.Unlock()
	if ok && e.gen == gen {
		return e.agent, nil
	}
	a, err := c.Store.LookupAgentToken(ctx, hash)
	if err != nil {
		return a, err
	}
	c.mu.Lock()
	if len(c.tokens) < c.limit {
		c.tokens[key] = cachedAgent{gen: gen, agent: a}
	}
	c.mu.Unlock()
	return a, nil
}

// ListPermissions implements AgentStore through the cache.
func (c *CachedStore) ListPermissions(ctx context.Context, tenantID, agentID string) ([]Permission, error) {
	key := tenantID + "/" + agentID
	gen := c.gen.Load()
	c.mu.Lock()
	e, ok := c.perms[key]
	c.mu.Unlock()
	if ok && e.gen == gen {
		return e.perms, nil
	}
	ps, err := c.Store.ListPermissions(ctx, tenantID, agentID)
	if err != nil {
		return ps, err
	}
	c.mu.Lock()
	if len(c.perms) < c.limit {
		c.perms[key] = cachedPerms{gen: gen, perms: ps}
	}
	c.mu.Unlock()
	return ps, nil
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
