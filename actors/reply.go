package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// The authorize path asks two actors per call (the agent's, then the group
// writer) and waits for each answer on a one-slot channel carried in the
// message rather than on a protoactor request future. A future registers a
// process under a fresh id in the actor system's registry, whose 1024
// buckets of 32 shards are Go maps: ids that never repeat spread over all
// 32768 of them, and their tables (about 11 MB, all pointers) stay live and
// are marked by every garbage collection. A channel costs one allocation
// and nothing to the collector once answered.

// deadLettered is implemented by request messages that carry a reply
// channel: a message that reached no actor (a stopped agent actor, a writer
// that is gone) is answered with actor.ErrDeadLetter instead of waiting for
// its timeout, as a request future would be.
type deadLettered interface {
	deadLetter()
}

// answerDeadLetters makes the system's dead letters answer their request
// (NewSystem calls it once per system).
func answerDeadLetters(system *actor.ActorSystem) {
	system.EventStream.Subscribe(func(evt any) {
		if e, ok := evt.(*actor.DeadLetterEvent); ok {
			if m, ok := e.Message.(deadLettered); ok {
				m.deadLetter()
			}
		}
	})
}

// offer puts v in a one-slot reply channel without ever blocking the actor
// that answers: a second answer to one request would be a bug, and is
// dropped rather than allowed to stall the sender.
func offer[T any](ch chan T, v T) {
	select {
	case ch <- v:
	default:
	}
}

// await waits for the answer on ch for at most timeout. Like the request
// futures it replaces, it does not give up when the caller's context is
// cancelled: a decision in flight is seen through to its answer.
func await[T any](ch <-chan T, timeout time.Duration) (T, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case v := <-ch:
		return v, nil
	case <-t.C:
		var zero T
		return zero, actor.ErrTimeout
	}
}

// awaitUnlessGone is await for an answer from an actor that may stop
// without answering (protoactor drops the messages still queued in a
// stopped actor's mailbox): once gone is closed and no answer came first,
// it returns actor.ErrDeadLetter. An actor answers before it stops, so an
// answer in ch when gone is closed is still taken.
func awaitUnlessGone[T any](ch <-chan T, gone <-chan struct{}, timeout time.Duration) (T, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case v := <-ch:
		return v, nil
	case <-gone:
		select {
		case v := <-ch:
			return v, nil
		default:
			var zero T
			return zero, actor.ErrDeadLetter
		}
	case <-t.C:
		var zero T
		return zero, actor.ErrTimeout
	}
}
