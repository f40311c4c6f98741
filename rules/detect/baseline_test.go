package detect

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"
)

// t0 is the start of a 60-second window.
var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

func call(tool, action string) Event {
	return Event{Kind: KindAuthorizeDecision, AgentID: "a1", TenantID: "t1", Tool: tool, Action: action, Decision: "allow"}
}

func names(as []Anomaly) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.Name)
	}
	return out
}

// feed observes n calls of one known pair at time at and returns the
// anomaly names per call.
func feed(b *Baseline, n int, at time.Time) [][]string {
	out := make([][]string, n)
	for i := range out {
		out[i] = names(b.Observe(call("known", "op"), at))
	}
	return out
}

func TestBaselineNewTool(t *testing.T) {
	type step struct {
		event Event
		want  []string
	}
	cases := []struct {
		name     string
		remember [][2]string
		steps    []step
	}{
		{name: "first use fires, second does not", steps: []step{
			{call("github", "merge"), []string{AnomalyNewTool}},
			{call("github", "merge"), nil},
		}},
		{name: "same tool other action is new", steps: []step{
			{call("github", "merge"), []string{AnomalyNewTool}},
			{call("github", "read"), []string{AnomalyNewTool}},
			{call("github", "merge"), nil},
		}},
		{name: "same action other tool is new", steps: []step{
			{call("github", "read"), []string{AnomalyNewTool}},
			{call("gitlab", "read"), []string{AnomalyNewTool}},
		}},
		{name: "pair is not concatenation", steps: []step{
			{call("ab", "c"), []string{AnomalyNewTool}},
			{call("a", "bc"), []string{AnomalyNewTool}},
		}},
		{name: "other kinds ignored and not remembered", steps: []step{
			{Event{Kind: KindReplayAttempt, Tool: "github", Action: "merge"}, nil},
			{Event{Kind: KindMCPManifestDrift, Tool: "github", Action: "merge"}, nil},
			{Event{Kind: "external_event:codehost_webhook", Tool: "github", Action: "merge"}, nil},
			{call("github", "merge"), []string{AnomalyNewTool}},
		}},
		{name: "remembered pair is not new", remember: [][2]string{{"github", "merge"}}, steps: []step{
			{call("github", "merge"), nil},
			{call("github", "read"), []string{AnomalyNewTool}},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBaseline()
			for _, p := range tc.remember {
				b.Remember(p[0], p[1])
			}
			for i, s := range tc.steps {
				if got := names(b.Observe(s.event, t0)); !slices.Equal(got, s.want) {
					t.Fatalf("step %d (%s/%s): anomalies %v, want %v", i, s.event.Tool, s.event.Action, got, s.want)
				}
			}
		})
	}
}

func TestBaselineNewToolAnomalyFields(t *testing.T) {
	b := NewBaseline()
	got := b.Observe(call("github", "merge"), t0.Add(15*time.Second))
	want := Anomaly{Name: AnomalyNewTool, Severity: SeverityInfo, Tool: "github", Action: "merge",
		WindowStart: t0, WindowCount: 1}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("anomalies = %+v, want [%+v]", got, want)
	}
}

