package sharedstate_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"svc/persistence/sharedstate"
	"svc/runstate"
)

// canon is a document's canonical text (what a receipt would commit to).
func canon(t *testing.T, run, agent runstate.Obj) string {
	t.Helper()
	c, err := runstate.NewContext(run, agent)
	if err != nil {
		t.Fatal(err)
	}
	return string(c.Canonical)
}

func memoryRuns(t *testing.T) sharedstate.Runs {
	m := sharedstate.NewMemory()
	t.Cleanup(func() { _ = m.Close() })
	return m.Runs(sharedstate.RunLimits{})
}

// TestRunsValkeyFoldsAsMemory runs one random script of attempts,
// settlements, peeks and restorations against both backends in lockstep:
// every document either returns must be byte for byte the other's (the Lua
// fold is runstate's fold).
func TestRunsValkeyFoldsAsMemory(t *testing.T) {
	u := valkeyURL(t)
	mem, vk := memoryRuns(t), newValkey(t, u).Runs(sharedstate.RunLimits{})
	ctx := ctxT(t)
	rng := rand.New(rand.NewPCG(7, 11))
	now := time.Now().UnixMilli()
	runs := []string{"", "r1", "r2", "r1/child", "r:1", "ü-run"}
	agents := []string{"a1", "a2"}
	tools := [][2]string{{"web", "fetch"}, {"crm", "get"}, {"stripe", "charge"}, {"email", "send"}, {"mcp:srv", "do"}}
	labels := []string{"egress", "private_read", "untrusted_ingest"}
	decisions := []string{"allow", "deny", "require_approval", "redact", "quarantine"}
	var issued []struct {
		k   sharedstate.RunKey
		seq int64
		a   runstate.Attempt
	}
	key := func() sharedstate.RunKey {
		k := sharedstate.RunKey{TenantID: "t1", AgentID: agents[rng.IntN(len(agents))], Run: runs[rng.IntN(len(runs))]}
		if k.Run == "r1/child" {
			k.Parent = "r1"
		}
		return k
	}
	for step := range 600 {
		now += int64(rng.IntN(3000))
		switch op := rng.IntN(10); {
		case op < 6:
			k := key()
			tool := tools[rng.IntN(len(tools))]
			a := runstate.Attempt{AgentID: k.AgentID, At: now, Tool: tool[0], Action: tool[1],
				Mutating: rng.IntN(2) == 0, Level: rng.IntN(7), Via: "source_trust", NoRunID: k.Run == ""}
			a.Destructive = a.Mutating && rng.IntN(3) == 0
			a.Egress = tool[0] == "email"
			if rng.IntN(3) == 0 {
				a.Labels = []string{labels[rng.IntN(len(labels))], labels[rng.IntN(len(labels))]}
			}
			if tool[0] == "stripe" {
				a.Sums = map[string]float64{"stripe/charge.amount": float64(rng.IntN(10000)) / 100}
			}
			if rng.IntN(4) == 0 && len(issued) > 0 {
				a.ID = issued[rng.IntN(len(issued))].a.ID // a retry
			} else if rng.IntN(2) == 0 {
				a.ID = fmt.Sprintf("att-%d", step)
			}
			pm, err := mem.Reserve(ctx, k, &a, runstate.AllFields)
			must(t, err)
			pv, err := vk.Reserve(ctx, k, &a, runstate.AllFields)
			must(t, err)
			if cm, cv := canon(t, pm.Run, pm.Agent), canon(t, pv.Run, pv.Agent); cm != cv || pm.Seq != pv.Seq || pm.Dup != pv.Dup || pm.Restore != pv.Restore {
				t.Fatalf("step %d reserve %+v:\nmemory %d %v %v %s\nvalkey %d %v %v %s", step, k, pm.Seq, pm.Dup, pm.Restore, cm, pv.Seq, pv.Dup, pv.Restore, cv)
			}
			issued = append(issued, struct {
				k   sharedstate.RunKey
				seq int64
				a   runstate.Attempt
			}{k, pm.Seq, a})
		case op < 8 && len(issued) > 0:
			i := issued[rng.IntN(len(issued))]
			d := decisions[rng.IntN(len(decisions))]
			s := runstate.Settlement{Seq: i.seq, Tool: i.a.Tool, Action: i.a.Action, Decision: d, Reason: "because_" + d, At: now}
			must(t, mem.Settle(ctx, i.k, &s))
			must(t, vk.Settle(ctx, i.k, &s))
		case op < 9:
			k := key()
			pm, err := mem.Peek(ctx, k, now, runstate.AllFields)
			must(t, err)
			pv, err := vk.Peek(ctx, k, now, runstate.AllFields)
			must(t, err)
			if cm, cv := canon(t, pm.Run, pm.Agent), canon(t, pv.Run, pv.Agent); cm != cv || pm.Restore != pv.Restore {
				t.Fatalf("step %d peek %+v:\nmemory %s\nvalkey %s", step, k, cm, cv)
			}
		default:
			k := key()
			lv := 1 + rng.IntN(6)
			must(t, mem.Tighten(ctx, k, lv, now))
			must(t, vk.Tighten(ctx, k, lv, now))
		}
	}
}

