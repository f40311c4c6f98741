package actors

// The leader's maintenance jobs (SPEC part 3, background leadership; SPEC
// part 8's intervals; issue 28): receipt integrity, audit archival and
// vacuum, beside approval cleanup and MCP re-discovery. Each job is a
// leader job actor (newLeaderJob) that runs a pass of
// maintenance.Maintenance every interval on the leader.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/hashicorp/go-hclog"

	"svc/leader"
	"svc/maintenance"
)

// Maintenance job names: the children on /readyz, the job label on
// /metrics, the status page's rows.
const (
	JobReceiptIntegrity = "receipt_integrity"
	JobAuditArchival    = "audit_archival"
	JobVacuum           = "vacuum"
	JobApprovalCleanup  = "approval_cleanup"
	JobMCPRediscovery   = "mcp_rediscovery"
)

// maintenanceJob returns the producer of a maintenance job's actor: pass, every
// interval on the leader, within a context of its interval (at least a
// minute).
func maintenanceJob(m *maintenance.Maintenance, name string, every time.Duration, jobs *leader.JobStats, log hclog.Logger,
	pass func(ctx context.Context) (string, error)) actor.Producer {
	return newLeaderJob(jobSpec{name: name, every: every, isLeader: m.Leading, stats: jobs, log: log,
		run: func() (string, error) {
			ctx, cancel := ioContext(max(every, time.Minute))
			defer cancel()
			return pass(ctx)
		}})
}

// NewReceiptIntegrityJob returns the producer of the receipt integrity job
// (SVC_RECEIPT_INTEGRITY_INTERVAL_SECS).
func NewReceiptIntegrityJob(m *maintenance.Maintenance, every time.Duration, jobs *leader.JobStats, log hclog.Logger) actor.Producer {
	return maintenanceJob(m, JobReceiptIntegrity, every, jobs, log, func(ctx context.Context) (string, error) {
		p, err := m.CheckReceipts(ctx)
		return fmt.Sprintf("%d chains, %d new receipts verified, %d older ones re-verified, %d broken",
			p.Tenants, p.Verified, p.Swept, len(p.Broken)), err
	})
}

// NewAuditArchivalJob returns the producer of the audit archival job
// (SVC_AUDIT_ARCHIVAL_INTERVAL_SECS, SVC_AUDIT_RETENTION_DAYS), which also
// drops the runs' durable trust floors older than a run can live.
func NewAuditArchivalJob(m *maintenance.Maintenance, every time.Duration, jobs *leader.JobStats, log hclog.Logger) actor.Producer {
	return maintenanceJob(m, JobAuditArchival, every, jobs, log, func(ctx context.Context) (string, error) {
		n, err := m.ArchiveAudit(ctx)
		if err != nil {
			return fmt.Sprintf("%d audit events archived", n), err
		}
		floors, err := m.PruneRunTaint(ctx)
		return fmt.Sprintf("%d audit events archived, %d expired run taint floors dropped", n, floors), err
	})
}

// NewVacuumJob returns the producer of the vacuum job
// (SVC_VACUUM_INTERVAL_SECS).
func NewVacuumJob(m *maintenance.Maintenance, every time.Duration, jobs *leader.JobStats, log hclog.Logger) actor.Producer {
	return maintenanceJob(m, JobVacuum, every, jobs, log, func(ctx context.Context) (string, error) {
		r, err := m.Vacuum(ctx)
		switch {
		case err != nil:
			return "", err
		case r.Note != "":
			return r.Note, nil
		case len(r.Tables) > 0:
			return "vacuumed and analyzed " + strings.Join(r.Tables, ", "), nil
		}
		return fmt.Sprintf("%d free pages returned to the file system; longest writer hold %s", r.FreedPages, r.LongestStall), nil
	})
}
