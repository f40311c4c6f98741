package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"svc/testkit"
	"svc/testkit/gateway"
)

// TestE2EAudit covers GET /v2/audit/events: order, filters, search,
// pagination and tenant isolation.
func TestE2EAudit(t *testing.T) {
	t.Parallel()
	gateway.ForModes(t, func(t *testing.T, backend string) {
		s := gateway.Start(t, backend, nil)
		tenantA, admin := s.Tenant(t, "audit-a-"+testkit.Uniq())
		_, adminB := s.Tenant(t, "audit-b-"+testkit.Uniq())
		var agentIDs []string
		for i := 0; i < 3; i++ {
			id, _ := s.Agent(t, admin, fmt.Sprintf("audited-%d", i), nil)
			agentIDs = append(agentIDs, id)
		}
		s.Want(t, 200, "POST", "/v2/agents/"+agentIDs[0]+"/freeze", admin, nil)
		s.Want(t, 200, "PATCH", "/v2/tenants/settings", admin, map[string]any{"auto_rotate_token_on_leak_enabled": false})
		s.Want(t, 204, "DELETE", "/v2/agents/"+agentIDs[1], admin, nil)
		s.Agent(t, adminB, "b-agent", nil)

		var all []map[string]any
		testkit.Eventually(t, 10*time.Second, "the agent_deleted event", func() bool {
			all = s.AuditEvents(t, admin, "")
			return len(all) > 0 && all[0]["action"] == "agent_deleted"
		})

		t.Run("newest first", func(t *testing.T) {
			if len(all) < 6 {
				t.Fatalf("only %d events: %v", len(all), all)
			}
			for i := 1; i < len(all); i++ {
				a, _ := time.Parse(time.RFC3339Nano, all[i-1]["created_at"].(string))
				b, _ := time.Parse(time.RFC3339Nano, all[i]["created_at"].(string))
				if a.Before(b) {
					t.Errorf("event %d (%v) is older than event %d (%v)", i-1, a, i, b)
				}
			}
			if all[0]["agent_id"] != agentIDs[1] {
				t.Errorf("newest event %v is not the deletion of %s", all[0], agentIDs[1])
			}
			last := all[len(all)-1]
			if last["action"] != "tenant_created" {
				t.Errorf("oldest event %v, want tenant_created", last)
			}
			for _, e := range all {
				for _, f := range []string{"event_id", "tenant_id", "event_type", "action", "actor", "details", "created_at"} {
					if _, ok := e[f]; !ok {
						t.Errorf("event lacks %s: %v", f, e)
					}
				}
				rfc3339UTC(t, "created_at", e["created_at"])
				if e["tenant_id"] != tenantA {
					t.Errorf("event of another tenant: %v", e)
				}
			}
		})

		t.Run("event_type filter", func(t *testing.T) {
			evs := s.AuditEvents(t, admin, "event_type=admin_action")
			if len(evs) == 0 {
				t.Fatal("no admin_action events")
			}
			for _, e := range evs {
				if e["event_type"] != "admin_action" {
					t.Errorf("filtered list has %v", e["event_type"])
				}
			}
			cc := s.AuditEvents(t, admin, "event_type=config_change")
			if len(cc) != 1 {
				t.Errorf("config_change events: %d, want 1", len(cc))
			}
			if none := s.AuditEvents(t, admin, "event_type=no_such_type"); len(none) != 0 {
				t.Errorf("unknown event type matched %d events", len(none))
			}
		})

		t.Run("keyword search", func(t *testing.T) {
			cases := []struct {
				name, q string
				check   func(t *testing.T, evs []map[string]any)
			}{
				{"prefix agent_del", "agent_del", func(t *testing.T, evs []map[string]any) {
					if len(evs) != 1 || evs[0]["action"] != "agent_deleted" {
						t.Errorf("q=agent_del gives %v", evs)
					}
				}},
				{"punctuation stripped", "agent_del!!", func(t *testing.T, evs []map[string]any) {
					if len(evs) != 1 || evs[0]["action"] != "agent_deleted" {
						t.Errorf("q=agent_del!! gives %v", evs)
					}
				}},
				{"all punctuation is no filter", "!!!", func(t *testing.T, evs []map[string]any) {
					if len(evs) != len(all) {
						t.Errorf("q=!!! gives %d events, want all %d", len(evs), len(all))
					}
				}},
				{"empty is no filter", "", func(t *testing.T, evs []map[string]any) {
					if len(evs) != len(all) {
						t.Errorf("q= gives %d events, want %d", len(evs), len(all))
					}
				}},
				{"no match", "zzzznothing", func(t *testing.T, evs []map[string]any) {
					if len(evs) != 0 {
						t.Errorf("q=zzzznothing gives %v", evs)
					}
				}},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					tc.check(t, s.AuditEvents(t, admin, "q="+strings.ReplaceAll(tc.q, "!", "%21")))
				})
			}
		})

		t.Run("cursor pagination", func(t *testing.T) {
			ids, pages := listAll(t, s, admin, "/v2/audit/events", "event_id", 2)
			if len(ids) != len(all) {
				t.Fatalf("walked %d events, want %d", len(ids), len(all))
			}
			for i := range ids {
				if ids[i] != all[i]["event_id"] {
					t.Errorf("page walk order differs at %d", i)
				}
			}
			if want := (len(all) + 1) / 2; pages != want {
				t.Errorf("%d pages, want %d", pages, want)
			}
			resp, _ := s.Do(t, "GET", fmt.Sprintf("/v2/audit/events?limit=%d", len(all)), admin, nil)
			if resp.Header.Get("X-Next-Cursor") != "" {
				t.Errorf("exact page boundary still has a next cursor")
			}
			_, raw := s.Do(t, "GET", "/v2/audit/events?cursor=%21%21", admin, nil)
			gateway.Envelope(t, raw, 400, "v2", "BadRequest")
			// Cursor paging with a filter.
			fids, _ := listAll(t, s, admin, "/v2/audit/events?event_type=admin_action", "event_id", 1)
			if len(fids) != len(s.AuditEvents(t, admin, "event_type=admin_action")) {
				t.Errorf("filtered walk gives %d events", len(fids))
			}
		})

		t.Run("tenant isolation", func(t *testing.T) {
			evs := s.AuditEvents(t, adminB, "")
			for _, e := range evs {
				if e["tenant_id"] == tenantA {
					t.Errorf("tenant B sees tenant A's event %v", e)
				}
				for _, id := range agentIDs {
					if e["agent_id"] == id {
						t.Errorf("tenant B sees an event about tenant A's agent: %v", e)
					}
				}
			}
			if len(s.AuditEvents(t, adminB, "q=agent_del")) != 0 {
				t.Errorf("tenant B's search finds tenant A's deletion")
			}
			if len(s.AuditEvents(t, adminB, "event_type=config_change")) != 0 {
				t.Errorf("tenant B sees tenant A's config change")
			}
		})
	})
}
