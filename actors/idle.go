package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// idleTimer is an actor's idle timeout, used in place of protoactor's
// receive timeout: that timer's goroutine writes the actor context's fields
// without synchronization (receiveTimeoutHandler calls CancelReceiveTimeout
// while the mailbox goroutine reads receiveTimeout in InvokeUserMessage), a
// data race the race detector reports under load. Here the timer only sends
// the actor an idleTick; the actor's own goroutine compares its last
// activity with the period, and re-arms the timer for what is left.
type idleTimer struct {
	period time.Duration
	last   time.Time // the last message but a tick, on the actor's goroutine
	timer  *time.Timer
}

// idleTick is an idle timer's message to its actor.
type idleTick struct{}

// IgnoreDeadLetterLogging: a tick that reaches an actor already stopped is
// expected.
func (idleTick) IgnoreDeadLetterLogging() {}

// start arms the timer for the actor of ctx (on Started; a restart arms it
// again).
func (t *idleTimer) start(ctx actor.Context, period time.Duration) {
	t.stop()
	t.period, t.last, t.timer = period, time.Now(), nil
	if period <= 0 {
		return
	}
	system, self := ctx.ActorSystem(), ctx.Self()
	t.timer = time.AfterFunc(period, func() { system.Root.Send(self, idleTick{}) })
}

// seen records the activity of a message that is not a tick.
func (t *idleTimer) seen(msg any) {
	if _, tick := msg.(idleTick); !tick {
		t.last = time.Now()
	}
}

// idle handles a tick: true when no other message came for a whole period;
// otherwise the timer is re-armed for the rest of it.
func (t *idleTimer) idle() bool {
	if t.timer == nil {
		return false
	}
	if left := t.period - time.Since(t.last); left > 0 {
		t.timer.Reset(left)
		return false
	}
	return true
}

// rearm waits another whole period (an idle actor that stays).
func (t *idleTimer) rearm() {
	if t.timer != nil {
		t.last = time.Now()
		t.timer.Reset(t.period)
	}
}

// stop disarms the timer (on Stopping).
func (t *idleTimer) stop() {
	if t.timer != nil {
		t.timer.Stop()
	}
}
