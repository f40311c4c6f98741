package sharedstate

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/valkey-io/valkey-go"
)

// remote is this node's one server subscription to a channel, shared by the
// channel's local subscribers. It starts with the first local subscriber and
// is torn down with the last, or when its connection fails; a channel has at
// most one remote at a time (a new one waits until the old one is done).
type remote struct {
	out    *fanout
	cancel context.CancelFunc
	ready  chan struct{} // closed when the server confirmed the subscription
	done   chan struct{} // closed when the remote has ended and out is closed
	err    error         // why it ended; written before done is closed

	stopping bool // guarded by Valkey.psMu
}

// errResubscribed: the client reconnected and subscribed again by itself;
// messages may have been lost in between, so the subscription is ended for
// its subscribers to notice.
var errResubscribed = errors.New("connection was re-established, messages may have been missed")

// Subscribe implements [State]. The first local subscriber of a channel
// subscribes this node on the server and waits (at most the subscribe
// timeout) for the server to confirm; later ones share that subscription.
// Every subscriber has its own buffer of [SubscriberBuffer] messages; when it
// is full, messages to that subscriber are dropped and counted, so neither
// publishers nor the connection ever wait for a slow reader. The channel is
// closed when ctx ends, on Close, or when the connection is lost.
func (v *Valkey) Subscribe(ctx context.Context, channel string) (<-chan []byte, error) {
	if err := v.check(ctx, "subscribe"); err != nil {
		return nil, err
	}
	timer := time.NewTimer(v.cfg.subscribeTimeout)
	defer timer.Stop()

	// Fail fast when the server is down rather than wait for the timeout.
	v.psMu.Lock()
	_, shared := v.remotes[channel]
	v.psMu.Unlock()
	if !shared {
		pctx, cancel := context.WithTimeout(ctx, v.cfg.subscribeTimeout)
		err := v.Ping(pctx)
		cancel()
		if err != nil {
			return nil, err
		}
	}

	var (
		r *remote
		s *subscriber
	)
	for s == nil {
		v.psMu.Lock()
		if v.closed.Load() {
			v.psMu.Unlock()
			return nil, fmt.Errorf("%w: subscribe", ErrClosed)
		}
		r = v.remotes[channel]
		if r == nil {
			r = v.startRemote(channel)
			v.remotes[channel] = r
		}
		if !r.stopping {
			s = r.out.add()
		}
		v.psMu.Unlock()
		if s == nil { // the previous remote is being torn down
			select {
			case <-r.done:
			case <-ctx.Done():
				return nil, fmt.Errorf("%w: subscribe: %w", ErrUnavailable, ctx.Err())
			case <-timer.C:
				return nil, fmt.Errorf("%w: subscribe: previous subscription did not end within %v", ErrUnavailable, v.cfg.subscribeTimeout)
			}
		}
	}

	select {
	case <-r.ready:
	case <-r.done:
		v.leave(r, s)
		if r.err != nil {
			return nil, r.err
		}
		return nil, fmt.Errorf("%w: subscribe", ErrClosed)
	case <-ctx.Done():
		v.leave(r, s)
		return nil, fmt.Errorf("%w: subscribe: %w", ErrUnavailable, ctx.Err())
	case <-timer.C:
		v.leave(r, s)
		return nil, fmt.Errorf("%w: subscribe: not confirmed within %v", ErrUnavailable, v.cfg.subscribeTimeout)
	}

	go func() {
		select {
		case <-ctx.Done():
			v.leave(r, s)
		case <-r.done: // out.closeAll closed s.ch
		}
	}()
	return s.ch, nil
}

// leave removes s from r and stops r when s was its last subscriber.
func (v *Valkey) leave(r *remote, s *subscriber) {
	v.psMu.Lock()
	defer v.psMu.Unlock()
	if r.out.remove(s) == 0 && !r.stopping {
		r.stopping = true
		r.cancel()
	}
}

// startRemote subscribes this node to channel on the server, in a goroutine
// that lives until the remote is cancelled or its connection fails. psMu
// must be held.
func (v *Valkey) startRemote(channel string) *remote {
	full := v.key(channel)
	rctx, cancel := context.WithCancel(context.Background())
	r := &remote{
		out:    newFanout(&v.dropped),
		cancel: cancel,
		ready:  make(chan struct{}),
		done:   make(chan struct{}),
	}
	var (
		confirmed   atomic.Int32
		resubscribe atomic.Bool
		broken      atomic.Bool
	)
	// Both hooks run on the client's goroutines and must not block.
	hctx := valkey.WithOnSubscriptionHook(rctx, func(s valkey.PubSubSubscription) {
		if s.Kind != "subscribe" || s.Channel != full {
			return
		}
		if confirmed.Add(1) == 1 {
			close(r.ready)
			return
		}
		// The client reconnected and subscribed again on its own.
		resubscribe.Store(true)
		cancel()
	})
	hctx = valkey.WithOnReceiveReturnHook(hctx, func(err error, c valkey.CommandClient) error {
		if rctx.Err() == nil {
			// The connection failed under the subscription. Cancelling
			// stops the client from resubscribing by itself: subscribers
			// must learn that messages may have been lost.
			broken.Store(true)
			cancel()
			return err
		}
		// We ended it. Tell the server so it stops sending on this
		// connection. Best effort, and its error is not ours to return:
		// the subscription has already ended for its subscribers, and if
		// the connection is broken the server has forgotten it anyway.
		uctx, ucancel := context.WithTimeout(context.Background(), time.Second)
		defer ucancel()
		_ = c.Do(uctx, c.B().Unsubscribe().Channel(full).Build()).Error()
		return err
	})

	go func() {
		err := v.client.Receive(hctx, v.client.B().Subscribe().Channel(full).Build(), func(m valkey.PubSubMessage) {
			deliver(r.out, m.Message)
		})
		switch {
		case resubscribe.Load():
			r.err = fmt.Errorf("%w: subscribe %q: %w", ErrUnavailable, channel, errResubscribed)
		case err == nil:
			r.err = fmt.Errorf("%w: subscribe %q: the server ended the subscription", ErrUnavailable, channel)
		case broken.Load() || !errors.Is(err, context.Canceled):
			r.err = v.fail("subscribe "+channel, err)
		default: // cancelled by leave or Close
			r.err = fmt.Errorf("%w: subscribe %q: ended", ErrClosed, channel)
		}
		cancel()
		v.psMu.Lock()
		r.stopping = true
		if v.remotes[channel] == r {
			delete(v.remotes, channel)
		}
		r.out.closeAll()
		v.psMu.Unlock()
		close(r.done)
	}()
	return r
}
