package actors

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// tick is sent by a periodic actor's ticker to the actor itself.
type tick struct{}

// ticker sends tick to the actor every interval until stopped.
type ticker struct{ stop chan struct{} }

func startTicker(ctx actor.Context, every time.Duration) *ticker {
	t := &ticker{stop: make(chan struct{})}
	self, root := ctx.Self(), ctx.ActorSystem().Root
	go func() {
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			select {
			case <-t.stop:
				return
			case <-tk.C:
				root.Send(self, tick{})
			}
		}
	}()
	return t
}

func (t *ticker) Stop() {
	if t != nil {
		close(t.stop)
	}
}

// ioContext bounds a background task's I/O, detached from any request.
func ioContext(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// leaderJob is a periodic job that runs on the leader only (SPEC part 3,
// background leadership): every interval, unless this node does not lead
// or the previous run is still going, it calls run on a goroutine of its
// own. A run's error panics the actor, so that its supervisor restarts it
// with its backoff and, past its budget, /readyz names it dead.
type leaderJob struct {
	what     string
	every    time.Duration
	isLeader func() bool
	run      func() error
	ticker   *ticker
	inFlight bool
}

// jobRan is a run's outcome, sent back to the job's actor.
type jobRan struct{ err error }

// newLeaderJob returns the producer of a leader job's actor; isLeader nil
// runs it on every node.
func newLeaderJob(what string, every time.Duration, isLeader func() bool, run func() error) actor.Producer {
	return func() actor.Actor { return &leaderJob{what: what, every: every, isLeader: isLeader, run: run} }
}

// Receive implements actor.Actor.
func (j *leaderJob) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		j.ticker = startTicker(ctx, j.every)
	case tick:
		if j.inFlight || (j.isLeader != nil && !j.isLeader()) {
			return
		}
		j.inFlight = true
		self, root, run := ctx.Self(), ctx.ActorSystem().Root, j.run
		go func() { root.Send(self, jobRan{run()}) }()
	case jobRan:
		j.inFlight = false
		if m.err != nil {
			panic(j.what + " failed: " + m.err.Error())
		}
	case *actor.Stopping, *actor.Restarting:
		j.ticker.Stop()
	}
}