func TestBaselineRemembersAtMostMaxPairs(t *testing.T) {
	cases := []struct {
		name  string
		max   int
		calls []string // actions on tool "t", in order
		want  []bool   // whether each call is reported new
	}{
		{name: "evicts the oldest", max: 2,
			calls: []string{"a", "b", "c", "a"},
			want:  []bool{true, true, true, true}},
		{name: "within bound nothing forgotten", max: 3,
			calls: []string{"a", "b", "c", "a", "b", "c"},
			want:  []bool{true, true, true, false, false, false}},
		{name: "least recently used goes, not first inserted", max: 2,
			calls: []string{"a", "b", "a", "c", "a", "b"},
			want:  []bool{true, true, false, true, false, true}},
		{name: "bound of one", max: 1,
			calls: []string{"a", "a", "b", "a"},
			want:  []bool{true, false, true, true}},
		// Past fewPairs the pairs move from the slice to the map and list,
		// in their order of use: "a", used after the move, stays; "b", the
		// least recently used, goes first.
		{name: "recency survives the move to the map", max: fewPairs + 2,
			calls: append(letters(fewPairs+1), "a", "x", "y", "a", "b"),
			want:  append(trues(fewPairs+1), false, true, true, false, true)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBaselineWithOptions(BaselineOptions{MaxPairs: tc.max})
			for i, a := range tc.calls {
				got := slices.Contains(names(b.Observe(call("t", a), t0)), AnomalyNewTool)
				if got != tc.want[i] {
					t.Fatalf("call %d (%s): new = %v, want %v", i, a, got, tc.want[i])
				}
				if b.remembered() > tc.max || (b.pairs != nil && b.lru.Len() != len(b.pairs)) {
					t.Fatalf("call %d: %d pairs, bound %d", i, b.remembered(), tc.max)
				}
			}
		})
	}

	t.Run("default bound 1024", func(t *testing.T) {
		b := NewBaseline()
		for i := range 3000 {
			b.Observe(call("t", fmt.Sprint(i)), t0)
		}
		if b.remembered() != DefaultBaselineMaxPairs || b.lru.Len() != DefaultBaselineMaxPairs {
			t.Fatalf("%d pairs remembered, want %d", b.remembered(), DefaultBaselineMaxPairs)
		}
		// The newest 1024 (1976..2999) are known, 1975 was evicted.
		if got := b.Observe(call("t", "2999"), t0); len(got) != 0 {
			t.Fatalf("recent pair reported: %v", names(got))
		}
		if got := names(b.Observe(call("t", "1975"), t0)); !slices.Equal(got, []string{AnomalyNewTool}) {
			t.Fatalf("evicted pair: %v", got)
		}
	})
}

// history builds a Baseline whose completed windows have the given counts,
// one window a minute from t0, and returns it with the start of the next
// (current) window.
func history(opts BaselineOptions, counts ...int) (*Baseline, time.Time) {
	b := NewBaselineWithOptions(opts)
	b.Remember("known", "op")
	at := t0
	for _, n := range counts {
		feed(b, n, at.Add(30*time.Second))
		at = at.Add(time.Minute)
	}
	return b, at
}

// firstRate returns the 1-based number of the call that raised the rate
// anomaly among calls (0 if none), failing when it fired twice.
func firstRate(t *testing.T, calls [][]string) int {
	t.Helper()
	first := 0
	for i, c := range calls {
		if slices.Contains(c, AnomalyRate) {
			if first != 0 {
				t.Fatalf("rate fired at calls %d and %d of one window", first, i+1)
			}
			first = i + 1
		}
	}
	return first
}

func TestBaselineRateThreshold(t *testing.T) {
	cases := []struct {
		name    string
		history []int
		calls   int
		want    int // 1-based call that fires; 0: none
	}{
		{name: "mean 2: 6 equals 3x, 7 exceeds", history: []int{2, 2, 2}, calls: 10, want: 7},
		{name: "mean 2: exactly 6 never fires", history: []int{2, 2, 2}, calls: 6, want: 0},
		{name: "mean 1: 4th fires", history: []int{1, 1, 1}, calls: 4, want: 4},
		{name: "mean 1: 3 does not", history: []int{1, 1, 1}, calls: 3, want: 0},
		{name: "mean 4/3: 4 equals 3x, 5 exceeds", history: []int{1, 1, 2}, calls: 6, want: 5},
		{name: "mean 5/3: 5 equals, 6 exceeds", history: []int{1, 2, 2}, calls: 6, want: 6},
		{name: "two windows are not enough", history: []int{1, 1}, calls: 50, want: 0},
		{name: "one window is not enough", history: []int{1}, calls: 50, want: 0},
		{name: "no history", history: nil, calls: 50, want: 0},
		{name: "mean 10 over 4 windows", history: []int{5, 15, 10, 10}, calls: 31, want: 31},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, now := history(BaselineOptions{}, tc.history...)
			got := firstRate(t, feed(b, tc.calls, now))
			if got != tc.want {
				t.Fatalf("rate fired at call %d, want %d", got, tc.want)
			}
		})
	}
}

