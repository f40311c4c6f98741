package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"svc/testkit"
	"svc/testkit/gateway"
)

// TestE2ESettingsLimits: the lockout, quota and approval limits, the
// bootstrap tenant, the node's name and the pool's size, on one node.
func TestE2ESettingsLimits(t *testing.T) {
	t.Parallel()
	boot := "boot-" + testkit.Uniq()
	s := gateway.Start(t, "sqlite", map[string]string{
		"SVC_BOOTSTRAP_TENANT": boot, "SVC_NODE_ID": "node-settings",
		"SVC_AUTH_FAILURE_LIMIT": "2", "SVC_AUTH_FAILURE_WINDOW_SECS": "1",
		"SVC_QUOTA_LIMIT": "1", "SVC_QUOTA_WINDOW_SECS": "1",
		"SVC_APPROVAL_CALLBACK_IP_LIMIT": "2",
		"SVC_DB_MAX_CONNECTIONS":         "3",
	})

	t.Run("SVC_BOOTSTRAP_TENANT: the tenant and its token printed once", func(t *testing.T) {
		var tok string
		testkit.Eventually(t, 5*time.Second, "the bootstrap token on stdout", func() bool {
			tok = regexp.MustCompile(`svc_op_[A-Za-z0-9_-]{20,}`).FindString(s.Stdout.String())
			return tok != ""
		})
		if !strings.Contains(s.Stdout.String(), fmt.Sprintf("Bootstrapped tenant %q", boot)) {
			t.Errorf("stdout does not name tenant %s: %s", boot, s.Stdout.String())
		}
		who := testkit.Obj(t, s.Want(t, 200, "GET", "/v2/whoami", tok, nil))
		if fmt.Sprint(who["role"]) != "admin" {
			t.Errorf("the bootstrap token: %v", who)
		}
	})

	t.Run("SVC_NODE_ID names the node", func(t *testing.T) {
		if id := testkit.Obj(t, s.Want(t, 200, "GET", "/readyz", "", nil))["node_id"]; id != "node-settings" {
			t.Errorf("/readyz node_id %v", id)
		}
	})

	t.Run("SVC_DB_MAX_CONNECTIONS sizes the pool without SVC_DB_POOL_SIZE", func(t *testing.T) {
		// SQLite: three read connections and the writer.
		if v := gateway.MetricValue(t, s, "db_pool_connections_max"); v != 4 {
			t.Errorf("db_pool_connections_max = %v, want 3 readers and the writer", v)
		}
	})

	tenantID, admin := s.Tenant(t, "settings-"+testkit.Uniq())
	_, tok := s.Agent(t, admin, "limited", nil)

	t.Run("SVC_AUTH_FAILURE_LIMIT and _WINDOW_SECS: locked after 2, free again after 1 s", func(t *testing.T) {
		bad := "svc_agent_" + strings.Repeat("Z", 43)
		for i := range 2 {
			if resp, raw := s.Do(t, "POST", "/v2/authorize", bad, gateway.AzRead(nil), "X-Svc-Tenant-ID", tenantID); resp.StatusCode != 401 {
				t.Fatalf("bad token %d: %d %s", i+1, resp.StatusCode, raw)
			}
		}
		resp, raw := s.Do(t, "POST", "/v2/authorize", bad, gateway.AzRead(nil), "X-Svc-Tenant-ID", tenantID)
		azRetryAfter(t, resp, raw, "auth_locked")
		testkit.Eventually(t, 5*time.Second, "the lockout to end with its window", func() bool {
			resp, _ := s.Do(t, "POST", "/v2/authorize", bad, gateway.AzRead(nil), "X-Svc-Tenant-ID", tenantID)
			return resp.StatusCode == 401
		})
	})

	t.Run("SVC_QUOTA_LIMIT and _WINDOW_SECS: one call per second", func(t *testing.T) {
		gateway.AzWant(t, s, tok, gateway.AzRead(nil), 200)
		resp, _, raw := gateway.AzPost(t, s, tok, gateway.AzRead(nil))
		azRetryAfter(t, resp, raw, "quota_exceeded")
		testkit.Eventually(t, 5*time.Second, "the quota's next window", func() bool {
			resp, _, _ := gateway.AzPost(t, s, tok, gateway.AzRead(nil))
			return resp.StatusCode == 200
		})
	})

	t.Run("SVC_APPROVAL_CALLBACK_IP_LIMIT: the third approve from one address is refused", func(t *testing.T) {
		for i := range 2 {
			if resp, raw := s.Do(t, "POST", "/v2/approvals/"+testkit.RandomUUID()+"/approve", admin, map[string]any{"approver_user_id": "x"}); resp.StatusCode != 404 {
				t.Fatalf("approve %d: %d %s", i+1, resp.StatusCode, raw)
			}
		}
		resp, raw := s.Do(t, "POST", "/v2/approvals/"+testkit.RandomUUID()+"/approve", admin, map[string]any{"approver_user_id": "x"})
		azRetryAfter(t, resp, raw, "approval_ip_limited")
	})
}

