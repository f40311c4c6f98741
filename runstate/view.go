package runstate

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
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

// NewContext builds a Context from the two documents.
func NewContext(run, agentHistory Obj) (*Context, error) {
	b := make([]byte, 0, 1024)
	b = append(b, `{"agent_history":`...)
	b, err := AppendCanonical(b, agentHistory)
	if err != nil {
		return nil, err
	}
	b = append(b, `,"run":`...)
	if b, err = AppendCanonical(b, run); err != nil {
		return nil, err
	}
	b = append(b, '}')
	sum := sha256.Sum256(b)
	return &Context{Run: run, AgentHistory: agentHistory, Canonical: b, Hash: hex.EncodeToString(sum[:])}, nil
}

// secs is a duration in whole seconds (never negative) from ms to now.
func secs(now, at int64) int64 { return max(0, now-at) / 1000 }

// RunDoc builds input.run from r, the state before this call. runID is the
// call's trace.run_id ("" for the ambient run); now is the call's time in
// Unix ms. seq is this call's ordinal in the run.
func RunDoc(r *Run, runID string, now int64) Obj {
	o := make(Obj, 0, 24)
	if runID == "" {
		o = append(o, Member{"id", Null{}})
	} else {
		o = append(o, Member{"id", runID})
	}
	known := r.Known()
	o = append(o,
		Member{"known", known},
		Member{"complete", r.Lost == 0},
		Member{"truncated", r.Truncated != 0},
		Member{"seq", r.Seq + 1},
		Member{"totals", Obj{{"calls", r.Seq}, {"destructive", r.Destr}, {"egress", r.Egress}, {"mutating", r.Mut}}},
		Member{"decisions", decisionsDoc(&r.Dec)},
		Member{"trust", trustDoc(r, now)},
		Member{"labels", labelsDoc(r.Labels)},
		Member{"tools", toolsDoc(r.Tools, now)},
		Member{"distinct_tools", int64(len(r.Tools))},
		Member{"window", Obj{
			{"w1h", windowDoc(window(r.W1h, Width1h, Slots1h, now), false)},
			{"w60s", windowDoc(window(r.W60, Width60, Slots60, now), false)},
		}},
		Member{"sums", sumsDoc(r.Sums)},
		Member{"recent", recentDoc(r.Recent, now)},
	)
	if r.Parent != "" {
		o = append(o, Member{"parent_id", r.Parent})
	}
	if known {
		o = append(o,
			Member{"owner_agent_id", r.Owner},
			Member{"agents", int64(len(r.Agents))},
			Member{"age_s", secs(now, r.Created)},
			Member{"idle_s", secs(now, r.Last)},
		)
	}
	if a := r.Allowed; a != nil {
		o = append(o, Member{"last_allowed", Obj{{"action", a.A}, {"key", a.T + "/" + a.A}, {"since_s", secs(now, a.At)}, {"tool", a.T}}})
	}
	return o.Sorted()
}

func decisionsDoc(d *Decisions) Obj {
	o := Obj{{"allow", d.Allow}, {"consecutive_denies", d.Consec}, {"deny", d.Deny},
		{"quarantine", d.Quarantine}, {"redact", d.Redact}, {"require_approval", d.Approval}}
	if d.LastReason != "" {
		o = append(o, Member{"last_deny_reason", d.LastReason})
	}
	return o.Sorted()
}

