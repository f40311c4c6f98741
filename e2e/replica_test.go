package e2e

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"svc/persistence/storetest"
	"svc/testkit"
	"svc/testkit/gateway"
)

// A read replica never serves a stale credential or policy. The gateway
// reads a real streaming standby (scripts/testenv.sh) whose replay is
// paused, so that it lags behind every write from then on: a rotated agent
// token, a revoked operator token and a new tenant policy still take effect
// on the very next call, while a list, which may read the replica, shows
// its lag (which also shows that the replica is in use) until replay
// resumes.
//
// It starts behind on schema: replay is paused before the gateway applies
// its migrations, so the standby has the new database but none of its
// tables, as in a rolling upgrade that adds a migration. A list must then
// be read from the primary (and counted in db_replica_fallbacks_total),
// never answer 500.
func TestE2EReplicaLag(t *testing.T) {
	t.Parallel()
	db := storetest.PostgresURL(t)
	replica := storetest.ReplicaOf(t, db)
	replica.Pause(t)
	s := gateway.StartOn(t, db, map[string]string{"SVC_DB_READ_REPLICA_URL": replica.URL})
	_, admin := s.Tenant(t, "replica-"+testkit.Uniq())
	const schemaFallbacks = `db_replica_fallbacks_total{reason="schema"}`
	before := gateway.MetricValue(t, s, schemaFallbacks)
	s.Agent(t, admin, "behind-on-schema", nil)
	if got := testkit.Arr(t, s.Want(t, 200, "GET", "/v2/agents", admin, nil)); len(got) != 1 || got[0]["name"] != "behind-on-schema" {
		t.Errorf("the agent list while the standby lacks the tables: %v", got)
	}
	if after := gateway.MetricValue(t, s, schemaFallbacks); after <= before {
		t.Errorf("%s went from %v to %v: the list did not fall back to the primary for the missing table", schemaFallbacks, before, after)
	}
	replica.Resume(t)
	agentID, tok := s.Agent(t, admin, "before-the-lag", nil)
	viewerID, viewer := s.OpToken(t, admin, "viewer", "viewer")
	read := map[string]any{"tool_call": map[string]any{"tool": "pay", "action": "charge", "parameters": map[string]any{"card": "x"}},
		"source_trust": "trusted_internal_signed"}
	if m := testkit.Obj(t, s.Want(t, 200, "POST", "/v2/authorize", tok, read)); m["decision"] != "allow" {
		t.Fatalf("before the lag: %v", m)
	}
	// listed reports whether the agent list names the agent; while the
	// standby converges an answer that is not 200 counts as not yet.
	listed := func(name string) bool {
		resp, raw := s.Do(t, "GET", "/v2/agents", admin, nil)
		if resp.StatusCode != http.StatusOK {
			t.Logf("GET /v2/agents: %d %s", resp.StatusCode, raw)
			return false
		}
		return slices.ContainsFunc(testkit.Arr(t, raw), func(a map[string]any) bool { return a["name"] == name })
	}
	// The standby has replayed the migrations and the first agent once a
	// list names it without falling back to the primary.
	testkit.Eventually(t, 60*time.Second, "the standby to list the first agent", func() bool {
		n := gateway.MetricValue(t, s, schemaFallbacks)
		return listed("before-the-lag") && gateway.MetricValue(t, s, schemaFallbacks) == n
	})

	replica.Pause(t)
	lateID, _ := s.Agent(t, admin, "after-the-lag", nil)
	fresh := testkit.Obj(t, s.Want(t, 200, "POST", "/v2/agents/"+agentID+"/rotate-token", admin, nil))
	if resp, _ := s.Do(t, "POST", "/v2/authorize", tok, read); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the rotated token answered %d on the next call", resp.StatusCode)
	}
	s.Want(t, 200, "POST", "/v2/authorize", testkit.Str(t, fresh, "agent_token"), read)
	s.Want(t, 204, "DELETE", "/v2/operator-tokens/"+viewerID, admin, nil)
	if resp, _ := s.Do(t, "GET", "/v2/agents", viewer, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the revoked operator token answered %d on the next call", resp.StatusCode)
	}
	rego := "package svc.policies.replica_redact\n\nresults contains {\"decision\":\"redact\",\"reason\":\"card\"," +
		"\"redact_fields\":[\"parameters.card\"]} if input.tool_call.action == \"charge\""
	s.Want(t, 201, "POST", "/v2/policies", admin, map[string]any{"name": "replica_redact", "rego": rego})
	if m := testkit.Obj(t, s.Want(t, 200, "POST", "/v2/authorize", testkit.Str(t, fresh, "agent_token"), read)); m["decision"] != "redact" {
		t.Errorf("the next call after a policy change: %v", m)
	}
	// A read by id is the primary's; a list is the replica's, which lags.
	if got := s.GetAgent(t, admin, lateID); got["name"] != "after-the-lag" {
		t.Errorf("the new agent by id: %v", got)
	}
	if slices.ContainsFunc(testkit.Arr(t, s.Want(t, 200, "GET", "/v2/agents", admin, nil)), func(a map[string]any) bool { return a["name"] == "after-the-lag" }) {
		t.Error("the agent list shows an agent the paused standby cannot have: the list does not read the replica")
	}
	replica.Resume(t)
	testkit.Eventually(t, 60*time.Second, "the standby to catch up", func() bool { return listed("after-the-lag") })
}
