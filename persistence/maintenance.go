package persistence

import (
	"context"
	"time"
)

// ChainCheckState is how far the receipt integrity job has verified a
// tenant's receipt chain (issue 28): every link up to VerifiedSeq, whose
// receipt_hash is VerifiedHash, checked (hash, link, signature, no gap);
// SweepSeq is where its rolling re-verification of older links goes on.
// BrokenSeq is the first link found broken (0: none), with why; the job
// stops advancing at a break until an operator has looked.
type ChainCheckState struct {
	TenantID     string
	VerifiedSeq  int64
	VerifiedHash string
	SweepSeq     int64
	BrokenSeq    int64
	BrokenError  string
	// CheckedAt is the last run that checked the chain (zero: never).
	CheckedAt time.Time
}

// VacuumResult is what one vacuum pass did.
type VacuumResult struct {
	// FreedPages is the pages returned to the file system (SQLite); 0 on
	// Postgres, whose VACUUM makes dead rows' space reusable in place.
	FreedPages int64
	// Tables is the tables vacuumed (Postgres) or empty.
	Tables []string
	// LongestStall is the longest the pass held the writer at once.
	LongestStall time.Duration
	// Note says why nothing could be reclaimed, when that is so.
	Note string
}

// MaintenanceStore serves the leader's maintenance jobs.
type MaintenanceStore interface {
	JobRunStore
	// ChainChecks returns every tenant's chain check state (tenants never
	// checked with a zero state) and its chain head.
	ChainChecks(ctx context.Context) ([]ChainCheckState, error)
	// ChainCheck returns one tenant's state (ErrNotFound for an unknown
	// tenant).
	ChainCheck(ctx context.Context, tenantID string) (ChainCheckState, error)
	// SaveChainCheck stores a tenant's state.
	SaveChainCheck(ctx context.Context, st ChainCheckState) error
	// ArchiveAudit moves up to limit audit events created before cutoff,
	// oldest first, from the hot table to the archive in one transaction,
	// stamped archivedAt; it returns how many moved. Decisions (and so
	// their authorize_decision events and receipts) are never archived.
	ArchiveAudit(ctx context.Context, cutoff, archivedAt time.Time, limit int) (int, error)
	// PruneRunTaint deletes the runs' durable trust floors set before
	// cutoff (they outlived the runs' maximum age); it returns how many.
	PruneRunTaint(ctx context.Context, cutoff time.Time) (int, error)
	// Vacuum reclaims space (SQLite: free pages, a bounded chunk per write
	// slot; Postgres: VACUUM (ANALYZE) of the append-heavy tables).
	Vacuum(ctx context.Context) (VacuumResult, error)
}

// JobRunRecord is a leader job's last run, whichever node ran it, and its
// runs and failures across the installation.
type JobRunRecord struct {
	Job       string
	NodeID    string
	StartedAt time.Time
	Duration  time.Duration
	// Outcome is "ok" or "failed".
	Outcome, Summary, Error string
	Runs, Failures          int64
}

// Lease is the holder of a lease row and when it expires.
type Lease struct {
	Name, Holder string
	ExpiresAt    time.Time
}

// JobRunStore records the leader jobs' runs and reads who leads.
type JobRunStore interface {
	// RecordJobRun stores a run as its job's last and counts it.
	RecordJobRun(ctx context.Context, r JobRunRecord) error
	// JobRuns returns every job's last run, by job.
	JobRuns(ctx context.Context) ([]JobRunRecord, error)
	// Lease reads the named lease (ErrNotFound when nobody holds it).
	Lease(ctx context.Context, name string) (Lease, error)
}
