package actors

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"svc/messages"
	"svc/persistence"
	"svc/persistence/sharedstate"
	"svc/rules/authz"
	"svc/rules/policy"
	"svc/runstate"
)

// The run context of a call (CONTRACT §16): what the agent actor adds to
// the policy input when the tenant's policies refer to input.run or
// input.agent_history, and what follows the decision's commit.

// errRunStore marks a failure to read a run's durable taint (the database,
// not the shared state).
var errRunStore = errors.New("actors: run taint unreadable")

// runTicket is a call's place in its run: what the decision records and
// what is settled after its commit.
type runTicket struct {
	key sharedstate.RunKey
	seq int64
	ctx *runstate.Context
	// taint is the durable trust floor this call lowers (nil: it lowers
	// nothing), written in the decision's transaction.
	taint *persistence.RunTaint
	// dry: a dry run's peek; nothing is settled.
	dry bool
}

// runAttempt classifies a call into the attempt its run records: every
// field is the call's own, whatever the policy decides.
func runAttempt(m *messages.Authorize, ad authz.Admission, act persistence.SkillAction, skillTrust string, found bool, mcp *policy.MCPInput) runstate.Attempt {
	req, tc := &m.Request, ad.ToolCall
	a := runstate.Attempt{AgentID: m.AgentID, At: m.ReceivedAt.UnixMilli(), Tool: tc.Tool, Action: tc.Action,
		Mutating: req.MutatesState || (found && act.MutatesState)}
	if m.ReceivedAt.IsZero() {
		a.At = time.Now().UnixMilli()
	}
	if req.RequestID != nil && *req.RequestID != "" {
		sum := sha256.Sum256([]byte(m.AgentID + "\n" + *req.RequestID))
		a.ID = hex.EncodeToString(sum[:12])
	}
	a.Destructive = a.Mutating && found && (act.Risk == "high" || act.Risk == "critical")
	// The least trusted of what the call brings: its own trust (the
	// source, tightened by the chain's root), the skill's output and the
	// MCP server's trust.
	source, _ := policy.ParseTrust(req.SourceTrust)
	a.Level, a.Via = runstate.Level(source), "source_trust"
	if root := rootTrust(req); root != nil && *root != "" {
		if lv := runstate.Level(*root); lv > a.Level {
			a.Level, a.Via = lv, "root_trust_level"
		}
	}
	if lv := runstate.Level(ad.EffectiveTrust); lv > a.Level {
		a.Level, a.Via = lv, "source_trust"
	}
	out := act.OutputTrust
	if out == "" {
		out = skillTrust
	}
	if lv := runstate.Level(out); lv > a.Level {
		a.Level, a.Via = lv, "skill.output_trust"
	}
	if mcp != nil {
		if lv := runstate.Level(mcp.TrustLevel); lv > a.Level {
			a.Level, a.Via = lv, "mcp.trust_level"
		}
	}
	if found {
		a.Labels = act.Labels
		for _, l := range act.Labels {
			if l == "egress" {
				a.Egress = true
			}
		}
		for _, p := range act.Accumulate {
			if v, ok := number(tc.Parameters[p]); ok {
				if a.Sums == nil {
					a.Sums = map[string]float64{}
				}
				a.Sums[tc.Tool+"/"+tc.Action+"."+p] = v
			}
		}
	}
	if req.Trace == nil || req.Trace.RunID == nil || *req.Trace.RunID == "" {
		a.NoRunID = true
	}
	return a
}

// number reads a JSON number parameter.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// runKey names the call's run: its trace.run_id, or the agent's ambient
// run.
func runKey(m *messages.Authorize) sharedstate.RunKey {
	k := sharedstate.RunKey{TenantID: m.TenantID, AgentID: m.AgentID}
	if t := m.Request.Trace; t != nil {
		if t.RunID != nil {
			k.Run = *t.RunID
		}
		if t.ParentRunID != nil {
			k.Parent = *t.ParentRunID
		}
	}
	return k
}

// ambientPrefix names an agent's ambient run in the durable taint table.
const ambientPrefix = "~ambient:"

// durableRunID is the run's id in the durable taint table; the ambient run
// is named after its agent.
func durableRunID(k sharedstate.RunKey) string {
	if k.Run == "" {
		return ambientPrefix + k.AgentID
	}
	return k.Run
}

// SeedRuns loads the durable trust floors of the last day into the run
// state (a node's start, before it serves; a cluster's shared state after a
// Valkey flush), so that a run without state takes its taint from there
// rather than from the database.
func (a *Authorizer) SeedRuns(ctx context.Context) error { return a.facts.seedRuns(ctx) }

