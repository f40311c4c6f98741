package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"svc/persistence/sharedstate"
	"svc/rules/correlate"
	"svc/rules/detect"
)

// SharedDetection keeps the per-agent detection state of a clustered
// installation in the shared state, so that every node's events count
// towards one agent's correlation windows (SPEC 6.3) and behavioural
// baseline (SPEC 6.2), and each incident and anomaly is raised once
// (CONTRACT §11: the windows are shared state).
//
// Each node still evaluates its own events, with the same rules as a lone
// node (correlate.Windows, detect.Rate). What is shared is their state:
//
//   - an agent's windows and rate baseline are one JSON value, updated by
//     compare and swap: read, observe, swap from what was read, and on a
//     lost race observe again on the value that won. Only the winning
//     swap's incidents and anomalies are raised, so a threshold crossed by
//     two nodes' events at once is crossed once;
//   - the tool and action pairs an agent used are a bounded recency set
//     (MarkSeen): the node whose mark finds the pair absent raises
//     behavioral_anomaly_new_tool, and no other.
//
// A lone node keeps the in-process path (SOCPipeline's baselines and its
// correlators' own windows).
type SharedDetection struct {
	st    sharedstate.State
	log   hclog.Logger
	stats *SOCStats
	// retryFor is how long observations are retried while the shared
	// state is unavailable (sharedRetryFor).
	retryFor time.Duration
	// outage is when the shared state was first found unavailable (Unix
	// nanoseconds), 0 while it answers. Every correlator retries within
	// the same outage budget: past it, an observation is tried once.
	outage atomic.Int64
}

// Shared detection keys, TTLs and bounds.
const (
	// sharedDetectionTTL is how long an agent's windows and rate baseline
	// live after its last event: longer than every window (10 minutes);
	// an agent idle for a day starts a fresh rate history.
	sharedDetectionTTL = 24 * time.Hour
	// sharedPairsTTL is how long an agent's tool and action pairs are
	// remembered after its last event.
	sharedPairsTTL = 30 * 24 * time.Hour
	// sharedSwapAttempts bounds the compare-and-swap retries of one
	// observation (each retry means another node won a race for the same
	// agent in between).
	sharedSwapAttempts = 64
	// sharedRetryFor is how long observations are retried while the
	// shared state is unavailable; past it they are dropped and counted.
	sharedRetryFor = 30 * time.Second
	// sharedCallTimeout bounds one call to the shared state.
	sharedCallTimeout = 2 * time.Second
)

// NewSharedDetection returns the shared detection state over st.
func NewSharedDetection(st sharedstate.State, stats *SOCStats, log hclog.Logger) *SharedDetection {
	return &SharedDetection{st: st, log: log, stats: stats, retryFor: sharedRetryFor}
}

// agentDetection is one tenant/agent's shared value.
type agentDetection struct {
	Windows *correlate.Windows `json:"windows"`
	Rate    detect.Rate        `json:"rate"`
	// Recent are the last events applied, newest last: a swap whose reply
	// was lost (a timeout after the server applied it) is not applied
	// twice when retried.
	Recent []string `json:"recent,omitempty"`
}

// newAgentDetection is an agent's detection state before its first event.
func newAgentDetection() agentDetection {
	return agentDetection{Windows: &correlate.Windows{}, Rate: detect.NewRate(detect.BaselineOptions{})}
}

// sharedRecent is how many applied event ids agentDetection keeps.
const sharedRecent = 16

// sharedObservation is one event on its way through the shared state. It
// remembers the steps already done, so that a retry after the shared state
// failed does not mark the pair twice (which would lose the new-tool
// anomaly).
type sharedObservation struct {
	event   detect.Event
	obs     correlate.Observation
	marked  bool
	newPair bool
}

