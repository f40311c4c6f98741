package sharedstate

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/valkey-io/valkey-go"

	"svc/runstate"
)

// valkeyRuns is the run state of a cluster: each run and each agent is one
// JSON value, folded by one Lua script per call (Valkey runs a script alone,
// so concurrent calls from every node each see a distinct state before
// them, and limits are exact). The script is runstate's fold written again
// in Lua; the contract suite holds the two equal.
type valkeyRuns struct {
	v       *Valkey
	lim     RunLimits
	reserve *valkey.Lua
	peek    *valkey.Lua
	settle  *valkey.Lua
	tighten *valkey.Lua
	seed    *valkey.Lua
}

var _ Runs = (*valkeyRuns)(nil)

// Runs returns the cluster's run state. The first call after the server
// lost its data (a flush, a restart without persistence) finds no epoch key
// and counts as a loss, as a lone node's start does.
func (v *Valkey) Runs(l RunLimits) Runs {
	return &valkeyRuns{v: v, lim: l.withDefaults(),
		reserve: valkey.NewLuaScript(runLua + runReserveLua),
		peek:    valkey.NewLuaScriptReadOnly(runLua + runPeekLua),
		settle:  valkey.NewLuaScript(runLua + runSettleLua),
		tighten: valkey.NewLuaScript(runLua + runTightenLua),
		seed:    valkey.NewLuaScript(runLua + runSeedLua),
	}
}

// wireAttempt is an Attempt as the script reads it.
type wireAttempt struct {
	ID     string   `json:"id"`
	Agent  string   `json:"ag"`
	At     int64    `json:"at"`
	Tool   string   `json:"t"`
	Action string   `json:"a"`
	M      int      `json:"m"`
	D      int      `json:"d"`
	E      int      `json:"e"`
	Level  int      `json:"lv"`
	Via    string   `json:"via"`
	Labels []string `json:"lb"`
	Sums   [][2]any `json:"su"`
	NoRun  int      `json:"nr"`
	Parent string   `json:"pid"`
}

