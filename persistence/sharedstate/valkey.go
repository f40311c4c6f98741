package sharedstate

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valkey-io/valkey-go"
)

// DefaultKeyPrefix is put before every key and channel name unless
// [WithKeyPrefix] says otherwise.
const DefaultKeyPrefix = "svc:"

// DefaultSubscribeTimeout bounds how long Subscribe waits for the server to
// confirm a new subscription.
const DefaultSubscribeTimeout = 5 * time.Second

// ValkeyOption configures [NewValkey].
type ValkeyOption func(*valkeyConfig)

// WithKeyPrefix puts prefix before every key and channel name, so that
// several installations (or tests) can share one server.
func WithKeyPrefix(prefix string) ValkeyOption {
	return func(c *valkeyConfig) { c.prefix = prefix }
}

// WithSubscribeTimeout bounds how long Subscribe waits for the server to
// confirm a subscription (default [DefaultSubscribeTimeout]).
func WithSubscribeTimeout(d time.Duration) ValkeyOption {
	return func(c *valkeyConfig) { c.subscribeTimeout = d }
}

type valkeyConfig struct {
	prefix           string
	subscribeTimeout time.Duration
}

// validate fills in defaults and checks the options.
func (c *valkeyConfig) validate() error {
	if c.subscribeTimeout == 0 {
		c.subscribeTimeout = DefaultSubscribeTimeout
	}
	if c.subscribeTimeout < 0 {
		return fmt.Errorf("%w: subscribe timeout %v must be positive", ErrInvalidArgument, c.subscribeTimeout)
	}
	return nil
}

// Valkey is the [State] of a cluster, kept in Valkey (or Redis 7). It is safe
// for concurrent use. See the package documentation for its guarantees.
type Valkey struct {
	client valkey.Client
	cfg    valkeyConfig

	incr      *valkey.Lua
	count     *valkey.Lua
	takeToken *valkey.Lua
	windowAdd *valkey.Lua
	cas       *valkey.Lua
	markSeen  *valkey.Lua

	dropped atomic.Uint64
	closed  atomic.Bool
	once    sync.Once

	psMu    sync.Mutex
	remotes map[string]*remote // by unprefixed channel
}

var (
	_ State       = (*Valkey)(nil)
	_ DropCounter = (*Valkey)(nil)
)

// NewValkey connects to the server at url (redis://, rediss://, valkey://,
// valkeys:// or unix://, as valkey.ParseURL reads them) and checks it
// answers within ctx. An unreachable server is [ErrUnavailable]; a URL that
// does not parse is [ErrInvalidArgument] (the error never repeats the URL,
// which may hold a password).
func NewValkey(ctx context.Context, rawURL string, opts ...ValkeyOption) (*Valkey, error) {
	cfg := valkeyConfig{prefix: DefaultKeyPrefix}
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	opt, err := valkey.ParseURL(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL
		}
		return nil, fmt.Errorf("%w: valkey url: %w", ErrInvalidArgument, err)
	}
	// Nothing here reads through a client-side cache, and not every server
	// supports the tracking it needs.
	opt.DisableCache = true
	client, err := valkey.NewClient(opt)
	if err != nil {
		return nil, fmt.Errorf("%w: connect: %w", ErrUnavailable, err)
	}
	v := &Valkey{
		client:    client,
		cfg:       cfg,
		incr:      valkey.NewLuaScript(incrScript),
		count:     valkey.NewLuaScriptReadOnly(countScript),
		takeToken: valkey.NewLuaScript(takeTokenScript),
		windowAdd: valkey.NewLuaScript(windowAddScript),
		cas:       valkey.NewLuaScript(casScript),
		markSeen:  valkey.NewLuaScript(markSeenScript),
		remotes:   make(map[string]*remote),
	}
	if err := v.Ping(ctx); err != nil {
		client.Close()
		return nil, err
	}
	return v, nil
}

func (v *Valkey) key(k string) string { return v.cfg.prefix + k }

// fail maps a client error to the package's errors, keeping the cause in
// the chain.
func (v *Valkey) fail(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, valkey.ErrClosing) && v.closed.Load() {
		return fmt.Errorf("%w: %s", ErrClosed, op)
	}
	if ve, ok := valkey.IsValkeyErr(err); ok {
		msg := ve.Error()
		switch {
		case strings.Contains(msg, "WRONGTYPE"), strings.Contains(msg, "not an integer"):
			return fmt.Errorf("%w: %s: %w", ErrWrongType, op, err)
		case ve.IsLoading(), ve.IsClusterDown(), ve.IsTryAgain(), serverCannotServe(msg):
			return fmt.Errorf("%w: %s: %w", ErrUnavailable, op, err)
		default:
			return fmt.Errorf("sharedstate: %s: %w", op, err)
		}
	}
	// Anything that is not a server reply: dial and I/O errors, timeouts,
	// a done context, a closing client.
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, op, err)
}

