package actors

// The security pipeline's counters and its front for the HTTP layer.

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"svc/persistence"
)

// SOCStats counts the security pipeline's work for /metrics (SPEC 4.10).
// Safe for concurrent use.
type SOCStats struct {
	Events    atomic.Uint64 // events processed
	Alerts    atomic.Uint64 // alerts raised
	Incidents atomic.Uint64 // incidents opened
	// Correlators is the number of live tenant/agent correlators.
	Correlators atomic.Int64
	// SharedConflicts counts lost compare-and-swap races on the shared
	// detection state (SharedDetection); SharedDropped counts observations
	// given up because the shared state stayed unavailable; SharedObserved
	// counts those folded into it.
	SharedConflicts atomic.Uint64
	SharedDropped   atomic.Uint64
	SharedObserved  atomic.Uint64

	mu         sync.Mutex
	mttd, mttr mean
	skipped    uint64
}

// mean is a rolling cumulative average of durations, in seconds.
type mean struct {
	sum float64
	n   uint64
}

func (m mean) value() float64 {
	if m.n == 0 {
		return 0
	}
	return m.sum / float64(m.n)
}

// observe adds one duration to m, skipping negative or non-finite ones
// (clock skew between nodes, bad timestamps), which it counts.
func (s *SOCStats) observe(m *mean, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := d.Seconds()
	if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		s.skipped++
		return
	}
	m.sum += v
	m.n++
}

// MTTD is the mean time, in seconds, from an event to the alert it raised.
func (s *SOCStats) MTTD() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mttd.value()
}

// MTTR is the mean time, in seconds, from an incident's opening to its
// closing.
func (s *SOCStats) MTTR() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mttr.value()
}

// Skipped counts durations left out of the averages.
func (s *SOCStats) Skipped() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.skipped
}

// SOC is the front of the security-operations pipeline (SPEC 6): the HTTP
// layer tells it about closed incidents (rule changes drop their caches
// through the control plane).
type SOC struct {
	stats *SOCStats
}

// NewSOC returns the pipeline's front.
func NewSOC(stats *SOCStats) *SOC { return &SOC{stats: stats} }

// IncidentClosed records the time to resolve for MTTR.
func (s *SOC) IncidentClosed(in persistence.Incident) {
	if in.ClosedAt == nil {
		return
	}
	s.stats.observe(&s.stats.mttr, in.ClosedAt.Sub(in.OpenedAt))
}
