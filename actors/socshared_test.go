package actors

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"svc/persistence/sharedstate"
	"svc/persistence/storetest"
	"svc/rules/correlate"
	"svc/rules/detect"
)

// sharedStates runs fn on the in-process State and on Valkey (the
// provisioned test server, under a fresh key prefix).
func sharedStates(t *testing.T, fn func(t *testing.T, st sharedstate.State)) {
	t.Run("memory", func(t *testing.T) {
		st := sharedstate.NewMemory()
		t.Cleanup(func() { _ = st.Close() })
		fn(t, st)
	})
	t.Run("valkey", func(t *testing.T) {
		var b [6]byte
		_, _ = rand.Read(b[:])
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := sharedstate.NewValkey(ctx, storetest.ValkeyURL(t), sharedstate.WithKeyPrefix("svctest:"+hex.EncodeToString(b[:])+":"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		fn(t, st)
	})
}

// sharedNode is one node's view: its SharedDetection and its correlator's
// cached value for one agent.
type sharedNode struct {
	d      *SharedDetection
	cached string
}

func (n *sharedNode) observe(t *testing.T, tenant, agent, decision, tool, action string, at time.Time) ([]correlate.Incident, []detect.Anomaly) {
	t.Helper()
	id := uuid.NewString()
	so := &sharedObservation{
		event: detect.Event{EventID: id, Kind: detect.KindAuthorizeDecision, Decision: decision, Tool: tool, Action: action, OccurredAt: at},
		obs:   correlate.Observation{EventID: id, Kind: correlate.EventKindAuthorizeDecision, Decision: decision, Tool: tool, Action: action, At: at},
	}
	inc, an, ok := n.d.observeRetrying(context.Background(), tenant, agent, so, &n.cached)
	if !ok {
		t.Fatalf("observation %s dropped", id)
	}
	return inc, an
}

func names(an []detect.Anomaly) []string {
	var out []string
	for _, a := range an {
		out = append(out, a.Name)
	}
	return out
}

// Two nodes taking an agent's events in turn: each threshold is crossed
// once, exactly at the boundary, and a pair is new once.
func TestSharedDetectionAcrossNodes(t *testing.T) {
	sharedStates(t, func(t *testing.T, st sharedstate.State) {
		stats := &SOCStats{}
		nodes := []*sharedNode{{d: NewSharedDetection(st, stats, hclog.NewNullLogger())}, {d: NewSharedDetection(st, stats, hclog.NewNullLogger())}}
		now := time.Now()
		var storms int
		for i := range 4 {
			inc, an := nodes[i%2].observe(t, "t1", "a1", "deny", "fs", "write", now.Add(time.Duration(i)*time.Millisecond))
			storms += len(inc)
			if got := names(an); (i == 0) != (len(got) == 1 && got[0] == detect.AnomalyNewTool) {
				t.Fatalf("deny %d: anomalies %v; want the new-tool anomaly on the first only", i+1, got)
			}
		}
		if storms != 0 {
			t.Fatal("4 denies opened an incident")
		}
		inc, _ := nodes[0].observe(t, "t1", "a1", "deny", "fs", "write", now.Add(5*time.Millisecond))
		if len(inc) != 1 || inc[0].Kind != correlate.KindDenyStorm || len(inc[0].SourceEventIDs) != 5 {
			t.Fatalf("the fifth deny, on another node than the fourth: %v", inc)
		}
		// Another agent, and another tenant, have their own state.
		if _, an := nodes[1].observe(t, "t1", "a2", "deny", "fs", "write", now); len(an) != 1 {
			t.Fatalf("another agent's first use: %v", names(an))
		}
		if _, an := nodes[1].observe(t, "t2", "a1", "deny", "fs", "write", now); len(an) != 1 {
			t.Fatalf("another tenant's first use: %v", names(an))
		}
		if stats.SharedConflicts.Load() == 0 {
			t.Error("alternating nodes never found the state changed since their last read")
		}
	})
}

// The rate baseline counts both nodes' actions: three completed minutes of
// 4 calls each (2 per node), then a minute whose 13th call, on either node,
// is over 3 times the mean of 4 and fires once.
func TestSharedDetectionRateAcrossNodes(t *testing.T) {
	sharedStates(t, func(t *testing.T, st sharedstate.State) {
		stats := &SOCStats{}
		nodes := []*sharedNode{{d: NewSharedDetection(st, stats, hclog.NewNullLogger())}, {d: NewSharedDetection(st, stats, hclog.NewNullLogger())}}
		minute := time.Now().Truncate(time.Minute).Add(-10 * time.Minute)
		call := 0
		observe := func(at time.Time) []string {
			call++
			_, an := nodes[call%2].observe(t, "t", "rate", "allow", "fs", "read", at)
			var rate []string
			for _, n := range names(an) {
				if n == detect.AnomalyRate {
					rate = append(rate, n)
				}
			}
			return rate
		}
		for m := range 3 {
			for i := range 4 {
				if r := observe(minute.Add(time.Duration(m)*time.Minute + time.Duration(i)*time.Second)); len(r) != 0 {
					t.Fatalf("minute %d call %d: %v", m, i, r)
				}
			}
		}
		fired := 0
		for i := range 20 {
			r := observe(minute.Add(3*time.Minute + time.Duration(i)*time.Second))
			if len(r) > 0 && i != 12 {
				t.Fatalf("rate anomaly on call %d of the busy minute, want the 13th only", i+1)
			}
			fired += len(r)
		}
		if fired != 1 {
			t.Fatalf("%d rate anomalies in the busy minute, want 1", fired)
		}
	})
}

// Racing nodes lose nothing and count nothing twice: 40 denies of one agent
// from 4 goroutines at once open exactly 8 deny storms (every deny lands
// in exactly one), and 16 goroutines using one new pair raise one new-tool
// anomaly.
func TestSharedDetectionRaces(t *testing.T) {
	sharedStates(t, func(t *testing.T, st sharedstate.State) {
		stats := &SOCStats{}
		now := time.Now()
		var storms, events, newTools atomic.Int64
		var wg sync.WaitGroup
		for range 4 {
			n := &sharedNode{d: NewSharedDetection(st, stats, hclog.NewNullLogger())}
			wg.Go(func() {
				for range 10 {
					// At one time, these also make runaways (counted apart
					// by kind); only the deny storms are counted here.
					inc, an := n.observe(t, "t", "racer", "deny", "fs", "write", now)
					for _, i := range inc {
						if i.Kind == correlate.KindDenyStorm {
							storms.Add(1)
							events.Add(int64(len(i.SourceEventIDs)))
						}
					}
					for _, a := range an {
						if a.Name == detect.AnomalyNewTool {
							newTools.Add(1)
						}
					}
				}
			})
		}
		wg.Wait()
		if storms.Load() != 8 || events.Load() != 40 || newTools.Load() != 1 {
			t.Fatalf("%d deny storms over %d events and %d new-tool anomalies, want 8 over 40 and 1", storms.Load(), events.Load(), newTools.Load())
		}
		t.Logf("%d stale reads among 40 racing observations", stats.SharedConflicts.Load())
	})
}

// flakyState fails every call with ErrUnavailable while down is set.
type flakyState struct {
	sharedstate.State
	down  atomic.Bool
	calls atomic.Int64
}

func (f *flakyState) MarkSeen(ctx context.Context, key, member string, at time.Time, limit int, ttl time.Duration) (bool, error) {
	f.calls.Add(1)
	if f.down.Load() {
		return false, fmt.Errorf("%w: test outage", sharedstate.ErrUnavailable)
	}
	return f.State.MarkSeen(ctx, key, member, at, limit, ttl)
}

func (f *flakyState) CompareAndSwap(ctx context.Context, key, old, value string, ttl time.Duration) (bool, string, error) {
	f.calls.Add(1)
	if f.down.Load() {
		return false, "", fmt.Errorf("%w: test outage", sharedstate.ErrUnavailable)
	}
	return f.State.CompareAndSwap(ctx, key, old, value, ttl)
}

// While the shared state is unavailable an observation waits and then
// catches up; past the outage budget it is dropped, reported, and later
// observations are tried once each until the state answers again.
func TestSharedDetectionOutage(t *testing.T) {
	mem := sharedstate.NewMemory()
	t.Cleanup(func() { _ = mem.Close() })
	fl := &flakyState{State: mem}
	d := NewSharedDetection(fl, &SOCStats{}, hclog.NewNullLogger())
	d.retryFor = time.Second
	n := &sharedNode{d: d}
	now := time.Now()
	for i := range 4 {
		n.observe(t, "t", "a", "deny", "fs", "write", now.Add(time.Duration(i)*time.Millisecond))
	}
	fl.down.Store(true)
	go func() { time.Sleep(300 * time.Millisecond); fl.down.Store(false) }()
	if inc, _ := n.observe(t, "t", "a", "deny", "fs", "write", now.Add(5*time.Millisecond)); len(inc) != 1 {
		t.Fatalf("the fifth deny, retried through a 300 ms outage: %v", inc)
	}

	fl.down.Store(true)
	so := func() *sharedObservation {
		id := uuid.NewString()
		return &sharedObservation{event: detect.Event{EventID: id, Kind: detect.KindAuthorizeDecision, Decision: "deny", OccurredAt: now},
			obs: correlate.Observation{EventID: id, Kind: correlate.EventKindAuthorizeDecision, Decision: "deny", At: now}}
	}
	start := time.Now()
	if _, _, ok := d.observeRetrying(context.Background(), "t", "a", so(), &n.cached); ok {
		t.Fatal("an observation succeeded during an outage")
	}
	if took := time.Since(start); took < 500*time.Millisecond {
		t.Fatalf("gave up after %v, before the outage budget", took)
	}
	time.Sleep(300 * time.Millisecond) // past the budget's end (it gives up when the next backoff would cross it)
	before := fl.calls.Load()
	if _, _, ok := d.observeRetrying(context.Background(), "t", "a", so(), &n.cached); ok {
		t.Fatal("an observation succeeded during an outage")
	}
	if tries := fl.calls.Load() - before; tries != 1 {
		t.Fatalf("%d tries once the outage budget was spent, want 1", tries)
	}
	fl.down.Store(false)
	if _, _, ok := d.observeRetrying(context.Background(), "t", "a", so(), &n.cached); !ok {
		t.Fatal("not observed once the state answered again")
	}
	// A cancelled pipeline ends a wait at once.
	fl.down.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start = time.Now()
	if _, _, ok := d.observeRetrying(ctx, "t", "a", so(), &n.cached); ok || time.Since(start) > 200*time.Millisecond {
		t.Fatalf("with a cancelled context: observed %v after %v; want dropped at once", ok, time.Since(start))
	}
}