// serverCannotServe reports server errors that mean "not now" rather than
// "wrong request".
func serverCannotServe(msg string) bool {
	for _, p := range []string{"READONLY", "MASTERDOWN", "BUSY ", "NOREPLICAS", "OOM "} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

func (v *Valkey) check(ctx context.Context, op string) error {
	if v.closed.Load() {
		return fmt.Errorf("%w: %s", ErrClosed, op)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, op, err)
	}
	return nil
}

func ms(d time.Duration) string { return strconv.FormatInt(millis(d), 10) }

// Incr implements [State] with one script: INCR, then PEXPIRE only when the
// counter is new.
func (v *Valkey) Incr(ctx context.Context, key string, window time.Duration) (int64, time.Duration, error) {
	if err := v.check(ctx, "incr"); err != nil {
		return 0, 0, err
	}
	if err := validWindow("incr", window); err != nil {
		return 0, 0, err
	}
	res, err := v.incr.Exec(ctx, v.client, []string{v.key(key)}, []string{ms(window)}).AsIntSlice()
	if err != nil {
		return 0, 0, v.fail("incr", err)
	}
	if len(res) != 2 {
		return 0, 0, fmt.Errorf("sharedstate: incr: unexpected reply of %d values", len(res))
	}
	return res[0], time.Duration(max(res[1], 0)) * time.Millisecond, nil
}

// Count implements [State].
func (v *Valkey) Count(ctx context.Context, key string) (int64, time.Duration, error) {
	if err := v.check(ctx, "count"); err != nil {
		return 0, 0, err
	}
	arr, err := v.count.Exec(ctx, v.client, []string{v.key(key)}, nil).ToArray()
	if err != nil {
		return 0, 0, v.fail("count", err)
	}
	if len(arr) != 2 {
		return 0, 0, fmt.Errorf("sharedstate: count: unexpected reply of %d values", len(arr))
	}
	raw, err := arr[0].ToString()
	if valkey.IsValkeyNil(err) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, v.fail("count", err)
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return 0, 0, wrongType("count", key)
	}
	ttl, err := arr[1].AsInt64()
	if err != nil {
		return 0, 0, v.fail("count", err)
	}
	return n, time.Duration(max(ttl, 0)) * time.Millisecond, nil
}

// SetNX implements [State] with SET NX PX.
func (v *Valkey) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	if err := v.check(ctx, "setnx"); err != nil {
		return false, err
	}
	if err := validTTL("setnx", ttl); err != nil {
		return false, err
	}
	nx := v.client.B().Set().Key(v.key(key)).Value(value).Nx()
	var cmd valkey.Completed
	if ttl > 0 {
		cmd = nx.PxMilliseconds(millis(ttl)).Build()
	} else {
		cmd = nx.Build()
	}
	err := v.client.Do(ctx, cmd).Error()
	switch {
	case err == nil:
		return true, nil
	case valkey.IsValkeyNil(err):
		return false, nil
	default:
		return false, v.fail("setnx", err)
	}
}

// Get implements [State].
func (v *Valkey) Get(ctx context.Context, key string) (string, bool, error) {
	if err := v.check(ctx, "get"); err != nil {
		return "", false, err
	}
	s, err := v.client.Do(ctx, v.client.B().Get().Key(v.key(key)).Build()).ToString()
	switch {
	case err == nil:
		return s, true, nil
	case valkey.IsValkeyNil(err):
		return "", false, nil
	default:
		return "", false, v.fail("get", err)
	}
}

// Set implements [State].
func (v *Valkey) Set(ctx context.Context, key, value string, ttl time.Duration) error {
	if err := v.check(ctx, "set"); err != nil {
		return err
	}
	if err := validTTL("set", ttl); err != nil {
		return err
	}
	set := v.client.B().Set().Key(v.key(key)).Value(value)
	var cmd valkey.Completed
	if ttl > 0 {
		cmd = set.PxMilliseconds(millis(ttl)).Build()
	} else {
		cmd = set.Build()
	}
	return v.fail("set", v.client.Do(ctx, cmd).Error())
}

// Del implements [State].
func (v *Valkey) Del(ctx context.Context, keys ...string) error {
	if err := v.check(ctx, "del"); err != nil {
		return err
	}
	if len(keys) == 0 {
		return nil
	}
	full := make([]string, len(keys))
	for i, k := range keys {
		full[i] = v.key(k)
	}
	return v.fail("del", v.client.Do(ctx, v.client.B().Del().Key(full...).Build()).Error())
}

