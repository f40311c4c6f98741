package sharedstate

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"svc/runstate"
)

// memRuns is the run state of a lone node: runs and agents in two arrays of
// locked shards (a call locks its run's shard, then its agent's, always in
// that order), expired lazily and by a sweep of one shard every
// sweepEvery reservations.
type memRuns struct {
	lim      RunLimits
	seed     maphash.Seed
	runs     [memoryShards]runShard
	agents   [memoryShards]agentShard
	lost     atomic.Int64 // ms: when this state last lost something (its start, an eviction)
	reserves atomic.Uint64
	closed   *atomic.Bool
}

type runShard struct {
	mu sync.Mutex
	m  map[string]*runstate.Run
}

type agentShard struct {
	mu sync.Mutex
	m  map[string]*runstate.Agent
}

const sweepEvery = 1024

var _ Runs = (*memRuns)(nil)

// Runs returns the lone node's run state. Its start counts as a loss: a run
// first seen within the idle TTL of it may have had calls before (a
// restart), so its counts are marked incomplete.
func (m *Memory) Runs(l RunLimits) Runs {
	r := &memRuns{lim: l.withDefaults(), seed: maphash.MakeSeed(), closed: &m.closed}
	for i := range r.runs {
		r.runs[i].m = map[string]*runstate.Run{}
		r.agents[i].m = map[string]*runstate.Agent{}
	}
	r.lost.Store(time.Now().UnixMilli())
	return r
}

func (r *memRuns) shard(key string) int {
	return int(maphash.String(r.seed, key) % memoryShards)
}

func (r *memRuns) check(ctx context.Context, op string) error {
	if r.closed.Load() {
		return fmt.Errorf("%w: %s", ErrClosed, op)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, op, err)
	}
	return nil
}

// live reports whether a run's state is still alive at now.
func (r *memRuns) live(st *runstate.Run, now int64) bool {
	return now-st.Last < r.lim.IdleTTL.Milliseconds() && now-st.Created < r.lim.MaxAge.Milliseconds()
}

func (r *memRuns) agentLive(st *runstate.Agent, now int64) bool {
	last := st.Created
	for _, s := range st.W1h {
		last = max(last, s.I*runstate.Width1h+runstate.Width1h)
	}
	return now-last < r.lim.IdleTTL.Milliseconds()+runstate.Width1h
}

func (r *memRuns) Reserve(ctx context.Context, k RunKey, a *runstate.Attempt) (RunPre, error) {
	if err := r.check(ctx, "run reserve"); err != nil {
		return RunPre{}, err
	}
	now := a.At
	if n := r.reserves.Add(1); n%sweepEvery == 0 {
		r.sweep(int((n/sweepEvery)%memoryShards), now)
	}
	parentLevel := r.parentLevel(k, now)
	key := k.runKey()
	sh := &r.runs[r.shard(key)]
	sh.mu.Lock()
	st, ok := sh.m[key]
	if ok && !r.live(st, now) {
		ok = false
	}
	if !ok {
		st = &runstate.Run{}
		r.insert(sh, key, st, now)
	}
	var pre RunPre
	fresh := !st.Known()
	lost := r.lost.Load()
	if fresh {
		pre.Restore = now-lost < r.lim.MaxAge.Milliseconds()
		if now-lost < r.lim.IdleTTL.Milliseconds() {
			st.Lost = 1
		}
		st.Inherit(k.Parent, parentLevel, now)
	}
	pre.Run = runstate.RunDoc(st, k.Run, now)
	at := *a
	at.ParentID, at.ParentLevel = k.Parent, parentLevel
	pre.Dup = st.Apply(&at)
	pre.Seq = st.Seq
	if pre.Dup {
		pre.Seq = st.Att[a.ID]
	}
	sh.mu.Unlock()

	ash := &r.agents[r.shard(k.agentKey())]
	ash.mu.Lock()
	g, ok := ash.m[k.agentKey()]
	if !ok || !r.agentLive(g, now) {
		g = &runstate.Agent{}
		if now-lost < r.lim.IdleTTL.Milliseconds() {
			g.Lost = 1
		}
		ash.m[k.agentKey()] = g
	}
	pre.Agent = runstate.AgentDoc(g, now)
	if !pre.Dup {
		g.Apply(a, fresh)
	}
	ash.mu.Unlock()
	return pre, nil
}

