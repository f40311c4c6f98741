package main

import (
	"bufio"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// Settings observed by their effect on a running gateway, each with a value
// whose effect the default would not have (config.TestEverySettingTakesEffect
// names the test observing every setting). Small windows of one second keep
// the waits short; each wait is bounded and polled, except where polling
// would itself keep a window full.

// TestE2ESettingsLimits: the lockout, quota and approval limits, the
// bootstrap tenant, the node's name and the pool's size, on one node.
func TestE2ESettingsLimits(t *testing.T) {
	t.Parallel()
	boot := "boot-" + uniq()
	s := startServer(t, "sqlite", map[string]string{
		"SVC_BOOTSTRAP_TENANT": boot, "SVC_NODE_ID": "node-settings",
		"SVC_AUTH_FAILURE_LIMIT": "2", "SVC_AUTH_FAILURE_WINDOW_SECS": "1",
		"SVC_QUOTA_LIMIT": "1", "SVC_QUOTA_WINDOW_SECS": "1",
		"SVC_APPROVAL_CALLBACK_IP_LIMIT": "2",
		"SVC_DB_MAX_CONNECTIONS":         "3",
	})

	t.Run("SVC_BOOTSTRAP_TENANT: the tenant and its token printed once", func(t *testing.T) {
		var tok string
		checkFor(t, 5*time.Second, "the bootstrap token on stdout", func() bool {
			tok = regexp.MustCompile(`svc_op_[A-Za-z0-9_-]{20,}`).FindString(s.stdout.String())
			return tok != ""
		})
		if !strings.Contains(s.stdout.String(), fmt.Sprintf("Bootstrapped tenant %q", boot)) {
			t.Errorf("stdout does not name tenant %s: %s", boot, s.stdout.String())
		}
		who := obj(t, s.want(t, 200, "GET", "/v2/whoami", tok, nil))
		if fmt.Sprint(who["role"]) != "admin" {
			t.Errorf("the bootstrap token: %v", who)
		}
	})

	t.Run("SVC_NODE_ID names the node", func(t *testing.T) {
		if id := obj(t, s.want(t, 200, "GET", "/readyz", "", nil))["node_id"]; id != "node-settings" {
			t.Errorf("/readyz node_id %v", id)
		}
	})

	t.Run("SVC_DB_MAX_CONNECTIONS sizes the pool without SVC_DB_POOL_SIZE", func(t *testing.T) {
		// SQLite: three read connections and the writer.
		if v := metricValue(t, s, "db_pool_connections_max"); v != 4 {
			t.Errorf("db_pool_connections_max = %v, want 3 readers and the writer", v)
		}
	})

	tenantID, admin := s.tenant(t, "settings-"+uniq())
	_, tok := s.agent(t, admin, "limited", nil)

	t.Run("SVC_AUTH_FAILURE_LIMIT and _WINDOW_SECS: locked after 2, free again after 1 s", func(t *testing.T) {
		bad := "svc_agent_" + strings.Repeat("Z", 43)
		for i := range 2 {
			if resp, raw := s.do(t, "POST", "/v2/authorize", bad, azRead(nil), "X-Svc-Tenant-ID", tenantID); resp.StatusCode != 401 {
				t.Fatalf("bad token %d: %d %s", i+1, resp.StatusCode, raw)
			}
		}
		resp, raw := s.do(t, "POST", "/v2/authorize", bad, azRead(nil), "X-Svc-Tenant-ID", tenantID)
		azRetryAfter(t, resp, raw, "auth_locked")
		checkFor(t, 5*time.Second, "the lockout to end with its window", func() bool {
			resp, _ := s.do(t, "POST", "/v2/authorize", bad, azRead(nil), "X-Svc-Tenant-ID", tenantID)
			return resp.StatusCode == 401
		})
	})

	t.Run("SVC_QUOTA_LIMIT and _WINDOW_SECS: one call per second", func(t *testing.T) {
		azWant(t, s, tok, azRead(nil), 200)
		resp, _, raw := azPost(t, s, tok, azRead(nil))
		azRetryAfter(t, resp, raw, "quota_exceeded")
		checkFor(t, 5*time.Second, "the quota's next window", func() bool {
			resp, _, _ := azPost(t, s, tok, azRead(nil))
			return resp.StatusCode == 200
		})
	})

	t.Run("SVC_APPROVAL_CALLBACK_IP_LIMIT: the third approve from one address is refused", func(t *testing.T) {
		for i := range 2 {
			if resp, raw := s.do(t, "POST", "/v2/approvals/"+randomUUID()+"/approve", admin, map[string]any{"approver_user_id": "x"}); resp.StatusCode != 404 {
				t.Fatalf("approve %d: %d %s", i+1, resp.StatusCode, raw)
			}
		}
		resp, raw := s.do(t, "POST", "/v2/approvals/"+randomUUID()+"/approve", admin, map[string]any{"approver_user_id": "x"})
		azRetryAfter(t, resp, raw, "approval_ip_limited")
	})
}

// TestE2ESettingsWindows: the rate limit's refill, the replay window and
// the approval attempt window, on one node.
func TestE2ESettingsWindows(t *testing.T) {
	t.Parallel()
	s := startServer(t, "sqlite", map[string]string{
		"SVC_RATE_LIMIT_CAPACITY": "1", "SVC_RATE_LIMIT_REFILL_RATE": "4",
		"SVC_REPLAY_WINDOW_SECS":     "1",
		"SVC_APPROVAL_ATTEMPT_LIMIT": "1", "SVC_APPROVAL_ATTEMPT_WINDOW_SECS": "1",
	})
	_, admin := s.tenant(t, "windows-"+uniq())
	_, tok := s.agent(t, admin, "windowed", nil)
	// untilServed retries a call refused by the rate limit (a bucket of
	// one) until its token has refilled.
	untilServed := func(body map[string]any) map[string]any {
		t.Helper()
		var m map[string]any
		checkFor(t, 5*time.Second, "a rate token", func() bool {
			resp, got, _ := azPost(t, s, tok, body)
			m = got
			return resp.StatusCode == 200
		})
		return m
	}

	t.Run("SVC_RATE_LIMIT_REFILL_RATE: a bucket of one refills within a second", func(t *testing.T) {
		untilServed(azRead(nil))
		resp, _, raw := azPost(t, s, tok, azRead(nil))
		azRetryAfter(t, resp, raw, "rate_limited")
		start := time.Now()
		untilServed(azRead(nil))
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("the token came back after %v at 4 per second", d)
		}
	})

	t.Run("SVC_REPLAY_WINDOW_SECS: a nonce is a replay for one second", func(t *testing.T) {
		nonce := "n-" + uniq()
		if m := untilServed(azRead(map[string]any{"nonce": nonce})); m["decision"] != "allow" {
			t.Fatalf("first use: %v", m)
		}
		if m := untilServed(azRead(map[string]any{"nonce": nonce})); m["decision"] != "deny" || m["reason"] != "replay_nonce_reused" {
			t.Fatalf("reused at once: %v", m)
		}
		checkFor(t, 6*time.Second, "the nonce to leave its window", func() bool {
			return untilServed(azRead(map[string]any{"nonce": nonce}))["decision"] == "allow"
		})
	})

	t.Run("SVC_APPROVAL_ATTEMPT_WINDOW_SECS: failed attempts are forgotten after a second", func(t *testing.T) {
		id := randomUUID()
		apDecide(t, s, admin, id, "approve", 404, map[string]any{"approver_user_id": "x"})
		resp, raw := s.do(t, "POST", "/v2/approvals/"+id+"/approve", admin, map[string]any{"approver_user_id": "x"})
		azRetryAfter(t, resp, raw, "approval_attempts_exceeded")
		// Every refused attempt counts too (and would keep the window
		// full): wait the window out once, then one attempt.
		time.Sleep(1500 * time.Millisecond)
		apDecide(t, s, admin, id, "approve", 404, map[string]any{"approver_user_id": "x"})
	})
}

