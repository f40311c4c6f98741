package runstate

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestResettleIsAFoldOfTheOtherOutcomes: for random calls of several runs
// and agents, decided one way (recorded) and another (simulated), the
// recorded contexts re-settled with the simulated outcomes are, byte for
// byte, the contexts a fold settled with the simulated outcomes gives,
// whatever members the policy reads.
func TestResettleIsAFoldOfTheOtherOutcomes(t *testing.T) {
	noSeq := AllFields
	noSeq.Run &^= runSeq
	narrow := Fields{Run: runDecisions | runRecent | runTools, Agent: AgentMember("consecutive_denies") | AgentMember("window")}
	for name, f := range map[string]Fields{"all": AllFields, "without seq": noSeq, "narrow": narrow} {
		t.Run(name, func(t *testing.T) {
			for seed := uint64(1); seed <= 150; seed++ {
				foldBothWays(t, seed, f)
				if t.Failed() {
					return
				}
			}
		})
	}
}

func foldBothWays(t *testing.T, seed uint64, f Fields) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	decisions := []string{"allow", "deny", "require_approval", "redact", "quarantine"}
	reasons := []string{"rule_a", "rule_b"}
	tools := []string{"search", "payments", "mail", "files"}
	type state struct {
		runs   map[string]*Run
		agents map[string]*Agent
	}
	rec := state{map[string]*Run{}, map[string]*Agent{}}
	sim := state{map[string]*Run{}, map[string]*Agent{}}
	at := func(s state, run, agent string) (*Run, *Agent) {
		if s.runs[run] == nil {
			s.runs[run] = &Run{}
		}
		if s.agents[agent] == nil {
			s.agents[agent] = &Agent{}
		}
		return s.runs[run], s.agents[agent]
	}
	rs := NewResettle(f, 1000)
	now := int64(1_790_000_000) * 1000
	changed := 0
	for i := range 150 {
		now += int64(rng.IntN(45)) * 1000
		agent := fmt.Sprintf("agent-%d", rng.IntN(2))
		runID := fmt.Sprintf("run-%d", rng.IntN(3))
		key := agent + "/" + runID
		tool, action := tools[rng.IntN(len(tools))], []string{"read", "write"}[rng.IntN(2)]
		fc := f.ForCall(tool, action)
		rr, ra := at(rec, key, agent)
		sr, sa := at(sim, key, agent)

		recorded, err := NewContext(RunDocOf(rr, runID, now, fc), AgentDoc(ra, now, fc.Agent))
		if err != nil {
			t.Fatal(err)
		}
		parsed, err := ParseContext(recorded.Canonical) // what a decision keeps
		if err != nil {
			t.Fatal(err)
		}
		want, err := NewContext(RunDocOf(sr, runID, now, fc), AgentDoc(sa, now, fc.Agent))
		if err != nil {
			t.Fatal(err)
		}
		got, err := rs.Patch(key, agent, parsed, now)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Canonical) != string(want.Canonical) {
			t.Fatalf("seed %d, call %d (%s by %s):\nrecorded  %s\nresettled %s\nwant      %s", seed, i, key, agent,
				recorded.Canonical, got.Canonical, want.Canonical)
		}

		a := &Attempt{AgentID: agent, At: now, Tool: tool, Action: action, Mutating: action == "write"}
		fresh := rr.Seq == 0
		rr.Apply(a)
		sr.Apply(a)
		ra.Apply(a, fresh)
		sa.Apply(a, fresh)
		o := &Outcome{Tool: tool, Action: action, At: now, Recorded: decisions[rng.IntN(len(decisions))],
			RecordedReason: reasons[rng.IntN(2)]}
		o.Decision, o.Reason = o.Recorded, o.RecordedReason
		if rng.IntN(5) == 0 {
			o.Decision, o.Reason = decisions[rng.IntN(len(decisions))], reasons[rng.IntN(2)]
		}
		if o.changes() {
			changed++
		}
		rr.Settle(&Settlement{Seq: rr.Seq, Tool: tool, Action: action, Decision: o.Recorded, Reason: o.RecordedReason, At: now})
		ra.Settle(&Settlement{Seq: rr.Seq, Tool: tool, Action: action, Decision: o.Recorded, Reason: o.RecordedReason, At: now})
		sr.Settle(&Settlement{Seq: sr.Seq, Tool: tool, Action: action, Decision: o.Decision, Reason: o.Reason, At: now})
		sa.Settle(&Settlement{Seq: sr.Seq, Tool: tool, Action: action, Decision: o.Decision, Reason: o.Reason, At: now})
		rs.Settle(key, agent, parsed, o)
	}
	if changed == 0 {
		t.Fatalf("seed %d changed no decision: the test checks nothing", seed)
	}
}

// TestResettleLeavesUndivergedContexts: a context of a run and agent that
// have not diverged is returned as it is; past max, a diverging run is not
// followed.
func TestResettleLeavesUndivergedContexts(t *testing.T) {
	rs := NewResettle(AllFields, 1)
	r := &Run{}
	c, err := NewContext(RunDocOf(r, "r1", 1000, AllFields), AgentDoc(&Agent{}, 1000, AllFields.Agent))
	if err != nil {
		t.Fatal(err)
	}
	rs.Settle("a/r1", "a", c, &Outcome{Tool: "t", Action: "x", At: 1000, Recorded: "allow", Decision: "allow"})
	if got, _ := rs.Patch("a/r1", "a", c, 2000); got != c {
		t.Fatal("a context of a run that has not diverged was rewritten")
	}
	rs.Settle("a/r1", "a", c, &Outcome{Tool: "t", Action: "x", At: 1000, Recorded: "allow", Decision: "deny"})
	rs.Settle("b/r2", "b", c, &Outcome{Tool: "t", Action: "x", At: 1000, Recorded: "allow", Decision: "deny"})
	if runs, agents := rs.Following(); runs != 1 || agents != 1 {
		t.Fatalf("following %d runs and %d agents, want 1 and 1 (max 1)", runs, agents)
	}
	if got, _ := rs.Patch("b/r2", "b", c, 2000); got != c {
		t.Fatal("a run past max was rewritten")
	}
	if got, _ := rs.Patch("a/r1", "a", c, 2000); got == c {
		t.Fatal("a context of a diverged run was not rewritten")
	}
}
