package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/hashicorp/go-hclog"

	"svc/messages"
	"svc/persistence"
)

// heartbeatBuffer collects agents' last-seen times and writes them in one
// batch every flush interval, so that a heartbeat costs no database write.
// A failed flush keeps the batch for the next one; stopping flushes.
type heartbeatBuffer struct {
	store    persistence.AgentStore
	every    time.Duration
	log      hclog.Logger
	pending  map[[2]string]time.Time
	inFlight bool
	ticker   *ticker
}

// flushed reports a finished flush back to the actor.
type flushed struct {
	batch []persistence.Heartbeat
	err   error
}

// NewHeartbeatBuffer returns the producer of the heartbeat actor.
func NewHeartbeatBuffer(store persistence.AgentStore, every time.Duration, log hclog.Logger) actor.Producer {
	return func() actor.Actor {
		return &heartbeatBuffer{store: store, every: every, log: log, pending: map[[2]string]time.Time{}}
	}
}

// Receive implements actor.Actor.
func (h *heartbeatBuffer) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		h.ticker = startTicker(ctx, h.every)
	case *messages.Heartbeat:
		h.add(m.TenantID, m.AgentID, m.At)
	case tick:
		h.flushAsync(ctx)
	case flushed:
		h.inFlight = false
		if m.err != nil {
			h.log.Warn("heartbeat flush failed; keeping the batch", "agents", len(m.batch), "error", m.err)
			for _, b := range m.batch {
				h.add(b.TenantID, b.AgentID, b.At)
			}
		}
	case *actor.Stopping:
		h.ticker.Stop()
		h.flushNow()
	case *actor.Restarting:
		h.ticker.Stop()
	}
}

func (h *heartbeatBuffer) add(tenantID, agentID string, at time.Time) {
	k := [2]string{tenantID, agentID}
	if at.After(h.pending[k]) {
		h.pending[k] = at
	}
}

func (h *heartbeatBuffer) take() []persistence.Heartbeat {
	batch := make([]persistence.Heartbeat, 0, len(h.pending))
	for k, at := range h.pending {
		batch = append(batch, persistence.Heartbeat{TenantID: k[0], AgentID: k[1], At: at})
	}
	h.pending = map[[2]string]time.Time{}
	return batch
}

func (h *heartbeatBuffer) flushAsync(ctx actor.Context) {
	if h.inFlight || len(h.pending) == 0 {
		return
	}
	h.inFlight = true
	batch := h.take()
	self, root := ctx.Self(), ctx.ActorSystem().Root
	go func() {
		c, cancel := ioContext(30 * time.Second)
		defer cancel()
		root.Send(self, flushed{batch: batch, err: h.store.TouchAgents(c, batch)})
	}()
}

// flushNow writes what is pending synchronously; used only when stopping.
func (h *heartbeatBuffer) flushNow() {
	batch := h.take()
	if len(batch) == 0 {
		return
	}
	c, cancel := ioContext(10 * time.Second)
	defer cancel()
	if err := h.store.TouchAgents(c, batch); err != nil {
		h.log.Error("final heartbeat flush failed", "agents", len(batch), "error", err)
	}
}
