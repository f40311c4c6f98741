package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// The raw client speaks just enough HTTP/1.1 keep-alive to send prepared
// requests (request line, headers and body serialized once, up front) and
// read the answers. On this 2-core machine the load generator shares the CPU
// with the server it measures; net/http's client spends several times more
// CPU per request than this, CPU the server then does not have. Both
// targets get the same client, and -client std switches to net/http.

// rawTarget is the endpoint of the raw client.
type rawTarget struct {
	addr    string // host:port
	host    string // the Host header
	path    string
	timeout time.Duration
}

func newRawTarget(endpoint string, timeout time.Duration) (*rawTarget, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" {
		return nil, fmt.Errorf("-client raw supports http:// only (got %q); use -client std", u.Scheme)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	path := u.EscapedPath()
	if u.RawQuery != "" {
		path += "?" + u.RawQuery
	}
	return &rawTarget{addr: addr, host: u.Host, path: path, timeout: timeout}, nil
}

// serialize returns the whole request: request line, headers, body.
func (t *rawTarget) serialize(token string, body []byte) []byte {
	var b bytes.Buffer
	b.WriteString("POST " + t.path + " HTTP/1.1\r\nHost: " + t.host + "\r\nContent-Type: application/json\r\n")
	if token != "" {
		b.WriteString("Authorization: Bearer " + token + "\r\n")
	}
	b.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n")
	b.Write(body)
	return b.Bytes()
}

// rawConn is one keep-alive connection.
type rawConn struct {
	c   net.Conn
	br  *bufio.Reader
	buf []byte
}

func (t *rawTarget) dial() (*rawConn, error) {
	c, err := net.DialTimeout("tcp", t.addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	return &rawConn{c: c, br: bufio.NewReaderSize(c, 16<<10)}, nil
}

var errProtocol = errors.New("malformed HTTP response")

// roundTrip writes one prepared request and reads the answer. The body is
// valid until the next call. keep is false when the connection must not be
// reused (the server said close, or anything failed).
func (rc *rawConn) roundTrip(t *rawTarget, req []byte) (status int, body []byte, keep bool, err error) {
	if err := rc.c.SetDeadline(time.Now().Add(t.timeout)); err != nil {
		return 0, nil, false, err
	}
	if _, err := rc.c.Write(req); err != nil {
		return 0, nil, false, err
	}
	line, err := rc.br.ReadSlice('\n')
	if err != nil {
		return 0, nil, false, err
	}
	// "HTTP/1.1 200 OK\r\n"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, nil, false, errProtocol
	}
	status, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, nil, false, errProtocol
	}
	length, chunked, keep := -1, false, true
	for {
		h, err := rc.br.ReadSlice('\n')
		if err != nil {
			return 0, nil, false, err
		}
		h = bytes.TrimRight(h, "\r\n")
		if len(h) == 0 {
			break
		}
		name, value, ok := bytes.Cut(h, []byte(":"))
		if !ok {
			return 0, nil, false, errProtocol
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil || length < 0 {
				return 0, nil, false, errProtocol
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			if bytes.EqualFold(value, []byte("close")) {
				keep = false
			}
		}
	}
	rc.buf = rc.buf[:0]
	switch {
	case chunked:
		for {
			sl, err := rc.br.ReadSlice('\n')
			if err != nil {
				return 0, nil, false, err
			}
			sl = bytes.TrimRight(sl, "\r\n")
			if i := bytes.IndexByte(sl, ';'); i >= 0 {
				sl = sl[:i]
			}
			n, err := strconv.ParseInt(string(sl), 16, 32)
			if err != nil || n < 0 {
				return 0, nil, false, errProtocol
			}
			if n == 0 {
				for { // trailers, up to the empty line
					tl, err := rc.br.ReadSlice('\n')
					if err != nil {
						return 0, nil, false, err
					}
					if len(bytes.TrimRight(tl, "\r\n")) == 0 {
						break
					}
				}
				break
			}
			if rc.buf, err = readN(rc.br, rc.buf, int(n)+2); err != nil {
				return 0, nil, false, err
			}
			rc.buf = rc.buf[:len(rc.buf)-2]
		}
	case length >= 0:
		if rc.buf, err = readN(rc.br, rc.buf, length); err != nil {
			return 0, nil, false, err
		}
	default:
		// No length: the body runs to the end of the connection.
		b, err := io.ReadAll(rc.br)
		if err != nil {
			return 0, nil, false, err
		}
		rc.buf, keep = append(rc.buf, b...), false
	}
	return status, rc.buf, keep, nil
}

// readN appends exactly n bytes from r to buf.
func readN(r io.Reader, buf []byte, n int) ([]byte, error) {
	start := len(buf)
	if cap(buf)-start < n {
		nb := make([]byte, start, start+n)
		copy(nb, buf)
		buf = nb
	}
	buf = buf[:start+n]
	_, err := io.ReadFull(r, buf[start:])
	return buf, err
}

func (rc *rawConn) close() { _ = rc.c.Close() }

// rawPool hands out idle connections (open loop: any goroutine may send).
type rawPool struct {
	t    *rawTarget
	mu   sync.Mutex
	idle []*rawConn
}

func (p *rawPool) get() (*rawConn, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		c := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return c, nil
	}
	p.mu.Unlock()
	return p.t.dial()
}

func (p *rawPool) put(c *rawConn) {
	p.mu.Lock()
	p.idle = append(p.idle, c)
	p.mu.Unlock()
}

func (p *rawPool) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.idle {
		c.close()
	}
	p.idle = nil
}
