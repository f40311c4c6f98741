package actors

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// actorTable maps keys (tenant/agent, tenant/approval) to the live
// incarnation of an actor that is spawned on demand and stops itself when
// idle. protoactor drops the messages still queued in a stopped actor's
// mailbox, without dead-lettering them (the actor was registered when they
// were queued), so a request can be lost to an actor stopping as it
// arrives. Each incarnation therefore carries a channel closed when it has
// stopped: a caller awaiting an answer also watches it (awaitUnlessGone)
// and asks a fresh incarnation instead of waiting out its deadline.
//
// Each incarnation has a name of its own (the key's name and a sequence
// number): protoactor resolves a PID whose process has stopped by its name,
// so with one name per key a request sent to a stopped incarnation would
// reach its successor while the caller, seeing the stop, asked it again.
// With a name per incarnation such a request is dead-lettered instead.
type actorTable struct {
	m   sync.Map   // key → *actorRef
	mu  sync.Mutex // serializes spawning (not the lookups)
	seq atomic.Uint64
	// spawning holds an incarnation's ref by its name while it is spawned,
	// so that an actor built from props shared by every key finds its own
	// on Started (self) before get has stored it under the key.
	spawning sync.Map
}

// actorRef is one incarnation of a keyed actor.
type actorRef struct {
	pid     *actor.PID
	stopped chan struct{} // closed once the incarnation has stopped
}

// get returns key's live incarnation, spawning one from props, named name
// and a sequence number, when there is none (callers look it up with load
// first: name and props allocate).
func (t *actorTable) get(system *actor.ActorSystem, key, name string, props func(*actorRef) *actor.Props) (*actorRef, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ref, ok := t.m.Load(key); ok {
		return ref.(*actorRef), nil //nolint:errcheck // only *actorRef is stored
	}
	ref := &actorRef{stopped: make(chan struct{})}
	id := name + "#" + strconv.FormatUint(t.seq.Add(1), 10)
	t.spawning.Store(id, ref)
	pid, err := system.Root.SpawnNamed(props(ref), id)
	if err != nil {
		t.spawning.Delete(id)
		return nil, err
	}
	ref.pid = pid
	t.m.Store(key, ref) // before the Delete: self finds it in one of the two
	t.spawning.Delete(id)
	return ref, nil
}

// self is the incarnation whose process is pid, for an actor built from
// shared props (on Started): nil when key names another incarnation now
// (this one was dropped, so it has stopped).
func (t *actorTable) self(key string, pid *actor.PID) *actorRef {
	if ref, ok := t.spawning.Load(pid.Id); ok {
		return ref.(*actorRef) //nolint:errcheck // only *actorRef is stored
	}
	if ref, ok := t.load(key); ok && ref.pid.Equal(pid) {
		return ref
	}
	return nil
}

// incarnationKey is the key of an incarnation named prefix+key+"#"+seq.
func incarnationKey(id, prefix string) string {
	id = strings.TrimPrefix(id, prefix)
	if i := strings.LastIndexByte(id, '#'); i >= 0 {
		return id[:i]
	}
	return id
}

// stopped is called by the incarnation on actor.Stopped: protoactor has
// unregistered it and will process nothing more it was sent.
func (t *actorTable) stopped(key string, ref *actorRef) {
	t.m.CompareAndDelete(key, ref)
	close(ref.stopped)
}

// drop forgets an incarnation found gone (a dead-lettered request).
func (t *actorTable) drop(key string, ref *actorRef) { t.m.CompareAndDelete(key, ref) }

// load returns key's incarnation, if any.
func (t *actorTable) load(key string) (*actorRef, bool) {
	v, ok := t.m.Load(key)
	if !ok {
		return nil, false
	}
	ref, ok := v.(*actorRef)
	return ref, ok
}

// len counts the live incarnations.
func (t *actorTable) len() int {
	n := 0
	t.m.Range(func(_, _ any) bool { n++; return true })
	return n
}

// errIncarnationsGone is askIncarnation's error when every incarnation it
// asked stopped without answering.
var errIncarnationsGone = errors.New("actors: actor unavailable: every incarnation asked stopped")

// askDeadline is ctx's deadline, or 10 s from now without one.
func askDeadline(ctx context.Context) time.Time {
	if dl, ok := ctx.Deadline(); ok {
		return dl
	}
	return time.Now().Add(10 * time.Second)
}

// askIncarnation sends a request (send returns its reply channel) to key's
// live incarnation, spawning one with spawn when there is none (only then:
// a name and props allocate), and awaits the answer until deadline. A
// request that reaches an incarnation as it stops is dead-lettered (its
// answer reports it: dead) or dropped (the incarnation's stopped channel
// closes first); either way it goes to a fresh incarnation, three tries in
// all.
func askIncarnation[R any](t *actorTable, key string, spawn func() (*actorRef, error), deadline time.Time,
	send func(*actor.PID) chan R, dead func(R) bool) (R, error) {
	var zero R
	for range 3 {
		ref, ok := t.load(key)
		if !ok {
			var err error
			if ref, err = spawn(); err != nil {
				return zero, err
			}
		}
		r, err := awaitUnlessGone(send(ref.pid), ref.stopped, max(time.Until(deadline), time.Millisecond))
		if errors.Is(err, actor.ErrDeadLetter) || (err == nil && dead(r)) {
			t.drop(key, ref)
			continue
		}
		return r, err
	}
	return zero, errIncarnationsGone
}