func TestBaselineRateAnomalyFields(t *testing.T) {
	b, now := history(BaselineOptions{}, 1, 1, 2)
	var got []Anomaly
	for range 5 {
		got = b.Observe(call("known", "op"), now.Add(59*time.Second))
	}
	want := Anomaly{Name: AnomalyRate, Severity: SeverityHigh, Tool: "known", Action: "op",
		WindowStart: now, WindowCount: 5, HistoricalMean: 4.0 / 3, CompletedWindows: 3}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("anomalies = %+v, want [%+v]", got, want)
	}
}

func TestBaselineNewToolAndRateTogether(t *testing.T) {
	b, now := history(BaselineOptions{}, 1, 1, 1)
	feed(b, 3, now)
	got := names(b.Observe(call("brand", "new"), now))
	if !slices.Equal(got, []string{AnomalyNewTool, AnomalyRate}) {
		t.Fatalf("anomalies = %v, want new tool then rate", got)
	}
}

func TestBaselineWindows(t *testing.T) {
	t.Run("fires again in the next window", func(t *testing.T) {
		b, now := history(BaselineOptions{}, 1, 1, 1)
		if got := firstRate(t, feed(b, 5, now)); got != 4 {
			t.Fatalf("first window fired at %d", got)
		}
		// History is now 1,1,1,5: mean 2, so the 7th call fires.
		if got := firstRate(t, feed(b, 8, now.Add(time.Minute))); got != 7 {
			t.Fatalf("second window fired at %d, want 7", got)
		}
	})
	t.Run("window boundary is aligned", func(t *testing.T) {
		b, now := history(BaselineOptions{}, 1, 1, 1)
		// Three calls at the last instant of the window, one at the next
		// window's first instant: 3 then 1, no burst.
		calls := append(feed(b, 3, now.Add(time.Minute-time.Nanosecond)), feed(b, 1, now.Add(time.Minute))...)
		if got := firstRate(t, calls); got != 0 {
			t.Fatalf("fired at call %d across a window boundary", got)
		}
		if b.rate.histLen != 4 || b.rate.curCount != 1 {
			t.Fatalf("histLen %d curCount %d, want 4 and 1", b.rate.histLen, b.rate.curCount)
		}
	})
	t.Run("idle windows are not history", func(t *testing.T) {
		b, now := history(BaselineOptions{}, 1, 1, 1)
		// Half an hour of silence, then one call: mean stays 1, no burst.
		if got := firstRate(t, feed(b, 1, now.Add(30*time.Minute))); got != 0 {
			t.Fatalf("a single call after idling fired")
		}
		if b.rate.histLen != 3 || b.rate.histSum != 3 {
			t.Fatalf("histLen %d histSum %d, want 3 and 3", b.rate.histLen, b.rate.histSum)
		}
	})
	t.Run("late event counts in the current window", func(t *testing.T) {
		b, now := history(BaselineOptions{}, 1, 1, 1)
		feed(b, 3, now)
		// A fourth call stamped in an earlier window still counts now.
		if got := names(b.Observe(call("known", "op"), now.Add(-10*time.Minute))); !slices.Equal(got, []string{AnomalyRate}) {
			t.Fatalf("late call: %v, want rate", got)
		}
		if b.rate.curCount != 4 || !b.rate.curStart.Equal(now) {
			t.Fatalf("current window %v count %d", b.rate.curStart, b.rate.curCount)
		}
	})
	t.Run("other kinds do not count", func(t *testing.T) {
		b, now := history(BaselineOptions{}, 1, 1, 1)
		for range 10 {
			if got := b.Observe(Event{Kind: KindReplayAttempt, Tool: "known", Action: "op"}, now); got != nil {
				t.Fatalf("replay event raised %v", names(got))
			}
		}
		// Unchanged: the last history window is still the current one.
		if b.rate.curCount != 1 || b.rate.histLen != 2 {
			t.Fatalf("curCount %d histLen %d after other kinds, want 1 and 2", b.rate.curCount, b.rate.histLen)
		}
	})
	t.Run("custom window length", func(t *testing.T) {
		b, now := history(BaselineOptions{Window: 10 * time.Second}, 1, 1, 1)
		// history() spaced its windows a minute apart; with 10 s windows
		// they are still three distinct completed windows.
		if b.rate.histLen != 2 {
			t.Fatalf("histLen %d before the current window completes, want 2", b.rate.histLen)
		}
		calls := feed(b, 4, now)
		if got := firstRate(t, calls); got != 4 {
			t.Fatalf("fired at %d, want 4", got)
		}
		if !b.rate.curStart.Equal(now) {
			t.Fatalf("window start %v", b.rate.curStart)
		}
	})
}

