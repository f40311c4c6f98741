package actors

import (
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/extensions"

	"github.com/asynkron/protoactor-go/actor"
)

// reusingDispatcher is a protoactor-go dispatcher that runs mailboxes on
// reused goroutines. The default dispatcher starts a goroutine for every
// mailbox run; an agent actor's run evaluates Rego, whose deep recursion
// then grows that fresh 8 KiB stack again every time (runtime.copystack was
// 6% of the gateway's CPU under load). A goroutine here keeps its grown
// stack for the next mailbox: Schedule hands the run to an idle worker when
// one is waiting and starts a new one otherwise, so it never blocks and the
// number of goroutines follows the number of busy mailboxes, as before;
// a worker idle for idleTimeout exits.
type reusingDispatcher struct {
	throughput int
	idle       chan func()
	timeout    time.Duration
	started    atomic.Int64 // goroutines ever started
	live       atomic.Int64 // goroutines running now
}

var _ actor.Dispatcher = (*reusingDispatcher)(nil)

// newReusingDispatcher returns a dispatcher processing up to throughput
// messages per mailbox run before yielding (as actor.NewDefaultDispatcher).
func newReusingDispatcher(throughput int, idleTimeout time.Duration) *reusingDispatcher {
	return &reusingDispatcher{throughput: throughput, idle: make(chan func()), timeout: idleTimeout}
}

// Schedule implements actor.Dispatcher.
func (d *reusingDispatcher) Schedule(fn func()) {
	select {
	case d.idle <- fn:
	default:
		d.started.Add(1)
		d.live.Add(1)
		go d.work(fn)
	}
}

// Started is the number of goroutines the dispatcher has started.
func (d *reusingDispatcher) Started() int64 { return d.started.Load() }

// Live is the number of its goroutines running now, busy or idle.
func (d *reusingDispatcher) Live() int64 { return d.live.Load() }

// Throughput implements actor.Dispatcher.
func (d *reusingDispatcher) Throughput() int { return d.throughput }

func (d *reusingDispatcher) work(fn func()) {
	t := time.NewTimer(d.timeout)
	defer func() {
		t.Stop()
		d.live.Add(-1)
	}()
	for {
		fn()
		t.Reset(d.timeout)
		select {
		case fn = <-d.idle:
		case <-t.C:
			return
		}
	}
}

// entityMailbox is the mailbox of the actors svc keeps one of per agent,
// approval and correlator window, a hundred thousand of them or more: a
// lock-free queue of linked nodes, which holds nothing while empty, where
// protoactor's default allocates a ring of ten slots and a mutex for every
// actor up front (about 40 MB at 100,000 agents with their correlators;
// bench/HISTORY.md). A message costs one small node.
var entityMailbox = actor.UnboundedLockfree()

// systemDispatcher is an actor system's dispatcher, kept as one of the
// system's extensions: NewSystem creates one per system (so per node),
// and it runs every actor svc spawns in that system (mailbox throughput
// 300, as protoactor-go's default) and the GroupWriter's commits.
type systemDispatcher struct{ d *reusingDispatcher }

// dispatcherExtension is the extension id of systemDispatcher (an id drawn
// once, not state).
var dispatcherExtension = extensions.NextExtensionID()

func (systemDispatcher) ExtensionID() extensions.ExtensionID { return dispatcherExtension }

// dispatcherOf is the system's dispatcher; a system not made by NewSystem
// (a test's bare one) gets protoactor's default.
func dispatcherOf(sys *actor.ActorSystem) actor.Dispatcher {
	if sys != nil && sys.Extensions != nil {
		if e, ok := sys.Extensions.Get(dispatcherExtension).(systemDispatcher); ok {
			return e.d
		}
	}
	return actor.NewDefaultDispatcher(300)
}
