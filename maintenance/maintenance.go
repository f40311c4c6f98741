package maintenance

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"svc/leader"
	"svc/messages"
	"svc/persistence"
	"svc/receipt"
	"svc/runstate"
)

// Bounds of one pass.
const (
	// integrityPage is the receipts read and verified at a time; the
	// verified point is saved after each page, so that a pass stopped
	// anywhere resumes from the last saved one.
	integrityPage = 1000
	// sweepBudget is the receipts of a tenant's older, already verified
	// links re-verified per pass (the rolling sweep), so that a row
	// altered after it was verified is found within a bounded number of
	// passes while a pass's cost stays bounded by what was appended since
	// the last one plus this.
	sweepBudget = 10_000
	// archiveBatch is the audit events one archival transaction moves.
	archiveBatch = 1000
)

// Options configure the passes.
type Options struct {
	// PublicKey verifies receipt signatures; nil when receipts are not
	// signed (unsigned receipts are then checked by hash and link).
	PublicKey ed25519.PublicKey
	// Retention is SVC_AUDIT_RETENTION_DAYS: audit events older than
	// this are archived.
	Retention time.Duration
	// RunTaintAge is how long a run's durable trust floor is kept (the
	// runs' maximum age, runstate.DefaultMaxAge when 0).
	RunTaintAge time.Duration
	// Now is the clock (time.Now when nil); tests advance their own.
	Now func() time.Time
	// IsLeader is asked between batches: a node that lost the lease stops
	// its pass there (nil: always).
	IsLeader func() bool
	// Events receives receipt_chain_broken security events (the SOC
	// pipeline raises the HIGH alert of the default rule).
	Events Events
	// LogOrigin is SVC_LOG_ORIGIN: with PublicKey, the receipt log's
	// checkpoints are opened and checked (receiptlog.go).
	LogOrigin string
}

// Events is where receipt_chain_broken events go (the node's SOC event
// bus, broadcast.EventBus).
type Events interface {
	Publish(ev messages.AseEvent)
}

// Maintenance runs the passes of the maintenance jobs.
type Maintenance struct {
	store persistence.Store
	opt   Options
	log   hclog.Logger
	// brokenChains is the tenants whose chain the last integrity pass
	// found broken (the svc_receipt_chains_broken gauge).
	brokenChains atomic.Int64
	// verified counts receipts verified (svc_receipt_integrity_verified_total).
	verified atomic.Uint64
	// integrityRan is whether an integrity pass has finished on this node.
	integrityRan atomic.Bool
}

// New returns the passes over store.
func New(store persistence.Store, opt Options, log hclog.Logger) *Maintenance {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	return &Maintenance{store: store, opt: opt, log: log}
}

// BrokenChains is the number of tenants whose chain the last integrity
// pass on this node found broken, and whether one has run here.
func (m *Maintenance) BrokenChains() (int64, bool) {
	return m.brokenChains.Load(), m.integrityRan.Load()
}

// VerifiedReceipts counts the receipts the integrity passes verified.
func (m *Maintenance) VerifiedReceipts() uint64 { return m.verified.Load() }

// Leading reports whether this node leads (Options.IsLeader; always when
// that is nil): the jobs run their passes only then.
func (m *Maintenance) Leading() bool { return m.opt.IsLeader == nil || m.opt.IsLeader() }

// IntegrityPass is what one receipt integrity pass found.
type IntegrityPass struct {
	Tenants, Verified, Swept int
	// Broken lists the tenants whose chain is broken, with where.
	Broken []persistence.ChainCheckState
}