// observe runs one observation against the shared state. cached is the
// value this correlator last read or wrote ("" when none), updated on
// success.
func (s *SharedDetection) observe(ctx context.Context, tenantID, agentID string, so *sharedObservation, cached *string) ([]correlate.Incident, []detect.Anomaly, error) {
	key := tenantID + "/" + agentID
	if !so.marked {
		c, cancel := context.WithTimeout(ctx, sharedCallTimeout)
		added, err := s.st.MarkSeen(c, "soc:pairs:"+key, so.event.Tool+"\x1f"+so.event.Action, so.event.OccurredAt,
			detect.DefaultBaselineMaxPairs, sharedPairsTTL)
		cancel()
		if err != nil {
			return nil, nil, err
		}
		so.marked, so.newPair = true, added
	}
	cur := *cached
	for range sharedSwapAttempts {
		st := newAgentDetection()
		if cur != "" {
			if err := json.Unmarshal([]byte(cur), &st); err != nil {
				// Never wedge an agent's detection on a bad value: start
				// it afresh, loudly.
				s.log.Error("shared detection state unreadable; starting it afresh", "tenant_id", tenantID, "agent_id", agentID, "error", err)
				st = newAgentDetection()
			}
		}
		if slices.Contains(st.Recent, so.event.EventID) {
			// Applied by a swap whose reply was lost; what it raised, if
			// anything, is lost with the reply (at most once).
			s.log.Warn("observation already applied to the shared detection state", "tenant_id", tenantID, "agent_id", agentID, "event_id", so.event.EventID)
			*cached = cur
			return nil, nil, nil
		}
		incidents := st.Windows.Observe(so.obs)
		anomalies := st.Rate.Observe(so.event, so.event.OccurredAt, so.newPair)
		st.Recent = append(st.Recent, so.event.EventID)
		if n := len(st.Recent); n > sharedRecent {
			st.Recent = st.Recent[n-sharedRecent:]
		}
		next, err := json.Marshal(st)
		if err != nil {
			return nil, nil, fmt.Errorf("encode shared detection state: %w", err)
		}
		c, cancel := context.WithTimeout(ctx, sharedCallTimeout)
		swapped, now, err := s.st.CompareAndSwap(c, "soc:agent:"+key, cur, string(next), sharedDetectionTTL)
		cancel()
		if err != nil {
			return nil, nil, err
		}
		if swapped {
			*cached = string(next)
			return incidents, anomalies, nil
		}
		s.stats.SharedConflicts.Add(1)
		cur = now
	}
	return nil, nil, fmt.Errorf("shared detection state of %s: %d swaps lost in a row", key, sharedSwapAttempts)
}

// observeRetrying runs observe, retrying with backoff while the shared
// state is unavailable, until sharedRetryFor after the outage began (one
// budget for every correlator: when it is spent, each observation is tried
// once) or until ctx ends; it reports false when it gave up (the caller
// counts the drop). Authorize fails closed while the shared state is
// unavailable (CONTRACT §11), so no new decision joins the queue meanwhile.
func (s *SharedDetection) observeRetrying(ctx context.Context, tenantID, agentID string, so *sharedObservation, cached *string) ([]correlate.Incident, []detect.Anomaly, bool) {
	backoff := 50 * time.Millisecond
	for {
		incidents, anomalies, err := s.observe(ctx, tenantID, agentID, so, cached)
		if err == nil {
			s.outage.Store(0)
			return incidents, anomalies, true
		}
		// A failed swap may have been applied: read afresh next time.
		*cached = ""
		now, unavailable := time.Now(), errors.Is(err, sharedstate.ErrUnavailable)
		if unavailable {
			s.outage.CompareAndSwap(0, now.UnixNano())
		}
		deadline := time.Unix(0, s.outage.Load()).Add(s.retryFor)
		if !unavailable || ctx.Err() != nil || now.Add(backoff).After(deadline) {
			s.log.Error("observation dropped: the shared detection state cannot be updated", "tenant_id", tenantID, "agent_id", agentID,
				"event_id", so.event.EventID, "error", err)
			return nil, nil, false
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}
