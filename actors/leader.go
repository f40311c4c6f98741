package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/hashicorp/go-hclog"

	"svc/leader"
	"svc/persistence"
)

// leaderLease renews or takes the lease every interval (SPEC part 3). A node
// that cannot reach the database stops calling itself leader at once.
type leaderLease struct {
	store    persistence.LeaseStore
	node     string
	every    time.Duration
	lease    time.Duration
	state    *leader.Leadership
	log      hclog.Logger
	ticker   *ticker
	inFlight bool
}

type leaseResult struct {
	held bool
	err  error
}

// NewLeaderLease returns the producer of the lease actor.
func NewLeaderLease(store persistence.LeaseStore, node string, every, lease time.Duration, state *leader.Leadership, log hclog.Logger) actor.Producer {
	return func() actor.Actor {
		return &leaderLease{store: store, node: node, every: every, lease: lease, state: state, log: log}
	}
}

// Receive implements actor.Actor.
func (l *leaderLease) Receive(ctx actor.Context) {
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
			held, err := l.store.AcquireLease(c, leader.LeaseName, l.node, l.lease)
			root.Send(self, leaseResult{held, err})
		}()
	case leaseResult:
		l.inFlight = false
		if m.err != nil {
			l.log.Warn("lease renewal failed; acting as standby", "error", m.err)
		}
		held := m.held && m.err == nil
		if was := l.state.Set(held); was != held {
			l.log.Info("leadership changed", "leader", held, "node", l.node)
		}
	case *actor.Stopping:
		l.ticker.Stop()
		if l.state.Set(false) {
			c, cancel := ioContext(5 * time.Second)
			defer cancel()
			if err := l.store.ReleaseLease(c, leader.LeaseName, l.node); err != nil {
				l.log.Warn("lease release failed", "error", err)
			}
		}
	case *actor.Restarting:
		l.ticker.Stop()
	}
}
