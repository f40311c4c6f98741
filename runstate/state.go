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

// Levels: a trust level's rank plus one, so that 0 means "none seen". Rank
// 0 is trusted_internal_signed and rank 5 malicious_suspected, in the order
// of policy.TrustLevels.
var levelNames = [...]string{"", "trusted_internal_signed", "trusted_internal_unsigned",
	"semi_trusted_customer", "unknown", "untrusted_external", "malicious_suspected"}

const (
	// LevelUntrusted is untrusted_external's level: a run that has seen it
	// (or worse) is tainted.
	LevelUntrusted = 5
	// LevelMalicious is malicious_suspected's level.
	LevelMalicious = 6
)

// Level returns a trust level's level (its rank plus one), 0 for a value
// that is no trust level.
func Level(trust string) int {
	for i := 1; i < len(levelNames); i++ {
		if levelNames[i] == trust {
			return i
		}
	}
	return 0
}

// LevelName is the inverse of [Level]; "" for 0 or a value out of range.
func LevelName(level int) string {
	if level <= 0 || level >= len(levelNames) {
		return ""
	}
	return levelNames[level]
}

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

// Tool counts one (tool, action) pair of a run.
type Tool struct {
	T  string `json:"t"`
	A  string `json:"a"`
	N  int64  `json:"n"`  // attempts
	OK int64  `json:"ok"` // allowed (settled)
	F  int64  `json:"f"`  // first seq
	L  int64  `json:"l"`  // last seq
	At int64  `json:"at"` // last attempt, ms
}

// Source is the first call that brought a level into the run.
type Source struct {
	Seq int64  `json:"s"`
	T   string `json:"t"`
	A   string `json:"a"`
	Via string `json:"v"`
	At  int64  `json:"at"`
}

// Entry is one of a run's latest calls.
type Entry struct {
	Seq int64  `json:"s"`
	T   string `json:"t"`
	A   string `json:"a"`
	M   int    `json:"m"`
	Lv  int    `json:"lv"`
	At  int64  `json:"at"`
	D   string `json:"d"` // the decision, "" until settled
}

// Decisions counts a run's settled decisions.
type Decisions struct {
	Allow      int64  `json:"al"`
	Deny       int64  `json:"dn"`
	Approval   int64  `json:"ra"`
	Redact     int64  `json:"rd"`
	Quarantine int64  `json:"q"`
	Consec     int64  `json:"cd"` // consecutive denies
	LastReason string `json:"lr"` // the last deny's reason
}

// Allowed is the last allowed call of a run.
type Allowed struct {
	T  string `json:"t"`
	A  string `json:"a"`
	At int64  `json:"at"`
}

// Run is one run's state. Maps are keyed so that the Valkey script keeps
// the same state as [Run.Apply]: slots by index modulo the slot count,
// sources by level, tools by [ToolKey], recent entries by seq modulo
// [Recent].
type Run struct {
	Created   int64              `json:"cr"`
	Last      int64              `json:"la"`
	Seq       int64              `json:"sq"`
	Owner     string             `json:"ow"`
	Agents    map[string]int64   `json:"ag"`
	Parent    string             `json:"pa"`
	Lost      int                `json:"ls"` // 1: counts may be missing (state lost)
	Mut       int64              `json:"mu"`
	Destr     int64              `json:"de"`
	Egress    int64              `json:"eg"`
	Level     int                `json:"lv"`
	Inherited int                `json:"ih"`
	Sources   map[string]*Source `json:"so"`
	Labels    map[string]int64   `json:"lb"`
	Tools     map[string]*Tool   `json:"to"`
	Truncated int                `json:"tr"`
	W60       map[string]*Slot   `json:"w6"`
	W1h       map[string]*Slot   `json:"wh"`
	Sums      map[string]*Num    `json:"su"`
	Recent    map[string]*Entry  `json:"rc"`
	Dec       Decisions          `json:"dc"`
	Allowed   *Allowed           `json:"al"`
	Att       map[string]int64   `json:"at"`
}