// parentLevel is the level of the call's parent run (0 without one).
func (r *memRuns) parentLevel(k RunKey, now int64) int {
	pk := k.parentKey()
	if pk == "" {
		return 0
	}
	sh := &r.runs[r.shard(pk)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if p, ok := sh.m[pk]; ok && r.live(p, now) {
		return p.Level
	}
	return 0
}

// insert adds a new run to a locked shard, evicting the least recently used
// when the shard is full (which counts as a loss).
func (r *memRuns) insert(sh *runShard, key string, st *runstate.Run, now int64) {
	limit := max(1, r.lim.MaxRuns/memoryShards)
	if len(sh.m) >= limit {
		for k, s := range sh.m {
			if !r.live(s, now) {
				delete(sh.m, k)
			}
		}
	}
	if len(sh.m) >= limit {
		oldest, at := "", int64(0)
		for k, s := range sh.m {
			if oldest == "" || s.Last < at {
				oldest, at = k, s.Last
			}
		}
		delete(sh.m, oldest)
		r.lost.Store(now)
	}
	sh.m[key] = st
}

// sweep drops the expired runs and agents of one shard.
func (r *memRuns) sweep(i int, now int64) {
	sh := &r.runs[i]
	sh.mu.Lock()
	for k, s := range sh.m {
		if !r.live(s, now) {
			delete(sh.m, k)
		}
	}
	sh.mu.Unlock()
	ash := &r.agents[i]
	ash.mu.Lock()
	for k, g := range ash.m {
		if !r.agentLive(g, now) {
			delete(ash.m, k)
		}
	}
	ash.mu.Unlock()
}

func (r *memRuns) Peek(ctx context.Context, k RunKey, now int64) (RunPre, error) {
	if err := r.check(ctx, "run peek"); err != nil {
		return RunPre{}, err
	}
	var pre RunPre
	parentLevel := r.parentLevel(k, now)
	key := k.runKey()
	sh := &r.runs[r.shard(key)]
	sh.mu.Lock()
	st, ok := sh.m[key]
	if !ok || !r.live(st, now) {
		st = &runstate.Run{}
		st.Inherit(k.Parent, parentLevel, now)
		lost := r.lost.Load()
		if now-lost < r.lim.IdleTTL.Milliseconds() {
			st.Lost = 1
		}
		pre.Restore = now-lost < r.lim.MaxAge.Milliseconds()
	}
	pre.Run = runstate.RunDoc(st, k.Run, now)
	pre.Seq = st.Seq + 1
	sh.mu.Unlock()
	ash := &r.agents[r.shard(k.agentKey())]
	ash.mu.Lock()
	g, ok := ash.m[k.agentKey()]
	if !ok || !r.agentLive(g, now) {
		g = &runstate.Agent{}
		if now-r.lost.Load() < r.lim.IdleTTL.Milliseconds() {
			g.Lost = 1
		}
	}
	pre.Agent = runstate.AgentDoc(g, now)
	ash.mu.Unlock()
	return pre, nil
}

func (r *memRuns) Settle(ctx context.Context, k RunKey, s *runstate.Settlement) error {
	if err := r.check(ctx, "run settle"); err != nil {
		return err
	}
	key := k.runKey()
	sh := &r.runs[r.shard(key)]
	sh.mu.Lock()
	if st, ok := sh.m[key]; ok {
		st.Settle(s)
	}
	sh.mu.Unlock()
	ash := &r.agents[r.shard(k.agentKey())]
	ash.mu.Lock()
	if g, ok := ash.m[k.agentKey()]; ok {
		g.Settle(s)
	}
	ash.mu.Unlock()
	return nil
}

func (r *memRuns) Tighten(ctx context.Context, k RunKey, level int, at int64) error {
	if err := r.check(ctx, "run tighten"); err != nil {
		return err
	}
	key := k.runKey()
	sh := &r.runs[r.shard(key)]
	sh.mu.Lock()
	if st, ok := sh.m[key]; ok {
		st.Tighten(level, at)
	}
	sh.mu.Unlock()
	return nil
}
