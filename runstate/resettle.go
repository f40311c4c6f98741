package runstate

import "slices"

// Resettling recorded contexts (a simulation's refold, CONTRACT §18).
//
// A simulation that decides a call otherwise than it was decided changes
// what the calls after it would have seen. What an attempt brings into its
// run and agent (calls, tools, trust, labels, sums, the windows' calls) is
// the same under any outcome, so the recorded context keeps it exact. What
// a settlement brings in is not: the run's decision counts, consecutive
// denies and last deny reason, its last allowed call, its recent calls'
// decisions and each tool's allowed count; the agent's consecutive denies,
// last deny and denies in its windows. [Resettle] follows each run and
// each agent from its first changed decision on, settling the outcomes the
// simulation gives, and rewrites those members of the recorded contexts
// that follow.
//
// It assumes each call's context counted the settlements of the calls
// before it (exact on a lone node for an agent that waits for its
// answers; concurrent calls of one run, and on several nodes a settlement
// a few milliseconds behind, can make a count differ by the calls still
// unsettled). Durations (since_s, since_last_deny_s) run from the time of
// each decision, to the second.

// Outcome is one decision as a simulation settles it.
type Outcome struct {
	Tool, Action string
	// At is the decision's time in Unix ms (its settlement's).
	At int64
	// Recorded and RecordedReason are the decision as recorded; Decision
	// and Reason what the simulation decided (the recorded ones when it did
	// not decide the call again).
	Recorded, RecordedReason string
	Decision, Reason         string
}

// changes reports whether o changes what later calls see: another
// decision, or a deny for another reason.
func (o *Outcome) changes() bool {
	return o.Decision != o.Recorded || (o.Decision == "deny" && o.Reason != o.RecordedReason)
}

// Resettle re-settles recorded contexts with a simulation's outcomes. It
// remembers at most limit runs and limit agents (past them, a run or agent
// that diverges is not followed and its contexts stay as recorded). It is
// not safe for concurrent use.
type Resettle struct {
	reads  Fields
	max    int
	runs   map[string]*settledRun
	agents map[string]*settledAgent
}

// NewResettle starts re-settling for a policy set that reads reads (a
// member the recorded context left out because it was unset, such as
// last_allowed, is added when the simulation sets it and reads it).
func NewResettle(reads Fields, limit int) *Resettle {
	return &Resettle{reads: reads, max: limit, runs: map[string]*settledRun{}, agents: map[string]*settledAgent{}}
}

// Patch returns the context a call of run (a key naming it) by agent at
// now would have seen, given what was settled before it: c itself while
// neither has diverged, else a rewritten copy.
func (rs *Resettle) Patch(run, agent string, c *Context, now int64) (*Context, error) {
	fr, fa := rs.runs[run], rs.agents[agent]
	if fr == nil && fa == nil {
		return c, nil
	}
	r, a := c.Run, c.AgentHistory
	if fr != nil && r != nil {
		r = fr.patch(cloneObj(r), now, rs.reads)
	}
	if fa != nil && a != nil {
		a = fa.patch(cloneObj(a), now, rs.reads)
	}
	return NewContext(r, a)
}

// Settle settles o, a decision of run by agent whose recorded context was
// c. A run or agent not yet followed starts to be at its first changed
// decision (or deny for another reason), from that decision's recorded
// context (which the simulation had not changed).
func (rs *Resettle) Settle(run, agent string, c *Context, o *Outcome) {
	changed := o.changes()
	fr := rs.runs[run]
	if fr == nil && changed && len(rs.runs) < rs.max {
		fr = seedRun(c.Run, o.At)
		rs.runs[run] = fr
	}
	if fr != nil {
		fr.settle(callSeq(c.Run), o)
	}
	fa := rs.agents[agent]
	if fa == nil && changed && len(rs.agents) < rs.max {
		fa = seedAgent(c.AgentHistory, o.At)
		rs.agents[agent] = fa
	}
	if fa != nil {
		fa.settle(o)
	}
}

// Following reports how many runs and agents are followed.
func (rs *Resettle) Following() (runs, agents int) { return len(rs.runs), len(rs.agents) }

// settledRun is a run's settled state under the simulation since it
// diverged.
type settledRun struct {
	// delta is the simulated minus the recorded decision counts.
	delta Decisions
	// consec and reason are the run's consecutive denies and last deny
	// reason; hasDec: the seed held them.
	consec int64
	reason string
	hasDec bool
	// allowed is the last allowed call; seeded: still the seed's (no
	// allow since), recAllowed: a recorded allow since the seed.
	allowed            Allowed
	seeded, recAllowed bool
	tools              []toolDelta
	// ring holds the latest calls' decisions, by seq.
	ring [Recent]settledCall
	n    int
}

type toolDelta struct {
	t, a string
	ok   int64
}

