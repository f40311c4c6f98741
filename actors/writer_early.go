package actors

// Early answers (SPEC 4.2 rule 10, a lone node): low-risk read-only allows
// sealed on arrival and answered before their commit, and the barriers
// that give reads after them their writes.

import (
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"svc/persistence"
)

// earlyDue ends the wait of deferred early-answered writes.
type earlyDue struct{}

// answered reports whether m's caller has its answer already (an early
// answer), so that its write may wait for company.
func (w *groupWriter) answered(m *CommitDecision) bool {
	return w.earlySeal && m.Early
}

// presealAndMaybeAnswer seals the receipt against this writer's head of
// its tenant (read from the database the first time) and answers an Early
// request at once. The transaction checks the seal against the locked head
// and reseals when they disagree.
func (w *groupWriter) presealAndMaybeAnswer(ctx actor.Context, m *CommitDecision) {
	r := m.Write.Receipt
	if r == nil {
		return
	}
	if w.resync[r.TenantID] {
		m.Early = false // sealed in its transaction, answered after it
		return
	}
	head, ok := w.heads[r.TenantID]
	if !ok {
		c, cancel := ioContext(5 * time.Second)
		h, err := w.store.ChainHead(c, r.TenantID)
		cancel()
		if err != nil {
			m.Early = false // cannot seal now: answer after the commit
			return
		}
		head = h
	}
	if err := w.seal1(r.TenantID, head, []*persistence.Receipt{r}); err != nil {
		m.Early = false
		return
	}
	w.heads[r.TenantID] = persistence.ChainHead{Seq: r.Seq, Hash: r.Hash}
	m.sealedAs = r.Hash
	if m.Early && w.failing {
		m.Early = false // writes fail: no receipt_id that may never exist
	}
	if m.Early && m.awaited() {
		if w.pending != nil {
			w.pending.n.Add(1)
		}
		m.answer(ctx, &Committed{DecisionID: m.Write.Decision.ID, ReceiptHash: r.Hash, Early: true})
	}
}

// passBarriers answers the barriers whose writes have all ended.
func (w *groupWriter) passBarriers(ctx actor.Context) {
	kept := w.barriers[:0]
	for _, b := range w.barriers {
		if b.after <= w.done {
			switch {
			case b.reply != nil:
				offer(b.reply, &barrierPassed{})
			case b.replyTo != nil:
				ctx.Send(b.replyTo, &barrierPassed{})
			}
			continue
		}
		kept = append(kept, b)
	}
	w.barriers = kept
}

// EarlyPending counts early-answered writes not yet committed; readers skip
// the barrier while it is zero.
type EarlyPending struct{ n atomic.Int64 }

// Pending reports the early-answered writes not yet committed.
func (e *EarlyPending) Pending() int64 { return e.n.Load() }
