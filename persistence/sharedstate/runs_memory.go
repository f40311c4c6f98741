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
	// seeded: the durable floors are loaded (Seed); until then a run
	// without state may have a floor only the database knows (Restore).
	seeded atomic.Bool
	// floorsLost (ms): when a floor was dropped at the cap; for the
	// maximum age after it, a run without state asks the database again.
	floorsLost atomic.Int64
}

type runShard struct {
	mu sync.Mutex
	m  map[string]*runstate.Run
	// floors are the runs' trust floors (untrusted_external or worse),
	// kept for the maximum age after they were set, past the runs' own
	// state: a run dropped for idleness, evicted at the cap, or started
	// again after a restart (Seed) keeps its taint.
	floors map[string]floor
}

// floor is a run's durable trust floor: its level and when it was set (ms).
type floor struct {
	level int
	at    int64
}

// maxFloors caps the floors a lone node keeps (about 100 bytes each).
const maxFloors = 1_000_000

type agentShard struct {
	mu sync.Mutex
	m  map[string]*runstate.Agent
}

const sweepEvery = 1024

var _ Runs = (*memRuns)(nil)

// InProcess reports whether r keeps its state in this process (a lone
// node's): its calls never wait on a network, so they need no deadline.
func InProcess(r Runs) bool {
	_, ok := r.(*memRuns)
	return ok
}

