package correlate

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

const ms = time.Millisecond

// ev is one observation of a test stream; at is relative to t0 and an empty
// kind means authorize_decision.
type ev struct {
	id, decision, tool, action string
	at                         time.Duration
	kind                       string
}

func (e ev) obs() Observation {
	kind := e.kind
	if kind == "" {
		kind = EventKindAuthorizeDecision
	}
	return Observation{EventID: e.id, Kind: kind, Decision: e.decision, Tool: e.tool, Action: e.action, At: t0.Add(e.at)}
}

// run makes n observations prefix1..prefixN with the given decision, the
// first at start and then every step.
func run(prefix, decision string, start, step time.Duration, n int) []ev {
	out := make([]ev, n)
	for i := range out {
		out[i] = ev{id: fmt.Sprintf("%s%d", prefix, i+1), decision: decision, tool: "github", action: "merge", at: start + time.Duration(i)*step}
	}
	return out
}

// ids returns prefixFrom..prefixTo.
func ids(prefix string, from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

func cat(parts ...[]ev) []ev { return slices.Concat(parts...) }

func deny(id string, at time.Duration) ev  { return ev{id: id, decision: DecisionDeny, at: at} }
func allow(id string, at time.Duration) ev { return ev{id: id, decision: "allow", at: at} }
func approval(id, tool, action string, at time.Duration) ev {
	return ev{id: id, decision: DecisionRequireApproval, tool: tool, action: action, at: at}
}

type want struct {
	kind string
	ids  []string
	at   time.Duration
}

var severities = map[string]string{KindDenyStorm: SeverityHigh, KindRunaway: SeverityHigh,
	KindRepeatedApproval: SeverityMedium, KindTrustEscalation: SeverityHigh}

func observeAll(w *Windows, events []ev) []Incident {
	var got []Incident
	for _, e := range events {
		got = append(got, w.Observe(e.obs())...)
	}
	return got
}

func checkIncidents(t *testing.T, got []Incident, wants []want) {
	t.Helper()
	if len(got) != len(wants) {
		t.Fatalf("got %d incidents %+v, want %d %+v", len(got), got, len(wants), wants)
	}
	for i, wt := range wants {
		g := got[i]
		if g.Kind != wt.kind || !slices.Equal(g.SourceEventIDs, wt.ids) || !g.At.Equal(t0.Add(wt.at)) {
			t.Errorf("incident %d = %s %v at %s, want %s %v at %s", i, g.Kind, g.SourceEventIDs, g.At.Sub(t0), wt.kind, wt.ids, wt.at)
		}
		if g.Severity != severities[wt.kind] {
			t.Errorf("incident %d severity = %q, want %q", i, g.Severity, severities[wt.kind])
		}
		if g.Summary == "" {
			t.Errorf("incident %d has an empty summary", i)
		}
	}
}

func TestPatterns(t *testing.T) {
	tests := []struct {
		name   string
		events []ev
		want   []want
	}{
		// deny_storm
		{name: "deny_storm: 4 denies within 60s give none", events: run("d", DecisionDeny, 0, 10*time.Second, 4)},
		{name: "deny_storm: 5 denies within 60s give one", events: run("d", DecisionDeny, 0, 10*time.Second, 5),
			want: []want{{KindDenyStorm, ids("d", 1, 5), 40 * time.Second}}},
		{name: "deny_storm: 5 denies spanning 60s-1ms give one",
			events: cat(run("d", DecisionDeny, 0, time.Second, 4), []ev{deny("d5", 60*time.Second-ms)}),
			want:   []want{{KindDenyStorm, ids("d", 1, 5), 60*time.Second - ms}}},
		{name: "deny_storm: 5 denies spanning exactly 60s give none",
			events: cat(run("d", DecisionDeny, 0, time.Second, 4), []ev{deny("d5", 60*time.Second)})},
		{name: "deny_storm: 5 denies spanning 60s+1ms give none",
			events: cat(run("d", DecisionDeny, 0, time.Second, 4), []ev{deny("d5", 60*time.Second+ms)})},
		{name: "deny_storm: a deny exactly 60s after the first slides it out",
			events: cat(run("d", DecisionDeny, 0, time.Second, 4), []ev{deny("d5", 60*time.Second), deny("d6", 60*time.Second+ms)}),
			want:   []want{{KindDenyStorm, ids("d", 2, 6), 60*time.Second + ms}}},
		{name: "deny_storm: a burst of 10 denies gives exactly 2 (and one runaway)", events: run("d", DecisionDeny, 0, 100*ms, 10),
			want: []want{{KindDenyStorm, ids("d", 1, 5), 400 * ms}, {KindDenyStorm, ids("d", 6, 10), 900 * ms}, {KindRunaway, ids("d", 1, 10), 900 * ms}}},
		{name: "deny_storm: the window is cleared after firing (9 denies give one)", events: run("d", DecisionDeny, 0, 100*ms, 9),
			want: []want{{KindDenyStorm, ids("d", 1, 5), 400 * ms}}},
		{name: "deny_storm: quarantine is not a deny", events: run("q", "quarantine", 0, time.Second, 5)},
		{name: "deny_storm: allows between denies do not count",
			events: []ev{deny("d1", 0), allow("a1", 1*time.Second), deny("d2", 2*time.Second), allow("a2", 3*time.Second),
				deny("d3", 4*time.Second), allow("a3", 5*time.Second), deny("d4", 6*time.Second), allow("a4", 7*time.Second), deny("d5", 8*time.Second)},
			want: []want{{KindDenyStorm, ids("d", 1, 5), 8 * time.Second}}},

		// runaway
		{name: "runaway: 9 actions within 30s give none", events: run("a", "allow", 0, 3*time.Second, 9)},
		{name: "runaway: 10 actions within 30s give one", events: run("a", "allow", 0, 3*time.Second, 10),
			want: []want{{KindRunaway, ids("a", 1, 10), 27 * time.Second}}},
		{name: "runaway: 10 actions spanning 30s-1ms give one",
			events: cat(run("a", "allow", 0, time.Second, 9), []ev{allow("a10", 30*time.Second-ms)}),
			want:   []want{{KindRunaway, ids("a", 1, 10), 30*time.Second - ms}}},
		{name: "runaway: 10 actions spanning exactly 30s give none",
			events: cat(run("a", "allow", 0, time.Second, 9), []ev{allow("a10", 30*time.Second)})},
		{name: "runaway: 10 actions spanning 30s+1ms give none",
			events: cat(run("a", "allow", 0, time.Second, 9), []ev{allow("a10", 30*time.Second+ms)})},
		{name: "runaway: any decision is an action",
			events: []ev{allow("x1", 0), {id: "x2", decision: "redact", at: time.Second}, {id: "x3", decision: "quarantine", at: 2 * time.Second},
				approval("x4", "t1", "a", 3*time.Second), allow("x5", 4*time.Second), {id: "x6", decision: "redact", at: 5 * time.Second},
				{id: "x7", decision: "quarantine", at: 6 * time.Second}, approval("x8", "t2", "a", 7*time.Second), allow("x9", 8*time.Second),
				{id: "x10", decision: "", at: 9 * time.Second}},
			want: []want{{KindRunaway, ids("x", 1, 10), 9 * time.Second}}},
		{name: "runaway: 20 actions give exactly 2", events: run("a", "allow", 0, 100*ms, 20),
			want: []want{{KindRunaway, ids("a", 1, 10), 900 * ms}, {KindRunaway, ids("a", 11, 20), 1900 * ms}}},

		// repeated_approval
		{name: "repeated_approval: 2 on one pair give none", events: run("r", DecisionRequireApproval, 0, time.Minute, 2)},
		{name: "repeated_approval: 3 on one pair give one", events: run("r", DecisionRequireApproval, 0, time.Minute, 3),
			want: []want{{KindRepeatedApproval, ids("r", 1, 3), 2 * time.Minute}}},
		{name: "repeated_approval: 2 plus 1 on another action give none",
			events: []ev{approval("r1", "github", "merge", 0), approval("r2", "github", "merge", time.Second), approval("r3", "github", "close", 2*time.Second)}},
		{name: "repeated_approval: 2 plus 1 on another tool give none",
			events: []ev{approval("r1", "github", "merge", 0), approval("r2", "github", "merge", time.Second), approval("r3", "gitlab", "merge", 2*time.Second)}},
		{name: "repeated_approval: 3 spanning 10m-1ms give one",
			events: []ev{approval("r1", "github", "merge", 0), approval("r2", "github", "merge", time.Minute), approval("r3", "github", "merge", 10*time.Minute-ms)},
			want:   []want{{KindRepeatedApproval, ids("r", 1, 3), 10*time.Minute - ms}}},
		{name: "repeated_approval: 3 spanning exactly 10m give none",
			events: []ev{approval("r1", "github", "merge", 0), approval("r2", "github", "merge", time.Minute), approval("r3", "github", "merge", 10*time.Minute)}},
		{name: "repeated_approval: 3 spanning 10m+1ms give none",
			events: []ev{approval("r1", "github", "merge", 0), approval("r2", "github", "merge", time.Minute), approval("r3", "github", "merge", 10*time.Minute+ms)}},
		{name: "repeated_approval: cleared after firing (5 give one, 6 give two)", events: run("r", DecisionRequireApproval, 0, time.Minute, 6),
			want: []want{{KindRepeatedApproval, ids("r", 1, 3), 2 * time.Minute}, {KindRepeatedApproval, ids("r", 4, 6), 5 * time.Minute}}},
		{name: "repeated_approval: interleaved pairs fire separately",
			events: []ev{approval("a1", "github", "merge", 0), approval("b1", "github", "close", time.Minute), approval("a2", "github", "merge", 2*time.Minute),
				approval("b2", "github", "close", 3*time.Minute), approval("a3", "github", "merge", 4*time.Minute), approval("b3", "github", "close", 5*time.Minute)},
			want: []want{{KindRepeatedApproval, ids("a", 1, 3), 4 * time.Minute}, {KindRepeatedApproval, ids("b", 1, 3), 5 * time.Minute}}},

		// trust_escalation
		{name: "trust_escalation: deny 30s-1ms after require_approval gives one",
			events: []ev{approval("ra", "github", "merge", 0), deny("d", 30*time.Second-ms)},
			want:   []want{{KindTrustEscalation, []string{"ra", "d"}, 30*time.Second - ms}}},
		{name: "trust_escalation: deny exactly 30s after gives none",
			events: []ev{approval("ra", "github", "merge", 0), deny("d", 30*time.Second)}},
		{name: "trust_escalation: deny 30s+1ms after gives none",
			events: []ev{approval("ra", "github", "merge", 0), deny("d", 30*time.Second+ms)}},
		{name: "trust_escalation: require_approval after a deny gives none",
			events: []ev{deny("d", 0), approval("ra", "github", "merge", time.Second)}},
		{name: "trust_escalation: same instant, require_approval arriving first, gives one",
			events: []ev{approval("ra", "github", "merge", 0), deny("d", 0)},
			want:   []want{{KindTrustEscalation, []string{"ra", "d"}, 0}}},
		{name: "trust_escalation: same instant, deny arriving first, gives none",
			events: []ev{deny("d", 0), approval("ra", "github", "merge", 0)}},
		{name: "trust_escalation: nearest require_approval is paired and the window cleared",
			events: []ev{approval("ra1", "github", "merge", 0), approval("ra2", "github", "close", 5*time.Second), deny("d1", 10*time.Second), deny("d2", 12*time.Second)},
			want:   []want{{KindTrustEscalation, []string{"ra2", "d1"}, 10 * time.Second}}},
		{name: "trust_escalation: a new require_approval after firing can fire again",
			events: []ev{approval("ra1", "github", "merge", 0), deny("d1", time.Second), approval("ra2", "github", "merge", 2*time.Second), deny("d2", 3*time.Second)},
			want:   []want{{KindTrustEscalation, []string{"ra1", "d1"}, time.Second}, {KindTrustEscalation, []string{"ra2", "d2"}, 3 * time.Second}}},
		{name: "trust_escalation: quarantine is not a deny",
			events: []ev{approval("ra", "github", "merge", 0), {id: "q", decision: "quarantine", at: time.Second}}},

		// several patterns from one observation
		{name: "one deny completes deny_storm and trust_escalation",
			events: cat(run("d", DecisionDeny, 0, time.Second, 4), []ev{approval("ra", "github", "merge", 4*time.Second), deny("d5", 5*time.Second)}),
			want:   []want{{KindDenyStorm, ids("d", 1, 5), 5 * time.Second}, {KindTrustEscalation, []string{"ra", "d5"}, 5 * time.Second}}},
		{name: "one deny completes deny_storm, runaway and trust_escalation",
			events: cat(run("a", "allow", 0, time.Second, 4), run("d", DecisionDeny, 4*time.Second, time.Second, 4),
				[]ev{approval("ra", "github", "merge", 8*time.Second), deny("d5", 9*time.Second)}),
			want: []want{{KindDenyStorm, ids("d", 1, 5), 9 * time.Second},
				{KindRunaway, slices.Concat(ids("a", 1, 4), ids("d", 1, 4), []string{"ra", "d5"}), 9 * time.Second},
				{KindTrustEscalation, []string{"ra", "d5"}, 9 * time.Second}}},

		// other kinds
		{name: "other kinds are ignored", events: func() []ev {
			es := run("x", DecisionDeny, 0, 100*ms, 12)
			for i := range es {
				es[i].kind = "replay_attempt"
			}
			return es
		}()},
		{name: "other kinds do not fill a window",
			events: cat(run("d", DecisionDeny, 0, time.Second, 4),
				[]ev{{id: "x", decision: DecisionDeny, kind: "mcp_manifest_drift", at: 4 * time.Second}, {id: "y", decision: DecisionDeny, kind: "", at: 5 * time.Second}}),
			want: []want{{KindDenyStorm, []string{"d1", "d2", "d3", "d4", "y"}, 5 * time.Second}}},
		{name: "other kinds do not make a trust_escalation",
			events: []ev{{id: "ra", decision: DecisionRequireApproval, kind: "external_event:codehost_webhook", at: 0}, deny("d", time.Second)}},

		// out-of-order arrival
		{name: "out of order: a late deny completes a storm, ids in time order",
			events: []ev{deny("d0", 0), deny("d1", time.Second), deny("d2", 2*time.Second), deny("d4", 4*time.Second), deny("d3", 3*time.Second)},
			want:   []want{{KindDenyStorm, []string{"d0", "d1", "d2", "d3", "d4"}, 4 * time.Second}}},
		{name: "out of order: equal times keep arrival order", events: run("d", DecisionDeny, 0, 0, 5),
			want: []want{{KindDenyStorm, ids("d", 1, 5), 0}}},
		{name: "out of order: a late require_approval before a held deny escalates",
			events: []ev{deny("d", 10*time.Second), approval("ra", "github", "merge", 5*time.Second)},
			want:   []want{{KindTrustEscalation, []string{"ra", "d"}, 10 * time.Second}}},
		{name: "out of order: a late require_approval timed after the deny does not",
			events: []ev{deny("d", 10*time.Second), allow("a", 20*time.Second), approval("ra", "github", "merge", 15*time.Second)}},
		{name: "out of order: a late require_approval 30s-1ms before the deny escalates",
			events: []ev{deny("d", 40*time.Second), approval("ra", "github", "merge", 10*time.Second+ms)},
			want:   []want{{KindTrustEscalation, []string{"ra", "d"}, 40 * time.Second}}},
		{name: "out of order: a late require_approval exactly 30s before the deny does not",
			events: []ev{deny("d", 40*time.Second), approval("ra", "github", "merge", 10*time.Second)}},
		{name: "out of order: a deny at exactly latest-60s is too late",
			events: cat([]ev{allow("a", 100*time.Second)}, run("d", DecisionDeny, 40*time.Second, time.Second, 5))},
		{name: "out of order: a deny at latest-60s+1ms still counts",
			events: cat([]ev{allow("a", 100*time.Second)}, []ev{deny("e0", 40*time.Second+ms)}, run("d", DecisionDeny, 41*time.Second, time.Second, 4)),
			want:   []want{{KindDenyStorm, []string{"e0", "d1", "d2", "d3", "d4"}, 44 * time.Second}}},
		{name: "out of order: a fifth deny arriving last at exactly latest-60s is too late",
			events: cat([]ev{allow("a", 100*time.Second)}, run("d", DecisionDeny, 41*time.Second, time.Second, 4), []ev{deny("e0", 40*time.Second)})},
		{name: "out of order: a fifth deny arriving last at latest-60s+1ms completes a storm",
			events: cat([]ev{allow("a", 100*time.Second)}, run("d", DecisionDeny, 41*time.Second, time.Second, 4), []ev{deny("e0", 40*time.Second+ms)}),
			want:   []want{{KindDenyStorm, []string{"e0", "d1", "d2", "d3", "d4"}, 44 * time.Second}}},
		{name: "out of order: a late require_approval pairs with the nearest deny after it, later entries stay",
			events: []ev{deny("d1", 10*time.Second), deny("d2", 12*time.Second), approval("ra2", "github", "merge", 14*time.Second),
				approval("ra1", "github", "merge", 8*time.Second), deny("d3", 15*time.Second)},
			want: []want{{KindTrustEscalation, []string{"ra1", "d1"}, 10 * time.Second}, {KindTrustEscalation, []string{"ra2", "d3"}, 15 * time.Second}}},
		{name: "out of order: a dropped late deny does not count later",
			events: cat(run("d", DecisionDeny, 100*time.Second, time.Second, 4), []ev{deny("late", 20*time.Second), deny("d5", 104*time.Second)}),
			want:   []want{{KindDenyStorm, ids("d", 1, 5), 104 * time.Second}}},
		{name: "out of order: a deny 40s late counts for deny_storm only",
			events: cat(run("a", "allow", 100*time.Second, 0, 5), run("d", DecisionDeny, 100*time.Second, 0, 4), []ev{deny("late", 60*time.Second)}),
			want:   []want{{KindDenyStorm, []string{"late", "d1", "d2", "d3", "d4"}, 100 * time.Second}}},
		{name: "out of order: a far past observation does not panic",
			events: []ev{allow("a", 0), deny("old", -200*365*24*time.Hour), approval("ra", "github", "merge", -100*365*24*time.Hour), deny("d", time.Second)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var w Windows
			checkIncidents(t, observeAll(&w, tc.events), tc.want)
		})
	}
}

func TestSummaries(t *testing.T) {
	tests := []struct {
		name   string
		events []ev
		want   []string
	}{
		{name: "deny_storm and runaway", events: run("d", DecisionDeny, 0, time.Second, 10),
			want: []string{"5 deny decisions within 60 seconds", "5 deny decisions within 60 seconds", "10 actions within 30 seconds"}},
		{name: "repeated_approval names tool and action", events: run("r", DecisionRequireApproval, 0, time.Second, 3),
			want: []string{"3 require_approval decisions for tool github action merge within 10 minutes"}},
		{name: "trust_escalation gives the gap", events: []ev{approval("ra", "github", "merge", 0), deny("d", 1500*ms)},
			want: []string{"deny 1.5s after require_approval (within 30 seconds)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var w Windows
			var got []string
			for _, inc := range observeAll(&w, tc.events) {
				got = append(got, inc.Summary)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("summaries = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestIdle(t *testing.T) {
	tests := []struct {
		name   string
		events []ev
		now    time.Duration
		want   bool
	}{
		{name: "empty", now: 0, want: true},
		{name: "only other kinds", events: []ev{{id: "x", decision: DecisionDeny, kind: "replay_attempt", at: 0}}, now: 0, want: true},
		{name: "a deny 60s-1ms ago", events: []ev{deny("d", 0)}, now: 60*time.Second - ms, want: false},
		{name: "a deny 60s ago", events: []ev{deny("d", 0)}, now: 60 * time.Second, want: true},
		{name: "an allow 30s-1ms ago", events: []ev{allow("a", 0)}, now: 30*time.Second - ms, want: false},
		{name: "an allow 30s ago", events: []ev{allow("a", 0)}, now: 30 * time.Second, want: true},
		{name: "a require_approval 10m-1ms ago", events: []ev{approval("r", "github", "merge", 0)}, now: 10*time.Minute - ms, want: false},
		{name: "a require_approval 10m ago", events: []ev{approval("r", "github", "merge", 0)}, now: 10 * time.Minute, want: true},
		{name: "a fired deny_storm frees its window (30s-1ms)", events: run("d", DecisionDeny, 0, 0, 5), now: 30*time.Second - ms, want: false},
		{name: "a fired deny_storm frees its window (30s)", events: run("d", DecisionDeny, 0, 0, 5), now: 30 * time.Second, want: true},
		{name: "a fired repeated_approval frees its key", events: run("r", DecisionRequireApproval, 0, 0, 3), now: 30 * time.Second, want: true},
		{name: "require_approvals held only by the trust window",
			events: cat(run("r", DecisionRequireApproval, 0, 0, 3), run("a", "allow", 0, 0, 7)), now: 30*time.Second - ms, want: false},
		{name: "require_approvals held only by the trust window, 30s later",
			events: cat(run("r", DecisionRequireApproval, 0, 0, 3), run("a", "allow", 0, 0, 7)), now: 30 * time.Second, want: true},
		{name: "an entry newer than now", events: []ev{allow("a", time.Hour)}, now: 0, want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var w Windows
			observeAll(&w, tc.events)
			if got := w.Idle(t0.Add(tc.now)); got != tc.want {
				t.Errorf("Idle = %v, want %v (lengths %+v)", got, tc.want, w.Len())
			}
		})
	}
}

func TestBounds(t *testing.T) {
	tests := []struct {
		name   string
		events []ev
		check  func(t *testing.T, w *Windows, got []Incident)
	}{
		{name: "count windows hold at most threshold-1",
			events: cat(run("d", DecisionDeny, 0, 0, 4), run("a", "allow", 0, 0, 5)),
			check: func(t *testing.T, w *Windows, _ []Incident) {
				if l := w.Len(); l.DenyStorm != 4 || l.Runaway != 9 {
					t.Errorf("lengths = %+v, want 4 denies and 9 actions", l)
				}
				w.Observe(deny("d5", 0).obs())
				if l := w.Len(); l.DenyStorm != 0 || l.Runaway != 0 {
					t.Errorf("after firing lengths = %+v, want empty deny_storm and runaway windows", l)
				}
			}},
		{name: "windows are pruned by time on every observation",
			events: []ev{deny("d", 0), approval("r", "github", "merge", 0), allow("a", 60*time.Second)},
			check: func(t *testing.T, w *Windows, _ []Incident) {
				if l := w.Len(); l != (Lengths{Runaway: 1, RepeatedApproval: 1, ApprovalKeys: 1}) {
					t.Errorf("lengths = %+v, want only the allow and the require_approval", l)
				}
			}},
		{name: "trust window capped with require_approvals, newest kept",
			events: func() []ev {
				var es []ev
				for i := range 20 {
					es = append(es, approval(fmt.Sprintf("r%d", i+1), fmt.Sprintf("t%d", i), "a", time.Duration(i)*100*ms))
				}
				return es
			}(),
			check: func(t *testing.T, w *Windows, _ []Incident) {
				if l := w.Len(); l.TrustEscalation != MaxTrustEntries {
					t.Errorf("trust entries = %d, want %d", l.TrustEscalation, MaxTrustEntries)
				}
				got := w.Observe(deny("d", 3*time.Second).obs())
				checkIncidents(t, got, []want{{KindTrustEscalation, []string{"r20", "d"}, 3 * time.Second}})
			}},
		{name: "trust window capped with denies",
			events: run("d", DecisionDeny, 0, 100*ms, 20),
			check: func(t *testing.T, w *Windows, _ []Incident) {
				if l := w.Len(); l.TrustEscalation != MaxTrustEntries {
					t.Errorf("trust entries = %d, want %d", l.TrustEscalation, MaxTrustEntries)
				}
			}},
		{name: "approval keys capped, least recently observed evicted",
			events: func() []ev {
				var es []ev
				for i := range MaxApprovalKeys {
					for j := range 2 {
						es = append(es, approval(fmt.Sprintf("p%d-%d", i, j), fmt.Sprintf("p%d", i), "a", time.Duration(2*i+j)*ms))
					}
				}
				return append(es, approval("new", "new", "a", time.Second))
			}(),
			check: func(t *testing.T, w *Windows, got []Incident) {
				if n := len(kinds(got, KindRepeatedApproval)); n != 0 {
					t.Fatalf("%d repeated_approval incidents before the test, want 0", n)
				}
				if l := w.Len(); l.ApprovalKeys != MaxApprovalKeys || l.RepeatedApproval != 2*MaxApprovalKeys-1 {
					t.Errorf("lengths = %+v, want %d keys and %d entries", l, MaxApprovalKeys, 2*MaxApprovalKeys-1)
				}
				// p0 was evicted: its third require_approval starts afresh (and evicts p1).
				if got := kinds(w.Observe(approval("p0-2", "p0", "a", 2*time.Second).obs()), KindRepeatedApproval); len(got) != 0 {
					t.Errorf("evicted key fired %+v", got)
				}
				got = kinds(w.Observe(approval("p2-2", "p2", "a", 3*time.Second).obs()), KindRepeatedApproval)
				checkIncidents(t, got, []want{{KindRepeatedApproval, []string{"p2-0", "p2-1", "p2-2"}, 3 * time.Second}})
				if got := kinds(w.Observe(approval("p1-2", "p1", "a", 4*time.Second).obs()), KindRepeatedApproval); len(got) != 0 {
					t.Errorf("key evicted by p0 fired %+v", got)
				}
				if l := w.Len(); l.ApprovalKeys > MaxApprovalKeys {
					t.Errorf("%d keys, cap %d", l.ApprovalKeys, MaxApprovalKeys)
				}
			}},
		{name: "approval keys: a too-late require_approval evicts no key",
			events: func() []ev {
				var es []ev
				for i := range MaxApprovalKeys {
					es = append(es, approval(fmt.Sprintf("p%d", i), fmt.Sprintf("p%d", i), "a", 10*time.Minute+time.Duration(i)*ms))
				}
				return append(es, approval("late", "late", "a", 0))
			}(),
			check: func(t *testing.T, w *Windows, _ []Incident) {
				if l := w.Len(); l.ApprovalKeys != MaxApprovalKeys || l.RepeatedApproval != MaxApprovalKeys {
					t.Errorf("lengths = %+v, want every live key kept", l)
				}
			}},
		{name: "approval keys: expired keys are removed before the least recent",
			events: func() []ev {
				var es []ev
				for i := range MaxApprovalKeys - 1 {
					es = append(es, approval(fmt.Sprintf("p%d", i), fmt.Sprintf("p%d", i), "a", 0))
				}
				return append(es, approval("live", "live", "a", 10*time.Minute-ms), approval("new", "new", "a", 10*time.Minute))
			}(),
			check: func(t *testing.T, w *Windows, _ []Incident) {
				if l := w.Len(); l.ApprovalKeys != 2 || l.RepeatedApproval != 2 {
					t.Errorf("lengths = %+v, want the live and the new key only", l)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var w Windows
			got := observeAll(&w, tc.events)
			tc.check(t, &w, got)
		})
	}
}

func kinds(incs []Incident, kind string) []Incident {
	var out []Incident
	for _, inc := range incs {
		if inc.Kind == kind {
			out = append(out, inc)
		}
	}
	return out
}

// TestLongStream feeds a long random stream, with some observations late by
// up to 5 seconds, and checks the memory bounds after every observation and
// the shape of every incident.
func TestLongStream(t *testing.T) {
	type rule struct {
		n    int
		span time.Duration
	}
	rules := map[string]rule{KindDenyStorm: {DenyStormThreshold, DenyStormWindow}, KindRunaway: {RunawayThreshold, RunawayWindow},
		KindRepeatedApproval: {RepeatedApprovalThreshold, RepeatedApprovalWindow}, KindTrustEscalation: {2, TrustEscalationWindow}}
	decisions := []string{"allow", DecisionDeny, DecisionRequireApproval, "redact", "quarantine"}
	tests := []struct {
		name  string
		seed  uint64
		n     int
		stepM int // max step between observations, milliseconds
	}{
		{name: "dense stream", seed: 1, n: 60000, stepM: 200},
		{name: "sparse stream", seed: 2, n: 20000, stepM: 4000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(tc.seed, 7))
			var w Windows
			now := t0
			at := map[string]time.Time{}
			used := map[string]map[string]bool{}
			fired := map[string]int{}
			maxKeys := 0
			for i := range tc.n {
				now = now.Add(time.Duration(r.IntN(tc.stepM)) * ms)
				o := Observation{EventID: fmt.Sprintf("e%d", i), Kind: EventKindAuthorizeDecision, Decision: decisions[r.IntN(len(decisions))], At: now}
				if r.IntN(10) == 0 {
					o.At = now.Add(-time.Duration(r.IntN(5000)) * ms)
				}
				if r.IntN(10) == 0 {
					o.Kind = "replay_attempt"
				}
				if r.IntN(2) == 0 {
					o.Tool, o.Action = fmt.Sprintf("t%d", r.IntN(4)), fmt.Sprintf("a%d", r.IntN(5))
				} else {
					o.Tool, o.Action = fmt.Sprintf("t%d", r.IntN(100)), fmt.Sprintf("a%d", r.IntN(100))
				}
				at[o.EventID] = o.At
				for _, inc := range w.Observe(o) {
					fired[inc.Kind]++
					ru := rules[inc.Kind]
					if len(inc.SourceEventIDs) != ru.n {
						t.Fatalf("%s with %d ids, want %d", inc.Kind, len(inc.SourceEventIDs), ru.n)
					}
					first, last := at[inc.SourceEventIDs[0]], at[inc.SourceEventIDs[ru.n-1]]
					if last.Sub(first) >= ru.span || !inc.At.Equal(last) {
						t.Fatalf("%s spans %s (window %s), at %s, last %s", inc.Kind, last.Sub(first), ru.span, inc.At, last)
					}
					if used[inc.Kind] == nil {
						used[inc.Kind] = map[string]bool{}
					}
					for j, id := range inc.SourceEventIDs {
						if used[inc.Kind][id] {
							t.Fatalf("%s reuses %s", inc.Kind, id)
						}
						used[inc.Kind][id] = true
						if j > 0 && at[id].Before(at[inc.SourceEventIDs[j-1]]) {
							t.Fatalf("%s ids not in time order: %v", inc.Kind, inc.SourceEventIDs)
						}
					}
				}
				l := w.Len()
				if l.DenyStorm > DenyStormThreshold-1 || l.Runaway > RunawayThreshold-1 || l.TrustEscalation > MaxTrustEntries ||
					l.ApprovalKeys > MaxApprovalKeys || l.RepeatedApproval > (RepeatedApprovalThreshold-1)*l.ApprovalKeys {
					t.Fatalf("after %d observations lengths = %+v", i+1, l)
				}
				for k, aw := range w.approvals {
					if len(aw.entries) > RepeatedApprovalThreshold-1 || len(aw.entries) == 0 {
						t.Fatalf("key %v holds %d entries", k, len(aw.entries))
					}
				}
				maxKeys = max(maxKeys, l.ApprovalKeys)
			}
			for kind := range rules {
				if fired[kind] == 0 {
					t.Errorf("no %s fired in the stream", kind)
				}
			}
			if tc.stepM == 200 && maxKeys != MaxApprovalKeys {
				t.Errorf("dense stream reached %d approval keys, want the cap %d", maxKeys, MaxApprovalKeys)
			}
			t.Logf("incidents %v, max approval keys %d", fired, maxKeys)
		})
	}
}

// TestJSONRoundTrip: windows encoded and decoded between every observation
// (as nodes sharing an agent's windows do) find exactly the incidents of
// windows kept in memory, over a long random stream that also overflows
// the approval keys.
func TestJSONRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 9))
	decisions := []string{"allow", DecisionDeny, DecisionRequireApproval, DecisionRequireApproval, "redact"}
	var mem Windows
	var enc []byte
	now := t0
	fired := 0
	maxKeys := 0
	for i := range 1500 {
		now = now.Add(time.Duration(r.IntN(400)) * ms)
		o := Observation{EventID: fmt.Sprintf("e%d", i), Kind: EventKindAuthorizeDecision, Decision: decisions[r.IntN(len(decisions))],
			Tool: fmt.Sprintf("t%d", r.IntN(30)), Action: fmt.Sprintf("a%d", r.IntN(20)), At: now}
		if r.IntN(10) == 0 {
			o.At = now.Add(-time.Duration(r.IntN(5000)) * ms)
		}
		var shared Windows
		if enc != nil {
			if err := shared.UnmarshalJSON(enc); err != nil {
				t.Fatalf("observation %d: decode: %v", i, err)
			}
		}
		want, got := mem.Observe(o), shared.Observe(o)
		if fmt.Sprint(want) != fmt.Sprint(got) {
			t.Fatalf("observation %d: in memory %v, shared %v", i, want, got)
		}
		if mem.Len() != shared.Len() {
			t.Fatalf("observation %d: lengths %+v and %+v", i, mem.Len(), shared.Len())
		}
		fired += len(want)
		maxKeys = max(maxKeys, mem.Len().ApprovalKeys)
		var err error
		if enc, err = shared.MarshalJSON(); err != nil {
			t.Fatal(err)
		}
	}
	if fired == 0 || maxKeys < MaxApprovalKeys {
		t.Fatalf("the stream opened %d incidents and tracked at most %d approval keys: it must open some and fill the %d keys", fired, maxKeys, MaxApprovalKeys)
	}
	if err := new(Windows).UnmarshalJSON([]byte(`{"deny":[{"id":"a","at_ns":2},{"id":"b","at_ns":1}]}`)); err == nil {
		t.Fatal("entries out of time order decoded")
	}
}
