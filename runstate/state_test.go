package runstate

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func get(t *testing.T, o Obj, path ...string) Doc {
	t.Helper()
	var d Doc = o
	for _, p := range path {
		obj, ok := d.(Obj)
		if !ok {
			t.Fatalf("%v: %s is not in an object", path, p)
		}
		var found bool
		for _, m := range obj {
			if m.Key == p {
				d, found = m.Value, true
				break
			}
		}
		if !found {
			return nil
		}
	}
	return d
}

func arr(t *testing.T, d Doc) Arr {
	t.Helper()
	a, ok := d.(Arr)
	if !ok {
		t.Fatalf("%v is not an array", d)
	}
	return a
}

func obj(t *testing.T, d Doc) Obj {
	t.Helper()
	o, ok := d.(Obj)
	if !ok {
		t.Fatalf("%v is not an object", d)
	}
	return o
}

func TestWindowBoundaries(t *testing.T) {
	// One call at t0 (the start of a bucket): the 60 s window counts it
	// until its bucket leaves the window, 60 to 70 s later, never sooner.
	const t0 = 1_000_000_200_000 // a multiple of both widths
	r := &Run{}
	r.Apply(&Attempt{AgentID: "a", At: t0, Tool: "x", Action: "y"})
	for _, c := range []struct {
		at   int64
		want int64
	}{
		{t0, 1}, {t0 + 59_999, 1}, {t0 + 60_000, 1}, {t0 + 69_999, 1}, {t0 + 70_000, 0},
	} {
		if got := get(t, RunDoc(r, "run", c.at, AllFields.Run), "window", "w60s", "calls"); got != c.want {
			t.Errorf("w60s.calls at t0+%d ms = %v, want %d", c.at-t0, got, c.want)
		}
	}
	for _, c := range []struct {
		at   int64
		want int64
	}{
		{t0 + 3_600_000, 1}, {t0 + 3_899_999, 1}, {t0 + 3_900_000, 0},
	} {
		if got := get(t, RunDoc(r, "run", c.at, AllFields.Run), "window", "w1h", "calls"); got != c.want {
			t.Errorf("w1h.calls at t0+%d ms = %v, want %d", c.at-t0, got, c.want)
		}
	}
	// A call in the last ms of a bucket still counts a full window later.
	r2 := &Run{}
	r2.Apply(&Attempt{AgentID: "a", At: t0 + 9_999, Tool: "x", Action: "y"})
	if got := get(t, RunDoc(r2, "run", t0+9_999+60_000, AllFields.Run), "window", "w60s", "calls"); got != int64(1) {
		t.Errorf("a call 60 s ago not counted: %v", got)
	}
}

func TestBounds(t *testing.T) {
	r := &Run{}
	for i := range MaxTools + 1 {
		r.Apply(&Attempt{AgentID: "a", At: 1, Tool: fmt.Sprint("t", i), Action: "y", Labels: []string{fmt.Sprint("l", i)}})
	}
	doc := RunDoc(r, "run", 1, AllFields.Run)
	if got := get(t, doc, "distinct_tools"); got != int64(MaxTools) {
		t.Errorf("distinct_tools = %v, want %d", got, MaxTools)
	}
	if get(t, doc, "truncated") != true {
		t.Error("33 tools did not mark the run truncated")
	}
	if got := len(arr(t, get(t, doc, "labels"))); got != MaxLabels {
		t.Errorf("%d labels, want %d", got, MaxLabels)
	}
	if got := get(t, doc, "totals", "calls"); got != int64(MaxTools+1) {
		t.Errorf("calls = %v: a call beyond the tool bound must still count", got)
	}
	recent := arr(t, get(t, doc, "recent"))
	if len(recent) != Recent || get(t, obj(t, recent[0]), "seq") != int64(MaxTools+1) || get(t, obj(t, recent[Recent-1]), "seq") != int64(MaxTools+2-Recent) {
		t.Errorf("recent ring: %v", recent)
	}
	// Past the bound, each call's pair is named by a names-only tool entry
	// that the ring refers to; at most Recent+1 of them are kept.
	for i := range 4 * Recent {
		r.Apply(&Attempt{AgentID: "a", At: 2, Tool: fmt.Sprint("extra", i), Action: "z"})
		r.Settle(&Settlement{Seq: r.Seq, Tool: fmt.Sprint("extra", i), Action: "z", Decision: "deny", At: 2})
	}
	if n := len(r.Tools); n > MaxTools+Recent+1 || r.DistinctTools() != MaxTools {
		t.Errorf("%d tool entries (%d counted), want at most %d (%d)", n, r.DistinctTools(), MaxTools+Recent+1, MaxTools)
	}
	recent = arr(t, get(t, RunDoc(r, "run", 2, AllFields.Run), "recent"))
	for i, e := range recent {
		want := fmt.Sprint("extra", 4*Recent-1-i)
		if got := get(t, obj(t, e), "tool"); got != want || get(t, obj(t, e), "decision") != "deny" || get(t, obj(t, e), "key") != want+"/z" {
			t.Errorf("recent[%d] = %v, want %s denied", i, e, want)
		}
	}
	for i := range Dedup + 1 {
		r.Apply(&Attempt{ID: fmt.Sprint("id", i), AgentID: "a", At: 1, Tool: "t0", Action: "y"})
	}
	if len(r.Att) != Dedup {
		t.Errorf("%d attempt ids kept, want %d", len(r.Att), Dedup)
	}
	if r.Apply(&Attempt{ID: "id0", AgentID: "a", At: 1, Tool: "t0", Action: "y"}) {
		t.Error("the oldest attempt id was not forgotten")
	}
	if !r.Apply(&Attempt{ID: fmt.Sprint("id", Dedup), AgentID: "a", At: 1, Tool: "t0", Action: "y"}) {
		t.Error("a recent attempt id counted twice")
	}
}