// TestE2ESettingsTimeouts: the header and body read timeouts of one
// second end a connection that sends neither within about a second (the
// defaults wait ten), and SVC_SHUTDOWN_TIMEOUT_SECS bounds a shutdown
// that a request still in flight would otherwise hold.
func TestE2ESettingsTimeouts(t *testing.T) {
	t.Parallel()
	t.Run("SVC_HEADER_READ_TIMEOUT_SECS and SVC_BODY_READ_TIMEOUT_SECS", func(t *testing.T) {
		s := startServer(t, "sqlite", map[string]string{"SVC_HEADER_READ_TIMEOUT_SECS": "1", "SVC_BODY_READ_TIMEOUT_SECS": "1"})
		_, admin := s.tenant(t, "timeouts-"+uniq())
		_, tok := s.agent(t, admin, "slow", nil)
		u, _ := url.Parse(s.base)
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
		line := slowBody(t, s.base, "127.0.0.1", tok, &started)
		if d := time.Since(start); d > 4*time.Second || !strings.Contains(line, "408") {
			t.Errorf("an unfinished body: %q after %v with a 1 s body timeout", line, d)
		}
	})

	t.Run("SVC_SHUTDOWN_TIMEOUT_SECS", func(t *testing.T) {
		s := startProcessOn(t, dbURLFor(t, "sqlite"), map[string]string{"SVC_SHUTDOWN_TIMEOUT_SECS": "1", "SVC_BODY_READ_TIMEOUT_SECS": "60"})
		_, admin := s.tenant(t, "shutdown-"+uniq())
		_, tok := s.agent(t, admin, "held", nil)
		var started sync.WaitGroup
		started.Add(1)
		go slowBody(t, s.base, "127.0.0.1", tok, &started) // holds a request for up to 60 s
		started.Wait()
		time.Sleep(200 * time.Millisecond) // its headers are read
		code, took := s.stop(t)
		t.Logf("shutdown with a request in flight: exit %d after %v", code, took)
		if took > 5*time.Second {
			t.Errorf("shutdown took %v with SVC_SHUTDOWN_TIMEOUT_SECS=1 (the default is 20)", took)
		}
	})
}
