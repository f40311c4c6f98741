package main

import (
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