func TestBaselineHistoryBound(t *testing.T) {
	t.Run("old windows leave the mean", func(t *testing.T) {
		// Three windows of 10, then three of 1; with a history of 3 only the
		// ones remain, mean 1, so the 4th call fires (mean 5.5 would not).
		b, now := history(BaselineOptions{HistoryWindows: 3}, 10, 10, 10, 1, 1, 1)
		// Completed so far: 10, 10, 10, 1, 1; kept: 10, 1, 1.
		if b.rate.histLen != 3 || b.rate.histSum != 12 {
			t.Fatalf("histLen %d histSum %d, want 3 and 12", b.rate.histLen, b.rate.histSum)
		}
		if got := firstRate(t, feed(b, 4, now)); got != 4 {
			t.Fatalf("fired at %d, want 4", got)
		}
		if b.rate.histLen != 3 || b.rate.histSum != 3 {
			t.Fatalf("histLen %d histSum %d, want 3 and 3", b.rate.histLen, b.rate.histSum)
		}
	})
	t.Run("default bound 60", func(t *testing.T) {
		counts := make([]int, 100)
		for i := range counts {
			counts[i] = i + 1
		}
		b, _ := history(BaselineOptions{}, counts...)
		if len(b.rate.history) != DefaultBaselineHistory || b.rate.histLen != DefaultBaselineHistory {
			t.Fatalf("history len %d/%d, want %d", b.rate.histLen, len(b.rate.history), DefaultBaselineHistory)
		}
		// The last 60 completed windows are 41..100 (100 is still current
		// until another window starts, so 40..99).
		want := 0
		for n := 40; n <= 99; n++ {
			want += n
		}
		if b.rate.histSum != want {
			t.Fatalf("histSum %d, want %d", b.rate.histSum, want)
		}
	})
	t.Run("no completed window holds no history", func(t *testing.T) {
		// The ring grows with the windows it holds: an agent seen once (most
		// of a large fleet) keeps none.
		b, _ := history(BaselineOptions{}, 1)
		if b.rate.history != nil || b.rate.histLen != 0 {
			t.Fatalf("one window, still current: history %v (len %d), want none", b.rate.history, b.rate.histLen)
		}
	})
	t.Run("history option below minimum is raised", func(t *testing.T) {
		b, now := history(BaselineOptions{HistoryWindows: 1}, 1, 1, 1)
		if b.rate.histCap != BaselineMinHistory || len(b.rate.history) != 2 {
			t.Fatalf("history capacity %d holding %d windows, want %d holding 2", b.rate.histCap, len(b.rate.history), BaselineMinHistory)
		}
		if got := firstRate(t, feed(b, 4, now)); got != 4 {
			t.Fatalf("fired at %d, want 4", got)
		}
	})
}