// TestMonotone applies random attempts and settlements: the run's level and
// its counters never go down.
func TestMonotone(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	r, g := &Run{}, &Agent{}
	var level int
	var calls, mut int64
	at := int64(1_000_000)
	for i := range 2000 {
		at += int64(rng.IntN(2000))
		a := &Attempt{AgentID: "a", At: at, Tool: fmt.Sprint("t", rng.IntN(5)), Action: "y", Level: rng.IntN(7), Mutating: rng.IntN(2) == 0}
		if rng.IntN(5) == 0 {
			a.ID = fmt.Sprint(rng.IntN(100))
		}
		g.Apply(a, !r.Known())
		r.Apply(a)
		if rng.IntN(3) == 0 {
			r.Settle(&Settlement{Seq: r.Seq, Tool: a.Tool, Action: a.Action, Decision: []string{"allow", "deny"}[rng.IntN(2)], At: at})
		}
		if rng.IntN(50) == 0 {
			r.Tighten(rng.IntN(7), at)
		}
		if r.Level < level || r.Seq < calls || r.Mut < mut {
			t.Fatalf("step %d: level %d→%d, calls %d→%d, mutating %d→%d", i, level, r.Level, calls, r.Seq, mut, r.Mut)
		}
		level, calls, mut = r.Level, r.Seq, r.Mut
	}
	if level != LevelMalicious {
		t.Fatalf("level %d after 2000 random attempts", level)
	}
}

func TestSettleAndAbsentFields(t *testing.T) {
	r := &Run{}
	doc := RunDoc(r, "", 5, AllFields.Run)
	if _, ok := get(t, doc, "id").(Null); !ok {
		t.Error("the ambient run's id is not null")
	}
	for _, p := range [][]string{{"trust", "min"}, {"last_allowed"}, {"trust", "since_untrusted_s"}, {"age_s"}, {"decisions", "last_deny_reason"}} {
		if v := get(t, doc, p...); v != nil {
			t.Errorf("%v = %v on a new run, want absent", p, v)
		}
	}
	if get(t, doc, "known") != false {
		t.Error("a new run is known")
	}
	r.Apply(&Attempt{AgentID: "a", At: 1000, Tool: "web", Action: "fetch", Level: LevelUntrusted, Via: "skill.output_trust"})
	r.Settle(&Settlement{Seq: 1, Tool: "web", Action: "fetch", Decision: "allow", At: 1000})
	r.Apply(&Attempt{AgentID: "a", At: 2000, Tool: "email", Action: "send", Level: 2})
	r.Settle(&Settlement{Seq: 2, Tool: "email", Action: "send", Decision: "deny", Reason: "egress_after_untrusted_content", At: 2000})
	doc = RunDoc(r, "r", 11_000, AllFields.Run)
	for _, c := range []struct {
		path []string
		want Doc
	}{
		{[]string{"known"}, true},
		{[]string{"seq"}, int64(3)},
		{[]string{"trust", "min"}, "untrusted_external"},
		{[]string{"trust", "untrusted_seen"}, true},
		{[]string{"trust", "first_untrusted_seq"}, int64(1)},
		{[]string{"trust", "since_untrusted_s"}, int64(10)},
		{[]string{"tools", "web", "fetch", "allowed"}, int64(1)},
		{[]string{"tools", "email", "send", "allowed"}, int64(0)},
		{[]string{"decisions", "deny"}, int64(1)},
		{[]string{"decisions", "consecutive_denies"}, int64(1)},
		{[]string{"decisions", "last_deny_reason"}, "egress_after_untrusted_content"},
		{[]string{"last_allowed", "key"}, "web/fetch"},
		{[]string{"last_allowed", "since_s"}, int64(10)},
	} {
		if got := get(t, doc, c.path...); got != c.want {
			t.Errorf("%v = %#v, want %#v", c.path, got, c.want)
		}
	}
	recent := arr(t, get(t, doc, "recent"))
	if get(t, obj(t, recent[0]), "decision") != "deny" || get(t, obj(t, recent[1]), "decision") != "allow" {
		t.Errorf("recent: %v", recent)
	}
}

