package process

// Correlation and behavioural baselines end to end (SPEC 6.2, 6.3), on one
// node and on two clustered nodes behind the round-robin balancer (issue
// 21): every incident kind at its exact threshold, the new-tool anomaly
// raised once per pair, the SSE incident stream, a node killed mid-storm,
// and the event-to-alert latency on two nodes.

import (
	"slices"
	"testing"
	"time"

	"svc/testkit"
	"svc/testkit/gateway"
)

// TestE2EClusterKillMidStorm: the windows live in the shared state, not in
// a node. Three denies of a storm are folded in, spread over both nodes;
// one node is killed; the last two denies, on the survivor, open the
// deny_storm once, with all five events.
func TestE2EClusterKillMidStorm(t *testing.T) {
	t.Parallel()
	s := gateway.StartProcess(t, gateway.ClusterBackend, nil)
	_, admin := s.Tenant(t, "kill-storm-"+testkit.Uniq())
	agentID, tok := s.Agent(t, admin, "kill-storm", nil)
	victim, survivor := s.Peers[0], s.Peers[1]
	folded := gateway.MetricValue(t, s, "svc_soc_shared_observations_total")
	var ids []string
	for range 3 {
		ids = append(ids, testkit.Str(t, gateway.AzDecide(t, s, tok, gateway.AzUntrustedWrite(nil), "deny", ""), "decision_id"))
	}
	// Both nodes took part, and the three events are in the shared windows.
	testkit.Eventually(t, 10*time.Second, "the three denies folded into the shared state", func() bool {
		return gateway.MetricValue(t, s, "svc_soc_shared_observations_total")-folded >= 3
	})
	if gateway.MetricValue(t, victim, "svc_soc_shared_observations_total") == 0 || gateway.MetricValue(t, survivor, "svc_soc_shared_observations_total") == 0 {
		t.Fatal("the balancer did not spread the storm over both nodes")
	}
	if err := victim.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-victim.Done
	for range 2 {
		ids = append(ids, testkit.Str(t, gateway.AzDecide(t, survivor, tok, gateway.AzUntrustedWrite(nil), "deny", ""), "decision_id"))
	}
	inc := gateway.WaitIncidents(t, survivor, admin, agentID, "deny_storm", 1)[0]
	if got := gateway.AzStrings(inc["source_event_ids"]); len(got) != 5 {
		t.Fatalf("deny_storm from %d events, want the 5 denies: %v", len(got), inc)
	}
	if got := gateway.AzStrings(inc["source_event_ids"]); len(slices.Compact(slices.Sorted(slices.Values(got)))) != 5 {
		t.Errorf("source events not distinct: %v", got)
	}
	t.Logf("storm decisions %v; incident %v", ids, inc)
}