// CheckReceipts verifies every tenant's receipt chain from its last
// verified point to its head (hashes, links, signatures, no gap in seq,
// the head itself), then re-verifies up to sweepBudget of its older links.
// A newly found break is saved on the tenant's state and published as a
// receipt_chain_broken event; a chain found broken stays reported, and is
// checked again from its last good link on every pass (a chain restored
// from a backup clears).
func (m *Maintenance) CheckReceipts(ctx context.Context) (IntegrityPass, error) {
	var pass IntegrityPass
	states, err := m.store.ChainChecks(ctx)
	if err != nil {
		return pass, err
	}
	for _, st := range states {
		if !m.Leading() {
			return pass, leader.ErrNotLeading
		}
		was := st
		verified, err := m.checkForward(ctx, &st)
		pass.Verified += verified
		if err != nil {
			return pass, fmt.Errorf("tenant %s: %w", st.TenantID, err)
		}
		if st.BrokenSeq == 0 {
			swept, err := m.sweep(ctx, &st)
			pass.Swept += swept
			if err != nil {
				return pass, fmt.Errorf("tenant %s: %w", st.TenantID, err)
			}
		}
		if st.BrokenSeq == 0 {
			seq, why, err := m.checkCheckpoints(ctx, st.TenantID, st.VerifiedSeq)
			if err != nil {
				return pass, fmt.Errorf("tenant %s: receipt log: %w", st.TenantID, err)
			}
			st.BrokenSeq, st.BrokenError = seq, why
		}
		st.CheckedAt = m.opt.Now().UTC()
		if err := m.store.SaveChainCheck(ctx, st); err != nil {
			return pass, err
		}
		pass.Tenants++
		if st.BrokenSeq > 0 {
			pass.Broken = append(pass.Broken, st)
			if st.BrokenSeq != was.BrokenSeq || st.BrokenError != was.BrokenError {
				m.raiseBroken(st)
			}
		} else if was.BrokenSeq > 0 {
			m.log.Info("receipt chain verifies again", "tenant_id", st.TenantID, "was_broken_at_seq", was.BrokenSeq)
		}
	}
	m.verified.Add(uint64(pass.Verified + pass.Swept)) //nolint:gosec // counts, never negative
	m.brokenChains.Store(int64(len(pass.Broken)))
	m.integrityRan.Store(true)
	return pass, nil
}

// checkForward verifies st's chain from its verified point to the head,
// saving the verified point after each page; a break stops it there.
func (m *Maintenance) checkForward(ctx context.Context, st *persistence.ChainCheckState) (int, error) {
	head, err := m.store.ChainHead(ctx, st.TenantID)
	if err != nil {
		return 0, err
	}
	st.BrokenSeq, st.BrokenError = 0, ""
	total := 0
	for st.VerifiedSeq < head.Seq {
		if !m.Leading() {
			return total, leader.ErrNotLeading
		}
		rs, err := m.store.ReceiptRange(ctx, st.TenantID, st.VerifiedSeq+1, head.Seq, integrityPage)
		if err != nil {
			return total, err
		}
		if len(rs) == 0 { // the receipts up to the head are missing
			st.BrokenSeq, st.BrokenError = st.VerifiedSeq+1, fmt.Sprintf("receipts %d to %d (the head) are missing", st.VerifiedSeq+1, head.Seq)
			return total, nil
		}
		good, seq, why := m.verify(st.TenantID, st.VerifiedSeq, st.VerifiedHash, rs)
		if why == "" {
			if seq, why, err = m.checkLeaves(ctx, st.TenantID, rs); err != nil {
				return total, err
			}
			if why != "" {
				good = slices.IndexFunc(rs, func(r persistence.Receipt) bool { return r.Seq == seq })
			}
		}
		total += good
		if good > 0 {
			last := rs[good-1]
			st.VerifiedSeq, st.VerifiedHash = last.Seq, last.Hash
		}
		if why != "" {
			st.BrokenSeq, st.BrokenError = seq, why
			return total, nil
		}
		if err := m.store.SaveChainCheck(ctx, *st); err != nil {
			return total, err
		}
	}
	if st.VerifiedSeq == head.Seq && st.VerifiedHash != head.Hash {
		st.BrokenSeq, st.BrokenError = head.Seq, "the last receipt is not the stored chain head"
	}
	return total, nil
}

// sweep re-verifies up to sweepBudget of st's links from its sweep point,
// starting over from the first link once it reaches the verified point.
func (m *Maintenance) sweep(ctx context.Context, st *persistence.ChainCheckState) (int, error) {
	total := 0
	for total < sweepBudget && st.VerifiedSeq > 0 {
		if !m.Leading() {
			return total, leader.ErrNotLeading
		}
		if st.SweepSeq < 1 || st.SweepSeq > st.VerifiedSeq {
			st.SweepSeq = 1
		}
		// The link before the sweep point anchors the first one checked.
		from := max(st.SweepSeq-1, 1)
		rs, err := m.store.ReceiptRange(ctx, st.TenantID, from, st.VerifiedSeq, min(integrityPage, sweepBudget-total)+1)
		if err != nil {
			return total, err
		}
		prevSeq, prevHash := int64(0), ""
		if st.SweepSeq > 1 {
			if len(rs) == 0 || rs[0].Seq != from {
				st.BrokenSeq, st.BrokenError = from, fmt.Sprintf("receipt %d, verified before, is missing", from)
				return total, nil
			}
			prevSeq, prevHash = rs[0].Seq, rs[0].Hash
			rs = rs[1:]
		}
		if len(rs) == 0 {
			st.BrokenSeq, st.BrokenError = st.SweepSeq, fmt.Sprintf("receipt %d, verified before, is missing", st.SweepSeq)
			return total, nil
		}
		good, seq, why := m.verify(st.TenantID, prevSeq, prevHash, rs)
		if why == "" {
			if seq, why, err = m.checkLeaves(ctx, st.TenantID, rs); err != nil {
				return total, err
			}
		}
		total += good
		if why != "" {
			st.BrokenSeq, st.BrokenError = seq, why+" (found by the re-verification of older links)"
			return total, nil
		}
		st.SweepSeq = rs[len(rs)-1].Seq + 1
		if st.SweepSeq > st.VerifiedSeq {
			st.SweepSeq = 1 // a whole round done
			break
		}
	}
	return total, nil
}

