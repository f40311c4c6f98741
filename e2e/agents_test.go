package e2e

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"svc/testkit"
	"svc/testkit/gateway"
)

var agentReadFields = []string{"agent_id", "name", "status", "risk_tier", "allowed_environments", "has_signing_key",
	"created_at", "updated_at", "last_seen_at"}

// agentShape asserts the CONTRACT §3 read shape (no secrets).
func agentShape(t testing.TB, a map[string]any) {
	t.Helper()
	for _, f := range agentReadFields {
		if _, ok := a[f]; !ok {
			t.Errorf("agent lacks %q: %v", f, a)
		}
	}
	for _, f := range []string{"agent_token", "signing_key", "token_hash", "agent_token_hash"} {
		if _, ok := a[f]; ok {
			t.Errorf("agent read shape exposes %q: %v", f, a)
		}
	}
	rfc3339UTC(t, "created_at", a["created_at"])
	rfc3339UTC(t, "updated_at", a["updated_at"])
	if a["last_seen_at"] != nil {
		rfc3339UTC(t, "last_seen_at", a["last_seen_at"])
	}
}

// listAll walks GET path with limit and the cursors, returning the ids.
func listAll(t testing.TB, s *gateway.Server, tok, path, idField string, limit int) (ids []string, pages int) {
	t.Helper()
	cursor := ""
	for pages = 1; pages < 100; pages++ {
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		p := fmt.Sprintf("%s%slimit=%d", path, sep, limit)
		if cursor != "" {
			p += "&cursor=" + url.QueryEscape(cursor)
		}
		resp, raw := s.Do(t, "GET", p, tok, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", p, resp.StatusCode, raw)
		}
		rows := testkit.Arr(t, raw)
		if len(rows) > limit {
			t.Fatalf("GET %s: %d rows over limit %d", p, len(rows), limit)
		}
		for _, r := range rows {
			ids = append(ids, r[idField].(string))
		}
		cursor = resp.Header.Get("X-Next-Cursor")
		if cursor == "" {
			return ids, pages
		}
		if len(rows) != limit {
			t.Errorf("GET %s: short page (%d rows) with a next cursor", p, len(rows))
		}
	}
	t.Fatalf("pagination of %s does not end", path)
	return nil, 0
}

