package actors

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"svc/messages"
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
	checkFor(t, 3*time.Second, "a correlator for the agent", func() bool { return stats.Correlators.Load() == 1 })
	checkFor(t, 3*time.Second, "the correlator to stop once its windows are empty", func() bool { return stats.Correlators.Load() == 0 })
	deny(time.Now())
	checkFor(t, 3*time.Second, "a new correlator for the agent's next event", func() bool { return stats.Correlators.Load() == 1 })
}
