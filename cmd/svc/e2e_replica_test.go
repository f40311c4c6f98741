package main

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"svc/persistence/storetest"
)

// A read replica never serves a stale credential or policy. The gateway
// reads a real streaming standby (scripts/testenv.sh) whose replay is
// paused, so that it lags behind every write from then on: a rotated agent
// token, a revoked operator token and a new tenant policy still take effect
// on the very next call, while a list, which may read the replica, shows
// its lag (which also shows that the replica is in use) until replay
// resumes.
func TestE2EReplicaLag(t *testing.T) {
	t.Parallel()
	db := storetest.PostgresURL(t)
	replica := storetest.ReplicaOf(t, db)
	s := startServerOn(t, db, map[string]string{"SVC_DB_READ_REPLICA_URL": replica.URL})
	_, admin := s.tenant(t, "replica-"+uniq())
	agentID, tok := s.agent(t, admin, "before-the-lag", nil)
	viewerID, viewer := s.opToken(t, admin, "viewer", "viewer")
	read := map[string]any{"tool_call": map[string]any{"tool": "pay", "action": "charge", "parameters": map[string]any{"card": "x"}},
		"source_trust": "trusted_internal_signed"}
	if m := obj(t, s.want(t, 200, "POST", "/v2/authorize", tok, read)); m["decision"] != "allow" {
		t.Fatalf("before the lag: %v", m)
	}
	listed := func(name string) bool {
		return slices.ContainsFunc(arr(t, s.want(t, 200, "GET", "/v2/agents", admin, nil)), func(a map[string]any) bool { return a["name"] == name })
	}
	checkFor(t, 30*time.Second, "the standby to list the first agent", func() bool { return listed("before-the-lag") })

	replica.Pause(t)
	lateID, _ := s.agent(t, admin, "after-the-lag", nil)
	fresh := obj(t, s.want(t, 200, "POST", "/v2/agents/"+agentID+"/rotate-token", admin, nil))
	if resp, _ := s.do(t, "POST", "/v2/authorize", tok, read); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the rotated token answered %d on the next call", resp.StatusCode)
	}
	s.want(t, 200, "POST", "/v2/authorize", str(t, fresh, "agent_token"), read)
	s.want(t, 204, "DELETE", "/v2/operator-tokens/"+viewerID, admin, nil)
	if resp, _ := s.do(t, "GET", "/v2/agents", viewer, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the revoked operator token answered %d on the next call", resp.StatusCode)
	}
	rego := "package svc.policies.replica_redact\n\nresults contains {\"decision\":\"redact\",\"reason\":\"card\"," +
		"\"redact_fields\":[\"parameters.card\"]} if input.tool_call.action == \"charge\""
	s.want(t, 201, "POST", "/v2/policies", admin, map[string]any{"name": "replica_redact", "rego": rego})
	if m := obj(t, s.want(t, 200, "POST", "/v2/authorize", str(t, fresh, "agent_token"), read)); m["decision"] != "redact" {
		t.Errorf("the next call after a policy change: %v", m)
	}
	// A read by id is the primary's; a list is the replica's, which lags.
	if got := s.getAgent(t, admin, lateID); got["name"] != "after-the-lag" {
		t.Errorf("the new agent by id: %v", got)
	}
	if listed("after-the-lag") {
		t.Error("the agent list shows an agent the paused standby cannot have: the list does not read the replica")
	}
	replica.Resume(t)
	checkFor(t, 30*time.Second, "the standby to catch up", func() bool { return listed("after-the-lag") })
}
