package actors

import (
	"context"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/hashicorp/go-hclog"

	"svc/persistence"
)

// CommitDecision asks the GroupWriter to make a decision durable. The writer
// answers Reply (or, when nil, ReplyTo, or when that is nil too the sender,
// e.g. a request future) with a *Committed once the transaction that
// carries it has committed or finally failed.
type CommitDecision struct {
	Write persistence.DecisionWrite
	// Reply, a channel with one free slot, takes the answer (reply.go).
	Reply   chan *Committed
	ReplyTo *actor.PID
	// Early asks for the answer as soon as the receipt is sealed, before the
	// commit (a low-risk read-only allow, SPEC 4.2 rule 10). Honoured only
	// by a writer with EarlySeal; a failure of its write afterwards is
	// counted (WriterOptions.EarlyLost) and logged.
	Early bool

	sealedAs string // the receipt hash sealed on arrival (EarlySeal)
}

// barrier asks the writer to answer (with *barrierPassed, on Reply when set,
// else to the sender) once every write it received before the barrier has
// been committed or has failed: a read after it sees every decision
// answered before it (read-your-writes after early answers).
type barrier struct {
	Reply chan *barrierPassed
}

func (m *barrier) deadLetter() { offer(m.Reply, &barrierPassed{}) }

// IgnoreDeadLetterLogging: a dead-lettered barrier is answered.
func (m *barrier) IgnoreDeadLetterLogging() {}

func (m *CommitDecision) deadLetter() {
	offer(m.Reply, &Committed{DecisionID: m.Write.Decision.ID, Err: actor.ErrDeadLetter})
}

// IgnoreDeadLetterLogging: a dead-lettered commit is answered with an error.
func (m *CommitDecision) IgnoreDeadLetterLogging() {}

// answer sends the one answer m gets, and forgets where to send it.
func (m *CommitDecision) answer(ctx actor.Context, c *Committed) {
	switch {
	case m.Reply != nil:
		offer(m.Reply, c)
	case m.ReplyTo != nil:
		ctx.Send(m.ReplyTo, c)
	}
	m.Reply, m.ReplyTo = nil, nil
}

func (m *CommitDecision) awaited() bool { return m.Reply != nil || m.ReplyTo != nil }

// barrierPassed answers a barrier.
type barrierPassed struct{}

// Committed is the writer's answer to one CommitDecision: the receipt hash
// the decision was sealed with, or the error that stopped it.
type Committed struct {
	DecisionID  string
	ReceiptHash string
	Err         error
	// Early is set when the answer precedes the commit.
	Early bool
}

// bufferAudit hands the writer standalone, best-effort audit events: they
// are flushed in batches of SVC_AUDIT_BATCH_SIZE or every
// SVC_AUDIT_BATCH_FLUSH_MS, whichever comes first. (A decision's own audit
// row is never buffered: it travels in the decision's transaction.)
type bufferAudit struct{ Events []persistence.AuditEvent }

// WriterHealth receives the outcome of every commit: the audit writer is
// unhealthy from a failed commit until the next successful one.
type WriterHealth func(err error)