func TestBaselineOptionsDefaults(t *testing.T) {
	cases := []struct {
		name string
		in   BaselineOptions
		want BaselineOptions
	}{
		{name: "zero", in: BaselineOptions{},
			want: BaselineOptions{Window: time.Minute, MaxPairs: 1024, HistoryWindows: 60}},
		{name: "negative", in: BaselineOptions{Window: -1, MaxPairs: -5, HistoryWindows: -2},
			want: BaselineOptions{Window: time.Minute, MaxPairs: 1024, HistoryWindows: 60}},
		{name: "kept", in: BaselineOptions{Window: 5 * time.Second, MaxPairs: 7, HistoryWindows: 10},
			want: BaselineOptions{Window: 5 * time.Second, MaxPairs: 7, HistoryWindows: 10}},
		{name: "history raised to minimum", in: BaselineOptions{HistoryWindows: 2},
			want: BaselineOptions{Window: time.Minute, MaxPairs: 1024, HistoryWindows: 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := NewBaselineWithOptions(tc.in).opts; got != tc.want {
				t.Fatalf("options %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestBaselineZeroValue(t *testing.T) {
	var b Baseline
	if got := names(b.Observe(call("github", "merge"), t0)); !slices.Equal(got, []string{AnomalyNewTool}) {
		t.Fatalf("zero Baseline: %v", got)
	}
	if b.opts.Window != DefaultBaselineWindow {
		t.Fatalf("zero Baseline window %v", b.opts.Window)
	}
	var r Baseline
	r.Remember("github", "merge")
	if got := r.Observe(call("github", "merge"), t0); len(got) != 0 {
		t.Fatalf("zero Baseline after Remember: %v", names(got))
	}
}

// TestRateJSONRoundTrip: a Rate encoded and decoded between every event,
// with the pair's novelty decided outside (as nodes sharing an agent's
// baseline do), raises exactly what an in-memory Baseline raises.
func TestRateJSONRoundTrip(t *testing.T) {
	b := NewBaseline()
	seen := map[string]bool{}
	var enc []byte
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	counts := map[string]int{}
	for i := range 3000 {
		// Bursts every few minutes over a steady trickle.
		step := 2 * time.Second
		if (i/200)%3 == 2 {
			step = 50 * time.Millisecond
		}
		now = now.Add(step)
		e := Event{Kind: KindAuthorizeDecision, Tool: "t" + strconv.Itoa(i%7), Action: "a" + strconv.Itoa(i%11)}
		var r Rate
		if enc != nil {
			if err := json.Unmarshal(enc, &r); err != nil {
				t.Fatalf("event %d: decode: %v", i, err)
			}
		}
		pair := e.Tool + "." + e.Action
		want, got := b.Observe(e, now), r.Observe(e, now, !seen[pair])
		seen[pair] = true
		if fmt.Sprint(want) != fmt.Sprint(got) {
			t.Fatalf("event %d: in memory %v, shared %v", i, want, got)
		}
		for _, a := range got {
			counts[a.Name]++
		}
		var err error
		if enc, err = json.Marshal(r); err != nil {
			t.Fatal(err)
		}
	}
	if counts[AnomalyNewTool] != 77 || counts[AnomalyRate] == 0 {
		t.Fatalf("anomalies %v: want 77 new pairs and some rate anomalies", counts)
	}
	var r Rate
	if err := json.Unmarshal([]byte(`{"window_ns":0,"history_cap":60}`), &r); err == nil {
		t.Fatal("a zero window decoded")
	}
}

// letters are the first n of "a", "b", ... (n at most 26).
func letters(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = string(rune('a' + i))
	}
	return out
}

func trues(n int) []bool {
	out := make([]bool, n)
	for i := range out {
		out[i] = true
	}
	return out
}
