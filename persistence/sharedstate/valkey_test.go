package sharedstate_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"svc/persistence/sharedstate"
	"svc/testkit"
)

// tcpProxy forwards connections to target until cut, so a test can take the
// server away from a client and give it back.
type tcpProxy struct {
	t      *testing.T
	addr   string
	target string

	mu    sync.Mutex
	ln    net.Listener
	conns []net.Conn
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	p := &tcpProxy{t: t, target: target}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.cut)
	return p
}

// restore listens again on the same address.
func (p *tcpProxy) restore() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.serve(ln)
}

func (p *tcpProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
}

// cut closes the listener and every forwarded connection.
func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestValkeyConnectionLost takes the server away from a Valkey State: calls
// fail with ErrUnavailable (never succeed by default), subscriptions end so
// that subscribers learn they may have missed messages, and everything works
// again once the server is back.
func TestValkeyConnectionLost(t *testing.T) {
	raw := valkeyURL(t)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	p := newTCPProxy(t, u.Host)
	viaProxy := *u
	viaProxy.Host = p.addr

	prefix := "svctest:" + randHex(t) + ":"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := sharedstate.NewValkey(ctx, viaProxy.String(),
		sharedstate.WithKeyPrefix(prefix), sharedstate.WithSubscribeTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Close()
		deletePrefix(t, raw, prefix)
	})

	ch, err := s.Subscribe(ctx, "invalidate")
	must(t, err)
	must(t, s.Publish(ctx, "invalidate", []byte("before")))
	if m := recv(t, ch, 2*time.Second); string(m) != "before" {
		t.Fatalf("got %q", m)
	}

	p.cut()
	waitClosed(t, ch, 3*time.Second)

	short := func() context.Context {
		c, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		t.Cleanup(cancel)
		return c
	}
	if _, _, err := s.Incr(short(), "c", time.Minute); !errors.Is(err, sharedstate.ErrUnavailable) {
		t.Fatalf("Incr while cut = %v, want ErrUnavailable", err)
	}
	if ok, err := s.SetNX(short(), "nonce", "v", time.Minute); ok || !errors.Is(err, sharedstate.ErrUnavailable) {
		t.Fatalf("SetNX while cut = %v, %v; want false, ErrUnavailable", ok, err)
	}
	if ok, _, err := s.TakeToken(short(), "b", 10, 1, 1); ok || !errors.Is(err, sharedstate.ErrUnavailable) {
		t.Fatalf("TakeToken while cut = %v, %v; want false, ErrUnavailable", ok, err)
	}
	if err := s.Ping(short()); !errors.Is(err, sharedstate.ErrUnavailable) {
		t.Fatalf("Ping while cut = %v, want ErrUnavailable", err)
	}
	start := time.Now()
	if _, err := s.Subscribe(ctx, "invalidate"); !errors.Is(err, sharedstate.ErrUnavailable) {
		t.Fatalf("Subscribe while cut = %v, want ErrUnavailable", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Subscribe while cut took %v", took)
	}

	p.restore()
	testkit.Eventually(t, 10*time.Second, "server reachable again", func() bool {
		return s.Ping(short()) == nil
	})
	ch, err = s.Subscribe(ctx, "invalidate")
	must(t, err)
	must(t, s.Publish(ctx, "invalidate", []byte("after")))
	if m := recv(t, ch, 2*time.Second); string(m) != "after" {
		t.Fatalf("got %q", m)
	}
	n, _, err := s.Incr(ctx, "c", time.Minute)
	must(t, err)
	if n != 1 {
		t.Fatalf("Incr after restore = %d, want 1 (the failed calls did not count)", n)
	}
}

// TestValkeyOneServerSubscriptionPerChannel: a node holds one server
// subscription per channel whatever its number of local subscribers, and
// gives it up when the last one leaves.
func TestValkeyOneServerSubscriptionPerChannel(t *testing.T) {
	raw := valkeyURL(t)
	prefix := "svctest:" + randHex(t) + ":"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := sharedstate.NewValkey(ctx, raw, sharedstate.WithKeyPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Close()
		deletePrefix(t, raw, prefix)
	})
	opt, err := valkey.ParseURL(raw)
	must(t, err)
	opt.DisableCache = true
	admin, err := valkey.NewClient(opt)
	must(t, err)
	defer admin.Close()
	numsub := func() int64 {
		m, err := admin.Do(ctx, admin.B().PubsubNumsub().Channel(prefix+"feed").Build()).AsIntMap()
		must(t, err)
		return m[prefix+"feed"]
	}

	var cancels []context.CancelFunc
	var chans []<-chan []byte
	for range 5 {
		sctx, cancel := context.WithCancel(ctx)
		ch, err := s.Subscribe(sctx, "feed")
		must(t, err)
		cancels = append(cancels, cancel)
		chans = append(chans, ch)
	}
	if n := numsub(); n != 1 {
		t.Fatalf("server subscriptions with 5 local subscribers = %d, want 1", n)
	}
	for i, cancel := range cancels {
		cancel()
		waitClosed(t, chans[i], 2*time.Second)
	}
	testkit.Eventually(t, 2*time.Second, "server subscription given up", func() bool { return numsub() == 0 })
}
