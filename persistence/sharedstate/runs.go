package sharedstate

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"svc/runstate"
)

// Runs keeps the run context of CONTRACT §16: per run and per agent, the
// bounded aggregates of runstate, folded atomically. Both [Memory] (a lone
// node: no network round trip) and [Valkey] (a cluster: one round trip per
// call, exact under concurrency from every node) implement it, and pass the
// same contract suite.
type Runs interface {
	// Reserve applies the attempt to its run and its agent in one atomic
	// step and returns the members f selects of both documents as they
	// were before it. A retried attempt id changes nothing (Dup).
	Reserve(ctx context.Context, k RunKey, a *runstate.Attempt, f runstate.Fields) (RunPre, error)
	// Peek returns the documents without changing anything (a dry run:
	// no attempt, no dedup entry, no TTL refresh).
	Peek(ctx context.Context, k RunKey, now int64, f runstate.Fields) (RunPre, error)
	// Settle records a committed decision at the run and the agent.
	Settle(ctx context.Context, k RunKey, s *runstate.Settlement) error
	// Tighten lowers the run's trust to level from a durable record and
	// marks its counts incomplete (the state was lost and restored).
	Tighten(ctx context.Context, k RunKey, level int, at int64) error
	// Seed loads the durable trust floors of the last maximum age (a
	// node's start; after a Valkey flush): once seeded, a run without
	// state takes its floor from the store, and Restore is false.
	Seed(ctx context.Context, floors []RunFloor) error
}

// RunFloor is a run's durable trust floor (persistence.RunTaint): its
// level (runstate.Level) and when it was set, in Unix ms.
type RunFloor struct {
	Key   RunKey
	Level int
	At    int64
}

// RunKey names a run and the agent calling in it. Run is the call's
// trace.run_id, "" for the agent's ambient run; Parent its
// trace.parent_run_id.
type RunKey struct {
	TenantID string
	AgentID  string
	Run      string
	Parent   string
}

// runKey and agentKey length-prefix each part, so that no separator inside
// an id makes two keys collide. The ambient run is keyed apart from every
// named run.
func (k RunKey) runKey() string {
	if k.Run == "" {
		return joinKey("run:", k.TenantID, '~', k.AgentID)
	}
	return joinKey("run:", k.TenantID, '=', k.Run)
}

func (k RunKey) parentKey() string {
	if k.Parent == "" {
		return ""
	}
	return joinKey("run:", k.TenantID, '=', k.Parent)
}

func (k RunKey) agentKey() string { return joinKey("runagent:", k.TenantID, ':', k.AgentID) }

// joinKey is prefix, a length-prefixed (its length in bytes, a colon, a),
// sep and b length-prefixed, in one allocation.
func joinKey(prefix, a string, sep byte, b string) string {
	var k strings.Builder
	k.Grow(len(prefix) + len(a) + len(b) + 24)
	k.WriteString(prefix)
	k.WriteString(strconv.Itoa(len(a))) // small: no allocation
	k.WriteByte(':')
	k.WriteString(a)
	k.WriteByte(sep)
	k.WriteString(strconv.Itoa(len(b)))
	k.WriteByte(':')
	k.WriteString(b)
	return k.String()
}

// RunPre is what Reserve and Peek return: the documents built from the state
// before the call (nil when the Fields select none of a document).
type RunPre struct {
	Run, Agent runstate.Obj
	// Seq is the attempt's ordinal in the run (Reserve; for Settle).
	Seq int64
	// Level is the run's trust level before the call (runstate.Level; 0
	// when it has seen none), whatever the documents hold.
	Level int
	// Dup: the attempt id was applied before; nothing changed.
	Dup bool
	// Restore: the run had no state, and the store does not know every
	// durable floor (not seeded yet, a Valkey flush being restored, floors
	// dropped at the cap); the caller reads the run's durable taint record
	// and tightens the run with it, if any.
	Restore bool
	// Restoring (Valkey): the server lost its data and the floors are not
	// restored yet; the caller seeds them (Seed).
	Restoring bool
}

// RunLimits bound the run state.
type RunLimits struct {
	// IdleTTL drops a run (and an agent's history) idle this long.
	IdleTTL time.Duration
	// MaxAge drops a run this long after its first call.
	MaxAge time.Duration
	// MaxRuns caps the runs a lone node keeps (at the cap a new run evicts
	// the least recently used of a sample of its shard, which marks runs
	// started in the idle TTL after it incomplete). Valkey runs with
	// noeviction and keeps every run.
	MaxRuns int
}

// docs builds the documents f selects (and notes the run's level).
func docs(pre *RunPre, r *runstate.Run, g *runstate.Agent, runID string, now int64, f runstate.Fields) {
	if r != nil {
		pre.Level = r.Level
	}
	if f.Run != 0 {
		pre.Run = runstate.RunDocOf(r, runID, now, f)
	}
	if f.Agent != 0 {
		pre.Agent = runstate.AgentDoc(g, now, f.Agent)
	}
}

func (l RunLimits) withDefaults() RunLimits {
	if l.IdleTTL <= 0 {
		l.IdleTTL = runstate.DefaultIdleTTL
	}
	if l.MaxAge <= 0 {
		l.MaxAge = runstate.DefaultMaxAge
	}
	if l.MaxRuns <= 0 {
		l.MaxRuns = 50_000
	}
	return l
}

// RunsOf returns the run state kept by st: in process for [Memory], in
// Valkey for [Valkey].
func RunsOf(st State, l RunLimits) (Runs, error) {
	switch s := st.(type) {
	case *Memory:
		return s.Runs(l), nil
	case *Valkey:
		return s.Runs(l), nil
	}
	return nil, fmt.Errorf("%w: no run state for a %s state", ErrInvalidArgument, st.Backend())
}
