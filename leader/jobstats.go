package leader

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"svc/persistence"
)

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

// Declare adds the job name, run every interval (0 keeps the interval
// known), before its first run.
func (s *JobStats) Declare(name string, every time.Duration) {
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

// Record records one run of the job name: on this node and, when Store is
// set, as the job's last run for the installation.
func (s *JobStats) Record(name string, start time.Time, d time.Duration, summary string, err error) {
	if s == nil {
		return
	}
	s.Declare(name, 0)
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
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
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
