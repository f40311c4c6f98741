package actors

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"svc/messages"
	"svc/persistence"
	"svc/rules/detect"
	"svc/testkit"
)

// A correlator whose windows still hold an event when its idle timeout
// fires waits another idle period (protoactor disarms the timeout on
// firing) and stops once they are empty; a later event for the agent gets
// a new correlator.
func TestCorrelatorStopsOnceItsWindowsEmpty(t *testing.T) {
	store, tenant := tenantStore(t)
	sys := NewSystem(hclog.NewNullLogger())
	stats := &SOCStats{}
	pipeline := sys.Root.Spawn(actor.PropsFromProducer(NewSOCPipeline(store, stats,
		SOCOptions{CorrelatorIdle: 50 * time.Millisecond}, hclog.NewNullLogger())))
	t.Cleanup(func() { _ = sys.Root.StopFuture(pipeline).Wait() })
	deny := func(at time.Time) {
		sys.Root.Send(pipeline, &messages.AseEvent{EventID: uuid.NewString(), OccurredAt: at, TenantID: tenant,
			Kind: messages.KindAuthorizeDecision, AgentID: "agent-1", Decision: "deny", Tool: "fs", Action: "write",
			SchemaVersion: 1})
	}
	// In the 60 s deny-storm window for another 300 ms: live at the first
	// timeout (50 ms), empty a few timeouts later.
	deny(time.Now().Add(-59700 * time.Millisecond))
	testkit.Eventually(t, 3*time.Second, "a correlator for the agent", func() bool { return stats.Correlators.Load() == 1 })
	testkit.Eventually(t, 3*time.Second, "the correlator to stop once its windows are empty", func() bool { return stats.Correlators.Load() == 0 })
	deny(time.Now())
	testkit.Eventually(t, 3*time.Second, "a new correlator for the agent's next event", func() bool { return stats.Correlators.Load() == 1 })
}

// A decision answered before its commit and then lost is a hole in the
// tenant's audit: a HIGH alert at once, then at most one a minute with
// the losses in between counted into it.
func TestRecordLostRaisesRateLimitedHighAlert(t *testing.T) {
	store, tenant := tenantStore(t)
	sys := NewSystem(hclog.NewNullLogger())
	var notified atomic.Int64
	pipeline := sys.Root.Spawn(actor.PropsFromProducer(NewSOCPipeline(store, &SOCStats{},
		SOCOptions{Notify: func(n messages.Notification) {
			if n.Kind == alertRecordLost && n.Severity == messages.NotifySeverityHigh {
				notified.Add(1)
			}
		}}, hclog.NewNullLogger())))
	t.Cleanup(func() { _ = sys.Root.StopFuture(pipeline).Wait() })
	lost := func(id string) {
		sys.Root.Send(pipeline, &messages.RecordLost{TenantID: tenant, AgentID: "agent-1", DecisionID: id, Error: "disk full", At: time.Now()})
	}
	lost("d1")
	lost("d2")
	lost("d3")
	var alerts []persistence.Alert
	testkit.Eventually(t, 5*time.Second, "the audit-hole alert written", func() bool {
		alerts, _ = store.ListAlerts(context.Background(), tenant, persistence.AlertFilter{}, persistence.Page{Limit: 10})
		return len(alerts) > 0
	})
	time.Sleep(2 * flushEvery) // a second alert, were there one, would be written by now
	alerts, _ = store.ListAlerts(context.Background(), tenant, persistence.AlertFilter{}, persistence.Page{Limit: 10})
	if len(alerts) != 1 || alerts[0].RuleKey != alertRecordLost || alerts[0].Severity != detect.SeverityHigh ||
		alerts[0].DecisionID != "d1" || !strings.Contains(alerts[0].Summary, "1 decision(s)") {
		t.Fatalf("alerts = %+v, want one HIGH %s for d1", alerts, alertRecordLost)
	}
	if notified.Load() != 1 {
		t.Fatalf("notifications = %d, want 1", notified.Load())
	}
}

// A pipeline stopped while a tenant's rules are loading stops at once: the
// events waiting for them are evaluated at the stop, and no correlator is
// spawned by the stopping pipeline (one spawned then would never be
// stopped, and the stop would wait for it for ever).
func TestPipelineStopsWhileRulesLoad(t *testing.T) {
	for i := range 20 {
		store, tenant := tenantStore(t)
		sys := NewSystem(hclog.NewNullLogger())
		pipeline := sys.Root.Spawn(actor.PropsFromProducer(NewSOCPipeline(store, &SOCStats{}, SOCOptions{}, hclog.NewNullLogger())))
		// A replay attempt raises a default HIGH alert; the decision spawns
		// a correlator once the tenant's rules are in.
		sys.Root.Send(pipeline, &messages.AseEvent{EventID: uuid.NewString(), OccurredAt: time.Now(), TenantID: tenant,
			Kind: messages.KindReplayAttempt, AgentID: "agent-1", SchemaVersion: 1})
		sys.Root.Send(pipeline, &messages.AseEvent{EventID: uuid.NewString(), OccurredAt: time.Now(), TenantID: tenant,
			Kind: messages.KindAuthorizeDecision, AgentID: "agent-1", Decision: "allow", Tool: "fs", Action: "read", SchemaVersion: 1})
		if err := sys.Root.PoisonFuture(pipeline).Wait(); err != nil {
			t.Fatalf("run %d: the pipeline did not stop: %v", i, err)
		}
		alerts, err := store.ListAlerts(context.Background(), tenant, persistence.AlertFilter{}, persistence.Page{Limit: 10})
		if err != nil || !slices.ContainsFunc(alerts, func(a persistence.Alert) bool { return a.RuleKey == detect.KeyReplayAttempt }) {
			t.Fatalf("run %d: alerts %+v (%v), want the replay alert of the event sent before the stop written", i, alerts, err)
		}
	}
}