func trustDoc(r *Run, now int64) Obj {
	o := Obj{{"untrusted_seen", r.Level >= LevelUntrusted}, {"malicious_seen", r.Level >= LevelMalicious}}
	if r.Level > 0 {
		o = append(o, Member{"min", LevelName(r.Level)}, Member{"min_rank", int64(r.Level - 1)})
	}
	if r.Inherited > 0 {
		o = append(o, Member{"inherited", LevelName(r.Inherited)})
	}
	var first *Source
	srcs := make(Arr, 0, len(r.Sources))
	for lv := LevelMalicious; lv >= 1; lv-- {
		s, ok := r.Sources[strconv.Itoa(lv)]
		if !ok {
			continue
		}
		e := Obj{{"level", LevelName(lv)}, {"seq", s.Seq}, {"via", s.Via}}
		if s.T != "" {
			e = append(e, Member{"tool", s.T}, Member{"action", s.A})
		}
		srcs = append(srcs, e.Sorted())
		if lv >= LevelUntrusted && (first == nil || s.Seq < first.Seq) {
			first = s
		}
	}
	o = append(o, Member{"sources", srcs})
	if first != nil {
		o = append(o, Member{"first_untrusted_seq", first.Seq}, Member{"since_untrusted_s", secs(now, first.At)})
	}
	return o.Sorted()
}

func labelsDoc(labels map[string]int64) Arr {
	keys := sortedKeys(labels)
	a := make(Arr, len(keys))
	for i, k := range keys {
		a[i] = k
	}
	return a
}

func toolsDoc(tools map[string]*Tool, now int64) Obj {
	byTool := map[string]Obj{}
	for _, t := range tools {
		byTool[t.T] = append(byTool[t.T], Member{t.A, Obj{{"allowed", t.OK}, {"attempts", t.N}, {"first_seq", t.F},
			{"last_seq", t.L}, {"since_last_s", secs(now, t.At)}}})
	}
	o := make(Obj, 0, len(byTool))
	for tool, actions := range byTool {
		o = append(o, Member{tool, actions.Sorted()})
	}
	return o.Sorted()
}

func windowDoc(s Slot, agent bool) Obj {
	o := Obj{{"calls", s.C}, {"destructive", s.D}, {"mutating", s.M}}
	if agent {
		o = append(o, Member{"denies", s.Dn}, Member{"no_run_id", s.Nr}, Member{"runs_started", s.Rs})
	}
	return o.Sorted()
}

func sumsDoc(sums map[string]*Num) Obj {
	o := make(Obj, 0, len(sums))
	for k, v := range sums {
		o = append(o, Member{k, float64(*v)})
	}
	return o.Sorted()
}

func recentDoc(recent map[string]*Entry, now int64) Arr {
	entries := make([]*Entry, 0, len(recent))
	for _, e := range recent {
		entries = append(entries, e)
	}
	slices.SortFunc(entries, func(a, b *Entry) int { return int(b.Seq - a.Seq) })
	a := make(Arr, len(entries))
	for i, e := range entries {
		d := e.D
		if d == "" {
			d = "pending"
		}
		o := Obj{{"action", e.A}, {"ago_s", secs(now, e.At)}, {"decision", d}, {"key", e.T + "/" + e.A},
			{"mutating", e.M != 0}, {"seq", e.Seq}, {"tool", e.T}}
		if e.Lv > 0 {
			o = append(o, Member{"trust", LevelName(e.Lv)})
		}
		a[i] = o.Sorted()
	}
	return a
}

// AgentDoc builds input.agent_history from g, the state before this call.
func AgentDoc(g *Agent, now int64) Obj {
	w1h := window(g.W1h, Width1h, Slots1h, now)
	o := Obj{
		{"complete", g.Lost == 0},
		{"consecutive_denies", g.Consec},
		{"window", Obj{{"w1h", windowDoc(w1h, true)}, {"w60s", windowDoc(window(g.W60, Width60, Slots60, now), true)}}},
	}
	trust := Obj{}
	if w1h.Lv > 0 {
		trust = Obj{{"min_1h", LevelName(w1h.Lv)}, {"min_rank_1h", int64(w1h.Lv - 1)}}
	}
	o = append(o, Member{"trust", trust})
	if g.Deny > 0 {
		o = append(o, Member{"since_last_deny_s", secs(now, g.Deny)})
	}
	return o.Sorted()
}
