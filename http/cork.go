package httpapi

import (
	"bufio"
	"net"
	"net/http"
	"sync"
)

// corkMax bounds what a corked connection holds before it writes anyway.
const corkMax = 64 << 10

// corkConn is a hijacked connection that can hold its writes back (like
// TCP_CORK, in user space): while corked, Write appends to a buffer; Uncork
// writes the buffer in one system call. The live feed corks while it
// writes the frames already queued for a subscriber, so a burst of N
// frames costs one write instead of N: at thousands of events a second and
// several subscribers, the per-frame write was the feed's largest cost.
// Writes from other goroutines (the WebSocket library's pongs and close
// frames) go through the same lock, in order.
type corkConn struct {
	net.Conn
	mu     sync.Mutex
	corked bool
	buf    []byte
}

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked && len(c.buf)+len(p) <= corkMax {
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	if err := c.flushLocked(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

// Cork holds writes back until Uncork.
func (c *corkConn) Cork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// Uncork writes what was held back and lets writes through again.
func (c *corkConn) Uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	return c.flushLocked()
}

func (c *corkConn) flushLocked() error {
	if len(c.buf) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.buf)
	c.buf = c.buf[:0]
	return err
}

// corkingWriter hands a hijacker (the WebSocket library) a corkConn instead
// of the raw connection. conn is set once Hijack has run.
type corkingWriter struct {
	http.ResponseWriter
	conn *corkConn
}

func (w *corkingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	if brw.Writer.Buffered() > 0 { // nothing is expected here; keep order if there is
		if err := brw.Flush(); err != nil {
			_ = nc.Close()
			return nil, nil, err
		}
	}
	w.conn = &corkConn{Conn: nc}
	return w.conn, bufio.NewReadWriter(brw.Reader, bufio.NewWriterSize(w.conn, brw.Writer.Size())), nil
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *corkingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
