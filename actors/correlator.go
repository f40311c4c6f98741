package actors

// Correlators (SPEC 6.3): one child actor of the pipeline per tenant and
// agent with events in a window.

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"svc/messages"
	"svc/rules/correlate"
	"svc/rules/detect"
)

// observed is one authorize decision on its way to its correlator.
type observed struct {
	ev  *messages.AseEvent
	de  detect.Event
	obs correlate.Observation
}

// correlated carries a correlator's incidents, and with shared detection
// the event's baseline anomalies, to the pipeline.
type correlated struct {
	tenantID, agentID string
	incidents         []correlate.Incident
	ev                *messages.AseEvent
	de                detect.Event
	anomalies         []detect.Anomaly
}

// corrEntry is a live correlator and how many observations the pipeline
// has sent it (sent, on the pipeline's goroutine) and it has processed
// (seen, on the correlator's, kept across its restarts).
type corrEntry struct {
	pid                    *actor.PID
	sent                   uint64
	tenantID, agentID, key string
	seen                   uint64
}

// correlatorIdle tells the pipeline a correlator's windows are empty after
// it processed seen observations. The pipeline, the only sender of
// observations, stops it only when it has sent it no more than that, so
// that no observation is ever queued to a stopping correlator (protoactor
// would drop it).
type correlatorIdle struct {
	key  string
	pid  *actor.PID
	seen uint64
}

// correlator returns (spawning when needed) the tenant/agent correlator.
func (p *socPipeline) correlator(ctx actor.Context, tenantID, agentID string) *corrEntry {
	key := tenantID + "/" + agentID
	if e, ok := p.corr[key]; ok {
		return e
	}
	if p.corrProps == nil {
		parent, idle, shared, life, stats, byID := ctx.Self(), p.opt.CorrelatorIdle, p.opt.Shared, p.life, p.stats, p.corrByID
		p.corrProps = actor.PropsFromProducer(func() actor.Actor {
			return &correlator{parent: parent, idle: idle, shared: shared, life: life, stats: stats, byID: byID}
		}, actor.WithDispatcher(dispatcherOf(ctx.ActorSystem())), actor.WithMailbox(entityMailbox))
	}
	// One props for every correlator (one per agent was about 350 bytes of
	// every live agent): each finds its entry by its name on Started.
	e := &corrEntry{tenantID: tenantID, agentID: agentID, key: key}
	p.corrSeq++
	name := "corr-" + strconv.FormatUint(p.corrSeq, 10)
	p.corrByID.Store(ctx.Self().Id+"/"+name, e)
	pid, err := ctx.SpawnNamed(p.corrProps, name)
	if err != nil {
		// Names are numbered per incarnation of the pipeline, whose
		// children stop with it: a clash is a defect, for its supervisor.
		panic(fmt.Errorf("actors: correlator %s: %w", name, err))
	}
	e.pid = pid
	p.corr[key] = e
	p.stats.Correlators.Add(1)
	return e
}

// correlator holds one tenant/agent's correlation windows (SPEC 6.3), or
// with shared detection updates the installation's windows and baseline of
// the agent (SharedDetection). When idle with nothing left in its own
// windows (with shared detection: when idle) it asks the pipeline to stop
// it.
type correlator struct {
	e      *corrEntry // found by name on Started
	byID   *sync.Map  // the pipeline's corrByID
	parent *actor.PID
	idle   time.Duration
	idleT  idleTimer
	w      *correlate.Windows

	shared *SharedDetection // nil: the windows are w
	life   context.Context  // the pipeline's: ends a wait for the shared state
	stats  *SOCStats
	cached string // the shared value last read or written
}

// Receive implements actor.Actor.
func (c *correlator) Receive(ctx actor.Context) {
	c.idleT.seen(ctx.Message())
	switch m := ctx.Message().(type) {
	case *actor.Started:
		if e, ok := c.byID.Load(ctx.Self().Id); ok {
			c.e = e.(*corrEntry) //nolint:errcheck // only *corrEntry is stored
		} else {
			c.e = &corrEntry{} // not the pipeline's: it is never sent anything
		}
		c.w = &correlate.Windows{}
		c.cached = ""
		c.idleT.start(ctx, c.idle)
	case observed:
		c.e.seen++
		if c.shared == nil {
			if found := c.w.Observe(m.obs); len(found) > 0 {
				ctx.Send(c.parent, correlated{tenantID: c.e.tenantID, agentID: c.e.agentID, incidents: found, ev: m.ev, de: m.de})
			}
			return
		}
		so := &sharedObservation{event: m.de, obs: m.obs}
		found, anomalies, ok := c.shared.observeRetrying(c.life, c.e.tenantID, c.e.agentID, so, &c.cached)
		if ok {
			c.stats.SharedObserved.Add(1)
		} else {
			c.stats.SharedDropped.Add(1)
		}
		if len(found) > 0 || len(anomalies) > 0 {
			ctx.Send(c.parent, correlated{tenantID: c.e.tenantID, agentID: c.e.agentID, incidents: found, ev: m.ev, de: m.de, anomalies: anomalies})
		}
	case idleTick:
		if !c.idleT.idle() {
			return
		}
		c.idleT.rearm()
		if c.shared != nil || c.w.Idle(time.Now()) {
			ctx.Send(c.parent, correlatorIdle{key: c.e.key, pid: ctx.Self(), seen: c.e.seen})
		}
	case *actor.Stopping:
		c.idleT.stop()
	}
}