func b01(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (r *valkeyRuns) args(op string, now int64) []string {
	return []string{op, strconv.FormatInt(now, 10), strconv.FormatInt(r.lim.IdleTTL.Milliseconds(), 10),
		strconv.FormatInt(r.lim.MaxAge.Milliseconds(), 10)}
}

func (r *valkeyRuns) keys(k RunKey) []string {
	parent := k.parentKey()
	if parent == "" {
		parent = k.runKey()
	}
	return []string{r.v.key(k.runKey()), r.v.key(k.agentKey()), r.v.key("runepoch"), r.v.key(parent), r.v.key("floor:" + k.runKey())}
}

func (r *valkeyRuns) Reserve(ctx context.Context, k RunKey, a *runstate.Attempt, f runstate.Fields) (RunPre, error) {
	if err := r.v.check(ctx, "run reserve"); err != nil {
		return RunPre{}, err
	}
	w := wireAttempt{ID: a.ID, Agent: a.AgentID, At: a.At, Tool: a.Tool, Action: a.Action, M: b01(a.Mutating), D: b01(a.Destructive),
		E: b01(a.Egress), Level: a.Level, Via: a.Via, Labels: slices.Sorted(slices.Values(a.Labels)), Sums: [][2]any{},
		NoRun: b01(a.NoRunID), Parent: k.Parent}
	if w.Labels == nil {
		w.Labels = []string{}
	}
	for _, key := range slices.Sorted(func(yield func(string) bool) {
		for key := range a.Sums {
			if !yield(key) {
				return
			}
		}
	}) {
		w.Sums = append(w.Sums, [2]any{key, a.Sums[key]})
	}
	raw, err := json.Marshal(w)
	if err != nil {
		return RunPre{}, fmt.Errorf("%w: run reserve: %w", ErrInvalidArgument, err)
	}
	res, err := r.reserve.Exec(ctx, r.v.client, r.keys(k), append(r.args("reserve", a.At), string(raw))).ToArray()
	if err != nil {
		return RunPre{}, r.v.fail("run reserve", err)
	}
	return r.pre(k, a.At, res, 2, f)
}

// pre decodes the script's answer {run, agent, flags...}: the run and agent
// as they were, and from index flags on: dup, seq, restore, run lost,
// agent lost, parent level, floor level, restoring (Reserve) or run lost,
// agent lost, restore, parent level, floor level, restoring (Peek).
func (r *valkeyRuns) pre(k RunKey, now int64, res []valkey.ValkeyMessage, flags int, f runstate.Fields) (RunPre, error) {
	ints := make([]int64, 0, len(res)-2)
	for _, m := range res[2:] {
		n, err := m.AsInt64()
		if err != nil {
			return RunPre{}, r.v.fail("run state", err)
		}
		ints = append(ints, n)
	}
	var pre RunPre
	var runLost, agentLost int64
	var parentLevel, floorLevel int64
	if flags == 2 && len(ints) == 8 {
		pre.Dup, pre.Seq, pre.Restore, runLost, agentLost, parentLevel, floorLevel, pre.Restoring =
			ints[0] == 1, ints[1], ints[2] == 1, ints[3], ints[4], ints[5], ints[6], ints[7] == 1
	} else if flags == 0 && len(ints) == 6 {
		runLost, agentLost, pre.Restore, parentLevel, floorLevel, pre.Restoring = ints[0], ints[1], ints[2] == 1, ints[3], ints[4], ints[5] == 1
	} else {
		return RunPre{}, fmt.Errorf("%w: run state: unexpected answer", ErrUnavailable)
	}
	var run runstate.Run
	var agent runstate.Agent
	if s, _ := res[0].ToString(); s != "" {
		if err := json.Unmarshal([]byte(s), &run); err != nil {
			return RunPre{}, fmt.Errorf("%w: run state: %w", ErrWrongType, err)
		}
	} else {
		run.Lost = int(runLost)
		run.Inherit(k.Parent, int(parentLevel), now)
		if floorLevel > 0 {
			run.Tighten(int(floorLevel), now)
		}
	}
	if s, _ := res[1].ToString(); s != "" {
		if err := json.Unmarshal([]byte(s), &agent); err != nil {
			return RunPre{}, fmt.Errorf("%w: agent run state: %w", ErrWrongType, err)
		}
	} else {
		agent.Lost = int(agentLost)
	}
	docs(&pre, &run, &agent, k.Run, now, f)
	return pre, nil
}

func (r *valkeyRuns) Peek(ctx context.Context, k RunKey, now int64, f runstate.Fields) (RunPre, error) {
	if err := r.v.check(ctx, "run peek"); err != nil {
		return RunPre{}, err
	}
	hasParent := "0"
	if k.Parent != "" {
		hasParent = "1"
	}
	res, err := r.peek.Exec(ctx, r.v.client, r.keys(k), append(r.args("peek", now), hasParent)).ToArray()
	if err != nil {
		return RunPre{}, r.v.fail("run peek", err)
	}
	pre, err := r.pre(k, now, res, 0, f)
	if err != nil {
		return RunPre{}, err
	}
	return pre, nil
}

// wireSettlement is a Settlement as the script reads it.
type wireSettlement struct {
	Seq      int64  `json:"s"`
	Tool     string `json:"t"`
	Action   string `json:"a"`
	Decision string `json:"d"`
	Reason   string `json:"r"`
	At       int64  `json:"at"`
}

func (r *valkeyRuns) Settle(ctx context.Context, k RunKey, s *runstate.Settlement) error {
	if err := r.v.check(ctx, "run settle"); err != nil {
		return err
	}
	raw, err := json.Marshal(wireSettlement{Seq: s.Seq, Tool: s.Tool, Action: s.Action, Decision: s.Decision, Reason: s.Reason, At: s.At})
	if err != nil {
		return fmt.Errorf("%w: run settle: %w", ErrInvalidArgument, err)
	}
	if err := r.settle.Exec(ctx, r.v.client, r.keys(k), append(r.args("settle", s.At), string(raw))).Error(); err != nil {
		return r.v.fail("run settle", err)
	}
	return nil
}

// Seed raises each floor's marker to its level (never lowers one) and
// marks the server's floors restored.
func (r *valkeyRuns) Seed(ctx context.Context, floors []RunFloor) error {
	if err := r.v.check(ctx, "run seed"); err != nil {
		return err
	}
	now := time.Now().UnixMilli()
	for len(floors) > 0 {
		n := min(len(floors), 500)
		args := r.args("seed", now)
		keys := []string{r.v.key("runepoch")}
		for _, fl := range floors[:n] {
			keys = append(keys, r.v.key("floor:"+fl.Key.runKey()))
			args = append(args, strconv.Itoa(fl.Level), strconv.FormatInt(max(1, r.lim.MaxAge.Milliseconds()-(now-fl.At)), 10))
		}
		floors = floors[n:]
		ready := "0"
		if len(floors) == 0 {
			ready = "1"
		}
		if err := r.seed.Exec(ctx, r.v.client, keys, append(args, ready)).Error(); err != nil {
			return r.v.fail("run seed", err)
		}
	}
	if err := r.seed.Exec(ctx, r.v.client, []string{r.v.key("runepoch")}, append(r.args("seed", now), "1")).Error(); err != nil {
		return r.v.fail("run seed", err)
	}
	return nil
}

func (r *valkeyRuns) Tighten(ctx context.Context, k RunKey, level int, at int64) error {
	if err := r.v.check(ctx, "run tighten"); err != nil {
		return err
	}
	if err := r.tighten.Exec(ctx, r.v.client, r.keys(k), append(r.args("tighten", at), strconv.Itoa(level))).Error(); err != nil {
		return r.v.fail("run tighten", err)
	}
	return nil
}