// verify checks rs, which follow the link (prevSeq, prevHash), and returns
// how many verified before the first failure, and that failure's seq and
// reason ("" when all verified). A seq missing before rs[i] fails at the
// missing seq.
func (m *Maintenance) verify(tenantID string, prevSeq int64, prevHash string, rs []persistence.Receipt) (good int, seq int64, why string) {
	check := receipt.ResumeChainCheck(m.opt.PublicKey, tenantID, prevSeq, prevHash)
	for _, r := range rs {
		check.Add(r.Sealable(r.Seq))
	}
	_, errs := check.Errors()
	if len(errs) == 0 {
		return len(rs), 0, ""
	}
	i := min(max(errs[0].Index, 0), len(rs)-1)
	expected := prevSeq + 1
	if i > 0 {
		expected = rs[i-1].Seq + 1
	}
	if rs[i].Seq > expected {
		return i, expected, fmt.Sprintf("sequence gap: receipt %d is missing", expected)
	}
	return i, rs[i].Seq, errs[0].Error
}

// raiseBroken publishes the receipt_chain_broken security event of a
// newly found break.
func (m *Maintenance) raiseBroken(st persistence.ChainCheckState) {
	m.log.Error("receipt chain broken", "tenant_id", st.TenantID, "seq", st.BrokenSeq, "error", st.BrokenError)
	if m.opt.Events == nil {
		return
	}
	res := fmt.Sprintf("receipt_seq:%d", st.BrokenSeq)
	m.opt.Events.Publish(messages.AseEvent{EventID: uuid.NewString(), OccurredAt: m.opt.Now().UTC(), TenantID: st.TenantID,
		Kind: messages.KindReceiptChainBroken, AgentID: messages.UnknownAgent, Decision: "deny", Tool: "receipts",
		Action: "verify_chain", Resource: &res, RiskScore: 90, Reason: fmt.Sprintf("seq %d: %s", st.BrokenSeq, st.BrokenError),
		MatchedPolicies: []string{}, RedactedFields: []string{}, SchemaVersion: messages.SchemaVersion})
}

// ArchiveAudit moves the audit events older than the retention to the
// archive, archiveBatch per transaction, until none is left or the node no
// longer leads; it returns how many moved.
func (m *Maintenance) ArchiveAudit(ctx context.Context) (int, error) {
	now := m.opt.Now().UTC()
	cutoff := now.Add(-m.opt.Retention)
	moved := 0
	for {
		if !m.Leading() {
			return moved, leader.ErrNotLeading
		}
		n, err := m.store.ArchiveAudit(ctx, cutoff, now, archiveBatch)
		moved += n
		if err != nil || n < archiveBatch {
			return moved, err
		}
	}
}

// PruneRunTaint drops the runs' durable trust floors older than
// RunTaintAge: past it no run can carry them (a run lives at most that
// long), and a starting node loads only the younger ones.
func (m *Maintenance) PruneRunTaint(ctx context.Context) (int, error) {
	age := m.opt.RunTaintAge
	if age <= 0 {
		age = runstate.DefaultMaxAge
	}
	return m.store.PruneRunTaint(ctx, m.opt.Now().UTC().Add(-age))
}

// Vacuum returns free pages to the file system and refreshes the
// planner's statistics, as the store does it (persistence Vacuum).
func (m *Maintenance) Vacuum(ctx context.Context) (persistence.VacuumResult, error) {
	return m.store.Vacuum(ctx)
}