// TakeToken implements [State] with one script that refills on the server's
// clock.
func (v *Valkey) TakeToken(ctx context.Context, key string, capacity, refillPerSec, cost float64) (bool, time.Duration, error) {
	if err := v.check(ctx, "take token"); err != nil {
		return false, 0, err
	}
	if err := validBucket(capacity, refillPerSec, cost); err != nil {
		return false, 0, err
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	args := []string{f(capacity), f(refillPerSec), f(cost), ms(idleMargin), ms(maxIdle)}
	res, err := v.takeToken.Exec(ctx, v.client, []string{v.key(key)}, args).AsIntSlice()
	if err != nil {
		return false, 0, v.fail("take token", err)
	}
	if len(res) != 2 {
		return false, 0, fmt.Errorf("sharedstate: take token: unexpected reply of %d values", len(res))
	}
	return res[0] == 1, time.Duration(res[1]) * time.Microsecond, nil
}

// WindowAdd implements [State] with one script: ZADD, ZREMRANGEBYSCORE,
// ZCARD, PEXPIRE. Scores are Unix microseconds of the caller's at.
func (v *Valkey) WindowAdd(ctx context.Context, key, member string, at time.Time, window time.Duration) (int64, error) {
	if err := v.check(ctx, "window add"); err != nil {
		return 0, err
	}
	if err := validWindow("window add", window); err != nil {
		return 0, err
	}
	score := at.UnixMicro()
	args := []string{
		strconv.FormatInt(score, 10),
		member,
		strconv.FormatInt(score-window.Microseconds(), 10),
		ms(window),
	}
	n, err := v.windowAdd.Exec(ctx, v.client, []string{v.key(key)}, args).AsInt64()
	if err != nil {
		return 0, v.fail("window add", err)
	}
	return n, nil
}

// CompareAndSwap implements [State] with one script: GET, compare, SET.
func (v *Valkey) CompareAndSwap(ctx context.Context, key, old, value string, ttl time.Duration) (bool, string, error) {
	if err := v.check(ctx, "compare and swap"); err != nil {
		return false, "", err
	}
	if err := validSwap(value, ttl); err != nil {
		return false, "", err
	}
	res, err := v.cas.Exec(ctx, v.client, []string{v.key(key)}, []string{old, value, ms(ttl)}).ToArray()
	if err != nil {
		return false, "", v.fail("compare and swap", err)
	}
	if len(res) != 2 {
		return false, "", fmt.Errorf("sharedstate: compare and swap: unexpected reply of %d values", len(res))
	}
	swapped, err := res[0].AsInt64()
	if err != nil {
		return false, "", v.fail("compare and swap", err)
	}
	cur, err := res[1].ToString()
	if err != nil {
		return false, "", v.fail("compare and swap", err)
	}
	return swapped == 1, cur, nil
}

// MarkSeen implements [State] with one script over a sorted set: ZADD GT,
// ZREMRANGEBYRANK over the limit, PEXPIRE.
func (v *Valkey) MarkSeen(ctx context.Context, key, member string, at time.Time, limit int, ttl time.Duration) (bool, error) {
	if err := v.check(ctx, "mark seen"); err != nil {
		return false, err
	}
	if err := validSeen(limit, ttl); err != nil {
		return false, err
	}
	args := []string{strconv.FormatInt(at.UnixMicro(), 10), member, strconv.Itoa(limit), ms(ttl)}
	n, err := v.markSeen.Exec(ctx, v.client, []string{v.key(key)}, args).AsInt64()
	if err != nil {
		return false, v.fail("mark seen", err)
	}
	return n == 1, nil
}

// Seen implements [State] with ZRANGE REV (score, then member, both
// descending).
func (v *Valkey) Seen(ctx context.Context, key string) ([]string, error) {
	if err := v.check(ctx, "seen"); err != nil {
		return nil, err
	}
	cmd := v.client.B().Zrange().Key(v.key(key)).Min("0").Max("-1").Rev().Build()
	out, err := v.client.Do(ctx, cmd).AsStrSlice()
	if err != nil {
		return nil, v.fail("seen", err)
	}
	return out, nil
}

// Publish implements [State] with PUBLISH.
func (v *Valkey) Publish(ctx context.Context, channel string, msg []byte) error {
	if err := v.check(ctx, "publish"); err != nil {
		return err
	}
	cmd := v.client.B().Publish().Channel(v.key(channel)).Message(valkey.BinaryString(msg)).Build()
	return v.fail("publish", v.client.Do(ctx, cmd).Error())
}

// Ping implements [State].
func (v *Valkey) Ping(ctx context.Context) error {
	if err := v.check(ctx, "ping"); err != nil {
		return err
	}
	return v.fail("ping", v.client.Do(ctx, v.client.B().Ping().Build()).Error())
}

// Backend implements [State].
func (v *Valkey) Backend() string { return "valkey" }

// Dropped returns how many messages were dropped because a local
// subscriber's buffer was full (see [DropCounter]).
func (v *Valkey) Dropped() uint64 { return v.dropped.Load() }

// Close ends every subscription, then closes the client. Later calls return
// [ErrClosed]. Close is idempotent.
func (v *Valkey) Close() error {
	v.once.Do(func() {
		v.closed.Store(true)
		v.psMu.Lock()
		rs := make([]*remote, 0, len(v.remotes))
		for _, r := range v.remotes {
			r.stopping = true
			r.cancel()
			rs = append(rs, r)
		}
		v.psMu.Unlock()
		deadline := time.NewTimer(2 * time.Second)
		defer deadline.Stop()
	wait:
		for _, r := range rs {
			select {
			case <-r.done:
			case <-deadline.C:
				break wait // client.Close ends what is left
			}
		}
		v.client.Close()
		for _, r := range rs {
			<-r.done
		}
	})
	return nil
}
