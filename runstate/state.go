package runstate

import (
	"slices"
	"strconv"
	"time"
)

// Bounds of one run's and one agent's state (the package documentation
// says what happens at each).
const (
	// MaxTools is how many distinct (tool, action) pairs a run counts.
	MaxTools = 32
	// MaxLabels is how many distinct labels a run keeps.
	MaxLabels = 16
	// MaxSums is how many accumulated parameters a run keeps.
	MaxSums = 8
	// MaxAgents is how many distinct agents a run names.
	MaxAgents = 8
	// Recent is the length of the ring of a run's latest calls.
	Recent = 8
	// Dedup is how many attempt ids a run remembers to count a retry once.
	Dedup = 64

	// The windows: buckets of Width60 ms, Slots60 of them (the current
	// bucket and six full ones: 60 to 70 s), and of Width1h ms, Slots1h of
	// them (60 to 65 min). A window over-counts by at most one bucket and
	// never under-counts.
	Width60 = 10_000
	Slots60 = 7
	Width1h = 300_000
	Slots1h = 13
)

// Defaults of the durations in [Limits].
const (
	DefaultIdleTTL = time.Hour
	DefaultMaxAge  = 24 * time.Hour
)

// Attempt is one call that reached policy evaluation, classified by the
// caller. Every field is policy-independent: the same call gives the same
// attempt whatever the policy decides.
type Attempt struct {
	// ID makes a retry count once: the same ID is applied once per run.
	// Empty: the attempt is not deduplicated.
	ID      string
	AgentID string
	// At is the node's time of the call, in Unix milliseconds.
	At     int64
	Tool   string
	Action string
	// Mutating: the request or the skill registry says the call changes
	// state. Destructive: mutating with a high or critical skill risk.
	// Egress: the call sends data out (the skill's egress label).
	Mutating, Destructive, Egress bool
	// Level is the least trusted level this call brings into the run (the
	// worst of its effective trust, the skill's output_trust and the MCP
	// server's trust_level); Via names where it came from.
	Level int
	Via   string
	// Labels are the skill's labels for the action.
	Labels []string
	// Sums are the values to accumulate, by "<tool>/<action>.<param>".
	Sums map[string]float64
	// NoRunID: the call named no run (it uses the agent's ambient run).
	NoRunID bool
	// ParentID and ParentLevel are the parent run and its level, read when
	// the run is created (its taint is inherited).
	ParentID    string
	ParentLevel int
}

// Settlement is a committed decision, applied to its run and agent after
// the commit (the decision-dependent fields).
type Settlement struct {
	Seq      int64
	Tool     string
	Action   string
	Decision string
	Reason   string
	At       int64
}

// The state is laid out for a store that keeps tens of thousands of runs in
// its heap: short slices that grow with what a run has done, instead of
// maps of pointers, so that a short run is a few small allocations, mostly
// without pointers for the garbage collector to follow. The JSON tags are
// the Valkey script's state (wire.go decodes its maps into these).

// Slot is one bucket of a window. I is the bucket's index (time / width);
// a slot whose index is older than the window counts nothing.
type Slot struct {
	I int64 `json:"i"`
	C int64 `json:"c"` // calls
	M int64 `json:"m"` // mutating
	D int64 `json:"d"` // destructive
	// Agent windows only:
	Dn int64 `json:"dn"` // denies (settled)
	Rs int64 `json:"rs"` // runs started
	Nr int64 `json:"nr"` // calls without a run id
	Lv int   `json:"lv"` // the worst level of the bucket's calls
}

// Window is a window's slots: at most one per bucket index modulo the
// window's slot count (the script's key), in no order.
type Window []Slot

// Tool counts one (tool, action) pair of a run.
type Tool struct {
	T  string `json:"t"`
	A  string `json:"a"`
	N  int64  `json:"n"`  // attempts
	OK int64  `json:"ok"` // allowed (settled)
	F  int64  `json:"f"`  // first seq
	L  int64  `json:"l"`  // last seq
	At int64  `json:"at"` // last attempt, ms
	// X: names only. The run counts [MaxTools] pairs already; the entry
	// only names a recent call's pair ([Entry.Ti]) and counts nothing.
	X bool `json:"-"`
}

// Source is the first call that brought a level into the run.
type Source struct {
	T   string `json:"t"`
	A   string `json:"a"`
	Via string `json:"v"`
	Seq int64  `json:"s"`
	At  int64  `json:"at"`
	Lv  int    `json:"-"` // the level (the script's key)
}

// Sources are a run's sources, at most one per level, in no order.
type Sources []Source

// Decisions counts a run's settled decisions.
type Decisions struct {
	LastReason string `json:"lr"` // the last deny's reason
	Allow      int64  `json:"al"`
	Deny       int64  `json:"dn"`
	Approval   int64  `json:"ra"`
	Redact     int64  `json:"rd"`
	Quarantine int64  `json:"q"`
	Consec     int64  `json:"cd"` // consecutive denies
}

// Allowed is the last allowed call of a run.
type Allowed struct {
	T   string `json:"t"`
	A   string `json:"a"`
	At  int64  `json:"at"`
	Set bool   `json:"-"` // the run has had an allowed call
}

// Run is one run's state. What the Valkey script keys (slots by index
// modulo the slot count, sources by level, recent entries by seq modulo
// [Recent]) is an array here; what it keys by name (tools by [ToolKey],
// labels, sums, agents, attempt ids) is a short slice searched in order.
type Run struct {
	Owner     string    `json:"ow"`
	Parent    string    `json:"pa"`
	Agents    NamedSet  `json:"ag"`
	Labels    NamedSet  `json:"lb"`
	Tools     ToolSet   `json:"to"`
	Sums      SumSet    `json:"su"`
	Sources   Sources   `json:"so"`
	Recent    Ring      `json:"-"` // the script's "rc" ([Run.UnmarshalJSON])
	Dec       Decisions `json:"dc"`
	Allowed   Allowed   `json:"al"`
	Att       SeenSet   `json:"at"`
	Created   int64     `json:"cr"`
	Last      int64     `json:"la"`
	Seq       int64     `json:"sq"`
	Lost      int       `json:"ls"` // 1: counts may be missing (state lost)
	Mut       int64     `json:"mu"`
	Destr     int64     `json:"de"`
	Egress    int64     `json:"eg"`
	Level     int       `json:"lv"`
	Inherited int       `json:"ih"`
	Truncated int       `json:"tr"`
	W60       Window    `json:"w6"`
	W1h       Window    `json:"wh"`
}

// Agent is one agent's state across its runs.
type Agent struct {
	W60     Window `json:"w6"`
	W1h     Window `json:"wh"`
	Created int64  `json:"cr"`
	Lost    int    `json:"ls"`
	Consec  int64  `json:"cd"`
	Deny    int64  `json:"dy"` // the last deny, ms
}

// ToolKey keys a (tool, action) pair so that no separator inside a name
// makes two pairs collide: the tool's length in bytes, a colon, the tool,
// a slash, the action.
func ToolKey(tool, action string) string {
	return strconv.Itoa(len(tool)) + ":" + tool + "/" + action
}

// Known reports whether the run has state (a call reached policy before).
func (r *Run) Known() bool { return r.Seq > 0 }

// Tool returns the run's count of (tool, action), nil when it has none.
func (r *Run) Tool(tool, action string) *Tool {
	if i := r.toolAt(tool, action); i >= 0 && !r.Tools[i].X {
		return &r.Tools[i]
	}
	return nil
}

// toolAt is the index of (tool, action)'s entry in Tools, counted or
// names only; -1 when it has none.
func (r *Run) toolAt(tool, action string) int {
	for i := range r.Tools {
		if t := &r.Tools[i]; t.T == tool && t.A == action {
			return i
		}
	}
	return -1
}

// DistinctTools is how many (tool, action) pairs the run counts.
func (r *Run) DistinctTools() int {
	n := 0
	for i := range r.Tools {
		if !r.Tools[i].X {
			n++
		}
	}
	return n
}

// SeenSeq returns the seq of the attempt id's first application, or 0 when
// the run does not remember the id.
func (r *Run) SeenSeq(id string) int64 {
	if id == "" {
		return 0
	}
	h := attemptHash(id)
	for _, s := range r.Att {
		if s.H == h {
			return s.Seq
		}
	}
	return 0
}

// Apply records a at the run and reports whether it was a duplicate (an
// attempt id applied before; nothing changes then). Fresh runs take their
// creation fields from a.
func (r *Run) Apply(a *Attempt) (dup bool) {
	if r.SeenSeq(a.ID) != 0 {
		return true
	}
	if r.Seq == 0 {
		r.Created, r.Owner = a.At, a.AgentID
		r.Inherit(a.ParentID, a.ParentLevel, a.At)
	}
	r.Seq++
	seq := r.Seq
	r.Last = a.At
	if !r.Agents.has(a.AgentID) && len(r.Agents) < MaxAgents {
		r.Agents = append(r.Agents, Named{a.AgentID, seq})
	}
	mut, destr := b2i(a.Mutating), b2i(a.Destructive)
	r.Mut += int64(mut)
	r.Destr += int64(destr)
	r.Egress += int64(b2i(a.Egress))
	// The run keeps one copy of a (tool, action)'s names, in its tool
	// entry: the recent entries name it by index, and sources share its
	// strings rather than each call's own (fewer objects, and fewer
	// pointers, for the collector to mark per run).
	ti := r.toolAt(a.Tool, a.Action)
	switch {
	case ti >= 0 && !r.Tools[ti].X:
		t := &r.Tools[ti]
		t.N++
		t.L, t.At = seq, a.At
	case ti < 0 && r.DistinctTools() < MaxTools:
		r.Tools = append(r.Tools, Tool{T: a.Tool, A: a.Action, N: 1, F: seq, L: seq, At: a.At})
		ti = len(r.Tools) - 1
	default:
		r.Truncated = 1
		if ti < 0 {
			ti = r.namesOnly(a.Tool, a.Action, seq)
		}
	}
	tool, action := r.Tools[ti].T, r.Tools[ti].A
	if a.Level > 0 {
		r.taint(a.Level, Source{Seq: seq, T: tool, A: action, Via: a.Via, At: a.At})
	}
	r.applyLabels(a.Labels, seq)
	r.W60.bump(Width60, Slots60, a.At, Slot{C: 1, M: int64(mut), D: int64(destr)})
	r.W1h.bump(Width1h, Slots1h, a.At, Slot{C: 1, M: int64(mut), D: int64(destr)})
	r.applySums(a.Sums)
	// ti is below MaxTools+Recent+1 and mut 0 or 1: newEntry cannot refuse.
	e, _ := newEntry(seq, a.At, a.Level, mut, ti)
	r.Recent.put(e)
	if a.ID != "" {
		// The oldest id goes first: seqs only grow, so it is the one at the
		// ring's next position.
		if len(r.Att) < Dedup {
			r.Att = append(r.Att, Seen{attemptHash(a.ID), seq})
		} else {
			r.Att[oldestSeen(r.Att)] = Seen{attemptHash(a.ID), seq}
		}
	}
	return false
}

// applyLabels adds the labels the run has not seen, in sorted order (the
// order the script adds them in, so that both truncate alike).
func (r *Run) applyLabels(labels []string, seq int64) {
	if len(labels) == 0 {
		return
	}
	if !slices.IsSorted(labels) {
		labels = slices.Sorted(slices.Values(labels))
	}
	for _, l := range labels {
		if r.Labels.has(l) {
			continue
		}
		if len(r.Labels) >= MaxLabels {
			r.Truncated = 1
			continue
		}
		r.Labels = append(r.Labels, Named{l, seq})
	}
}