// TestE2ESettingsWindows: the rate limit's refill, the replay window and
// the approval attempt window, on one node.
func TestE2ESettingsWindows(t *testing.T) {
	t.Parallel()
	s := gateway.Start(t, "sqlite", map[string]string{
		"SVC_RATE_LIMIT_CAPACITY": "1", "SVC_RATE_LIMIT_REFILL_RATE": "4",
		"SVC_REPLAY_WINDOW_SECS":     "1",
		"SVC_APPROVAL_ATTEMPT_LIMIT": "1", "SVC_APPROVAL_ATTEMPT_WINDOW_SECS": "1",
	})
	_, admin := s.Tenant(t, "windows-"+testkit.Uniq())
	_, tok := s.Agent(t, admin, "windowed", nil)
	// untilServed retries a call refused by the rate limit (a bucket of
	// one) until its token has refilled.
	untilServed := func(body map[string]any) map[string]any {
		t.Helper()
		var m map[string]any
		testkit.Eventually(t, 5*time.Second, "a rate token", func() bool {
			resp, got, _ := gateway.AzPost(t, s, tok, body)
			m = got
			return resp.StatusCode == 200
		})
		return m
	}

	t.Run("SVC_RATE_LIMIT_REFILL_RATE: a bucket of one refills within a second", func(t *testing.T) {
		untilServed(gateway.AzRead(nil))
		resp, _, raw := gateway.AzPost(t, s, tok, gateway.AzRead(nil))
		azRetryAfter(t, resp, raw, "rate_limited")
		start := time.Now()
		untilServed(gateway.AzRead(nil))
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("the token came back after %v at 4 per second", d)
		}
	})

	t.Run("SVC_REPLAY_WINDOW_SECS: a nonce is a replay for one second", func(t *testing.T) {
		nonce := "n-" + testkit.Uniq()
		if m := untilServed(gateway.AzRead(map[string]any{"nonce": nonce})); m["decision"] != "allow" {
			t.Fatalf("first use: %v", m)
		}
		if m := untilServed(gateway.AzRead(map[string]any{"nonce": nonce})); m["decision"] != "deny" || m["reason"] != "replay_nonce_reused" {
			t.Fatalf("reused at once: %v", m)
		}
		testkit.Eventually(t, 6*time.Second, "the nonce to leave its window", func() bool {
			return untilServed(gateway.AzRead(map[string]any{"nonce": nonce}))["decision"] == "allow"
		})
	})

	t.Run("SVC_APPROVAL_ATTEMPT_WINDOW_SECS: failed attempts are forgotten after a second", func(t *testing.T) {
		id := testkit.RandomUUID()
		apDecide(t, s, admin, id, "approve", 404, map[string]any{"approver_user_id": "x"})
		resp, raw := s.Do(t, "POST", "/v2/approvals/"+id+"/approve", admin, map[string]any{"approver_user_id": "x"})
		azRetryAfter(t, resp, raw, "approval_attempts_exceeded")
		// Every refused attempt counts too (and would keep the window
		// full): wait the window out once, then one attempt.
		time.Sleep(1500 * time.Millisecond)
		apDecide(t, s, admin, id, "approve", 404, map[string]any{"approver_user_id": "x"})
	})
}
