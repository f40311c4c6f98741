package process

import (
	"bufio"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/testkit"
	"svc/testkit/gateway"
)

// TestE2ESettingsTimeouts: the header and body read timeouts of one
// second end a connection that sends neither within about a second (the
// defaults wait ten), and SVC_SHUTDOWN_TIMEOUT_SECS bounds a shutdown
// that a request still in flight would otherwise hold.
func TestE2ESettingsTimeouts(t *testing.T) {
	t.Parallel()
	t.Run("SVC_HEADER_READ_TIMEOUT_SECS and SVC_BODY_READ_TIMEOUT_SECS", func(t *testing.T) {
		s := gateway.StartProcess(t, "sqlite", map[string]string{"SVC_HEADER_READ_TIMEOUT_SECS": "1", "SVC_BODY_READ_TIMEOUT_SECS": "1"})
		_, admin := s.Tenant(t, "timeouts-"+testkit.Uniq())
		_, tok := s.Agent(t, admin, "slow", nil)
		u, _ := url.Parse(s.Base)
		conn, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close() }()
		start := time.Now()
		_, _ = fmt.Fprintf(conn, "GET /livez HTTP/1.1\r\nHost: %s\r\n", u.Host) // the header block never ends
		_ = conn.SetReadDeadline(time.Now().Add(8 * time.Second))
		_, _ = bufio.NewReader(conn).ReadString('\n')
		if d := time.Since(start); d > 4*time.Second {
			t.Errorf("an unfinished header block was held %v with a 1 s header timeout", d)
		}
		var started sync.WaitGroup
		started.Add(1)
		start = time.Now()
		line := gateway.SlowBody(t, s.Base, "127.0.0.1", tok, &started)
		if d := time.Since(start); d > 4*time.Second || !strings.Contains(line, "408") {
			t.Errorf("an unfinished body: %q after %v with a 1 s body timeout", line, d)
		}
	})

	t.Run("SVC_SHUTDOWN_TIMEOUT_SECS", func(t *testing.T) {
		s := gateway.StartProcessOn(t, gateway.DBURLFor(t, "sqlite"), map[string]string{"SVC_SHUTDOWN_TIMEOUT_SECS": "1", "SVC_BODY_READ_TIMEOUT_SECS": "60"})
		_, admin := s.Tenant(t, "shutdown-"+testkit.Uniq())
		_, tok := s.Agent(t, admin, "held", nil)
		var started sync.WaitGroup
		started.Add(1)
		go gateway.SlowBody(t, s.Base, "127.0.0.1", tok, &started) // holds a request for up to 60 s
		started.Wait()
		time.Sleep(200 * time.Millisecond) // its headers are read
		code, took := s.Stop(t)
		t.Logf("shutdown with a request in flight: exit %d after %v", code, took)
		if took > 5*time.Second {
			t.Errorf("shutdown took %v with SVC_SHUTDOWN_TIMEOUT_SECS=1 (the default is 20)", took)
		}
	})
}