type settledCall struct {
	seq      int64
	rec, sim uint8
}

func seedRun(run Obj, now int64) *settledRun {
	fr := &settledRun{seeded: true}
	if d, ok := member(run, "decisions").(Obj); ok {
		fr.hasDec = true
		fr.consec, _ = member(d, "consecutive_denies").(int64)
		fr.reason, _ = member(d, "last_deny_reason").(string)
	}
	if la, ok := member(run, "last_allowed").(Obj); ok {
		since, _ := member(la, "since_s").(int64)
		fr.allowed.T, _ = member(la, "tool").(string)
		fr.allowed.A, _ = member(la, "action").(string)
		fr.allowed.At, fr.allowed.Set = now-since*1000, true
	}
	return fr
}

// allows says whether a decision counts as allowed (as [Run.Settle] does).
func allows(decision string) bool { return decision == "allow" || decision == "redact" }

func (fr *settledRun) settle(seq int64, o *Outcome) {
	if o.Decision != o.Recorded {
		fr.delta.count(o.Recorded, -1)
		fr.delta.count(o.Decision, 1)
		if d := int64(b2i(allows(o.Decision)) - b2i(allows(o.Recorded))); d != 0 {
			fr.toolDelta(o.Tool, o.Action, d)
		}
	}
	if o.Decision == "deny" {
		fr.consec++
		fr.reason = o.Reason
	} else {
		fr.consec = 0
	}
	if allows(o.Decision) {
		fr.allowed, fr.seeded = Allowed{T: o.Tool, A: o.Action, At: o.At, Set: true}, false
	}
	if allows(o.Recorded) {
		fr.recAllowed = true
	}
	if seq > 0 {
		fr.ring[fr.n%Recent] = settledCall{seq: seq, rec: verdictCode(o.Recorded), sim: verdictCode(o.Decision)}
		fr.n++
	}
}

func (d *Decisions) count(decision string, n int64) {
	switch decision {
	case "allow":
		d.Allow += n
	case "deny":
		d.Deny += n
	case "require_approval":
		d.Approval += n
	case "redact":
		d.Redact += n
	case "quarantine":
		d.Quarantine += n
	}
}

func (fr *settledRun) toolDelta(tool, action string, n int64) {
	for i := range fr.tools {
		if fr.tools[i].t == tool && fr.tools[i].a == action {
			fr.tools[i].ok += n
			return
		}
	}
	if len(fr.tools) < MaxTools {
		fr.tools = append(fr.tools, toolDelta{t: tool, a: action, ok: n})
	}
}

func (fr *settledRun) patch(run Obj, now int64, reads Fields) Obj {
	if d, ok := member(run, "decisions").(Obj); ok {
		for _, c := range [...]struct {
			key string
			n   int64
		}{{"allow", fr.delta.Allow}, {"deny", fr.delta.Deny}, {"require_approval", fr.delta.Approval},
			{"redact", fr.delta.Redact}, {"quarantine", fr.delta.Quarantine}} {
			if v, ok := member(d, c.key).(int64); ok && c.n != 0 {
				d = put(d, c.key, max(0, v+c.n))
			}
		}
		if fr.hasDec {
			d = put(d, "consecutive_denies", fr.consec)
			if fr.reason != "" {
				d = put(d, "last_deny_reason", fr.reason)
			} else {
				d = drop(d, "last_deny_reason")
			}
		}
		run = put(run, "decisions", d)
	}
	_, has := member(run, "last_allowed").(Obj)
	switch {
	case !fr.seeded && (has || reads.Run&runLastAllowed != 0):
		// An allow since the seed: the simulation knows it exactly.
		run = put(run, "last_allowed", allowedDoc(&fr.allowed, now))
	case fr.seeded && fr.recAllowed && fr.allowed.Set:
		// The recorded context shows a later allow the simulation did not
		// make: the seed's is the last one.
		run = put(run, "last_allowed", allowedDoc(&fr.allowed, now))
	case fr.seeded && fr.recAllowed:
		run = drop(run, "last_allowed")
	}
	if recent, ok := member(run, "recent").(Arr); ok {
		for _, e := range recent {
			fr.patchEntry(e)
		}
	}
	if tools, ok := member(run, "tools").(Obj); ok {
		for _, td := range fr.tools {
			actions, _ := member(tools, td.t).(Obj)
			counts, _ := member(actions, td.a).(Obj)
			if v, ok := member(counts, "allowed").(int64); ok {
				put(counts, "allowed", max(0, v+td.ok))
			}
		}
	}
	return run
}

