// Package sharedstate holds the state that the gateway nodes of one
// installation must agree on, behind one interface, [State], with an
// in-process implementation for a lone node and a Valkey implementation for
// a cluster.
//
// # What it holds
//
// Only hot, shared and rebuildable state: token buckets and quotas, per-IP
// and auth-failure counters, replay nonces, idempotency keys, the denial and
// correlator windows, cache invalidations (a rotated token fails on the very
// next call on every node) and the live-feed fan-out. Nothing durable lives
// here: a decision, its audit row and its receipt are in the database. Losing
// this state (a restart, a flushed Valkey) never loses a decision; at worst a
// window or a bucket starts afresh.
//
// # Implementations
//
// [Memory] ([NewMemory]) keeps everything in process: sharded maps, lazy
// expiry on access plus a sweep goroutine (stopped by Close) that removes
// expired keys, so memory stays bounded by the live keys. Publish reaches the
// subscribers of this process only. It serves a node that runs alone.
//
// [Valkey] ([NewValkey]) keeps everything in Valkey (or Redis 7, which speaks
// the same protocol) through github.com/valkey-io/valkey-go. Every key and
// channel name gets a prefix ("svc:" unless [WithKeyPrefix] says otherwise).
// Client-side caching is disabled: nothing here is read through a cache.
// Each node holds one server subscription per channel it listens on and fans
// messages out to its local subscribers.
//
// Both implementations pass the same contract suite (contract_test.go).
//
// # Atomicity
//
// Every method is atomic on its key, across goroutines and, for [Valkey],
// across nodes: in Valkey, Incr, Count, TakeToken and WindowAdd are each one
// Lua script and SetNX is SET NX PX; in Memory each call holds its key's
// lock. So 200 concurrent SetNX on one key store exactly one value, and a
// bucket of capacity 50 hands out exactly 50 tokens to 200 takers. Only Del
// takes several keys, and Memory deletes them one by one.
//
// Clocks: counter and key expiry run on the server's clock (PEXPIRE); token
// buckets refill on the server's clock (the script reads TIME), so nodes with
// skewed clocks still agree. Sliding windows are scored by the caller's at,
// which the caller takes from its own clock. [Memory] expires keys and
// refills buckets on the process clock.
//
// # Contract details
//
// Beyond the comments of [State], both implementations agree on these:
//
//   - Time left (Incr, Count) is 0 for an absent key and for a key without
//     expiry.
//   - Durations are kept to the millisecond; a positive duration below one
//     millisecond counts as one.
//   - Incr on a counter that somehow has no expiry (written by Set with no
//     TTL) gives it one of window, so a counter never sticks for ever.
//   - Set and SetNX accept ttl 0 (no expiry). A negative ttl, a window of 0
//     or less, a bucket capacity or refill rate of 0 or less, and a cost
//     below 0 or above the capacity are [ErrInvalidArgument].
//   - An absent (or expired) token bucket is full. An idle bucket expires
//     once it would be full again (plus one second, at most 30 days); a
//     sliding window expires window after its last WindowAdd. retryAfter is
//     (cost - tokens left) / refillPerSec, rounded up to the microsecond.
//   - Dropped (the [DropCounter] interface, implemented by both) counts the
//     messages lost to full subscriber buffers since the State was created.
//   - Subscribe with a context that is already done, like every other
//     method, returns an error wrapping [ErrUnavailable] and the context's
//     error; every method after Close returns [ErrClosed].
//
// # Pub/sub
//
// Publish is fire and forget: a message reaches the subscribers that exist
// when it is published. Each subscription has a buffer of [SubscriberBuffer]
// messages; a subscriber that does not keep up loses messages rather than
// blocking publishers or the connection, and every lost message is counted
// ([Memory.Dropped], [Valkey.Dropped]). Every subscriber receives its own
// copy of a message.
//
// A subscription ends, and its channel is closed, when its context ends, when
// the State is closed, or (Valkey) when the connection carrying it is lost.
// Messages published while a node was disconnected are not replayed, so a
// subscriber that must not miss any (cache invalidation) treats the closed
// channel as "something may have been missed": it drops what it caches and
// subscribes again.
//
// # Failures
//
// Errors are returned, never swallowed or retried into success, and callers
// fail closed: a rate limit or nonce check that cannot reach its state
// denies (503), it does not allow. Connection failures, timeouts and a server
// that cannot serve (loading, read-only replica, out of memory) wrap
// [ErrUnavailable]; the context's error stays in the chain too, so
// errors.Is(err, context.DeadlineExceeded) also works. A key holding another
// kind of value gives [ErrWrongType], a bad argument [ErrInvalidArgument],
// and any call after Close [ErrClosed].
package sharedstate