// TestE2EAgents covers agent registration, reads, lists, transitions,
// PATCH, cross-tenant isolation, tokens, permissions and heartbeats.
func TestE2EAgents(t *testing.T) {
	t.Parallel()
	gateway.ForModes(t, func(t *testing.T, backend string) {
		s := gateway.Start(t, backend, nil)
		_, admin := s.Tenant(t, "agents-"+testkit.Uniq())

		t.Run("register and read", func(t *testing.T) {
			m := testkit.Obj(t, s.Want(t, 201, "POST", "/v2/agents", admin, map[string]any{"name": "plain"}))
			if tok, _ := m["agent_token"].(string); !agentTokenRE.MatchString(tok) {
				t.Errorf("agent_token %q is not svc_agent_ + 43 base64url chars", m["agent_token"])
			}
			if _, ok := m["signing_key"]; ok {
				t.Errorf("signing_key returned without generate: %v", m)
			}
			if m["status"] != "active" || m["risk_tier"] != "low" || m["has_signing_key"] != false || m["allowed_environments"] != nil || m["last_seen_at"] != nil {
				t.Errorf("new agent defaults = %v", m)
			}
			id := testkit.Str(t, m, "agent_id")
			a := s.GetAgent(t, admin, id)
			agentShape(t, a)
			if a["name"] != "plain" || a["agent_id"] != id {
				t.Errorf("read = %v", a)
			}

			g := testkit.Obj(t, s.Want(t, 201, "POST", "/v2/agents", admin, map[string]any{"name": "signed", "signing_key": "generate",
				"risk_tier": "medium", "allowed_environments": []string{"prod", "staging"}}))
			key, _ := base64.StdEncoding.DecodeString(testkit.Str(t, g, "signing_key"))
			if len(key) < 32 || g["has_signing_key"] != true {
				t.Errorf("generated key %v (%d bytes), has_signing_key %v", g["signing_key"], len(key), g["has_signing_key"])
			}
			ga := s.GetAgent(t, admin, g["agent_id"].(string))
			agentShape(t, ga)
			if ga["has_signing_key"] != true || ga["risk_tier"] != "medium" || fmt.Sprint(ga["allowed_environments"]) != "[prod staging]" {
				t.Errorf("read of signed agent = %v", ga)
			}
			raw := s.Want(t, 200, "GET", "/v2/agents/"+g["agent_id"].(string), admin, nil)
			if bytes.Contains(raw, []byte(g["signing_key"].(string))) || bytes.Contains(raw, []byte(g["agent_token"].(string))) {
				t.Errorf("read exposes a secret: %s", raw)
			}

			own := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
			o := testkit.Obj(t, s.Want(t, 201, "POST", "/v2/agents", admin, map[string]any{"name": "own-key", "signing_key": own}))
			if o["has_signing_key"] != true {
				t.Errorf("supplied key: has_signing_key %v", o["has_signing_key"])
			}
			if _, ok := o["signing_key"]; ok {
				t.Errorf("supplied signing key echoed back: %v", o)
			}
			short := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 16))
			_, raw = s.Do(t, "POST", "/v2/agents", admin, map[string]any{"name": "short-key", "signing_key": short})
			gateway.Envelope(t, raw, 400, "v2", "BadRequest")
			_, raw = s.Do(t, "POST", "/v2/agents", admin, map[string]any{"name": "bad-tier", "risk_tier": "extreme"})
			gateway.Envelope(t, raw, 400, "v2", "BadRequest")
			_, raw = s.Do(t, "POST", "/v2/agents", admin, map[string]any{"name": strings.Repeat("n", 129)})
			gateway.Envelope(t, raw, 400, "v2", "BadRequest")
			s.Want(t, 201, "POST", "/v2/agents", admin, map[string]any{"name": strings.Repeat("n", 128)})

			for _, item := range testkit.Arr(t, s.Want(t, 200, "GET", "/v2/agents", admin, nil)) {
				agentShape(t, item)
			}
		})

		t.Run("duplicate name and reuse after delete", func(t *testing.T) {
			id, _ := s.Agent(t, admin, "dup", nil)
			_, raw := s.Do(t, "POST", "/v2/agents", admin, map[string]any{"name": "dup"})
			gateway.Envelope(t, raw, 409, "v2", "AlreadyExists")
			s.Want(t, 204, "DELETE", "/v2/agents/"+id, admin, nil)
			s.Want(t, 404, "DELETE", "/v2/agents/"+id, admin, nil)
			id2, _ := s.Agent(t, admin, "dup", nil)
			if id2 == id {
				t.Errorf("re-registered agent got the deleted one's id")
			}
			// PATCH to a taken name: 409.
			id3, _ := s.Agent(t, admin, "dup-other", nil)
			_, raw = s.Do(t, "PATCH", "/v2/agents/"+id3, admin, map[string]any{"name": "dup"})
			gateway.Envelope(t, raw, 409, "v2", "AlreadyExists")
		})

		t.Run("pagination and status filter", func(t *testing.T) {
			_, pa := s.Tenant(t, "paging-"+testkit.Uniq())
			want := map[string]bool{}
			for i := 0; i < 5; i++ {
				id, _ := s.Agent(t, pa, fmt.Sprintf("page-%d", i), nil)
				want[id] = true
			}
			resp, raw := s.Do(t, "GET", "/v2/agents?limit=2", pa, nil)
			if resp.StatusCode != 200 || len(testkit.Arr(t, raw)) != 2 || resp.Header.Get("X-Next-Cursor") == "" {
				t.Fatalf("limit=2: %d, %s, cursor %q", resp.StatusCode, raw, resp.Header.Get("X-Next-Cursor"))
			}
			ids, pages := listAll(t, s, pa, "/v2/agents", "agent_id", 2)
			if len(ids) != 5 || pages != 3 {
				t.Errorf("walk with limit 2: %d ids in %d pages, want 5 in 3", len(ids), pages)
			}
			seen := map[string]bool{}
			for _, id := range ids {
				if seen[id] || !want[id] {
					t.Errorf("id %s repeated or unexpected", id)
				}
				seen[id] = true
			}
			resp, raw = s.Do(t, "GET", "/v2/agents?limit=5", pa, nil)
			if resp.StatusCode != 200 || len(testkit.Arr(t, raw)) != 5 || resp.Header.Get("X-Next-Cursor") != "" {
				t.Errorf("limit=5 with 5 agents: %d rows, cursor %q; want 5 and none", len(testkit.Arr(t, raw)), resp.Header.Get("X-Next-Cursor"))
			}
			resp, raw = s.Do(t, "GET", "/v2/agents?limit=100000", pa, nil)
			if resp.StatusCode != 200 || len(testkit.Arr(t, raw)) != 5 {
				t.Errorf("limit=100000: %d %s", resp.StatusCode, raw)
			}
			// Integers too large for an int are clamped like any large value.
			resp, raw = s.Do(t, "GET", "/v2/agents?limit=99999999999999999999", pa, nil)
			if resp.StatusCode != 200 || len(testkit.Arr(t, raw)) != 5 {
				t.Errorf("limit=99999999999999999999: %d %s", resp.StatusCode, raw)
			}
			resp, raw = s.Do(t, "GET", "/v2/agents?offset=99999999999999999999", pa, nil)
			if resp.StatusCode != 200 || len(testkit.Arr(t, raw)) != 0 {
				t.Errorf("offset=99999999999999999999: %d %s; want an empty page", resp.StatusCode, raw)
			}
			resp, raw = s.Do(t, "GET", "/v2/agents?offset=3", pa, nil)
			if resp.StatusCode != 200 || len(testkit.Arr(t, raw)) != 2 {
				t.Errorf("offset=3: %d, %d rows, want 2", resp.StatusCode, len(testkit.Arr(t, raw)))
			}
			for _, q := range []string{"limit=-1", "limit=abc", "limit=-99999999999999999999", "limit=1e3", "offset=-1", "offset=x", "cursor=not-a-cursor!", "cursor=zz"} {
				_, raw := s.Do(t, "GET", "/v2/agents?"+q, pa, nil)
				gateway.Envelope(t, raw, 400, "v2", "BadRequest")
			}
			s.Want(t, 200, "GET", "/v2/agents?no_such_filter=1", pa, nil)

			victim := ids[0]
			s.Want(t, 204, "DELETE", "/v2/agents/"+victim, pa, nil)
			for _, a := range testkit.Arr(t, s.Want(t, 200, "GET", "/v2/agents", pa, nil)) {
				if a["agent_id"] == victim {
					t.Errorf("default list shows the deleted agent")
				}
			}
			del := testkit.Arr(t, s.Want(t, 200, "GET", "/v2/agents?status=deleted", pa, nil))
			if len(del) != 1 || del[0]["agent_id"] != victim || del[0]["status"] != "deleted" {
				t.Errorf("status=deleted = %v", del)
			}
			if act := testkit.Arr(t, s.Want(t, 200, "GET", "/v2/agents?status=active", pa, nil)); len(act) != 4 {
				t.Errorf("status=active gives %d agents, want 4", len(act))
			}
			// A deleted agent reads as deleted (or 404); it is never active.
			resp, raw = s.Do(t, "GET", "/v2/agents/"+victim, pa, nil)
			if resp.StatusCode == 200 && testkit.Obj(t, raw)["status"] != "deleted" {
				t.Errorf("deleted agent reads %s", raw)
			}
		})

		t.Run("transitions", func(t *testing.T) {
			id, _ := s.Agent(t, admin, "walker", nil)
			steps := []struct {
				name, op string
				status   int
				want     string
				action   string
			}{
				{"freeze active", "freeze", 200, "frozen", "agent_frozen"},
				{"freeze frozen", "freeze", 409, "", ""},
				{"unfreeze frozen", "unfreeze", 200, "active", "agent_unfrozen"},
				{"unfreeze active", "unfreeze", 409, "", ""},
				{"restore active", "restore", 409, "", ""},
				{"freeze again", "freeze", 200, "frozen", "agent_frozen"},
				{"restore frozen", "restore", 200, "active", "agent_restored"},
				{"revoke active", "revoke", 200, "revoked", "agent_revoked"},
				{"unfreeze revoked", "unfreeze", 409, "", ""},
				{"freeze revoked", "freeze", 409, "", ""},
				{"restore revoked", "restore", 409, "", ""},
				{"revoke revoked", "revoke", 409, "", ""},
			}
			for _, st := range steps {
				resp, raw := s.Do(t, "POST", "/v2/agents/"+id+"/"+st.op, admin, nil)
				if resp.StatusCode != st.status {
					t.Fatalf("%s: %d, want %d: %s", st.name, resp.StatusCode, st.status, raw)
				}
				if st.status == 409 {
					gateway.Envelope(t, raw, 409, "v2", "Conflict")
					continue
				}
				a := testkit.Obj(t, raw)
				agentShape(t, a)
				if a["status"] != st.want {
					t.Errorf("%s: status %v, want %s", st.name, a["status"], st.want)
				}
			}
			for _, action := range []string{"agent_frozen", "agent_unfrozen", "agent_restored", "agent_revoked"} {
				s.WaitAudit(t, admin, "event_type=admin_action", "admin_action "+action, func(e map[string]any) bool {
					return e["action"] == action && e["agent_id"] == id
				})
			}
			// Deleting a revoked agent works; transitions on it then 404 or 409.
			s.Want(t, 204, "DELETE", "/v2/agents/"+id, admin, nil)
			if resp, raw := s.Do(t, "POST", "/v2/agents/"+id+"/revoke", admin, nil); resp.StatusCode != 404 && resp.StatusCode != 409 {
				t.Errorf("revoke deleted: %d %s", resp.StatusCode, raw)
			}
			s.WaitAudit(t, admin, "event_type=admin_action", "admin_action agent_deleted", func(e map[string]any) bool {
				return e["action"] == "agent_deleted" && e["agent_id"] == id
			})
		})

		t.Run("patch", func(t *testing.T) {
			id, _ := s.Agent(t, admin, "patchy", map[string]any{"signing_key": "generate", "allowed_environments": []string{"prod"}})
			before := s.GetAgent(t, admin, id)
			a := testkit.Obj(t, s.Want(t, 200, "PATCH", "/v2/agents/"+id, admin, map[string]any{"risk_tier": "high"}))
			if a["risk_tier"] != "high" || a["name"] != "patchy" || fmt.Sprint(a["allowed_environments"]) != "[prod]" || a["has_signing_key"] != true {
				t.Errorf("after risk_tier PATCH: %v", a)
			}
			if a["updated_at"] == before["updated_at"] && a["updated_at"] != nil {
				// updated_at must not go backwards; equal is tolerated only at coarse clocks.
				t.Logf("updated_at unchanged: %v", a["updated_at"])
			}
			// An empty list is unrestricted (SPEC 4.2 rule 5) and reads as null
			// (CONTRACT §3), like no list.
			a = testkit.Obj(t, s.Want(t, 200, "PATCH", "/v2/agents/"+id, admin, `{"allowed_environments":[]}`))
			if v, ok := a["allowed_environments"]; !ok || v != nil {
				t.Errorf("allowed_environments after an empty-list PATCH = %v, want null", v)
			}
			_ = s.Want(t, 200, "PATCH", "/v2/agents/"+id, admin, `{"allowed_environments":["prod"]}`)
			a = testkit.Obj(t, s.Want(t, 200, "PATCH", "/v2/agents/"+id, admin, `{"allowed_environments":null}`))
			if v, ok := a["allowed_environments"]; !ok || v != nil {
				t.Errorf("allowed_environments after null PATCH = %v", v)
			}
			if g := s.GetAgent(t, admin, id); g["allowed_environments"] != nil || g["risk_tier"] != "high" {
				t.Errorf("read after clearing environments: %v", g)
			}
			a = testkit.Obj(t, s.Want(t, 200, "PATCH", "/v2/agents/"+id, admin, `{"signing_key":null}`))
			if a["has_signing_key"] != false {
				t.Errorf("has_signing_key after null PATCH = %v", a["has_signing_key"])
			}
			if g := s.GetAgent(t, admin, id); g["has_signing_key"] != false {
				t.Errorf("read after removing the key: %v", g)
			}
			a = testkit.Obj(t, s.Want(t, 200, "PATCH", "/v2/agents/"+id, admin, map[string]any{"signing_key": "generate", "name": "patchy2"}))
			if a["has_signing_key"] != true || a["name"] != "patchy2" {
				t.Errorf("after generate PATCH: %v", a)
			}
			if k, _ := a["signing_key"].(string); k == "" {
				t.Errorf("generated key not returned on PATCH: %v", a)
			}
			_, raw := s.Do(t, "PATCH", "/v2/agents/"+id, admin, map[string]any{"risk_tier": "extreme"})
			gateway.Envelope(t, raw, 400, "v2", "BadRequest")
			s.WaitAudit(t, admin, "event_type=admin_action", "agent_updated audit", func(e map[string]any) bool {
				return e["action"] == "agent_updated" && e["agent_id"] == id
			})
		})

		t.Run("cross-tenant ids behave as unknown", func(t *testing.T) {
			idA, _ := s.Agent(t, admin, "isolated", nil)
			s.Want(t, 201, "POST", "/v2/agents/"+idA+"/permissions", admin, map[string]any{"tool_key": "shell"})
			_, adminB := s.Tenant(t, "agents-b-"+testkit.Uniq())
			unknown := testkit.RandomUUID()
			ops := []struct {
				name, method, suffix string
				body                 any
			}{
				{"GET", "GET", "", nil},
				{"PATCH", "PATCH", "", map[string]any{"risk_tier": "high"}},
				{"DELETE", "DELETE", "", nil},
				{"freeze", "POST", "/freeze", nil},
				{"unfreeze", "POST", "/unfreeze", nil},
				{"revoke", "POST", "/revoke", nil},
				{"restore", "POST", "/restore", nil},
				{"rotate-token", "POST", "/rotate-token", nil},
				{"report-leaked-token", "POST", "/report-leaked-token", nil},
				{"permissions list", "GET", "/permissions", nil},
				{"permissions add", "POST", "/permissions", map[string]any{"tool_key": "x"}},
				{"permissions delete", "DELETE", "/permissions/shell", nil},
			}
			for _, op := range ops {
				t.Run(op.name, func(t *testing.T) {
					respX, rawX := s.Do(t, op.method, "/v2/agents/"+idA+op.suffix, adminB, op.body)
					respU, rawU := s.Do(t, op.method, "/v2/agents/"+unknown+op.suffix, adminB, op.body)
					if respX.StatusCode != 404 || respU.StatusCode != 404 {
						t.Fatalf("cross-tenant %d %s; unknown %d %s; want 404 both", respX.StatusCode, rawX, respU.StatusCode, rawU)
					}
					mx, mu := gateway.Envelope(t, rawX, 404, "v2", "NotFound"), gateway.Envelope(t, rawU, 404, "v2", "NotFound")
					if mx["reason"] != mu["reason"] || mx["code"] != mu["code"] || !bytes.Equal(rawX, rawU) {
						t.Errorf("cross-tenant body %s differs from unknown-id body %s", rawX, rawU)
					}
					respM, rawM := s.Do(t, op.method, "/v2/agents/not-a-uuid"+op.suffix, adminB, op.body)
					if respM.StatusCode != 404 {
						t.Errorf("malformed id: %d, want 404: %s", respM.StatusCode, rawM)
					} else {
						gateway.Envelope(t, rawM, 404, "v2", "NotFound")
					}
				})
			}
			a := s.GetAgent(t, admin, idA)
			if a["status"] != "active" || a["risk_tier"] != "low" {
				t.Errorf("tenant B changed tenant A's agent: %v", a)
			}
			if p := testkit.Arr(t, s.Want(t, 200, "GET", "/v2/agents/"+idA+"/permissions", admin, nil)); len(p) != 1 {
				t.Errorf("tenant A's bindings changed: %v", p)
			}
		})

		t.Run("rotate token", func(t *testing.T) {
			id, old := s.Agent(t, admin, "rotor", nil)
			s.Want(t, 204, "POST", "/v2/agents/heartbeat", old, nil)
			m := testkit.Obj(t, s.Want(t, 200, "POST", "/v2/agents/"+id+"/rotate-token", admin, nil))
			fresh := testkit.Str(t, m, "agent_token")
			if m["agent_id"] != id || !agentTokenRE.MatchString(fresh) || fresh == old {
				t.Errorf("rotate-token = %v", m)
			}
			s.Want(t, 204, "POST", "/v2/agents/heartbeat", fresh, nil)
			_, raw := s.Do(t, "POST", "/v2/agents/heartbeat", old, nil)
			gateway.Envelope(t, raw, 401, "v2", "Unauthorized")
			s.WaitAudit(t, admin, "event_type=agent_token_rotated", "agent_token_rotated audit", func(e map[string]any) bool {
				return e["agent_id"] == id
			})
		})

		t.Run("report leaked token", func(t *testing.T) {
			_, la := s.Tenant(t, "leaks-"+testkit.Uniq())
			id, old := s.Agent(t, la, "leaky", nil)
			m := testkit.Obj(t, s.Want(t, 200, "POST", "/v2/agents/"+id+"/report-leaked-token", la, nil))
			fresh, _ := m["agent_token"].(string)
			if m["rotated"] != true || !agentTokenRE.MatchString(fresh) {
				t.Fatalf("leak report with the flag on = %v", m)
			}
			_, raw := s.Do(t, "POST", "/v2/agents/heartbeat", old, nil)
			gateway.Envelope(t, raw, 401, "v2", "Unauthorized")
			s.Want(t, 204, "POST", "/v2/agents/heartbeat", fresh, nil)

			s.Want(t, 200, "PATCH", "/v2/tenants/settings", la, map[string]any{"auto_rotate_token_on_leak_enabled": false})
			m = testkit.Obj(t, s.Want(t, 200, "POST", "/v2/agents/"+id+"/report-leaked-token", la, nil))
			if m["rotated"] != false {
				t.Errorf("leak report with the flag off = %v", m)
			}
			if tok, ok := m["agent_token"]; ok && tok != "" {
				t.Errorf("leak report with the flag off returned a token: %v", m)
			}
			s.Want(t, 204, "POST", "/v2/agents/heartbeat", fresh, nil)
			s.WaitAudit(t, la, "event_type=agent_token_leak_detected_no_rotation", "agent_token_leak_detected_no_rotation audit",
				func(e map[string]any) bool { return e["agent_id"] == id })
			s.Want(t, 404, "POST", "/v2/agents/"+testkit.RandomUUID()+"/report-leaked-token", la, nil)
		})

		t.Run("permissions", func(t *testing.T) {
			id, _ := s.Agent(t, admin, "perm", nil)
			p := testkit.Obj(t, s.Want(t, 201, "POST", "/v2/agents/"+id+"/permissions", admin, map[string]any{"tool_key": "github.create_pr"}))
			if p["tool_key"] != "github.create_pr" || p["agent_id"] != id {
				t.Errorf("binding = %v", p)
			}
			_, raw := s.Do(t, "POST", "/v2/agents/"+id+"/permissions", admin, map[string]any{"tool_key": "github.create_pr"})
			gateway.Envelope(t, raw, 409, "v2", "AlreadyExists")
			_, raw = s.Do(t, "POST", "/v2/agents/"+id+"/permissions", admin, map[string]any{"tool_key": ""})
			gateway.Envelope(t, raw, 400, "v2", "BadRequest")
			list := testkit.Arr(t, s.Want(t, 200, "GET", "/v2/agents/"+id+"/permissions", admin, nil))
			if len(list) != 1 || list[0]["tool_key"] != "github.create_pr" {
				t.Errorf("permissions = %v", list)
			}
			s.Want(t, 204, "DELETE", "/v2/agents/"+id+"/permissions/github.create_pr", admin, nil)
			s.WaitAudit(t, admin, "event_type=admin_action", "agent_tool_permission_revoked audit", func(e map[string]any) bool {
				d, _ := e["details"].(map[string]any)
				return e["action"] == "agent_tool_permission_revoked" && e["agent_id"] == id && d["action"] == "agent_tool_permission_revoked"
			})
			_, raw = s.Do(t, "DELETE", "/v2/agents/"+id+"/permissions/github.create_pr", admin, nil)
			gateway.Envelope(t, raw, 404, "v2", "NotFound")
			if list := testkit.Arr(t, s.Want(t, 200, "GET", "/v2/agents/"+id+"/permissions", admin, nil)); len(list) != 0 {
				t.Errorf("permissions after delete = %v", list)
			}
			// Unknown agent: 404 on add.
			_, raw = s.Do(t, "POST", "/v2/agents/"+testkit.RandomUUID()+"/permissions", admin, map[string]any{"tool_key": "x"})
			gateway.Envelope(t, raw, 404, "v2", "NotFound")
		})

		t.Run("heartbeat", func(t *testing.T) {
			id, tok := s.Agent(t, admin, "beater", nil)
			if s.GetAgent(t, admin, id)["last_seen_at"] != nil {
				t.Fatalf("last_seen_at set before any heartbeat")
			}
			start := time.Now().UTC().Add(-2 * time.Second)
			s.Want(t, 204, "POST", "/v2/agents/heartbeat", tok, nil)
			s.Want(t, 204, "POST", "/v1/agents/heartbeat", tok, nil)
			var seen any
			testkit.Eventually(t, 10*time.Second, "last_seen_at to be flushed", func() bool {
				seen = s.GetAgent(t, admin, id)["last_seen_at"]
				return seen != nil
			})
			rfc3339UTC(t, "last_seen_at", seen)
			if ts, err := time.Parse(time.RFC3339Nano, seen.(string)); err == nil && ts.Before(start) {
				t.Errorf("last_seen_at %v is before the heartbeat (%v)", ts, start)
			}

			s.Want(t, 200, "POST", "/v2/agents/"+id+"/freeze", admin, nil)
			s.Want(t, 204, "POST", "/v2/agents/heartbeat", tok, nil)
			s.Want(t, 200, "POST", "/v2/agents/"+id+"/revoke", admin, nil)
			_, raw := s.Do(t, "POST", "/v2/agents/heartbeat", tok, nil)
			gateway.Envelope(t, raw, 401, "v2", "Unauthorized")

			id2, tok2 := s.Agent(t, admin, "beater-deleted", nil)
			s.Want(t, 204, "DELETE", "/v2/agents/"+id2, admin, nil)
			_, raw = s.Do(t, "POST", "/v2/agents/heartbeat", tok2, nil)
			gateway.Envelope(t, raw, 401, "v2", "Unauthorized")
		})
	})
}