// TestRunsValkeyFoldsPastTheToolBoundAsMemory: a run of more distinct
// (tool, action) pairs than it counts names its recent calls alike in both
// stores (the in-process ring names them by index, the script by name).
func TestRunsValkeyFoldsPastTheToolBoundAsMemory(t *testing.T) {
	u := valkeyURL(t)
	mem, vk := memoryRuns(t), newValkey(t, u).Runs(sharedstate.RunLimits{})
	ctx := ctxT(t)
	k := sharedstate.RunKey{TenantID: "t1", AgentID: "a1", Run: "wide"}
	now := time.Now().UnixMilli()
	for i := range 3 * runstate.MaxTools {
		now += 10
		// New pairs, and now and then one counted or one named before.
		n := i
		if i%5 == 4 {
			n = i / 2
		}
		a := runstate.Attempt{AgentID: k.AgentID, At: now, Tool: fmt.Sprint("tool-", n), Action: "act", ID: fmt.Sprint("id-", i)}
		pm, err := mem.Reserve(ctx, k, &a, runstate.AllFields)
		must(t, err)
		pv, err := vk.Reserve(ctx, k, &a, runstate.AllFields)
		must(t, err)
		if cm, cv := canon(t, pm.Run, pm.Agent), canon(t, pv.Run, pv.Agent); cm != cv || pm.Seq != pv.Seq {
			t.Fatalf("call %d:\nmemory %d %s\nvalkey %d %s", i, pm.Seq, cm, pv.Seq, cv)
		}
		if i%3 == 0 {
			s := runstate.Settlement{Seq: pm.Seq, Tool: a.Tool, Action: a.Action, Decision: "allow", At: now}
			must(t, mem.Settle(ctx, k, &s))
			must(t, vk.Settle(ctx, k, &s))
		}
	}
	pm, err := mem.Peek(ctx, k, now, runstate.AllFields)
	must(t, err)
	if got := field(t, pm.Run, "distinct_tools"); got != int64(runstate.MaxTools) {
		t.Errorf("distinct_tools = %v, want %d", got, runstate.MaxTools)
	}
	recent, ok := field(t, pm.Run, "recent").(runstate.Arr)
	if !ok || len(recent) != runstate.Recent {
		t.Fatalf("recent = %v", field(t, pm.Run, "recent"))
	}
	last := 3*runstate.MaxTools - 1 // not a repeat (last%5 != 4)
	if e, ok := recent[0].(runstate.Obj); !ok || field(t, e, "tool") != fmt.Sprint("tool-", last) {
		t.Errorf("the latest recent entry = %v, want tool-%d", recent[0], last)
	}
	pv, err := vk.Peek(ctx, k, now, runstate.AllFields)
	must(t, err)
	if cm, cv := canon(t, pm.Run, pm.Agent), canon(t, pv.Run, pv.Agent); cm != cv {
		t.Fatalf("peek:\nmemory %s\nvalkey %s", cm, cv)
	}
}

