package runstate

import (
	"reflect"
	"testing"
)

// TestParseContextReadsBackWhatADecisionKept: the documents a policy saw,
// built by the fold, kept as canonical bytes and read back, are the same
// documents (and the same bytes again); a null is kept only as the
// ambient run's id.
func TestParseContextReadsBackWhatADecisionKept(t *testing.T) {
	r, g := &Run{}, &Agent{}
	a := &Attempt{AgentID: "a", At: 1_000_000, Tool: "web", Action: "fetch", Level: LevelUntrusted, Via: "source_trust",
		Labels: []string{"egress"}, Sums: map[string]float64{"web/fetch.n": 2.5}, ParentID: "parent", ParentLevel: 2}
	g.Apply(a, true)
	r.Apply(a)
	r.Settle(&Settlement{Seq: 1, Tool: "web", Action: "fetch", Decision: "allow", At: a.At})
	for _, id := range []string{"run-1", ""} {
		c, err := NewContext(RunDoc(r, id, a.At+5000, AllFields.Run), AgentDoc(g, a.At+5000, AllFields.Agent))
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseContext(c.Canonical)
		if err != nil {
			t.Fatal(err)
		}
		again, err := NewContext(back.Run, back.AgentHistory)
		if err != nil {
			t.Fatal(err)
		}
		if string(again.Canonical) != string(c.Canonical) || again.Hash != c.Hash {
			t.Fatalf("read back and written again:\n%s\nwant\n%s", again.Canonical, c.Canonical)
		}
		if !reflect.DeepEqual(back.Run, c.Run) || !reflect.DeepEqual(back.AgentHistory, c.AgentHistory) {
			t.Errorf("documents differ:\n%#v\n%#v", back.Run, c.Run)
		}
	}
	only, err := ParseContext([]byte(`{"run":{"id":null,"n":3}}`))
	if err != nil || only.AgentHistory != nil || len(only.Run) != 2 || only.Run[0].Value != (Null{}) || only.Run[1].Value != int64(3) {
		t.Fatalf("run alone: %#v, %v", only, err)
	}
	for _, bad := range []string{``, `[]`, `{"run":[]}`, `{"run":{"x":null}}`, `{"run":{"n":1e999}}`, `{"run":`} {
		if _, err := ParseContext([]byte(bad)); err == nil {
			t.Errorf("%q read as a run context", bad)
		}
	}
}
