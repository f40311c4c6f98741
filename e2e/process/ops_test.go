package process

import (
	"bufio"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"svc/testkit"
	"svc/testkit/gateway"
)

// TestE2EConfig runs the binary directly: invalid settings, version, CLI.
func TestE2EConfig(t *testing.T) {
	t.Parallel()
	t.Run("invalid settings", func(t *testing.T) {
		cases := []struct {
			name, variable, value string
		}{
			{"rate limit not a number", "SVC_RATE_LIMIT_CAPACITY", "abc"},
			{"debug addr not loopback", "SVC_DEBUG_ADDR", "0.0.0.0:1234"},
			{"unknown database scheme", "DATABASE_URL", "mysql://x"},
			{"negative body limit", "SVC_MAX_BODY_LIMIT_BYTES", "-5"},
			{"flush interval not a number", "SVC_HEARTBEAT_FLUSH_INTERVAL_SECS", "soon"},
			{"listen addr without port", "SVC_LISTEN_ADDR", "localhost"},
			{"shutdown timeout negative", "SVC_SHUTDOWN_TIMEOUT_SECS", "-1"},
			{"concurrency not a number", "SVC_MAX_CONCURRENT_REQUESTS", "lots"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				env := map[string]string{
					"DATABASE_URL":    "sqlite://" + filepath.Join(t.TempDir(), "svc.db"),
					"SVC_LISTEN_ADDR": gateway.FreeAddr(t),
					"SVC_DEBUG_ADDR":  gateway.FreeAddr(t),
					"SVC_LOG_LEVEL":   "warn",
				}
				env[tc.variable] = tc.value
				code, _, stderr := gateway.RunSvc(t, env, "serve")
				if code == 0 {
					t.Fatalf("exit 0 with %s=%s", tc.variable, tc.value)
				}
				if !strings.Contains(stderr, tc.variable) {
					t.Errorf("stderr does not name %s:\n%s", tc.variable, stderr)
				}
			})
		}
	})

	t.Run("version", func(t *testing.T) {
		code, out, _ := gateway.RunSvc(t, nil, "version")
		if code != 0 || !strings.HasPrefix(out, "svc") {
			t.Errorf("svc version: exit %d, output %q", code, out)
		}
	})

	t.Run("unknown command", func(t *testing.T) {
		if code, _, _ := gateway.RunSvc(t, nil, "frobnicate"); code == 0 {
			t.Errorf("unknown command exits 0")
		}
	})

	gateway.ForBackends(t, func(t *testing.T, backend string) {
		t.Run("tenants create", func(t *testing.T) {
			dbURL := gateway.DBURLFor(t, backend)
			code, out, stderr := gateway.RunSvc(t, map[string]string{"DATABASE_URL": dbURL, "SVC_LOG_LEVEL": "warn"}, "tenants", "create", "acme")
			if code != 0 {
				t.Fatalf("svc tenants create: exit %d\n%s", code, stderr)
			}
			fields := map[string]string{}
			sc := bufio.NewScanner(strings.NewReader(out))
			for sc.Scan() {
				if k, v, ok := strings.Cut(sc.Text(), ": "); ok {
					fields[k] = strings.TrimSpace(v)
				}
			}
			if fields["tenant_id"] == "" || !gateway.OpTokenRE.MatchString(fields["operator_token"]) {
				t.Fatalf("output lacks tenant_id / operator_token:\n%s", out)
			}
			// The same name again fails.
			if code, _, _ := gateway.RunSvc(t, map[string]string{"DATABASE_URL": dbURL, "SVC_LOG_LEVEL": "warn"}, "tenants", "create", "acme"); code == 0 {
				t.Errorf("duplicate tenants create exits 0")
			}
			s := gateway.StartProcessOn(t, dbURL, nil)
			m := testkit.Obj(t, s.Want(t, 200, "GET", "/v2/tenants/settings", fields["operator_token"], nil))
			if m["tenant_id"] != fields["tenant_id"] {
				t.Errorf("token acts for tenant %v, want %s", m["tenant_id"], fields["tenant_id"])
			}
			s.Want(t, 201, "POST", "/v2/agents", fields["operator_token"], map[string]any{"name": "cli-agent"})
		})

		t.Run("SIGTERM exits 0 and flushes heartbeats", func(t *testing.T) {
			dbURL := gateway.DBURLFor(t, backend)
			s := gateway.StartProcessOn(t, dbURL, map[string]string{"SVC_HEARTBEAT_FLUSH_INTERVAL_SECS": "3600", "SVC_SHUTDOWN_TIMEOUT_SECS": "5"})
			_, admin := s.Tenant(t, "flush-"+testkit.Uniq())
			id, tok := s.Agent(t, admin, "flushed", nil)
			s.Want(t, 204, "POST", "/v2/agents/heartbeat", tok, nil)
			if s.GetAgent(t, admin, id)["last_seen_at"] != nil {
				t.Logf("last_seen_at already set before shutdown (flush interval 3600 s)")
			}
			code, took := s.Stop(t)
			if code != 0 {
				t.Errorf("exit code %d after SIGTERM, want 0\nstderr:\n%s", code, s.Stderr.String())
			}
			if took > 5*time.Second+5*time.Second {
				t.Errorf("shutdown took %s", took)
			}
			s2 := gateway.StartProcessOn(t, dbURL, nil)
			// The binary serves its debug routes on SVC_DEBUG_ADDR, not on
			// the API's listener.
			if m := testkit.Obj(t, s2.Want(t, 200, "GET", s2.Debug+"/debug/runtime", "", nil)); m["uptime_secs"] == nil {
				t.Errorf("/debug/runtime on SVC_DEBUG_ADDR: %v", m)
			}
			if resp, _ := s2.Do(t, "GET", "/debug/runtime", "", nil); resp.StatusCode == 200 {
				t.Errorf("/debug/runtime answered 200 on SVC_LISTEN_ADDR")
			}
			a := s2.GetAgent(t, admin, id)
			if a["last_seen_at"] == nil {
				t.Errorf("heartbeat accepted before SIGTERM was lost: %v", a)
			}
			code, _ = s2.Stop(t)
			if code != 0 {
				t.Errorf("second server exit code %d", code)
			}
		})
	})
}