// applySums accumulates sums in key order (as the script does).
func (r *Run) applySums(sums map[string]float64) {
	if len(sums) == 0 {
		return
	}
	for _, key := range sortedKeys(sums) {
		v := sums[key]
		if i := slices.IndexFunc(r.Sums, func(s Sum) bool { return s.Key == key }); i >= 0 {
			r.Sums[i].V += Num(v)
		} else if len(r.Sums) < MaxSums {
			r.Sums = append(r.Sums, Sum{key, Num(v)})
		} else {
			r.Truncated = 1
		}
	}
}

// oldestSeen is the position of the smallest seq.
func oldestSeen(s SeenSet) int {
	i := 0
	for j := range s {
		if s[j].Seq < s[i].Seq {
			i = j
		}
	}
	return i
}

// Inherit starts a run under its parent: the parent's level is the run's
// from its first call on (a store calls it on a run without state before
// it builds the documents, so the first call's policy sees the taint too).
func (r *Run) Inherit(parentID string, level int, at int64) {
	r.Parent = parentID
	if level > 0 && r.Inherited == 0 {
		r.Inherited = level
		r.taint(level, Source{Seq: 0, Via: "parent_run", At: at})
	}
}

// taint lowers the run's trust to level (it never rises) and records the
// first source of each level.
func (r *Run) taint(level int, src Source) {
	if level < 1 || level > LevelMalicious {
		return
	}
	if level > r.Level {
		r.Level = level
	}
	if !slices.ContainsFunc(r.Sources, func(s Source) bool { return s.Lv == level }) {
		src.Lv = level
		r.Sources = append(r.Sources, src)
	}
}

// Tighten lowers a run's trust to level from a durable record (restored
// after state was lost); the run's counts are then marked incomplete.
func (r *Run) Tighten(level int, at int64) {
	if level > r.Level {
		r.taint(level, Source{Via: "restored", At: at})
	}
	r.Lost = 1
}

// Settle records a committed decision at the run.
func (r *Run) Settle(s *Settlement) {
	r.Dec.count(s.Decision, 1)
	if s.Decision == "deny" {
		r.Dec.Consec++
		r.Dec.LastReason = s.Reason
	} else {
		r.Dec.Consec = 0
	}
	if allows(s.Decision) {
		if t := r.Tool(s.Tool, s.Action); t != nil {
			t.OK++
			// The strings the run holds already, rather than the call's.
			r.Allowed = Allowed{T: t.T, A: t.A, At: s.At, Set: true}
		} else {
			r.Allowed = Allowed{T: s.Tool, A: s.Action, At: s.At, Set: true}
		}
	}
	for i := range r.Recent {
		if e := &r.Recent[i]; e.Seq == s.Seq {
			e.D = verdictCode(s.Decision)
		}
	}
}

// Apply records a at the agent; freshRun says the attempt started a run.
func (g *Agent) Apply(a *Attempt, freshRun bool) {
	if g.Created == 0 {
		g.Created = a.At
	}
	d := Slot{C: 1, M: int64(b2i(a.Mutating)), D: int64(b2i(a.Destructive)), Nr: int64(b2i(a.NoRunID)), Lv: a.Level}
	if freshRun && !a.NoRunID {
		d.Rs = 1
	}
	g.W60.bump(Width60, Slots60, a.At, d)
	g.W1h.bump(Width1h, Slots1h, a.At, d)
}

// Settle records a committed decision at the agent.
func (g *Agent) Settle(s *Settlement) {
	if s.Decision != "deny" {
		g.Consec = 0
		return
	}
	g.Consec++
	g.Deny = s.At
	g.W60.bump(Width60, Slots60, s.At, Slot{Dn: 1})
	g.W1h.bump(Width1h, Slots1h, s.At, Slot{Dn: 1})
}

// Last is the end of the agent's latest 1 h bucket (or its creation), in
// ms: when it was last active, to a bucket's width.
func (g *Agent) Last() int64 {
	last := g.Created
	for _, s := range g.W1h {
		last = max(last, s.I*Width1h+Width1h)
	}
	return last
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
