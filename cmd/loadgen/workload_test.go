package main

import (
	"strings"
	"testing"
)

// pick interleaves the mix: every stretch of len(schedule) consecutive
// requests holds the mix's proportions, no class arrives in a block longer
// than the schedule itself makes it, and every agent's own calls cycle
// through every class.
func TestPickInterleavesTheMix(t *testing.T) {
	mix, err := parseMix(defaultMix)
	if err != nil {
		t.Fatal(err)
	}
	for _, agents := range []int{1, 7, 10, 50, 64} {
		w := &workload{agents: agents, seq: schedule(mix)}
		w.reqs = make([][][]request, agents)
		for a := range agents {
			w.reqs[a] = make([][]request, len(classes))
			for c := range classes {
				w.reqs[a][c] = make([]request, variants)
				for v := range variants {
					w.reqs[a][c][v] = request{class: c, token: string(rune('A' + a%26))}
				}
			}
		}
		want := map[int]int{}
		for _, m := range mix {
			want[classIndex(m.Class)] = m.Weight
		}
		seqLen := len(w.seq) // 10 for 60/20/10/10
		total := int64(agents * seqLen * 4)
		longest, run, prev := 0, 0, -1
		perAgent := make([]map[int]bool, agents)
		counts := map[int]int{}
		for n := range total {
			r := w.pick(n)
			counts[r.class]++
			if r.class == prev {
				run++
			} else {
				run, prev = 1, r.class
			}
			longest = max(longest, run)
			a := int(n % int64(agents))
			if perAgent[a] == nil {
				perAgent[a] = map[int]bool{}
			}
			perAgent[a][r.class] = true
			if r.token != w.reqs[a][0][0].token {
				t.Fatalf("agents=%d: request %d is not agent %d's", agents, n, a)
			}
		}
		for c, weight := range want {
			if got, exp := counts[c], int(total)*weight/100; got != exp {
				t.Errorf("agents=%d: class %s picked %d times, want %d", agents, classes[c].name, got, exp)
			}
		}
		// The schedule repeats "read" at most twice in a row, and a round's
		// seam can join two such pairs; blocks of a whole round (the old
		// pick: 50 in a row) are what must not happen.
		if longest > 4 {
			t.Errorf("agents=%d: %d consecutive requests of one class", agents, longest)
		}
		for a, seen := range perAgent {
			if len(seen) != len(want) {
				t.Errorf("agents=%d: agent %d saw classes %v, want all %d", agents, a, seen, len(want))
			}
		}
	}
}

// With -runs, every call names a run whose id changes every runs calls of
// its agent of one class: a run holds runs calls of one class (the last
// of each agent and class fewer), and a body differs from its template
// only in the run id.
func TestPickRuns(t *testing.T) {
	mix, err := parseMix(defaultMix)
	if err != nil {
		t.Fatal(err)
	}
	const agents, runs = 7, 4
	w := &workload{agents: agents, seq: schedule(mix), runs: runs}
	w.reqs = make([][][]request, agents)
	for a := range agents {
		w.reqs[a] = make([][]request, len(classes))
		for c := range classes {
			w.reqs[a][c] = make([]request, variants)
			for v := range variants {
				b, err := svcBody(classes[c].build(v), true)
				if err != nil {
					t.Fatal(err)
				}
				w.reqs[a][c][v] = request{class: c, body: b, raw: append([]byte("POST / HTTP/1.1\r\n\r\n"), b...)}
			}
		}
	}
	perRun := map[string]int{}
	for n := range int64(agents * 400) {
		r := w.pick(n)
		body := string(r.body)
		i := strings.Index(body, `"run_id":"`)
		if i < 0 || strings.Contains(body, runSlot) || !strings.HasSuffix(string(r.raw), body) {
			t.Fatalf("request %d: body %s", n, body)
		}
		id := body[i+10 : i+26]
		perRun[id]++
		if perRun[id] > runs {
			t.Fatalf("run %s holds more than %d calls", id, runs)
		}
	}
	// Every run holds runs calls but the last one of each agent and class.
	short := 0
	for _, n := range perRun {
		if n < runs {
			short++
		}
	}
	if short > agents*len(classes) {
		t.Fatalf("%d of %d runs hold fewer than %d calls", short, len(perRun), runs)
	}
	if tmpl := string(w.reqs[0][0][0].body); !strings.Contains(tmpl, runSlot) {
		t.Fatalf("pick changed the template: %s", tmpl)
	}
}