func TestMemoryRuns(t *testing.T) {
	runRunsContract(t, memoryRuns)
}

func TestValkeyRuns(t *testing.T) {
	u := valkeyURL(t)
	runRunsContract(t, func(t *testing.T) sharedstate.Runs { return newValkey(t, u).Runs(sharedstate.RunLimits{}) })
}

func field(t *testing.T, o runstate.Obj, path ...string) runstate.Doc {
	t.Helper()
	var d runstate.Doc = o
	for _, p := range path {
		obj, ok := d.(runstate.Obj)
		if !ok {
			t.Fatalf("%v: %s is not in an object", path, p)
		}
		found := false
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

func runRunsContract(t *testing.T, newRuns func(t *testing.T) sharedstate.Runs) {
	t.Run("concurrent attempts each see a distinct state before them", func(t *testing.T) {
		ctx := ctxT(t)
		// For Valkey each call is one script, whichever node sends it; the
		// end-to-end suite repeats this from two nodes.
		r := newRuns(t)
		k := sharedstate.RunKey{TenantID: "t", AgentID: "a", Run: "run-c"}
		now := time.Now().UnixMilli()
		seen := make([]int64, 100)
		var mu sync.Mutex
		race(100, func(i int) {
			a := runstate.Attempt{ID: fmt.Sprint("id", i), AgentID: "a", At: now, Tool: "db", Action: "drop", Mutating: true, Destructive: true}
			pre, err := r.Reserve(ctx, k, &a, runstate.AllFields)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			seen[i], _ = field(t, pre.Run, "totals", "calls").(int64)
			mu.Unlock()
		})
		got := map[int64]bool{}
		for _, c := range seen {
			got[c] = true
		}
		if len(got) != 100 {
			t.Fatalf("%d distinct states before 100 concurrent calls, want 100", len(got))
		}
		pre, err := r.Peek(ctx, k, now, runstate.AllFields)
		must(t, err)
		if c := field(t, pre.Run, "tools", "db", "drop", "attempts"); c != int64(100) {
			t.Fatalf("attempts = %v, want 100", c)
		}
	})
	t.Run("a retried attempt counts once and a peek changes nothing", func(t *testing.T) {
		ctx := ctxT(t)
		r := newRuns(t)
		k := sharedstate.RunKey{TenantID: "t", AgentID: "a", Run: "run-d"}
		now := time.Now().UnixMilli()
		for range 10 {
			a := runstate.Attempt{ID: "same", AgentID: "a", At: now, Tool: "x", Action: "y"}
			pre, err := r.Reserve(ctx, k, &a, runstate.AllFields)
			must(t, err)
			if pre.Seq != 1 {
				t.Fatalf("seq %d, want 1", pre.Seq)
			}
		}
		before, err := r.Peek(ctx, k, now, runstate.AllFields)
		must(t, err)
		for range 50 {
			_, err := r.Peek(ctx, k, now, runstate.AllFields)
			must(t, err)
		}
		after, err := r.Peek(ctx, k, now, runstate.AllFields)
		must(t, err)
		if canon(t, before.Run, before.Agent) != canon(t, after.Run, after.Agent) {
			t.Fatal("peeks changed the state")
		}
		if c := field(t, after.Run, "totals", "calls"); c != int64(1) {
			t.Fatalf("calls = %v after ten retries of one attempt, want 1", c)
		}
		next, err := r.Reserve(ctx, k, &runstate.Attempt{ID: "other", AgentID: "a", At: now, Tool: "x", Action: "y"}, runstate.AllFields)
		must(t, err)
		if canon(t, next.Run, next.Agent) != canon(t, after.Run, after.Agent) {
			t.Fatal("a reservation saw another state than the peek before it")
		}
	})
	t.Run("trust only falls, and a child run inherits its parent's", func(t *testing.T) {
		ctx := ctxT(t)
		r := newRuns(t)
		now := time.Now().UnixMilli()
		parent := sharedstate.RunKey{TenantID: "t", AgentID: "a", Run: "p"}
		for _, lv := range []int{2, runstate.LevelUntrusted, 1} {
			_, err := r.Reserve(ctx, parent, &runstate.Attempt{AgentID: "a", At: now, Tool: "x", Action: "y", Level: lv}, runstate.AllFields)
			must(t, err)
		}
		pre, err := r.Peek(ctx, parent, now, runstate.AllFields)
		must(t, err)
		if m := field(t, pre.Run, "trust", "min"); m != "untrusted_external" {
			t.Fatalf("parent trust.min = %v", m)
		}
		child := sharedstate.RunKey{TenantID: "t", AgentID: "b", Run: "c", Parent: "p"}
		peek, err := r.Peek(ctx, child, now, runstate.AllFields)
		must(t, err)
		first, err := r.Reserve(ctx, child, &runstate.Attempt{AgentID: "b", At: now, Tool: "x", Action: "y", Level: 1}, runstate.AllFields)
		must(t, err)
		for _, pre := range []sharedstate.RunPre{peek, first} {
			if m := field(t, pre.Run, "trust", "min"); m != "untrusted_external" {
				t.Fatalf("the child run's first call sees trust.min %v, want its parent's", m)
			}
		}
		pre, err = r.Peek(ctx, child, now, runstate.AllFields)
		must(t, err)
		if m, inh := field(t, pre.Run, "trust", "min"), field(t, pre.Run, "trust", "inherited"); m != "untrusted_external" || inh != "untrusted_external" {
			t.Fatalf("child trust.min = %v, inherited %v", m, inh)
		}
		must(t, r.Tighten(ctx, child, runstate.LevelMalicious, now))
		must(t, r.Tighten(ctx, child, 1, now))
		pre, err = r.Peek(ctx, child, now, runstate.AllFields)
		must(t, err)
		if m, c := field(t, pre.Run, "trust", "min"), field(t, pre.Run, "complete"); m != "malicious_suspected" || c != false {
			t.Fatalf("after tightening: trust.min %v complete %v", m, c)
		}
	})
	t.Run("a seeded floor taints a run without state, and seeding ends the database reads", func(t *testing.T) {
		ctx := ctxT(t)
		r := newRuns(t)
		now := time.Now().UnixMilli()
		tainted := sharedstate.RunKey{TenantID: "t", AgentID: "a", Run: "tainted-before"}
		ambient := sharedstate.RunKey{TenantID: "t", AgentID: "b"}
		clean := sharedstate.RunKey{TenantID: "t", AgentID: "a", Run: "clean"}
		if pre, err := r.Peek(ctx, clean, now, runstate.AllFields); err != nil || !pre.Restore {
			t.Fatalf("before seeding a run without state must ask the database: %+v %v", pre.Restore, err)
		}
		must(t, r.Seed(ctx, []sharedstate.RunFloor{{Key: tainted, Level: runstate.LevelUntrusted, At: now - 1000},
			{Key: ambient, Level: runstate.LevelMalicious, At: now - 1000}}))
		for _, c := range []struct {
			k    sharedstate.RunKey
			want string
		}{{tainted, "untrusted_external"}, {ambient, "malicious_suspected"}} {
			pre, err := r.Reserve(ctx, c.k, &runstate.Attempt{AgentID: c.k.AgentID, At: now, Tool: "x", Action: "y", Level: 1}, runstate.AllFields)
			must(t, err)
			if m := field(t, pre.Run, "trust", "min"); m != c.want || pre.Restore || field(t, pre.Run, "complete") != false {
				t.Fatalf("%+v after seeding: trust.min %v (want %s), restore %v, complete %v", c.k, m, c.want, pre.Restore, field(t, pre.Run, "complete"))
			}
		}
		pre, err := r.Reserve(ctx, clean, &runstate.Attempt{AgentID: "a", At: now, Tool: "x", Action: "y", Level: 2}, runstate.AllFields)
		must(t, err)
		if pre.Restore || field(t, pre.Run, "trust", "min") != nil {
			t.Fatalf("a clean run after seeding: restore %v, trust %v", pre.Restore, field(t, pre.Run, "trust"))
		}
	})
	t.Run("tenants and separators never share a run", func(t *testing.T) {
		ctx := ctxT(t)
		r := newRuns(t)
		now := time.Now().UnixMilli()
		for _, k := range []sharedstate.RunKey{
			{TenantID: "t1", AgentID: "a", Run: "x"},
			{TenantID: "t2", AgentID: "a", Run: "x"},
			{TenantID: "t1:", AgentID: "a", Run: "x"},
			{TenantID: "t1", AgentID: "a", Run: ":x"},
			{TenantID: "t1", AgentID: "a"},
		} {
			pre, err := r.Reserve(ctx, k, &runstate.Attempt{AgentID: "a", At: now, Tool: "x", Action: "y"}, runstate.AllFields)
			must(t, err)
			if field(t, pre.Run, "known") != false {
				t.Fatalf("%+v shares a run with an earlier key", k)
			}
		}
	})
	t.Run("an unavailable context fails closed", func(t *testing.T) {
		r := newRuns(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := r.Reserve(ctx, sharedstate.RunKey{TenantID: "t", AgentID: "a"}, &runstate.Attempt{AgentID: "a"}, runstate.AllFields); err == nil {
			t.Fatal("Reserve with a done context succeeded")
		}
	})
}

// BenchmarkMemoryRunsReserve is the lone node's atomic step of a call under
// run context: the run's and the agent's documents before the call (what
// the policy sees), then the attempt folded in; runs rotate among 1,000,
// each with up to a few dozen calls.
func BenchmarkMemoryRunsReserve(b *testing.B) {
	m := sharedstate.NewMemory()
	defer m.Close()
	r := m.Runs(sharedstate.RunLimits{})
	ctx := context.Background()
	now := time.Now().UnixMilli()
	tools := []string{"crm", "web", "email", "payments"}
	// What README's five run policies read.
	fields := runstate.Fields{Run: runstate.RunMember("trust") | runstate.RunMember("tools") | runstate.RunMember("sums")}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := sharedstate.RunKey{TenantID: "t", AgentID: fmt.Sprint("a", i%50), Run: fmt.Sprint("run-", i%1000)}
		a := runstate.Attempt{ID: fmt.Sprint(i), AgentID: k.AgentID, At: now + int64(i/100), Tool: tools[i%4], Action: "get", Level: 3}
		if _, err := r.Reserve(ctx, k, &a, fields); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// TestValkeyRunsSurviveAFlush: after the server loses its data, a run
// reads its floor from the database (Restore) and the node is told to seed
// the floors again (Restoring); once seeded, the floor comes from Valkey.
func TestValkeyRunsSurviveAFlush(t *testing.T) {
	u := valkeyURL(t)
	prefix := "svctest:" + randHex(t) + ":"
	ctx := ctxT(t)
	v, err := sharedstate.NewValkey(ctx, u, sharedstate.WithKeyPrefix(prefix))
	must(t, err)
	t.Cleanup(func() { _ = v.Close(); deletePrefix(t, u, prefix) })
	r := v.Runs(sharedstate.RunLimits{})
	now := time.Now().UnixMilli()
	k := sharedstate.RunKey{TenantID: "t", AgentID: "a", Run: "r"}
	must(t, r.Seed(ctx, nil))
	_, err = r.Reserve(ctx, k, &runstate.Attempt{AgentID: "a", At: now, Tool: "web", Action: "fetch", Level: runstate.LevelUntrusted}, runstate.AllFields)
	must(t, err)
	deletePrefix(t, u, prefix) // FLUSHALL, as far as this test's keys go
	pre, err := r.Reserve(ctx, k, &runstate.Attempt{AgentID: "a", At: now, Tool: "x", Action: "y", Level: 1}, runstate.AllFields)
	must(t, err)
	if !pre.Restore || !pre.Restoring {
		t.Fatalf("after a flush: restore %v restoring %v, want both", pre.Restore, pre.Restoring)
	}
	deletePrefix(t, u, prefix)
	must(t, r.Seed(ctx, []sharedstate.RunFloor{{Key: k, Level: runstate.LevelUntrusted, At: now}}))
	pre, err = r.Reserve(ctx, k, &runstate.Attempt{AgentID: "a", At: now, Tool: "x", Action: "y", Level: 1}, runstate.AllFields)
	must(t, err)
	if pre.Restore || pre.Restoring || field(t, pre.Run, "trust", "min") != "untrusted_external" {
		t.Fatalf("after seeding: restore %v restoring %v trust %v", pre.Restore, pre.Restoring, field(t, pre.Run, "trust"))
	}
}

// BenchmarkMemoryRunsFootprint reports what a lone node's run state keeps
// per run (four calls each, settled): the heap bytes and objects the
// collector has to scan, measured after a collection.
func BenchmarkMemoryRunsFootprint(b *testing.B) {
	ctx := context.Background()
	tools := []string{"crm", "web", "email", "payments"}
	fields := runstate.Fields{Run: runstate.RunMember("trust") | runstate.RunMember("tools") | runstate.RunMember("sums")}
	const runs = 10_000
	var bytes, objects float64
	for b.Loop() {
		m := sharedstate.NewMemory()
		r := m.Runs(sharedstate.RunLimits{})
		now := time.Now().UnixMilli()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range runs * 4 {
			k := sharedstate.RunKey{TenantID: "t", AgentID: fmt.Sprint("a", i/4%50), Run: fmt.Sprintf("run-%08d", i/4)}
			a := runstate.Attempt{ID: fmt.Sprintf("req-%016d", i), AgentID: k.AgentID, At: now + int64(i/100), Tool: tools[i%4],
				Action: "get", Level: 3, Via: "source_trust", Labels: []string{"egress"}}
			pre, err := r.Reserve(ctx, k, &a, fields)
			if err != nil {
				b.Fatal(err)
			}
			if err := r.Settle(ctx, k, &runstate.Settlement{Seq: pre.Seq, Tool: a.Tool, Action: a.Action, Decision: "allow", At: a.At}); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(r)
		bytes += float64(after.HeapAlloc) - float64(before.HeapAlloc)
		objects += float64(after.HeapObjects) - float64(before.HeapObjects)
		_ = m.Close()
	}
	b.ReportMetric(bytes/float64(b.N)/runs, "bytes/run")
	b.ReportMetric(objects/float64(b.N)/runs, "objects/run")
}

// TestMemoryRunsEvictTheLeastRecent: at the cap a new run evicts a run
// that has not been used for longest among those it looks at, so a run in
// use survives any number of new ones, and an old one is gone.
func TestMemoryRunsEvictTheLeastRecent(t *testing.T) {
	m := sharedstate.NewMemory()
	defer m.Close()
	// Four runs per shard: the sample covers a whole shard, so eviction is
	// exact LRU here.
	r := m.Runs(sharedstate.RunLimits{MaxRuns: 64 * 4})
	ctx := context.Background()
	now := time.Now().UnixMilli()
	seq := runstate.Fields{Run: runstate.RunMember("seq") | runstate.RunMember("known")}
	reserve := func(run string, at int64) runstate.Obj {
		t.Helper()
		pre, err := r.Reserve(ctx, sharedstate.RunKey{TenantID: "t", AgentID: "a", Run: run},
			&runstate.Attempt{AgentID: "a", At: at, Tool: "x", Action: "y"}, seq)
		must(t, err)
		return pre.Run
	}
	member := func(o runstate.Obj, key string) runstate.Doc {
		for _, mb := range o {
			if mb.Key == key {
				return mb.Value
			}
		}
		return nil
	}
	const n = 5000
	for i := range n {
		reserve("hot", now+int64(2*i))
		reserve(fmt.Sprint("cold-", i), now+int64(2*i+1))
	}
	if got := member(reserve("hot", now+2*n), "seq"); got != int64(n+1) {
		t.Errorf("the run in use was evicted: seq %v, want %d", got, n+1)
	}
	if got := member(reserve("cold-0", now+2*n+1), "known"); got != false {
		t.Errorf("the least recent run was kept among %d new ones (known = %v)", n, got)
	}
}
