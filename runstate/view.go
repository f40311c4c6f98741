package runstate

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"unicode/utf16"

	"github.com/gowebpki/jcs"

	"svc/canonical"
)

// Doc is a JSON document built for the policy input: an Obj, an Arr, a
// string, an int64, a float64 or a bool. A member without a value is left
// out, never null (CONTRACT §16), except the run's id, which is null for
// the agent's ambient run.
type Doc = any

// Obj is a JSON object; [Sorted] orders its members as RFC 8785 does.
type Obj []Member

// Member is one member of an Obj.
type Member struct {
	Key   string
	Value Doc
}

// Arr is a JSON array.
type Arr []Doc

// Null is the JSON null (only the ambient run's id).
type Null struct{}

// MarshalJSON encodes o as its canonical JSON object.
func (o Obj) MarshalJSON() ([]byte, error) { return AppendCanonical(nil, o) }

// Sorted sorts o's members by their keys' UTF-16 code units (RFC 8785).
func (o Obj) Sorted() Obj {
	slices.SortFunc(o, func(a, b Member) int { return compareUTF16(a.Key, b.Key) })
	return o
}

func compareUTF16(a, b string) int {
	if isASCII(a) && isASCII(b) {
		switch {
		case a < b:
			return -1
		case a > b:
			return 1
		}
		return 0
	}
	return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// AppendCanonical appends the RFC 8785 bytes of d (whose objects are
// sorted). It fails on a float that is not finite.
func AppendCanonical(b []byte, d Doc) ([]byte, error) {
	switch v := d.(type) {
	case Obj:
		b = append(b, '{')
		for i, m := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = canonical.AppendString(b, m.Key)
			b = append(b, ':')
			var err error
			if b, err = AppendCanonical(b, m.Value); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case Arr:
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = AppendCanonical(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case string:
		return canonical.AppendString(b, v), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, errors.New("runstate: a number is not finite")
		}
		s, err := jcs.NumberToJSON(v)
		if err != nil {
			return nil, err
		}
		return append(b, s...), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case Null:
		return append(b, "null"...), nil
	}
	return nil, errors.New("runstate: not a document value")
}

// Context is what a policy saw of the run: the two documents, their
// canonical bytes and their hash.
type Context struct {
	Run          Obj
	AgentHistory Obj
	// Canonical is the RFC 8785 form of {"agent_history":…,"run":…}, what a
	// decision keeps; Hash is its lower-case hex SHA-256, what the receipt
	// commits to.
	Canonical []byte
	Hash      string
}

// NewContext builds a Context from the two documents; a nil one (no policy
// reads it) is left out.
func NewContext(run, agentHistory Obj) (*Context, error) {
	b := make([]byte, 0, 512)
	b = append(b, '{')
	var err error
	if agentHistory != nil {
		b = append(b, `"agent_history":`...)
		if b, err = AppendCanonical(b, agentHistory); err != nil {
			return nil, err
		}
	}
	if run != nil {
		if agentHistory != nil {
			b = append(b, ',')
		}
		b = append(b, `"run":`...)
		if b, err = AppendCanonical(b, run); err != nil {
			return nil, err
		}
	}
	b = append(b, '}')
	sum := sha256.Sum256(b)
	return &Context{Run: run, AgentHistory: agentHistory, Canonical: b, Hash: hex.EncodeToString(sum[:])}, nil
}

// secs is a duration in whole seconds (never negative) from ms to now.
func secs(now, at int64) int64 { return max(0, now-at) / 1000 }

// RunDoc builds the members of input.run that mask selects ([Fields.Run])
// from r, the state before this call. runID is the call's trace.run_id (""
// for the ambient run); now is the call's time in Unix ms.
func RunDoc(r *Run, id string, now int64, mask uint32) Obj {
	return RunDocOf(r, id, now, Fields{Run: mask})
}

// RunDocOf builds the members of input.run that f selects: [Fields.Run],
// and within tools what [Fields.Tools] reads for the call.
func RunDocOf(r *Run, id string, now int64, f Fields) Obj {
	mask := f.Run
	o := make(Obj, 0, bits.OnesCount32(mask))
	add := func(bit uint32, name string, v Doc) {
		if mask&bit != 0 && v != nil {
			o = append(o, Member{name, v})
		}
	}
	known := r.Known()
	// Members in RFC 8785 order (all ASCII, so byte order), so that no
	// sort is needed.
	if known {
		add(runAge, "age_s", secs(now, r.Created))
		add(runAgents, "agents", int64(len(r.Agents)))
	}
	add(runComplete, "complete", r.Lost == 0)
	if mask&runDecisions != 0 {
		add(runDecisions, "decisions", decisionsDoc(&r.Dec))
	}
	add(runDistinctTools, "distinct_tools", int64(r.DistinctTools()))
	if mask&runID != 0 {
		if id == "" {
			add(runID, "id", Null{})
		} else {
			add(runID, "id", id)
		}
	}
	if known {
		add(runIdle, "idle_s", secs(now, r.Last))
	}
	add(runKnown, "known", known)
	if mask&runLabels != 0 {
		add(runLabels, "labels", labelsDoc(r.Labels))
	}
	if a := &r.Allowed; a.Set && mask&runLastAllowed != 0 {
		add(runLastAllowed, "last_allowed", Obj{{"action", a.A}, {"key", a.T + "/" + a.A}, {"since_s", secs(now, a.At)}, {"tool", a.T}})
	}
	if known {
		add(runOwner, "owner_agent_id", r.Owner)
	}
	if r.Parent != "" {
		add(runParentID, "parent_id", r.Parent)
	}
	if mask&runRecent != 0 {
		add(runRecent, "recent", recentDoc(r, now))
	}
	add(runSeq, "seq", r.Seq+1)
	if mask&runSums != 0 {
		add(runSums, "sums", sumsDoc(r.Sums))
	}
	if mask&runTools != 0 {
		add(runTools, "tools", toolsDoc(r.Tools, now, &f))
	}
	if mask&runTotals != 0 {
		add(runTotals, "totals", Obj{{"calls", r.Seq}, {"destructive", r.Destr}, {"egress", r.Egress}, {"mutating", r.Mut}})
	}
	add(runTruncated, "truncated", r.Truncated != 0)
	if mask&runTrust != 0 {
		add(runTrust, "trust", trustDoc(r, now, f.Trust))
	}
	if mask&runWindow != 0 {
		add(runWindow, "window", Obj{
			{"w1h", windowDoc(window(r.W1h, Width1h, Slots1h, now), false)},
			{"w60s", windowDoc(window(r.W60, Width60, Slots60, now), false)},
		})
	}
	return o
}

func decisionsDoc(d *Decisions) Obj {
	o := make(Obj, 0, 7)
	o = append(o, Member{"allow", d.Allow}, Member{"consecutive_denies", d.Consec}, Member{"deny", d.Deny})
	if d.LastReason != "" {
		o = append(o, Member{"last_deny_reason", d.LastReason})
	}
	return append(o, Member{"quarantine", d.Quarantine}, Member{"redact", d.Redact}, Member{"require_approval", d.Approval})
}

// trustDoc is the trust member (of it, what mask selects; 0: all), its
// members in RFC 8785 order.
func trustDoc(r *Run, now int64, mask uint8) Obj {
	if mask == 0 {
		mask = AllTrust
	}
	want := func(i int) bool { return mask&(1<<i) != 0 }
	var first *Source
	var srcs Arr
	if want(0) || want(5) || want(6) {
		srcs = make(Arr, 0, len(r.Sources))
		for lv := LevelMalicious; lv >= 1; lv-- {
			i := slices.IndexFunc(r.Sources, func(s Source) bool { return s.Lv == lv })
			if i < 0 {
				continue
			}
			s := &r.Sources[i]
			if want(6) {
				e := make(Obj, 0, 5)
				if s.T != "" {
					e = append(e, Member{"action", s.A})
				}
				e = append(e, Member{"level", LevelName(lv)}, Member{"seq", s.Seq})
				if s.T != "" {
					e = append(e, Member{"tool", s.T})
				}
				srcs = append(srcs, append(e, Member{"via", s.Via}))
			}
			if lv >= LevelUntrusted && (first == nil || s.Seq < first.Seq) {
				first = s
			}
		}
	}
	o := make(Obj, 0, bits.OnesCount8(mask))
	if first != nil && want(0) {
		o = append(o, Member{"first_untrusted_seq", first.Seq})
	}
	if r.Inherited > 0 && want(1) {
		o = append(o, Member{"inherited", LevelName(r.Inherited)})
	}
	if want(2) {
		o = append(o, Member{"malicious_seen", r.Level >= LevelMalicious})
	}
	if r.Level > 0 {
		if want(3) {
			o = append(o, Member{"min", LevelName(r.Level)})
		}
		if want(4) {
			o = append(o, Member{"min_rank", int64(r.Level - 1)})
		}
	}
	if first != nil && want(5) {
		o = append(o, Member{"since_untrusted_s", secs(now, first.At)})
	}
	if want(6) {
		o = append(o, Member{"sources", srcs})
	}
	if want(7) {
		o = append(o, Member{"untrusted_seen", r.Level >= LevelUntrusted})
	}
	return o
}

func labelsDoc(labels NamedSet) Arr {
	names := make([]string, len(labels))
	for i, l := range labels {
		names[i] = l.Name
	}
	slices.Sort(names)
	a := make(Arr, len(names))
	for i, n := range names {
		a[i] = n
	}
	return a
}

// toolsDoc is {tool: {action: counts}} for the entries and counts f
// reads: the pairs sorted by tool, then grouped.
func toolsDoc(tools ToolSet, now int64, f *Fields) Obj {
	sorted := make([]*Tool, 0, len(tools))
	for i := range tools {
		if t := &tools[i]; !t.X && f.Tools.selects(t, f.CallTool, f.CallAction) {
			sorted = append(sorted, t)
		}
	}
	slices.SortFunc(sorted, func(a, b *Tool) int { return compareUTF16(a.T, b.T) })
	leaves := f.Tools.leaves()
	o := make(Obj, 0, len(sorted))
	var actions Obj
	for i, t := range sorted {
		counts := make(Obj, 0, bits.OnesCount8(leaves))
		for j, v := range [...]int64{t.OK, t.N, t.F, t.L, secs(now, t.At)} { // toolLeaves' order
			if leaves&(1<<j) != 0 {
				counts = append(counts, Member{toolLeaves[j], v})
			}
		}
		actions = append(actions, Member{t.A, counts})
		if i == len(sorted)-1 || sorted[i+1].T != t.T {
			o = append(o, Member{t.T, actions.Sorted()})
			actions = nil
		}
	}
	return o
}

func windowDoc(s Slot, agent bool) Obj {
	if !agent {
		return Obj{{"calls", s.C}, {"destructive", s.D}, {"mutating", s.M}}
	}
	return Obj{{"calls", s.C}, {"denies", s.Dn}, {"destructive", s.D}, {"mutating", s.M}, {"no_run_id", s.Nr}, {"runs_started", s.Rs}}
}

func sumsDoc(sums SumSet) Obj {
	o := make(Obj, 0, len(sums))
	for _, s := range sums {
		o = append(o, Member{s.Key, float64(s.V)})
	}
	return o.Sorted()
}

func recentDoc(r *Run, now int64) Arr {
	entries := make([]*Entry, len(r.Recent))
	for i := range r.Recent {
		entries[i] = &r.Recent[i]
	}
	slices.SortFunc(entries, func(a, b *Entry) int { return int(b.Seq - a.Seq) })
	a := make(Arr, len(entries))
	for i, e := range entries {
		t := &r.Tools[e.Ti]
		o := Obj{{"action", t.A}, {"ago_s", secs(now, e.At)}, {"decision", verdictName(e.D)}, {"key", t.T + "/" + t.A},
			{"mutating", e.M != 0}, {"seq", e.Seq}, {"tool", t.T}}
		if e.Lv > 0 {
			o = append(o, Member{"trust", LevelName(int(e.Lv))})
		}
		a[i] = o
	}
	return a
}

// AgentDoc builds the members of input.agent_history that mask selects
// ([Fields.Agent]) from g, the state before this call.
func AgentDoc(g *Agent, now int64, mask uint32) Obj {
	o := make(Obj, 0, 5)
	want := func(name string) bool { return mask&AgentMember(name) != 0 }
	// Members in RFC 8785 order.
	if want("complete") {
		o = append(o, Member{"complete", g.Lost == 0})
	}
	if want("consecutive_denies") {
		o = append(o, Member{"consecutive_denies", g.Consec})
	}
	if want("since_last_deny_s") && g.Deny > 0 {
		o = append(o, Member{"since_last_deny_s", secs(now, g.Deny)})
	}
	if want("window") || want("trust") {
		w1h := window(g.W1h, Width1h, Slots1h, now)
		if want("trust") {
			trust := Obj{}
			if w1h.Lv > 0 {
				trust = Obj{{"min_1h", LevelName(w1h.Lv)}, {"min_rank_1h", int64(w1h.Lv - 1)}}
			}
			o = append(o, Member{"trust", trust})
		}
		if want("window") {
			o = append(o, Member{"window", Obj{{"w1h", windowDoc(w1h, true)}, {"w60s", windowDoc(window(g.W60, Width60, Slots60, now), true)}}})
		}
	}
	return o
}

// Names returns every fixed string the documents hold (member names, trust
// levels, how a level came in, decisions), so that a policy engine can
// intern them once. The slice is new on every call.
func Names() []string {
	names := append(append([]string{}, runMembers[:]...), agentMembers[:]...)
	names = append(names, levelNames[1:]...)
	return append(names, "calls", "destructive", "egress", "mutating", "allow", "deny", "quarantine", "redact",
		"require_approval", "consecutive_denies", "last_deny_reason", "untrusted_seen", "malicious_seen", "min", "min_rank",
		"inherited", "sources", "level", "seq", "via", "tool", "action", "first_untrusted_seq", "since_untrusted_s", "allowed",
		"attempts", "first_seq", "last_seq", "since_last_s", "w1h", "w60s", "denies", "no_run_id", "runs_started", "key",
		"since_s", "ago_s", "decision", "trust", "min_1h", "min_rank_1h", "pending", "source_trust", "root_trust_level",
		"skill.output_trust", "mcp.trust_level", "parent_run", "restored")
}