// groupWriter group-commits decisions, their audit rows and receipts: while
// one transaction is in flight the next batch forms from whatever arrives,
// and it starts the moment the previous one ends. There is no timer on this
// path, so a lone request is committed at once and a busy stream is
// committed in large batches.
type groupWriter struct {
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

	// earlySeal (a lone node) seals receipts on arrival against heads kept
	// here, so that low-risk allows can be answered before the commit.
	earlySeal bool
	seal1     persistence.Sealer
	heads     map[string]persistence.ChainHead
	// A tenant in resync had a write fail, or resealed in its transaction:
	// the receipts sealed on arrival after it, still queued, no longer
	// continue the stored chain (each would be resealed in turn, and its
	// early answer's receipt_hash would not be the stored one). Until the
	// transaction in flight ends, its new receipts are not sealed on
	// arrival; then its head is read again and its queued receipts are
	// sealed against it (resyncHeads).
	resync    map[string]bool
	earlyLost func(*persistence.DecisionWrite, error)
	pending   *EarlyPending
	observe   func(int, time.Duration, bool)

	// Early-answered writes wait up to earlyWait (or until earlyMax of
	// them, a write whose caller waits, or a barrier) so that they share a
	// transaction instead of each paying for one. urgent counts the queued
	// writes whose caller waits; due runs while such a wait is on.
	earlyWait time.Duration
	earlyMax  int
	urgent    int
	due       *time.Timer
	overdue   bool

	// received numbers the CommitDecisions in arrival order; done is the
	// number of them whose batch has ended; barriers wait for a number.
	received int64
	done     int64
	barriers []barrierWait

	auditBuf      []persistence.AuditEvent
	auditSize     int
	auditEvery    time.Duration
	auditInFlight bool
	ticker        *ticker

	// failing is set while the database refuses writes (the last batch
	// failed as busy or unavailable and none of it committed): no early
	// answers then, and every probeEvery a one-row write (probeWrite)
	// checks whether writes succeed again, so that the audit writer's
	// health recovers without waiting for traffic.
	failing    bool
	probeWrite func(context.Context) error
	probeEvery time.Duration
	probe      *time.Timer
	probing    bool
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
	// EarlySeal enables early answers; only for a lone node, where no other
	// writer advances a tenant's chain.
	EarlySeal bool
	// EarlyLost is called for each early-answered decision whose write
	// failed afterwards.
	EarlyLost func(*persistence.DecisionWrite, error)
	// Pending, when set, counts early-answered writes not yet committed.
	Pending *EarlyPending
	// EarlyCommitWait, when positive, lets early-answered writes wait up to
	// that long for a transaction to share (SVC_EARLY_COMMIT_WAIT_MS): they
	// go at once with any write whose caller waits, with a barrier, or when
	// EarlyCommitMax of them wait. No caller waits on them (their answers
	// are out), so this timer is not on the authorize path; it bounds how
	// many of them a crash can lose, which SPEC 4.2 rule 10 allows.
	EarlyCommitWait time.Duration
	EarlyCommitMax  int // default 64
	// Observe, when set, is told of every group commit: how many decisions
	// it carried, how long it took (retries included) and whether any of
	// them failed.
	Observe func(decisions int, took time.Duration, failed bool)
	// ProbeEvery is the interval of the write probe while writes fail
	// (default 1 s).
	ProbeEvery time.Duration
}

type barrierWait struct {
	after   int64
	reply   chan *barrierPassed
	replyTo *actor.PID
}

// NewGroupWriter returns the producer of the writer actor.
func NewGroupWriter(store persistence.Store, seal persistence.Sealer, health WriterHealth, o WriterOptions, log hclog.Logger) actor.Producer {
	if o.MaxBatch <= 0 {
		o.MaxBatch = 512
	}
	if o.EarlyCommitMax <= 0 {
		o.EarlyCommitMax = 64
	}
	if o.ProbeEvery <= 0 {
		o.ProbeEvery = time.Second
	}
	return func() actor.Actor {
		return &groupWriter{store: store, audit: store, seal: seal, health: health, log: log, maxBatch: o.MaxBatch,
			auditSize: max(o.AuditBatchSize, 1), auditEvery: o.AuditBatchFlush,
			earlySeal: o.EarlySeal, seal1: seal, heads: map[string]persistence.ChainHead{}, earlyLost: o.EarlyLost,
			resync:  map[string]bool{},
			pending: o.Pending, observe: o.Observe, earlyWait: o.EarlyCommitWait, earlyMax: min(o.EarlyCommitMax, o.MaxBatch),
			probeWrite: store.ProbeWrite, probeEvery: o.ProbeEvery}
	}
}

