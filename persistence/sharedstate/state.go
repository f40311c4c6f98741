package sharedstate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// State is the shared, rebuildable state of an installation.
type State interface {
	// Incr adds 1 to the counter at key, creating it with a time to live of
	// window when absent (a fixed window: the TTL is NOT extended by later
	// increments), and returns the new count and the time left in the window.
	Incr(ctx context.Context, key string, window time.Duration) (count int64, ttl time.Duration, err error)
	// Count returns the counter's value (0 when absent) and its time left.
	Count(ctx context.Context, key string) (int64, time.Duration, error)
	// SetNX stores value at key with a TTL only when key is absent, and
	// reports whether it stored it.
	SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error)
	// Get returns the value at key and whether it exists.
	Get(ctx context.Context, key string) (string, bool, error)
	// Set stores value at key with a TTL (0: no expiry), overwriting.
	Set(ctx context.Context, key, value string, ttl time.Duration) error
	// Del removes keys.
	Del(ctx context.Context, keys ...string) error
	// TakeToken takes cost tokens from the token bucket at key (capacity
	// tokens, refilled continuously at refillPerSec). It reports whether the
	// tokens were taken and, when not, how long until they would be.
	// Atomic across nodes.
	TakeToken(ctx context.Context, key string, capacity, refillPerSec, cost float64) (ok bool, retryAfter time.Duration, err error)
	// WindowAdd records one event at time at in the sliding window at key
	// (a sorted set scored by time, members unique via member), drops
	// entries older than at-window, and returns how many remain. Atomic.
	WindowAdd(ctx context.Context, key, member string, at time.Time, window time.Duration) (int64, error)
	// CompareAndSwap stores value at key, with a TTL (0: no expiry), only
	// when key holds exactly old ("" meaning absent), and reports whether it
	// did; when it did not, current is what key holds ("" when absent).
	// value must not be empty. Atomic across nodes: of several callers
	// swapping from the same old value, one succeeds.
	CompareAndSwap(ctx context.Context, key, old, value string, ttl time.Duration) (swapped bool, current string, err error)
	// MarkSeen adds member to the bounded recency set at key and reports
	// whether it was absent. A member's recency is the latest at it was
	// marked with; the set keeps the limit most recent members (dropping
	// the least recent first, ties in member order) and expires ttl after
	// the last mark. Atomic across nodes: of several callers marking a new
	// member, one is told it was absent.
	MarkSeen(ctx context.Context, key, member string, at time.Time, limit int, ttl time.Duration) (added bool, err error)
	// Publish sends msg to every current subscriber of channel on every node.
	// Seen returns the members of the recency set at key (MarkSeen), the
	// most recently marked first (ties in reverse member order); none when
	// it is absent.
	Seen(ctx context.Context, key string) ([]string, error)
	Publish(ctx context.Context, channel string, msg []byte) error
	// Subscribe delivers messages published on channel until ctx ends. The
	// returned channel is closed when the subscription ends. A slow reader
	// loses messages rather than blocking publishers (buffer 1024; drops
	// are counted, see Dropped).
	Subscribe(ctx context.Context, channel string) (<-chan []byte, error)
	// Ping checks the backend answers.
	Ping(ctx context.Context) error
	// Backend is "memory" or "valkey".
	Backend() string
	Close() error
}

// DropCounter is implemented by both implementations of [State]: Dropped
// returns how many published messages this State has dropped since it was
// created because a local subscriber's buffer was full. It is kept out of
// [State] so that a test double need not implement it; a metrics collector
// asserts it:
//
//	if dc, ok := st.(sharedstate.DropCounter); ok { dropped.Set(float64(dc.Dropped())) }
type DropCounter interface {
	Dropped() uint64
}

// SubscriberBuffer is how many messages a subscription buffers before it
// drops new ones.
const SubscriberBuffer = 1024

