package httpapi

import (
	"errors"
	"time"

	"svc/actors"
	"svc/leader"
	"svc/persistence"
)

// The operations status (issue 28): what an operator needs to know that
// the installation looks after itself, in one read, for the console's
// status page: who leads, the leader jobs' last runs (whichever node ran
// them), the caller's tenant's receipt chain integrity, dead background
// tasks and the audit writer's health.

type statusView struct {
	// NodeID and Leader: the node that answered and whether it leads.
	NodeID string `json:"node_id"`
	Leader bool   `json:"leader"`
	// LeaderNodeID is the lease's holder (null when nobody holds an
	// unexpired lease: a takeover is under way), until LeaseExpiresAt.
	LeaderNodeID   *string    `json:"leader_node_id"`
	LeaseExpiresAt *time.Time `json:"lease_expires_at"`
	// BackgroundTasks, DeadBackgroundTasks and Components are /readyz's, of
	// the node that answered.
	BackgroundTasks     string             `json:"background_tasks"`
	DeadBackgroundTasks []string           `json:"dead_background_tasks"`
	Components          []actors.Component `json:"components"`
	// AuditWriter is ok or unhealthy (audit writes failing on this node).
	AuditWriter string `json:"audit_writer"`
	// Jobs are the leader jobs, by name.
	Jobs         []jobView      `json:"jobs"`
	ReceiptChain chainStateView `json:"receipt_chain"`
}

// jobView is a leader job and its last run anywhere in the installation.
type jobView struct {
	Job          string `json:"job"`
	IntervalSecs int64  `json:"interval_secs"`
	// The last run (null before the first): when it started, on which
	// node, how long it took, ok or failed, what it did or why it failed.
	LastRunAt      *time.Time `json:"last_run_at"`
	LastNodeID     *string    `json:"last_node_id"`
	LastDurationMS *float64   `json:"last_duration_ms"`
	LastOutcome    *string    `json:"last_outcome"`
	LastSummary    *string    `json:"last_summary"`
	LastError      *string    `json:"last_error"`
	// Runs and Failures count the runs of every node.
	Runs     int64 `json:"runs"`
	Failures int64 `json:"failures"`
}

// chainStateView is the receipt integrity job's finding on the caller's
// tenant's chain.
type chainStateView struct {
	// Status: never_checked, verified (every link up to verified_seq
	// verifies and the head is reached), behind (links appended since the
	// last pass wait for the next) or broken.
	Status      string     `json:"status"`
	HeadSeq     int64      `json:"head_seq"`
	VerifiedSeq int64      `json:"verified_seq"`
	CheckedAt   *time.Time `json:"checked_at"`
	BrokenSeq   *int64     `json:"broken_seq"`
	BrokenError *string    `json:"broken_error"`
}

func (s *Server) registerStatus() {
	s.register(Route{Method: "GET", Path: "/status", Access: AccessViewer, Tag: "operations", Resp: statusView{},
		Summary: "The installation's maintenance status: the leader (this node's view and the lease's holder), every leader job's last run " +
			"across the nodes (receipt_integrity, audit_archival, vacuum, approval_cleanup, mcp_rediscovery), the caller's tenant's receipt chain " +
			"integrity (never_checked, verified, behind or broken with the first broken seq), this node's dead background tasks and components, " +
			"and its audit writer's health. The console's status page reads it.",
		Handle: s.status})
}

// status serves GET /status.
func (s *Server) status(c *Call) (any, error) {
	ctx := c.Ctx()
	v := statusView{NodeID: s.NodeID, Leader: s.Leader.IsLeader(), BackgroundTasks: "up", DeadBackgroundTasks: s.Registry.DeadTasks(),
		Components: s.Registry.Snapshot(), AuditWriter: "ok", Jobs: []jobView{}}
	if len(v.DeadBackgroundTasks) > 0 {
		v.BackgroundTasks = "down"
	}
	if !s.auditWriterOK() {
		v.AuditWriter = "unhealthy"
	}
	lease, err := s.Store.Lease(ctx, leader.LeaseName)
	switch {
	case err == nil && lease.ExpiresAt.After(time.Now()):
		at := lease.ExpiresAt.UTC()
		v.LeaderNodeID, v.LeaseExpiresAt = &lease.Holder, &at
	case err != nil && !errors.Is(err, persistence.ErrNotFound):
		return nil, err
	}
	runs, err := s.Store.JobRuns(ctx)
	if err != nil {
		return nil, err
	}
	byJob := make(map[string]persistence.JobRunRecord, len(runs))
	for _, r := range runs {
		byJob[r.Job] = r
	}
	for _, j := range s.Jobs.Snapshot() {
		jv := jobView{Job: j.Name, IntervalSecs: int64(j.Every / time.Second)}
		if r, ok := byJob[j.Name]; ok {
			at, ms := r.StartedAt.UTC(), float64(r.Duration.Microseconds())/1000
			jv.LastRunAt, jv.LastNodeID, jv.LastDurationMS, jv.LastOutcome = &at, &r.NodeID, &ms, &r.Outcome
			jv.LastSummary, jv.LastError, jv.Runs, jv.Failures = nullable(r.Summary), nullable(r.Error), r.Runs, r.Failures
		}
		v.Jobs = append(v.Jobs, jv)
	}
	st, err := s.Store.ChainCheck(ctx, c.Principal.TenantID)
	if err != nil {
		return nil, err
	}
	head, err := s.Store.ChainHead(ctx, c.Principal.TenantID)
	if err != nil {
		return nil, err
	}
	ch := chainStateView{HeadSeq: head.Seq, VerifiedSeq: st.VerifiedSeq, Status: "verified"}
	if !st.CheckedAt.IsZero() {
		at := st.CheckedAt.UTC()
		ch.CheckedAt = &at
	}
	switch {
	case st.BrokenSeq > 0:
		ch.Status, ch.BrokenSeq, ch.BrokenError = "broken", &st.BrokenSeq, &st.BrokenError
	case st.CheckedAt.IsZero():
		ch.Status = "never_checked"
	case st.VerifiedSeq < head.Seq:
		ch.Status = "behind"
	}
	v.ReceiptChain = ch
	return v, nil
}
