package process

import (
	"net/http"
	"testing"
	"time"

	"svc/testkit"
	"svc/testkit/gateway"
)

// TestE2ELeaderTakeover: two clustered nodes on one Postgres. One leads
// and runs the maintenance jobs, the other never runs one, and between
// them a job runs once per interval; the leader killed with SIGKILL, the
// other takes over within the lease plus the election interval (measured
// and logged; the bound allows two seconds of scheduling on a busy
// machine), and the jobs go on there.
func TestE2ELeaderTakeover(t *testing.T) {
	t.Parallel()
	const interval, lease = time.Second, 3 * time.Second
	s := gateway.StartProcess(t, gateway.ClusterBackend, map[string]string{"SVC_LEADER_ELECTION_INTERVAL_SECS": "1", "SVC_LEADER_LEASE_SECS": "3",
		"SVC_RECEIPT_INTEGRITY_INTERVAL_SECS": "1"})
	_, admin := s.Tenant(t, "takeover-"+testkit.Uniq())
	ready := func(n *gateway.Server) map[string]any {
		resp, raw := n.Do(t, "GET", "/readyz", "", nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/readyz %d: %s", resp.StatusCode, raw)
		}
		return testkit.Obj(t, raw)
	}
	var leader, standby *gateway.Server
	testkit.Eventually(t, 15*time.Second, "exactly one leader", func() bool {
		a, b := ready(s.Peers[0])["leader"] == true, ready(s.Peers[1])["leader"] == true
		switch {
		case a && !b:
			leader, standby = s.Peers[0], s.Peers[1]
		case b && !a:
			leader, standby = s.Peers[1], s.Peers[0]
		default:
			return false
		}
		return true
	})
	const ran = `svc_maintenance_job_runs_total{job="receipt_integrity",outcome="ok"}`
	runs := func(n *gateway.Server) float64 {
		return gateway.StatusJob(t, testkit.Obj(t, n.Want(t, 200, "GET", "/v2/status", admin, nil)), "receipt_integrity")["runs"].(float64)
	}
	testkit.Eventually(t, 10*time.Second, "the leader's first integrity run", func() bool { return gateway.MetricValue(t, leader, ran) > 0 })
	before, start := runs(standby), time.Now()
	time.Sleep(5 * time.Second)
	after, window := runs(standby), time.Since(start)
	if n, most := after-before, window.Seconds()+1; n < 2 || n > most {
		t.Errorf("%v integrity runs across both nodes in %v at one per %v", n, window, interval)
	}
	if v := gateway.MetricValue(t, standby, ran); v != 0 {
		t.Errorf("the standby ran the integrity job %v times", v)
	}

	killed := time.Now()
	if err := leader.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-leader.Done
	testkit.Eventually(t, 20*time.Second, "the standby to take over", func() bool { return ready(standby)["leader"] == true })
	took := time.Since(killed)
	t.Logf("takeover %v after SIGKILL (lease %v, election interval %v)", took, lease, interval)
	if took > lease+interval+2*time.Second {
		t.Errorf("takeover took %v, more than lease plus interval (%v) with 2 s to spare", took, lease+interval)
	}
	node := ready(standby)["node_id"]
	testkit.Eventually(t, 10*time.Second, "the jobs running on the new leader", func() bool {
		st := testkit.Obj(t, standby.Want(t, 200, "GET", "/v2/status", admin, nil))
		return gateway.StatusJob(t, st, "receipt_integrity")["last_node_id"] == node && st["leader_node_id"] == node
	})
}
