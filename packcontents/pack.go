package packcontents

import (
	"context"
	"io"
	"time"

	"svc/evidencepack"
	"svc/persistence"
	"svc/receipt"
)

// Reads is what the packs read: read methods of the store
// (persistence.Store has them all).
type Reads interface {
	AlertsBySourceEvents(ctx context.Context, tenantID string, eventIDs []string) ([]persistence.Alert, error)
	ChainHead(ctx context.Context, tenantID string) (persistence.ChainHead, error)
	DecisionStats(ctx context.Context, tenantID string, from, to time.Time) (persistence.DecisionStats, error)
	GetRiskSettings(ctx context.Context, tenantID string) (persistence.RiskSettings, error)
	GetTenant(ctx context.Context, id string) (persistence.Tenant, error)
	ListAgents(ctx context.Context, tenantID string, f persistence.AgentFilter, p persistence.Page) ([]persistence.Agent, error)
	ListApprovals(ctx context.Context, tenantID, agentID string, p persistence.Page) ([]persistence.Approval, error)
	ListAudit(ctx context.Context, tenantID string, f persistence.AuditFilter, p persistence.Page) ([]persistence.AuditEvent, error)
	ListIncidents(ctx context.Context, tenantID string, f persistence.IncidentFilter, p persistence.Page) ([]persistence.Incident, error)
	ListPolicies(ctx context.Context, tenantID string) ([]persistence.Policy, error)
	ListSkills(ctx context.Context, tenantID string) ([]persistence.Skill, error)
	PolicyVersion(ctx context.Context, tenantID string) (int64, error)
	ReceiptRange(ctx context.Context, tenantID string, fromSeq, toSeq int64, limit int) ([]persistence.Receipt, error)
	ReceiptsByID(ctx context.Context, tenantID string, ids []string) ([]persistence.Receipt, error)
	LatestCheckpoint(ctx context.Context, tenantID string) (persistence.Checkpoint, error)
	LogSize(ctx context.Context, tenantID string) (leaves, hashes int64, err error)
	LogHashes(ctx context.Context, tenantID string, indexes []int64) ([][32]byte, error)
}

var _ Reads = persistence.Store(nil)

// Pack is one evidence pack, ready to be written.
type Pack struct {
	// Kind is evidencepack.KindIncident or KindCompliance.
	Kind string
	// Name is the file name a download gives it.
	Name     string
	tenantID string
	signer   *receipt.Signer
	files    func(ctx context.Context, p *evidencepack.Writer) error
}

// Write writes the pack into w as it reads it: its files, then the
// manifest, signed when the pack was given a signer. An error can come
// after bytes were written; what w holds is then no pack (evidencepack
// would not verify it), and a response carrying it must be aborted.
func (pk Pack) Write(ctx context.Context, w io.Writer) error {
	p := evidencepack.NewWriter(w, pk.Kind, pk.tenantID, pk.signer, time.Now())
	err := pk.files(ctx, p)
	if err == nil {
		err = p.Close()
	}
	return err
}