// Sentinel errors. Each is wrapped with detail; test with errors.Is.
var (
	// ErrUnavailable: the backend could not be reached or could not serve
	// (connection refused or lost, timeout, server loading, read-only or out
	// of memory). Callers fail closed.
	ErrUnavailable = errors.New("sharedstate: unavailable")
	// ErrWrongType: the key holds another kind of value (Incr on a string
	// that is not an integer, Get on a token bucket, and so on).
	ErrWrongType = errors.New("sharedstate: key holds another kind of value")
	// ErrInvalidArgument: an argument is out of range (see "Contract
	// details" in the package documentation) or the Valkey URL does not
	// parse.
	ErrInvalidArgument = errors.New("sharedstate: invalid argument")
	// ErrClosed: the State was closed.
	ErrClosed = errors.New("sharedstate: closed")
)

const (
	// idleMargin is added to the time a bucket takes to fill before it
	// expires.
	idleMargin = time.Second
	// maxIdle caps how long an idle bucket is kept.
	maxIdle = 30 * 24 * time.Hour
)

// validWindow checks an Incr or WindowAdd window.
func validWindow(op string, window time.Duration) error {
	if window <= 0 {
		return fmt.Errorf("%w: %s: window %v must be positive", ErrInvalidArgument, op, window)
	}
	return nil
}

// validTTL checks a Set or SetNX TTL.
func validTTL(op string, ttl time.Duration) error {
	if ttl < 0 {
		return fmt.Errorf("%w: %s: ttl %v must not be negative", ErrInvalidArgument, op, ttl)
	}
	return nil
}

// validBucket checks the arguments of TakeToken.
func validBucket(capacity, refillPerSec, cost float64) error {
	finite := func(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
	switch {
	case !finite(capacity) || capacity <= 0:
		return fmt.Errorf("%w: take token: capacity %v must be positive", ErrInvalidArgument, capacity)
	case !finite(refillPerSec) || refillPerSec <= 0:
		return fmt.Errorf("%w: take token: refill rate %v must be positive", ErrInvalidArgument, refillPerSec)
	case !finite(cost) || cost < 0 || cost > capacity:
		return fmt.Errorf("%w: take token: cost %v must be between 0 and capacity %v", ErrInvalidArgument, cost, capacity)
	}
	return nil
}

// validSwap checks a CompareAndSwap's value and TTL.
func validSwap(value string, ttl time.Duration) error {
	if value == "" {
		return fmt.Errorf("%w: compare and swap: the new value must not be empty", ErrInvalidArgument)
	}
	return validTTL("compare and swap", ttl)
}

// validSeen checks a MarkSeen's limit and TTL.
func validSeen(limit int, ttl time.Duration) error {
	switch {
	case limit <= 0:
		return fmt.Errorf("%w: mark seen: limit %d must be positive", ErrInvalidArgument, limit)
	case ttl <= 0:
		return fmt.Errorf("%w: mark seen: ttl %v must be positive", ErrInvalidArgument, ttl)
	}
	return nil
}

// millis rounds d up to whole milliseconds (at least 1 for d > 0).
func millis(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// idleTTL is how long a bucket holding tokens stays before it expires: the
// time it takes to fill, plus idleMargin, capped at maxIdle.
func idleTTL(capacity, tokens, refillPerSec float64) time.Duration {
	fill := (capacity - tokens) / refillPerSec // seconds
	if fill < 0 {
		fill = 0
	}
	if fill >= maxIdle.Seconds() {
		return maxIdle
	}
	d := time.Duration(math.Ceil(fill*1e3))*time.Millisecond + idleMargin
	return min(d, maxIdle)
}

// retryAfter is how long until tokens reach cost at refillPerSec, rounded up
// to the microsecond.
func retryAfter(tokens, refillPerSec, cost float64) time.Duration {
	if tokens >= cost {
		return 0
	}
	return time.Duration(math.Ceil((cost-tokens)/refillPerSec*1e6)) * time.Microsecond
}
