package actors

// The GroupWriter's health: after a failed write it probes the database
// until a write succeeds again (SPEC 4.2 rule 10's audit_writer_unhealthy).

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// probeDue and probeDone run the write probe while writes fail.
type probeDue struct{}

type probeDone struct{ err error }

// noteOutcome tracks whether the database refuses writes: a batch of which
// nothing committed because the database was busy or unavailable starts the
// write probe; any committed write ends it.
func (w *groupWriter) noteOutcome(ctx actor.Context, errs []error) {
	refused := false
	for _, err := range errs {
		if err == nil {
			w.failing = false
			w.stopProbe()
			return
		}
		refused = refused || transient(err)
	}
	if refused {
		w.failing = true
		w.scheduleProbe(ctx)
	}
}

func (w *groupWriter) scheduleProbe(ctx actor.Context) {
	if w.probe != nil || w.probing {
		return
	}
	self, root := ctx.Self(), ctx.ActorSystem().Root
	w.probe = time.AfterFunc(w.probeEvery, func() { root.Send(self, probeDue{}) })
}

func (w *groupWriter) stopProbe() { stopTimer(&w.probe) }

// startProbe writes the probe row unless writes succeed again already or a
// group commit is in flight (its outcome tells as much; the probe is
// scheduled again if it fails).
func (w *groupWriter) startProbe(ctx actor.Context) {
	if !w.failing || w.probing {
		return
	}
	if w.inFlight {
		w.scheduleProbe(ctx)
		return
	}
	w.probing = true
	self, root := ctx.Self(), ctx.ActorSystem().Root
	dispatcherOf(ctx.ActorSystem()).Schedule(func() {
		c, cancel := ioContext(5 * time.Second)
		err := w.probeWrite(c)
		cancel()
		root.Send(self, probeDone{err: err})
	})
}
