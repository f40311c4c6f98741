package actors

import (
	"context"
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/hashicorp/go-hclog"

	"svc/persistence"
)

// CommitDecision asks the GroupWriter to make a decision durable. The writer
// answers ReplyTo (or, when nil, the sender, e.g. a request future) with a
// *Committed once the transaction that carries it has committed or finally
// failed.
type CommitDecision struct {
	Write   persistence.DecisionWrite
	ReplyTo *actor.PID
}

// Committed is the writer's answer to one CommitDecision.
type Committed struct {
	DecisionID string
	Err        error
}

// BufferAudit hands the writer standalone, best-effort audit events: they
// are flushed in batches of SVC_AUDIT_BATCH_SIZE or every
// SVC_AUDIT_BATCH_FLUSH_MS, whichever comes first. (A decision's own audit
// row is never buffered: it travels in the decision's transaction.)
type BufferAudit struct{ Events []persistence.AuditEvent }

// WriterHealth receives the outcome of every commit: the audit writer is
// unhealthy from a failed commit until the next successful one.
type WriterHealth func(err error)

// GroupWriter group-commits decisions, their audit rows and receipts: while
// one transaction is in flight the next batch forms from whatever arrives,
// and it starts the moment the previous one ends. There is no timer on this
// path, so a lone request is committed at once and a busy stream is
// committed in large batches.
type GroupWriter struct {
	store    persistence.DecisionStore
	audit    persistence.AuditStore
	seal     persistence.Sealer
	health   WriterHealth
	log      hclog.Logger
	maxBatch int

	queue    []*CommitDecision
	inFlight bool
	// flight is closed when the in-flight batch's commit has ended; its
	// result is in flightDone (written before the close).
	flight     chan struct{}
	flightDone batchDone

	auditBuf      []persistence.AuditEvent
	auditSize     int
	auditEvery    time.Duration
	auditInFlight bool
	ticker        *ticker
}

// batchDone reports a finished group commit back to the writer.
type batchDone struct {
	batch []*CommitDecision
	errs  []error
}

type auditDone struct {
	events []persistence.AuditEvent
	err    error
}

// WriterOptions configure the GroupWriter.
type WriterOptions struct {
	MaxBatch        int // largest transaction, default 512
	AuditBatchSize  int
	AuditBatchFlush time.Duration
}

// NewGroupWriter returns the producer of the writer actor.
func NewGroupWriter(store persistence.Store, seal persistence.Sealer, health WriterHealth, o WriterOptions, log hclog.Logger) actor.Producer {
	if o.MaxBatch <= 0 {
		o.MaxBatch = 512
	}
	return func() actor.Actor {
		return &GroupWriter{store: store, audit: store, seal: seal, health: health, log: log, maxBatch: o.MaxBatch,
			auditSize: max(o.AuditBatchSize, 1), auditEvery: o.AuditBatchFlush}
	}
}

// Receive implements actor.Actor.
func (w *GroupWriter) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		if w.auditEvery > 0 {
			w.ticker = startTicker(ctx, w.auditEvery)
		}
	case *CommitDecision:
		if m.ReplyTo == nil {
			m.ReplyTo = ctx.Sender() // a RequestFuture: answer the future
		}
		w.queue = append(w.queue, m)
		if !w.inFlight {
			w.startBatch(ctx)
		}
	case batchDone:
		w.inFlight = false
		w.reply(ctx, m)
		if len(w.queue) > 0 {
			w.startBatch(ctx)
		}
	case *BufferAudit:
		w.auditBuf = append(w.auditBuf, m.Events...)
		if len(w.auditBuf) >= w.auditSize {
			w.flushAudit(ctx)
		}
	case tick:
		w.flushAudit(ctx)
	case auditDone:
		w.auditInFlight = false
		if m.err != nil {
			w.log.Warn("buffered audit flush failed; keeping the events", "events", len(m.events), "error", m.err)
			w.auditBuf = append(m.events, w.auditBuf...)
		}
	case *actor.Stopping:
		w.ticker.Stop()
		w.drain(ctx)
	case *actor.Restarting:
		w.ticker.Stop()
	}
}

func (w *GroupWriter) startBatch(ctx actor.Context) {
	n := min(len(w.queue), w.maxBatch)
	batch := w.queue[:n:n]
	w.queue = w.queue[n:]
	w.inFlight = true
	flight := make(chan struct{})
	w.flight = flight
	self, root := ctx.Self(), ctx.ActorSystem().Root
	go func() {
		done := batchDone{batch: batch, errs: w.commit(batch)}
		w.flightDone = done
		close(flight)
		root.Send(self, done)
	}()
}

func (w *GroupWriter) reply(ctx actor.Context, d batchDone) {
	for i, c := range d.batch {
		if c.ReplyTo != nil {
			ctx.Send(c.ReplyTo, &Committed{DecisionID: c.Write.Decision.ID, Err: d.errs[i]})
		}
	}
}

// commit writes a batch with retries for a busy or unreachable database,
// and, when the batch fails for another reason (one bad row poisons a
// transaction), commits its writes one by one so that only the bad one
// fails. It returns one error per write.
func (w *GroupWriter) commit(batch []*CommitDecision) []error {
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

func (w *GroupWriter) commitWithRetry(writes []persistence.DecisionWrite) error {
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

func (w *GroupWriter) flushAudit(ctx actor.Context) {
	if w.auditInFlight || len(w.auditBuf) == 0 {
		return
	}
	events := w.auditBuf
	w.auditBuf = nil
	w.auditInFlight = true
	self, root := ctx.Self(), ctx.ActorSystem().Root
	go func() {
		c, cancel := ioContext(10 * time.Second)
		defer cancel()
		root.Send(self, auditDone{events: events, err: w.audit.AppendAudit(c, events)})
	}()
}

// drain waits for the batch in flight and answers it, then commits
// everything still queued, synchronously; used when stopping so that
// nothing accepted is lost.
func (w *GroupWriter) drain(ctx actor.Context) {
	if w.inFlight {
		<-w.flight
		w.inFlight = false
		w.reply(ctx, w.flightDone)
	}
	for len(w.queue) > 0 {
		n := min(len(w.queue), w.maxBatch)
		batch := w.queue[:n:n]
		w.queue = w.queue[n:]
		w.reply(ctx, batchDone{batch: batch, errs: w.commit(batch)})
	}
	if len(w.auditBuf) > 0 {
		c, cancel := ioContext(10 * time.Second)
		defer cancel()
		if err := w.audit.AppendAudit(c, w.auditBuf); err != nil {
			w.log.Error("final audit flush failed", "events", len(w.auditBuf), "error", err)
		}
	}
}