// Runs returns the lone node's run state. Its start counts as a loss: a run
// first seen within the idle TTL of it may have had calls before (a
// restart), so its counts are marked incomplete.
func (m *Memory) Runs(l RunLimits) Runs {
	r := &memRuns{lim: l.withDefaults(), seed: maphash.MakeSeed(), closed: &m.closed}
	for i := range r.runs {
		r.runs[i].m = map[string]*runstate.Run{}
		r.runs[i].floors = map[string]floor{}
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
	return now-st.Last() < r.lim.IdleTTL.Milliseconds()+runstate.Width1h
}

func (r *memRuns) Reserve(ctx context.Context, k RunKey, a *runstate.Attempt, f runstate.Fields) (RunPre, error) {
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
	if fresh {
		pre.Restore = r.startRun(sh, key, st, k, parentLevel, now)
	}
	docs(&pre, st, nil, k.Run, now, f.RunOnly())
	at := *a
	at.ParentID, at.ParentLevel = k.Parent, parentLevel
	pre.Dup = st.Apply(&at)
	pre.Seq = st.Seq
	if pre.Dup {
		pre.Seq = st.SeenSeq(a.ID)
	}
	r.keepFloor(sh, key, st.Level, now)
	sh.mu.Unlock()

	akey := k.agentKey()
	ash := &r.agents[r.shard(akey)]
	ash.mu.Lock()
	g := r.agent(ash, akey, now, true)
	docs(&pre, nil, g, k.Run, now, f.AgentOnly())
	if !pre.Dup {
		g.Apply(a, fresh)
	}
	ash.mu.Unlock()
	return pre, nil
}

// startRun prepares a run without state in its locked shard: its counts
// are incomplete when the store lost state within the idle TTL, it takes
// its parent's level, and its own durable floor if it has one. It reports
// whether the database must still be asked for a floor (Restore).
func (r *memRuns) startRun(sh *runShard, key string, st *runstate.Run, k RunKey, parentLevel int, now int64) bool {
	if now-r.lost.Load() < r.lim.IdleTTL.Milliseconds() {
		st.Lost = 1
	}
	st.Inherit(k.Parent, parentLevel, now)
	if fl, ok := sh.floors[key]; ok && now-fl.at < r.lim.MaxAge.Milliseconds() {
		st.Tighten(fl.level, now)
		return false
	}
	return !r.seeded.Load() || now-r.floorsLost.Load() < r.lim.MaxAge.Milliseconds()
}

// keepFloor records a run's level as its floor once it is untrusted.
func (r *memRuns) keepFloor(sh *runShard, key string, level int, now int64) {
	if level < runstate.LevelUntrusted {
		return
	}
	if fl, ok := sh.floors[key]; ok && fl.level >= level {
		return
	}
	if trim(sh.floors, maxFloors/memoryShards, func(fl floor) bool { return now-fl.at >= r.lim.MaxAge.Milliseconds() },
		func(fl floor) int64 { return fl.at }) {
		r.floorsLost.Store(now)
	}
	sh.floors[key] = floor{level: level, at: now}
}

// Seed loads durable trust floors (a node's start) and marks the store as
// knowing every floor: a run without state then asks the database no more.
func (r *memRuns) Seed(ctx context.Context, floors []RunFloor) error {
	if err := r.check(ctx, "run seed"); err != nil {
		return err
	}
	for _, fl := range floors {
		key := fl.Key.runKey()
		sh := &r.runs[r.shard(key)]
		sh.mu.Lock()
		if cur, ok := sh.floors[key]; !ok || cur.level < fl.Level {
			sh.floors[key] = floor{level: fl.Level, at: fl.At}
		}
		sh.mu.Unlock()
	}
	r.seeded.Store(true)
	return nil
}

// agent is the call's agent in its locked shard, new (its counts
// incomplete when the store lost state within the idle TTL) when it has no
// live state; keep stores a new one.
func (r *memRuns) agent(ash *agentShard, akey string, now int64, keep bool) *runstate.Agent {
	g, ok := ash.m[akey]
	if ok && r.agentLive(g, now) {
		return g
	}
	g = &runstate.Agent{}
	if now-r.lost.Load() < r.lim.IdleTTL.Milliseconds() {
		g.Lost = 1
	}
	if keep {
		ash.m[akey] = g
	}
	return g
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
	if trim(sh.m, max(1, r.lim.MaxRuns/memoryShards), func(st *runstate.Run) bool { return !r.live(st, now) },
		func(st *runstate.Run) int64 { return st.Last }) {
		r.lost.Store(now)
	}
	sh.m[key] = st
}

// evictSample is how many entries trim looks at to choose the one to
// evict, as Redis approximates LRU: the least recent of a sample costs the
// same at any size, where a scan of the shard cost ~10 µs per new run at
// the cap.
const evictSample = 8

// trim makes room for one more entry in m, which holds at most limit: it
// looks at up to evictSample entries (Go starts a map's iteration at a
// random place), drops the first expired one it meets or else the least
// recent, and reports whether it dropped one that was still live. The
// periodic sweep drops the other expired entries.
func trim[V any](m map[string]V, limit int, expired func(V) bool, recency func(V) int64) bool {
	if len(m) < limit {
		return false
	}
	oldest, at, n := "", int64(0), 0
	for k, v := range m {
		if expired(v) {
			delete(m, k)
			return false
		}
		if oldest == "" || recency(v) < at {
			oldest, at = k, recency(v)
		}
		if n++; n == evictSample {
			break
		}
	}
	delete(m, oldest)
	return true
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
	for k, fl := range sh.floors {
		if now-fl.at >= r.lim.MaxAge.Milliseconds() {
			delete(sh.floors, k)
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

func (r *memRuns) Peek(ctx context.Context, k RunKey, now int64, f runstate.Fields) (RunPre, error) {
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
		pre.Restore = r.startRun(sh, key, st, k, parentLevel, now)
	}
	docs(&pre, st, nil, k.Run, now, f.RunOnly())
	pre.Seq = st.Seq + 1
	sh.mu.Unlock()
	akey := k.agentKey()
	ash := &r.agents[r.shard(akey)]
	ash.mu.Lock()
	docs(&pre, nil, r.agent(ash, akey, now, false), k.Run, now, f.AgentOnly())
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
	akey := k.agentKey()
	ash := &r.agents[r.shard(akey)]
	ash.mu.Lock()
	if g, ok := ash.m[akey]; ok {
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
	r.keepFloor(sh, key, level, at)
	sh.mu.Unlock()
	return nil
}
