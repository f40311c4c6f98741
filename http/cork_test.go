package httpapi

import (
	"bytes"
	"errors"
	"net"
	"strings"
	"testing"
)

// recordConn is a net.Conn that records each Write call.
type recordConn struct {
	net.Conn
	writes [][]byte
	err    error
}

func (c *recordConn) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	c.writes = append(c.writes, bytes.Clone(p))
	return len(p), nil
}

func TestCorkConn(t *testing.T) {
	rec := &recordConn{}
	c := &corkConn{Conn: rec}

	if _, err := c.Write([]byte("a")); err != nil || len(rec.writes) != 1 {
		t.Fatalf("uncorked write: err %v, %d writes, want 1", err, len(rec.writes))
	}
	c.Cork()
	for _, s := range []string{"b", "cc", "ddd"} {
		if n, err := c.Write([]byte(s)); err != nil || n != len(s) {
			t.Fatalf("corked write %q: n %d err %v", s, n, err)
		}
	}
	if len(rec.writes) != 1 {
		t.Fatalf("corked writes reached the connection: %d writes", len(rec.writes))
	}
	if err := c.Uncork(); err != nil {
		t.Fatal(err)
	}
	if len(rec.writes) != 2 || string(rec.writes[1]) != "bccddd" {
		t.Fatalf("uncork wrote %q, want one write of bccddd", rec.writes[1:])
	}
	if err := c.Uncork(); err != nil || len(rec.writes) != 2 {
		t.Fatalf("an empty uncork wrote: %d writes, err %v", len(rec.writes), err)
	}

	// Past corkMax the held bytes go first, then the new ones.
	c.Cork()
	big := strings.Repeat("x", corkMax)
	_, _ = c.Write([]byte("head"))
	if _, err := c.Write([]byte(big)); err != nil {
		t.Fatal(err)
	}
	if len(rec.writes) != 4 || string(rec.writes[2]) != "head" || len(rec.writes[3]) != corkMax {
		t.Fatalf("overflow: %d writes", len(rec.writes))
	}
	_ = c.Uncork()

	// A failing connection reports its error at Uncork.
	rec.err = errors.New("broken pipe")
	c.Cork()
	if _, err := c.Write([]byte("lost")); err != nil {
		t.Fatalf("corked write failed early: %v", err)
	}
	if err := c.Uncork(); !errors.Is(err, rec.err) {
		t.Fatalf("Uncork = %v, want the connection's error", err)
	}
}