// Agent is one agent's state across its runs.
type Agent struct {
	Created int64            `json:"cr"`
	Lost    int              `json:"ls"`
	W60     map[string]*Slot `json:"w6"`
	W1h     map[string]*Slot `json:"wh"`
	Consec  int64            `json:"cd"`
	Deny    int64            `json:"dy"` // the last deny, ms
}

// ToolKey keys a (tool, action) pair so that no separator inside a name
// makes two pairs collide: the tool's length in bytes, a colon, the tool,
// a slash, the action.
func ToolKey(tool, action string) string {
	return strconv.Itoa(len(tool)) + ":" + tool + "/" + action
}

// Known reports whether the run has state (a call reached policy before).
func (r *Run) Known() bool { return r.Seq > 0 }

// Apply records a at the run and reports whether it was a duplicate (an
// attempt id applied before; nothing changes then). Fresh runs take their
// creation fields from a.
func (r *Run) Apply(a *Attempt) (dup bool) {
	if a.ID != "" {
		if _, ok := r.Att[a.ID]; ok {
			return true
		}
	}
	if r.Seq == 0 {
		r.Created, r.Owner = a.At, a.AgentID
		r.Inherit(a.ParentID, a.ParentLevel, a.At)
	}
	r.Seq++
	seq := r.Seq
	r.Last = a.At
	if r.Agents == nil {
		r.Agents = map[string]int64{}
	}
	if _, ok := r.Agents[a.AgentID]; !ok && len(r.Agents) < MaxAgents {
		r.Agents[a.AgentID] = seq
	}
	mut, destr := b2i(a.Mutating), b2i(a.Destructive)
	r.Mut += int64(mut)
	r.Destr += int64(destr)
	r.Egress += int64(b2i(a.Egress))
	if a.Level > 0 {
		r.taint(a.Level, &Source{Seq: seq, T: a.Tool, A: a.Action, Via: a.Via, At: a.At})
	}
	labels := slices.Clone(a.Labels)
	slices.Sort(labels)
	for _, l := range labels {
		if _, ok := r.Labels[l]; ok {
			continue
		}
		if len(r.Labels) >= MaxLabels {
			r.Truncated = 1
			continue
		}
		if r.Labels == nil {
			r.Labels = map[string]int64{}
		}
		r.Labels[l] = seq
	}
	k := ToolKey(a.Tool, a.Action)
	if t, ok := r.Tools[k]; ok {
		t.N++
		t.L, t.At = seq, a.At
	} else if len(r.Tools) < MaxTools {
		if r.Tools == nil {
			r.Tools = map[string]*Tool{}
		}
		r.Tools[k] = &Tool{T: a.Tool, A: a.Action, N: 1, F: seq, L: seq, At: a.At}
	} else {
		r.Truncated = 1
	}
	r.W60 = bump(r.W60, Width60, Slots60, a.At, Slot{C: 1, M: int64(mut), D: int64(destr)})
	r.W1h = bump(r.W1h, Width1h, Slots1h, a.At, Slot{C: 1, M: int64(mut), D: int64(destr)})
	for _, key := range sortedKeys(a.Sums) {
		v := a.Sums[key]
		if cur, ok := r.Sums[key]; ok {
			*cur += Num(v)
		} else if len(r.Sums) < MaxSums {
			if r.Sums == nil {
				r.Sums = map[string]*Num{}
			}
			n := Num(v)
			r.Sums[key] = &n
		} else {
			r.Truncated = 1
		}
	}
	if r.Recent == nil {
		r.Recent = map[string]*Entry{}
	}
	r.Recent[strconv.FormatInt(seq%Recent, 10)] = &Entry{Seq: seq, T: a.Tool, A: a.Action, M: mut, Lv: a.Level, At: a.At}
	if a.ID != "" {
		if r.Att == nil {
			r.Att = map[string]int64{}
		}
		r.Att[a.ID] = seq
		if len(r.Att) > Dedup {
			oldest, at := "", int64(-1)
			for id, s := range r.Att {
				if at < 0 || s < at {
					oldest, at = id, s
				}
			}
			delete(r.Att, oldest)
		}
	}
	return false
}

