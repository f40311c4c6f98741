package actors

import (
	"context"
	"errors"
	"time"

	"svc/leader"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/hashicorp/go-hclog"
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
// own, records the run on its leader.JobStats and logs a line. A run's error
// panics the actor, so that its supervisor restarts it with its backoff
// and, past its budget, /readyz names it dead.
type leaderJob struct {
	spec     jobSpec
	ticker   *ticker
	inFlight bool
}

// jobSpec describes a leader job.
type jobSpec struct {
	// name is the job's name on /metrics, the status page and the log.
	name  string
	every time.Duration
	// isLeader nil runs the job on every node.
	isLeader func() bool
	// stats records every run (nil: not recorded).
	stats *leader.JobStats
	// log gets a line per run (nil: none).
	log hclog.Logger
	// run does one pass and sums it up for the log and the status page.
	run func() (summary string, err error)
}

// jobRan is a run's outcome, sent back to the job's actor.
type jobRan struct{ err error }

// newLeaderJob returns the producer of a leader job's actor.
func newLeaderJob(spec jobSpec) actor.Producer {
	spec.stats.Declare(spec.name, spec.every)
	return func() actor.Actor { return &leaderJob{spec: spec} }
}

// Receive implements actor.Actor.
func (j *leaderJob) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		j.ticker = startTicker(ctx, j.spec.every)
	case tick:
		if j.inFlight || (j.spec.isLeader != nil && !j.spec.isLeader()) {
			return
		}
		j.inFlight = true
		self, root, spec := ctx.Self(), ctx.ActorSystem().Root, j.spec
		go func() { root.Send(self, jobRan{spec.runOnce()}) }()
	case jobRan:
		j.inFlight = false
		if m.err != nil {
			panic(j.spec.name + " failed: " + m.err.Error())
		}
	case *actor.Stopping, *actor.Restarting:
		j.ticker.Stop()
	}
}

// runOnce runs the job once, timing, recording and logging it. A pass
// that stopped because this node no longer leads is no failure.
func (s jobSpec) runOnce() error {
	start := time.Now()
	summary, err := s.run()
	d := time.Since(start)
	if errors.Is(err, leader.ErrNotLeading) {
		summary, err = "stopped: this node no longer leads", nil
	}
	s.stats.Record(s.name, start, d, summary, err)
	if s.log != nil {
		if err != nil {
			s.log.Error("maintenance job failed", "job", s.name, "duration_ms", d.Milliseconds(), "error", err)
		} else {
			s.log.Info("maintenance job ran", "job", s.name, "duration_ms", d.Milliseconds(), "result", summary)
		}
	}
	return err
}