// Receive implements actor.Actor.
func (w *groupWriter) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		if w.auditEvery > 0 {
			w.ticker = startTicker(ctx, w.auditEvery)
		}
	case *CommitDecision:
		if m.Reply == nil && m.ReplyTo == nil {
			m.ReplyTo = ctx.Sender() // a RequestFuture: answer the future
		}
		if w.earlySeal {
			w.presealAndMaybeAnswer(ctx, m)
		}
		w.received++
		w.queue = append(w.queue, m)
		if !w.answered(m) {
			w.urgent++
		}
		w.maybeStart(ctx)
	case *barrier:
		w.barriers = append(w.barriers, barrierWait{after: w.received, reply: m.Reply, replyTo: ctx.Sender()})
		w.passBarriers(ctx)
		w.maybeStart(ctx)
	case earlyDue:
		// Overdue: start now, or as soon as the transaction in flight ends.
		w.due, w.overdue = nil, len(w.queue) > 0
		w.maybeStart(ctx)
	case batchDone:
		w.inFlight = false
		w.noteOutcome(ctx, m.errs)
		w.reply(ctx, m)
		w.done += int64(len(m.batch))
		if len(w.resync) > 0 {
			w.resyncHeads()
		}
		w.passBarriers(ctx)
		w.maybeStart(ctx)
	case *bufferAudit:
		w.auditBuf = append(w.auditBuf, m.Events...)
		if len(w.auditBuf) >= w.auditSize {
			w.flushAudit(ctx)
		}
	case tick:
		w.flushAudit(ctx)
	case auditDone:
		w.auditInFlight = false
		if len(m.events) > 0 {
			w.log.Warn("buffered audit flush failed; keeping the events", "events", len(m.events), "error", m.err)
			w.auditBuf = append(m.events, w.auditBuf...)
		}
	case probeDue:
		w.probe = nil
		w.startProbe(ctx)
	case probeDone:
		w.probing = false
		if !w.failing {
			break // a commit since has told the outcome
		}
		if w.health != nil {
			w.health(m.err)
		}
		if m.err == nil {
			w.failing = false
		} else {
			w.scheduleProbe(ctx)
		}
	case *actor.Stopping:
		w.ticker.Stop()
		w.stopDue()
		w.stopProbe()
		w.drain(ctx)
	case *actor.Restarting:
		w.ticker.Stop()
		w.stopDue()
		w.stopProbe()
	}
}

// maybeStart starts the next transaction unless only early-answered writes
// wait and they may wait longer; then it starts their timer, which runs
// from the first of them to wait (a transaction started meanwhile for other
// reasons only makes the timer's round come early for the next ones). A
// timer that fires while a transaction is in flight starts the next one
// when that ends, so no write waits much longer than the wait.
func (w *groupWriter) maybeStart(ctx actor.Context) {
	if w.inFlight || len(w.queue) == 0 {
		return
	}
	if w.earlyWait <= 0 || w.urgent > 0 || w.overdue || len(w.queue) >= w.earlyMax || len(w.barriers) > 0 {
		w.startBatch(ctx)
		return
	}
	if w.due == nil {
		self, root := ctx.Self(), ctx.ActorSystem().Root
		w.due = time.AfterFunc(w.earlyWait, func() { root.Send(self, earlyDue{}) })
	}
}

func (w *groupWriter) stopDue() { stopTimer(&w.due) }

// stopTimer stops and forgets a timer that would send the writer a message.
func stopTimer(t **time.Timer) {
	if *t != nil {
		(*t).Stop()
		*t = nil
	}
}