func TestCanonical(t *testing.T) {
	o := Obj{{"b", int64(1)}, {"a", Arr{"x", 1.5, true, Null{}}}, {"é", "ü"}, {"Z", Obj{}}}.Sorted()
	c, err := NewContext(o, Obj{})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"agent_history":{},"run":{"Z":{},"a":["x",1.5,true,null],"b":1,"é":"ü"}}`
	if string(c.Canonical) != want {
		t.Fatalf("canonical\n%s\nwant\n%s", c.Canonical, want)
	}
	if len(c.Hash) != 64 {
		t.Fatalf("hash %q", c.Hash)
	}
}

// TestEachMemberAlone: a mask of one member builds that member and no
// other, for every member of both documents.
func TestEachMemberAlone(t *testing.T) {
	r, g := &Run{}, &Agent{}
	a := &Attempt{AgentID: "a", At: 1_000_000, Tool: "web", Action: "fetch", Level: LevelUntrusted, Via: "source_trust",
		Labels: []string{"egress"}, Sums: map[string]float64{"web/fetch.n": 2}, ParentID: "parent", ParentLevel: 2}
	g.Apply(a, true)
	r.Apply(a)
	r.Settle(&Settlement{Seq: 1, Tool: "web", Action: "fetch", Decision: "allow", At: a.At})
	g.Settle(&Settlement{Seq: 1, Tool: "web", Action: "fetch", Decision: "deny", At: a.At})
	for _, name := range runMembers {
		doc := RunDoc(r, "run-1", a.At+5000, RunMember(name))
		if len(doc) != 1 || doc[0].Key != name {
			t.Errorf("run member %s alone: %v", name, doc)
		}
	}
	for _, name := range agentMembers {
		doc := AgentDoc(g, a.At+5000, AgentMember(name))
		if len(doc) != 1 || doc[0].Key != name {
			t.Errorf("agent member %s alone: %v", name, doc)
		}
	}
	if got := len(RunDoc(r, "run-1", a.At+5000, AllFields.Run)); got != len(runMembers) {
		t.Errorf("all members: %d, want %d", got, len(runMembers))
	}
}

// TestDocumentsAreSorted: every object the documents hold has its members
// in RFC 8785 order (the builders emit them so, without sorting).
func TestDocumentsAreSorted(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	r, g := &Run{}, &Agent{}
	at := int64(1_000_000_000)
	for i := range 300 {
		at += int64(rng.IntN(3000))
		a := &Attempt{ID: fmt.Sprint(i), AgentID: fmt.Sprint("a", rng.IntN(3)), At: at, Tool: fmt.Sprint("t", rng.IntN(4)), Action: fmt.Sprint("x", rng.IntN(3)),
			Level: rng.IntN(7), Via: "source_trust", Mutating: rng.IntN(2) == 0, Labels: []string{fmt.Sprint("l", rng.IntN(5))},
			Sums: map[string]float64{fmt.Sprint("s", rng.IntN(3)): 1.5}, ParentID: "p", ParentLevel: 2}
		g.Apply(a, !r.Known())
		r.Apply(a)
		d := []string{"allow", "deny", "redact"}[rng.IntN(3)]
		r.Settle(&Settlement{Seq: r.Seq, Tool: a.Tool, Action: a.Action, Decision: d, Reason: "why", At: at})
		g.Settle(&Settlement{Seq: r.Seq, Tool: a.Tool, Action: a.Action, Decision: d, At: at})
		for _, doc := range []Obj{RunDoc(r, "run", at+500, AllFields.Run), AgentDoc(g, at+500, AllFields.Agent)} {
			checkSorted(t, doc)
		}
	}
}

func checkSorted(t *testing.T, d Doc) {
	t.Helper()
	switch v := d.(type) {
	case Obj:
		for i := range v {
			if i > 0 && compareUTF16(v[i-1].Key, v[i].Key) >= 0 {
				t.Fatalf("members out of order: %q before %q in %v", v[i-1].Key, v[i].Key, v)
			}
			checkSorted(t, v[i].Value)
		}
	case Arr:
		for _, e := range v {
			checkSorted(t, e)
		}
	}
}
