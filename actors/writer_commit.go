package actors

// The GroupWriter's transactions: one batch of decisions with their audit
// events and receipts, retried while the database is transiently busy,
// and the buffered best-effort audit events.

import (
	"context"
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"svc/persistence"
)

// commit writes a batch with retries for a busy or unreachable database,
// and, when the batch fails for another reason (one bad row poisons a
// transaction), commits its writes one by one so that only the bad one
// fails. It returns one error per write.
func (w *groupWriter) commit(batch []*CommitDecision) []error {
	writes := make([]persistence.DecisionWrite, len(batch))
	for i, c := range batch {
		writes[i] = c.Write
	}
	errs := make([]error, len(batch))
	err := w.commitWithRetry(writes)
	if err != nil && len(batch) > 1 && !transient(err) {
		for i := range writes {
			errs[i] = w.commitWithRetry(writes[i : i+1])
		}
	} else {
		for i := range errs {
			errs[i] = err
		}
	}
	return errs
}

// retryBudget bounds how long a busy or unreachable database is retried
// before the writes are answered as failed (fail closed).
const retryBudget = 2 * time.Second

func (w *groupWriter) commitWithRetry(writes []persistence.DecisionWrite) error {
	deadline := time.Now().Add(retryBudget)
	delay := 5 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := w.store.CommitDecisions(ctx, writes, w.seal)
		cancel()
		if w.health != nil {
			w.health(err)
		}
		if err == nil || !transient(err) || time.Now().Add(delay).After(deadline) {
			return err
		}
		w.log.Debug("commit retry", "writes", len(writes), "error", err)
		time.Sleep(delay)
		delay *= 2
	}
}

// transient errors are worth retrying.
func transient(err error) bool {
	return errors.Is(err, persistence.ErrBusy) || errors.Is(err, persistence.ErrUnavailable)
}

func (w *groupWriter) flushAudit(ctx actor.Context) {
	if w.auditInFlight || len(w.auditBuf) == 0 {
		return
	}
	events := w.auditBuf
	w.auditBuf = nil
	w.auditInFlight = true
	self, root := ctx.Self(), ctx.ActorSystem().Root
	go func() {
		keep, err := w.appendAudit(events)
		root.Send(self, auditDone{events: keep, err: err})
	}()
}

// appendAudit writes buffered audit events and returns those to keep for
// the next flush (writeBuffered).
func (w *groupWriter) appendAudit(events []persistence.AuditEvent) ([]persistence.AuditEvent, error) {
	return writeBuffered(events, w.audit.AppendAudit,
		func(e persistence.AuditEvent, err error) {
			w.log.Error("audit event dropped: it cannot be written", "tenant_id", e.TenantID, "event_type", e.EventType,
				"event_id", e.ID, "error", err)
		})
}
