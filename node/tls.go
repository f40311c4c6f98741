package node

import (
	"bufio"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"svc/config"
)

// serveTLS serves TLS (1.2 minimum, HTTP/1.1 and HTTP/2) and, on the same
// port, answers plain HTTP with a 308 redirect to https (SPEC part 8). The
// first byte of a connection tells them apart: 0x16 opens a TLS handshake.
func serveTLS(srv *http.Server, ln net.Listener, cfg *config.Config) error {
	srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	split := newSplitListener(ln)
	redirect := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The target keeps the request's own host and path: the redirect only
		// upgrades the scheme, it cannot send a client to another site.
		http.Redirect(w, r, "https://"+r.Host+r.URL.RequestURI(), http.StatusPermanentRedirect) //nolint:gosec // G710: same host, scheme upgrade only
	})}
	go func() { _ = redirect.Serve(split.plain) }()
	srv.RegisterOnShutdown(func() { _ = redirect.Close() })
	return srv.ServeTLS(split.tls, cfg.TLSCert, cfg.TLSKey)
}

type splitListener struct {
	ln         net.Listener
	tls, plain *chanListener
}

func newSplitListener(ln net.Listener) *splitListener {
	s := &splitListener{ln: ln, tls: newChanListener(ln.Addr()), plain: newChanListener(ln.Addr())}
	s.tls.onClose = func() { _ = ln.Close() }
	go s.accept()
	return s
}

func (s *splitListener) accept() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			s.tls.fail(err)
			s.plain.fail(err)
			return
		}
		go func() {
			br := bufio.NewReader(c)
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			first, err := br.Peek(1)
			_ = c.SetReadDeadline(time.Time{})
			if err != nil {
				_ = c.Close()
				return
			}
			pc := &peekedConn{Conn: c, r: br}
			if first[0] == 0x16 {
				s.tls.push(pc)
			} else {
				s.plain.push(pc)
			}
		}()
	}
}

type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (p *peekedConn) Read(b []byte) (int, error) { return p.r.Read(b) }

// chanListener is a net.Listener fed by the split listener.
type chanListener struct {
	addr  net.Addr
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
	err   error
	// onClose closes the shared socket when the TLS side is closed.
	onClose func()
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) push(c net.Conn) {
	select {
	case l.conns <- c:
	case <-l.done:
		_ = c.Close()
	}
}

func (l *chanListener) fail(err error) {
	l.once.Do(func() { l.err = err; close(l.done) })
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, l.err
	}
}

func (l *chanListener) Close() error {
	l.fail(errors.New("listener closed"))
	if l.onClose != nil {
		l.onClose()
	}
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }
