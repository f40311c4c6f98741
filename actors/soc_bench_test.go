package actors_test

// BenchmarkSOCPipelineLatency measures the security pipeline (SPEC 6.2,
// 6.3) at a fixed rate: the time from an event's occurred_at to its alert
// reaching a live-feed subscriber, at the 50th and 99th percentile, with
// the default rules, a custom rule, the behavioural baselines and the
// correlators all running on SQLite. Run it with -benchtime=1x (each
// iteration is a fixed-rate run of benchSOCDuration); scripts/bench.sh
// does. The target: p99 under 250 ms at 5,000 events per second.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"svc/actors"
	"svc/broadcast"
	"svc/messages"
	"svc/persistence"
	"svc/persistence/sharedstate"
)

func benchSOCSetting(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func BenchmarkSOCPipelineLatency(b *testing.B) {
	rate := benchSOCSetting("BENCH_SOC_RATE", 5000)            // events per second
	seconds := benchSOCSetting("BENCH_SOC_SECONDS", 5)         // per iteration
	subscribers := benchSOCSetting("BENCH_SOC_SUBSCRIBERS", 3) // live-feed subscribers attached
	for b.Loop() {
		runSOCLatency(b, rate, time.Duration(seconds)*time.Second, subscribers)
	}
}

func runSOCLatency(b *testing.B, rate int, d time.Duration, subscribers int) {
	f := newBenchFixture(b, 50)
	ctx := context.Background()
	now := time.Now().UTC()
	if _, err := f.store.PutRule(ctx, persistence.CustomRule{TenantID: f.tenantID, Key: "bench_writes", AlertName: "bench_writes",
		Severity: "MEDIUM", Enabled: true, Condition: json.RawMessage(`{"mutates_state":{"eq":true}}`), CreatedAt: now, UpdatedAt: now}); err != nil {
		b.Fatal(err)
	}
	sys := actors.NewSystem(hclog.NewNullLogger())
	shared := sharedstate.NewMemory()
	feed := broadcast.NewFeed(shared, hclog.NewNullLogger(), false)
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	go feed.Run(fctx)
	time.Sleep(50 * time.Millisecond) // the feed's subscription is in place
	stats := &actors.SOCStats{}
	pid := sys.Root.Spawn(actor.PropsFromProducer(actors.NewSOCPipeline(f.store, stats, actors.SOCOptions{Feed: feed}, hclog.NewNullLogger())))
	defer func() { _ = sys.Root.PoisonFuture(pid).Wait() }()
	bus := broadcast.NewEventBus(sys.Root, 10_000)
	bus.Subscribe(pid)
	busStop := make(chan struct{})
	go bus.Run(busStop)
	defer close(busStop)

	// Idle subscribers that also receive everything, and the measuring one:
	// each alert frame's source_event_id finds its event's send time.
	for i := 1; i < subscribers; i++ {
		s, c := feed.Subscribe(f.tenantID, 1<<16)
		defer c()
		go func() {
			for range s.C { // drain
			}
		}()
	}
	var mu sync.Mutex
	var lat []time.Duration
	var sent sync.Map
	sub, cancelSub := feed.Subscribe(f.tenantID, 1<<16)
	defer cancelSub()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for frame := range sub.C {
			var item struct {
				Type string `json:"type"`
				Data struct {
					SourceEventID string `json:"source_event_id"`
				} `json:"data"`
			}
			if json.Unmarshal(frame, &item) != nil || item.Type != messages.FeedAlert {
				continue
			}
			if t0, ok := sent.Load(item.Data.SourceEventID); ok {
				mu.Lock()
				lat = append(lat, time.Since(t0.(time.Time))) //nolint:errcheck,forcetypeassert // only time.Time is stored
				mu.Unlock()
			}
		}
	}()

	tick := time.Second / time.Duration(rate)
	start := time.Now()
	total := int(d / tick)
	for i := range total {
		if wait := time.Until(start.Add(time.Duration(i) * tick)); wait > 0 {
			time.Sleep(wait)
		}
		agent := f.agents[i%len(f.agents)].ID
		mut := i%2 == 0
		decision, trust := "allow", "trusted_internal_signed"
		if i%5 == 0 {
			decision, trust = "deny", "untrusted_external"
		}
		id, did := uuid.NewString(), uuid.NewString()
		t0 := time.Now()
		sent.Store(id, t0)
		bus.Publish(messages.AseEvent{EventID: id, OccurredAt: t0.UTC(), TenantID: f.tenantID, Kind: messages.KindAuthorizeDecision,
			AgentID: agent, Decision: decision, Tool: "crm", Action: fmt.Sprintf("act_%d", i%20), RiskScore: 30,
			MatchedPolicies: []string{"default_allow_read"}, SchemaVersion: 1, MutatesState: &mut,
			Evidence: &messages.Evidence{DecisionID: &did, SourceTrust: &trust}})
	}
	elapsed := time.Since(start)
	time.Sleep(time.Second) // let the tail drain
	cancelSub()
	<-done

	mu.Lock()
	defer mu.Unlock()
	if len(lat) == 0 {
		b.Fatal("no alert reached the subscriber")
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(float64(total)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(len(lat)), "alerts")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(bus.Dropped()), "events-dropped")
	_, _, cut, failed := feed.Stats()
	b.ReportMetric(float64(cut), "subscribers-cut")
	b.ReportMetric(float64(failed), "feed-failed")
	b.ReportMetric(float64(stats.Incidents.Load()), "incidents")
}
