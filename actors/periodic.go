package actors

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/hashicorp/go-hclog"

	"svc/persistence"
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
// own, records the run on its JobStats and logs a line. A run's error
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
	stats *JobStats
	// log gets a line per run (nil: none).
	log hclog.Logger
	// run does one pass and sums it up for the log and the status page.
	run func() (summary string, err error)
}

// jobRan is a run's outcome, sent back to the job's actor.
type jobRan struct{ err error }

// newLeaderJob returns the producer of a leader job's actor.
func newLeaderJob(spec jobSpec) actor.Producer {
	spec.stats.declare(spec.name, spec.every)
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
	if errors.Is(err, errNotLeader) {
		summary, err = "stopped: this node no longer leads", nil
	}
	s.stats.record(s.name, start, d, summary, err)
	if s.log != nil {
		if err != nil {
			s.log.Error("maintenance job failed", "job", s.name, "duration_ms", d.Milliseconds(), "error", err)
		} else {
			s.log.Info("maintenance job ran", "job", s.name, "duration_ms", d.Milliseconds(), "result", summary)
		}
	}
	return err
}

// JobRun is what a job's runs on this node came to.
type JobRun struct {
	Name  string
	Every time.Duration
	// Runs and Failures count the runs on this node.
	Runs, Failures uint64
	// LastStart is zero before the first run here.
	LastStart    time.Time
	LastDuration time.Duration
	// LastOutcome is "ok" or "failed" ("" before the first run).
	LastOutcome string
	LastSummary string
	LastError   string
}

// JobStats records the leader jobs' runs on this node and, when Store is
// set, as each job's last run for the installation (the status page reads
// that on every node). Safe for concurrent use; the zero value is ready
// and a nil *JobStats records nothing.
type JobStats struct {
	// Store, NodeID and Log: where runs are recorded for every node to
	// read, under which node, and where a failure to record is logged.
	Store  persistence.JobRunStore
	NodeID string
	Log    hclog.Logger

	mu   sync.Mutex
	jobs map[string]*JobRun
}

func (s *JobStats) declare(name string, every time.Duration) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.jobs == nil {
		s.jobs = map[string]*JobRun{}
	}
	if s.jobs[name] == nil {
		s.jobs[name] = &JobRun{Name: name}
	}
	if every > 0 {
		s.jobs[name].Every = every
	}
}

func (s *JobStats) record(name string, start time.Time, d time.Duration, summary string, err error) {
	if s == nil {
		return
	}
	s.declare(name, 0)
	rec := persistence.JobRunRecord{Job: name, NodeID: s.NodeID, StartedAt: start.UTC(), Duration: d, Outcome: "ok", Summary: summary}
	if err != nil {
		rec.Outcome, rec.Error = "failed", err.Error()
	}
	s.mu.Lock()
	r := s.jobs[name]
	r.Runs++
	r.LastStart, r.LastDuration, r.LastSummary, r.LastOutcome, r.LastError = start, d, summary, rec.Outcome, rec.Error
	if err != nil {
		r.Failures++
	}
	s.mu.Unlock()
	if s.Store == nil {
		return
	}
	ctx, cancel := ioContext(5 * time.Second)
	defer cancel()
	if err := s.Store.RecordJobRun(ctx, rec); err != nil && s.Log != nil {
		s.Log.Warn("recording a maintenance job's run failed", "job", name, "error", err)
	}
}

// Snapshot returns every job's record, by name.
func (s *JobStats) Snapshot() []JobRun {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]JobRun, 0, len(s.jobs))
	for _, r := range s.jobs {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b JobRun) int { return strings.Compare(a.Name, b.Name) })
	return out
}
