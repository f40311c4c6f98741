package actors

import (
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/hashicorp/go-hclog"

	"svc/persistence"
)

// LeaseName is the lease row that elects the maintenance leader.
const LeaseName = "maintenance"

// Leadership tells whether this node holds the maintenance lease. Safe for
// concurrent use.
type Leadership struct{ held atomic.Bool }

// IsLeader reports whether this node is the leader now.
func (l *Leadership) IsLeader() bool { return l.held.Load() }

// LeaderLease renews or takes the lease every interval (SPEC part 3). A node
// that cannot reach the database stops calling itself leader at once.
type LeaderLease struct {
	store    persistence.LeaseStore
	node     string
	every    time.Duration
	lease    time.Duration
	state    *Leadership
	log      hclog.Logger
	ticker   *ticker
	inFlight bool
}

type leaseResult struct {
	held bool
	err  error
}

// NewLeaderLease returns the producer of the lease actor.
func NewLeaderLease(store persistence.LeaseStore, node string, every, lease time.Duration, state *Leadership, log hclog.Logger) actor.Producer {
	return func() actor.Actor {
		return &LeaderLease{store: store, node: node, every: every, lease: lease, state: state, log: log}
	}
}

// Receive implements actor.Actor.
func (l *LeaderLease) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		l.ticker = startTicker(ctx, l.every)
		ctx.Send(ctx.Self(), tick{})
	case tick:
		if l.inFlight {
			return
		}
		l.inFlight = true
		self, root := ctx.Self(), ctx.ActorSystem().Root
		go func() {
			c, cancel := ioContext(l.every)
			defer cancel()
			held, err := l.store.AcquireLease(c, LeaseName, l.node, l.lease)
			root.Send(self, leaseResult{held, err})
		}()
	case leaseResult:
		l.inFlight = false
		if m.err != nil {
			l.log.Warn("lease renewal failed; acting as standby", "error", m.err)
		}
		held := m.held && m.err == nil
		if was := l.state.held.Swap(held); was != held {
			l.log.Info("leadership changed", "leader", held, "node", l.node)
		}
	case *actor.Stopping:
		l.ticker.Stop()
		if l.state.held.Swap(false) {
			c, cancel := ioContext(5 * time.Second)
			defer cancel()
			if err := l.store.ReleaseLease(c, LeaseName, l.node); err != nil {
				l.log.Warn("lease release failed", "error", err)
			}
		}
	case *actor.Restarting:
		l.ticker.Stop()
	}
}