func (w *groupWriter) startBatch(ctx actor.Context) {
	n := min(len(w.queue), w.maxBatch)
	batch := w.queue[:n:n]
	w.queue = w.queue[n:]
	w.overdue = false
	for _, c := range batch {
		if !w.answered(c) {
			w.urgent--
		}
	}
	w.inFlight = true
	flight := make(chan struct{})
	w.flight = flight
	self, root := ctx.Self(), ctx.ActorSystem().Root
	// On a reused goroutine: SQLite's call depth regrows a fresh stack.
	dispatcherOf(ctx.ActorSystem()).Schedule(func() {
		start := time.Now()
		done := batchDone{batch: batch, errs: w.commit(batch)}
		if w.observe != nil {
			w.observe(len(batch), time.Since(start), slices.ContainsFunc(done.errs, func(e error) bool { return e != nil }))
		}
		w.flightDone = done
		close(flight)
		root.Send(self, done)
	})
}

func (w *groupWriter) reply(ctx actor.Context, d batchDone) {
	for i, c := range d.batch {
		if c.Early && w.pending != nil {
			w.pending.n.Add(-1)
		}
		w.settle(c, d.errs[i])
		if d.errs[i] != nil && c.Early {
			// Answered already: the write was best effort.
			if w.earlyLost != nil {
				w.earlyLost(&c.Write, d.errs[i])
			}
			w.log.Warn("early-answered decision not recorded (best effort)", "decision_id", c.Write.Decision.ID, "error", d.errs[i])
			continue
		}
		if c.awaited() {
			hash := ""
			if c.Write.Receipt != nil && d.errs[i] == nil {
				hash = c.Write.Receipt.Hash
			}
			c.answer(ctx, &Committed{DecisionID: c.Write.Decision.ID, ReceiptHash: hash, Err: d.errs[i]})
		}
	}
}

// settle puts c's tenant in resync when c's write failed or its receipt,
// sealed on arrival, was resealed in its transaction.
func (w *groupWriter) settle(c *CommitDecision, err error) {
	r := c.Write.Receipt
	if !w.earlySeal || r == nil {
		return
	}
	if err != nil || c.sealedAs != "" && r.Hash != c.sealedAs {
		w.resync[r.TenantID] = true
	}
}

// resyncHeads ends the resyncs once no transaction is in flight: each such
// tenant's head is read from the database, and its queued receipts are
// sealed against it in order (they were sealed on a chain that is not the
// stored one, or not at all). A tenant whose head cannot be read stays in
// resync until the next transaction ends.
func (w *groupWriter) resyncHeads() {
	for t := range w.resync {
		c, cancel := ioContext(5 * time.Second)
		head, err := w.store.ChainHead(c, t)
		cancel()
		if err != nil {
			continue
		}
		var queued []*CommitDecision
		var rs []*persistence.Receipt
		for _, q := range w.queue {
			if r := q.Write.Receipt; r != nil && r.TenantID == t {
				queued, rs = append(queued, q), append(rs, r)
			}
		}
		if len(rs) > 0 {
			if err := w.seal1(t, head, rs); err != nil {
				continue
			}
			for _, q := range queued {
				q.sealedAs = q.Write.Receipt.Hash
			}
			head = persistence.ChainHead{Seq: rs[len(rs)-1].Seq, Hash: rs[len(rs)-1].Hash}
		}
		w.heads[t] = head
		delete(w.resync, t)
	}
}

// drain waits for the batch in flight and answers it, then commits
// everything still queued, synchronously; used when stopping so that
// nothing accepted is lost.
func (w *groupWriter) drain(ctx actor.Context) {
	if w.inFlight {
		<-w.flight
		w.inFlight = false
		w.reply(ctx, w.flightDone)
		w.done += int64(len(w.flightDone.batch))
	}
	for len(w.queue) > 0 {
		n := min(len(w.queue), w.maxBatch)
		batch := w.queue[:n:n]
		w.queue = w.queue[n:]
		w.reply(ctx, batchDone{batch: batch, errs: w.commit(batch)})
		w.done += int64(len(batch))
	}
	w.passBarriers(ctx)
	if len(w.auditBuf) > 0 {
		if keep, err := w.appendAudit(w.auditBuf); len(keep) > 0 {
			w.log.Error("final audit flush failed", "events", len(keep), "error", err)
		}
	}
}