// Inherit starts a run under its parent: the parent's level is the run's
// from its first call on (a store calls it on a run without state before
// it builds the documents, so the first call's policy sees the taint too).
func (r *Run) Inherit(parentID string, level int, at int64) {
	r.Parent = parentID
	if level > 0 && r.Inherited == 0 {
		r.Inherited = level
		r.taint(level, &Source{Seq: 0, Via: "parent_run", At: at})
	}
}

// taint lowers the run's trust to level (it never rises) and records the
// first source of each level.
func (r *Run) taint(level int, src *Source) {
	if level > r.Level {
		r.Level = level
	}
	key := strconv.Itoa(level)
	if _, ok := r.Sources[key]; !ok {
		if r.Sources == nil {
			r.Sources = map[string]*Source{}
		}
		r.Sources[key] = src
	}
}

// Tighten lowers a run's trust to level from a durable record (restored
// after state was lost); the run's counts are then marked incomplete.
func (r *Run) Tighten(level int, at int64) {
	if level > r.Level {
		r.taint(level, &Source{Via: "restored", At: at})
	}
	r.Lost = 1
}

// Settle records a committed decision at the run.
func (r *Run) Settle(s *Settlement) {
	switch s.Decision {
	case "allow":
		r.Dec.Allow++
	case "deny":
		r.Dec.Deny++
	case "require_approval":
		r.Dec.Approval++
	case "redact":
		r.Dec.Redact++
	case "quarantine":
		r.Dec.Quarantine++
	}
	if s.Decision == "deny" {
		r.Dec.Consec++
		r.Dec.LastReason = s.Reason
	} else {
		r.Dec.Consec = 0
	}
	if s.Decision == "allow" || s.Decision == "redact" {
		if t, ok := r.Tools[ToolKey(s.Tool, s.Action)]; ok {
			t.OK++
		}
		r.Allowed = &Allowed{T: s.Tool, A: s.Action, At: s.At}
	}
	if e, ok := r.Recent[strconv.FormatInt(s.Seq%Recent, 10)]; ok && e.Seq == s.Seq {
		e.D = s.Decision
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
	g.W60 = bump(g.W60, Width60, Slots60, a.At, d)
	g.W1h = bump(g.W1h, Width1h, Slots1h, a.At, d)
}

// Settle records a committed decision at the agent.
func (g *Agent) Settle(s *Settlement) {
	if s.Decision != "deny" {
		g.Consec = 0
		return
	}
	g.Consec++
	g.Deny = s.At
	g.W60 = bump(g.W60, Width60, Slots60, s.At, Slot{Dn: 1})
	g.W1h = bump(g.W1h, Width1h, Slots1h, s.At, Slot{Dn: 1})
}

// bump adds d to the bucket of at, resetting a slot that held an older
// bucket.
func bump(slots map[string]*Slot, width, n, at int64, d Slot) map[string]*Slot {
	if slots == nil {
		slots = make(map[string]*Slot, n)
	}
	idx := at / width
	key := strconv.FormatInt(idx%n, 10)
	// A slot holding an older bucket starts afresh. One holding a later
	// bucket (a skewed clock on another node) keeps it, and the call counts
	// there rather than being lost.
	s, ok := slots[key]
	if !ok || s.I < idx {
		s = &Slot{I: idx}
		slots[key] = s
	}
	s.add(d)
	return slots
}

// add adds d's counts to s and keeps the worse level.
func (s *Slot) add(d Slot) {
	s.C += d.C
	s.M += d.M
	s.D += d.D
	s.Dn += d.Dn
	s.Rs += d.Rs
	s.Nr += d.Nr
	s.Lv = max(s.Lv, d.Lv)
}

// window sums the slots of the window that ends at now.
func window(slots map[string]*Slot, width, n, now int64) Slot {
	var sum Slot
	oldest := now/width - (n - 1)
	for _, s := range slots {
		if s.I >= oldest {
			sum.add(*s)
		}
	}
	return sum
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

// Num is an accumulated sum. The Valkey script keeps it as a string of 17
// significant digits (exact for a float64), which Num also reads.
type Num float64

// UnmarshalJSON reads a number or a string holding one.
func (n *Num) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		b = b[1 : len(b)-1]
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return err
	}
	*n = Num(f)
	return nil
}