func (f *factSource) seedRuns(ctx context.Context) error {
	if f.opt.Runs == nil {
		return nil
	}
	rows, err := f.store.RecentRunTaints(ctx, time.Now().Add(-f.opt.RunMaxAge))
	if err != nil {
		return err
	}
	floors := make([]sharedstate.RunFloor, 0, len(rows))
	for _, t := range rows {
		k := sharedstate.RunKey{TenantID: t.TenantID, Run: t.RunID}
		if agent, ok := strings.CutPrefix(t.RunID, ambientPrefix); ok {
			k = sharedstate.RunKey{TenantID: t.TenantID, AgentID: agent}
		}
		floors = append(floors, sharedstate.RunFloor{Key: k, Level: t.Level, At: t.UpdatedAt.UnixMilli()})
	}
	return f.opt.Runs.Seed(ctx, floors)
}

// reseed restores the floors in the background after the shared state lost
// them (a Valkey flush), once at a time on this node; calls meanwhile read
// each new run's floor from the database.
func (f *factSource) reseed() {
	if !f.seeding.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer f.seeding.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := f.seedRuns(ctx); err != nil {
			f.log.Warn("run taint floors not restored into shared state yet; new runs read theirs from the database", "error", err)
			return
		}
		f.log.Info("run taint floors restored into shared state")
	}()
}

// runContext reserves the call's attempt in its run (a dry run only peeks)
// and returns the documents the policy sees, the state before this call.
// Shared state that cannot be reached fails the call closed.
func (f *factSource) runContext(ctx context.Context, m *messages.Authorize, a *runstate.Attempt, fields runstate.Fields) (*runTicket, error) {
	k := runKey(m)
	read := fields.ForCall(a.Tool, a.Action)
	var pre sharedstate.RunPre
	var err error
	if m.Request.DryRun {
		pre, err = f.opt.Runs.Peek(ctx, k, a.At, read)
	} else {
		pre, err = f.opt.Runs.Reserve(ctx, k, a, read)
	}
	if err != nil {
		return nil, err
	}
	if pre.Restoring {
		f.reseed()
	}
	if pre.Restore {
		// The run has no state, and the store may have lost some: its
		// durable floor, if any, comes back (taint never clears).
		t, err := f.store.RunTaint(ctx, m.TenantID, durableRunID(k))
		switch {
		case err == nil && t.Level > 0:
			if !m.Request.DryRun {
				if err := f.opt.Runs.Tighten(ctx, k, t.Level, a.At); err != nil {
					return nil, err
				}
			}
			r := &runstate.Run{}
			r.Tighten(t.Level, t.UpdatedAt.UnixMilli())
			if read.Run != 0 {
				pre.Run = runstate.RunDocOf(r, k.Run, a.At, read)
			}
			pre.Level = max(pre.Level, t.Level)
		case err != nil && !errors.Is(err, persistence.ErrNotFound):
			return nil, fmt.Errorf("%w: %w", errRunStore, err)
		}
	}
	level := pre.Level
	c, err := runstate.NewContext(pre.Run, pre.Agent)
	if err != nil {
		return nil, err
	}
	tk := &runTicket{key: k, seq: pre.Seq, ctx: c, dry: m.Request.DryRun}
	// Taint (untrusted_external or worse) is durable: the decision's
	// transaction writes it, so losing shared state never clears it.
	if !tk.dry && !pre.Dup && a.Level > level && a.Level >= runstate.LevelUntrusted {
		tk.taint = &persistence.RunTaint{TenantID: m.TenantID, RunID: durableRunID(k), Level: a.Level, Seq: pre.Seq,
			Via: a.Via, UpdatedAt: m.ReceivedAt.UTC().Truncate(time.Microsecond)}
	}
	return tk, nil
}

// settleRun records a committed decision at its run before the call is
// answered, so that the caller's next call sees it on any node (on a
// cluster this is a second Valkey round trip, after the commit). A failure
// is logged: the decision-dependent counts then lag, the attempt counts
// and the taint do not.
func (f *factSource) settleRun(tk *runTicket, tool, action, decision, reason string, at time.Time) {
	if tk == nil || tk.dry {
		return
	}
	s := &runstate.Settlement{Seq: tk.seq, Tool: tool, Action: action, Decision: decision, Reason: reason, At: at.UnixMilli()}
	ctx := context.Background()
	if !sharedstate.InProcess(f.opt.Runs) { // a lone node's state needs no deadline (nor its timer)
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	if err := f.opt.Runs.Settle(ctx, tk.key, s); err != nil {
		f.log.Warn("run context not settled: its decision counts lag", "error", err)
	}
}