// patchEntry rewrites a recent call's decision with the simulation's, when
// the recorded context had settled it as recorded.
func (fr *settledRun) patchEntry(e Doc) {
	o, ok := e.(Obj)
	if !ok {
		return
	}
	seq, _ := member(o, "seq").(int64)
	for _, c := range fr.ring[:min(fr.n, Recent)] {
		if c.seq == seq && member(o, "decision") == verdictName(c.rec) {
			put(o, "decision", verdictName(c.sim))
		}
	}
}

func allowedDoc(a *Allowed, now int64) Obj {
	return Obj{{"action", a.A}, {"key", a.T + "/" + a.A}, {"since_s", secs(now, a.At)}, {"tool", a.T}}
}

// settledAgent is an agent's settled state under the simulation since it
// diverged.
type settledAgent struct {
	consec    int64
	hasConsec bool
	// deny is the last deny (ms, 0: none); seeded: still the seed's,
	// recDeny: a recorded deny since the seed.
	deny            int64
	seeded, recDeny bool
	// w60 and w1h count the simulated minus the recorded denies (Dn).
	w60, w1h Window
}

func seedAgent(agent Obj, now int64) *settledAgent {
	fa := &settledAgent{seeded: true}
	fa.consec, fa.hasConsec = member(agent, "consecutive_denies").(int64)
	if since, ok := member(agent, "since_last_deny_s").(int64); ok {
		fa.deny = now - since*1000
	}
	return fa
}

func (fa *settledAgent) settle(o *Outcome) {
	sim, rec := o.Decision == "deny", o.Recorded == "deny"
	if d := int64(b2i(sim) - b2i(rec)); d != 0 {
		fa.w60.bump(Width60, Slots60, o.At, Slot{Dn: d})
		fa.w1h.bump(Width1h, Slots1h, o.At, Slot{Dn: d})
	}
	if sim {
		fa.consec++
		fa.deny, fa.seeded = o.At, false
	} else {
		fa.consec = 0
	}
	if rec {
		fa.recDeny = true
	}
}

func (fa *settledAgent) patch(agent Obj, now int64, reads Fields) Obj {
	if _, ok := member(agent, "consecutive_denies").(int64); ok && fa.hasConsec {
		agent = put(agent, "consecutive_denies", fa.consec)
	}
	_, has := member(agent, "since_last_deny_s").(int64)
	switch {
	case !fa.seeded && (has || reads.Agent&AgentMember("since_last_deny_s") != 0):
		agent = put(agent, "since_last_deny_s", secs(now, fa.deny))
	case fa.seeded && fa.recDeny && fa.deny > 0:
		agent = put(agent, "since_last_deny_s", secs(now, fa.deny))
	case fa.seeded && fa.recDeny:
		agent = drop(agent, "since_last_deny_s")
	}
	if w, ok := member(agent, "window").(Obj); ok {
		for _, x := range [...]struct {
			key          string
			slots        Window
			width, count int64
		}{{"w1h", fa.w1h, Width1h, Slots1h}, {"w60s", fa.w60, Width60, Slots60}} {
			if counts, ok := member(w, x.key).(Obj); ok {
				if v, ok := member(counts, "denies").(int64); ok {
					put(counts, "denies", max(0, v+window(x.slots, x.width, x.count, now).Dn))
				}
			}
		}
	}
	return agent
}

// callSeq is a call's seq in its run, read from the context it saw: its
// seq member, or one past its latest recent call; 0 when it has neither.
func callSeq(run Obj) int64 {
	if s, ok := member(run, "seq").(int64); ok {
		return s
	}
	recent, ok := member(run, "recent").(Arr)
	if !ok {
		return 0
	}
	var last int64
	for _, e := range recent {
		if o, ok := e.(Obj); ok {
			s, _ := member(o, "seq").(int64)
			last = max(last, s)
		}
	}
	return last + 1
}

// member is o's member key (nil when it has none, or o is nil).
func member(o Obj, key string) Doc {
	for _, m := range o {
		if m.Key == key {
			return m.Value
		}
	}
	return nil
}

// put sets o's member key to v in place, or adds it (keeping o sorted).
func put(o Obj, key string, v Doc) Obj {
	for i := range o {
		if o[i].Key == key {
			o[i].Value = v
			return o
		}
	}
	return append(o, Member{key, v}).Sorted()
}

// drop removes o's member key.
func drop(o Obj, key string) Obj {
	return slices.DeleteFunc(o, func(m Member) bool { return m.Key == key })
}

// cloneObj copies o deeply (objects and arrays; scalars are values).
func cloneObj(o Obj) Obj {
	c := make(Obj, len(o))
	for i, m := range o {
		c[i] = Member{m.Key, cloneDoc(m.Value)}
	}
	return c
}

func cloneDoc(d Doc) Doc {
	switch v := d.(type) {
	case Obj:
		return cloneObj(v)
	case Arr:
		a := make(Arr, len(v))
		for i, e := range v {
			a[i] = cloneDoc(e)
		}
		return a
	}
	return d
}
