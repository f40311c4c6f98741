package main

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"svc/persistence/storetest"
)

// statusJob returns the job of that name in a GET /status body.
func statusJob(t testing.TB, st map[string]any, name string) map[string]any {
	t.Helper()
	jobs, _ := st["jobs"].([]any)
	for _, j := range jobs {
		if m, _ := j.(map[string]any); m["job"] == name {
			return m
		}
	}
	return nil
}

// insertOldAudit writes an administrative audit event created age ago,
// behind the gateway's back, as an installation that has run that long
// would hold (seq -1: older than every row the gateway numbered; on SQLite
// also in the full-text index, as the bulk indexer keeps every row below
// its indexed point).
func insertOldAudit(t testing.TB, dbURL, tenantID, id string, age time.Duration) {
	t.Helper()
	var at any = time.Now().UTC().Add(-age)
	if strings.HasPrefix(dbURL, "sqlite://") {
		at = at.(time.Time).Format("2006-01-02 15:04:05.000000")
	}
	storetest.ExecSQL(t, dbURL, `INSERT INTO audit_events (seq, id, tenant_id, event_type, action, actor, agent_id, decision_id, details, created_at)
		VALUES (-1, $1, $2, 'config_change', 'policy_file_reload', 'operator:old', '', '', '{"old":true}', $3)`, id, tenantID, at)
	if strings.HasPrefix(dbURL, "sqlite://") {
		storetest.ExecSQL(t, dbURL, `INSERT INTO audit_events_fts (rowid, event_type, action, actor, agent_id, details)
			SELECT seq, event_type, action, actor, agent_id, details FROM audit_events_search WHERE seq = -1`)
	}
}

// TestE2EMaintenanceJobs runs the leader's maintenance jobs every second on
// a lone node of each backend and on two clustered nodes: GET /status shows
// their runs and the tenant's chain verified; an administrative event older
// than the retention is archived and still listed and packed; a receipt
// altered behind the gateway's back is found, shown as broken at its seq,
// raised as a HIGH receipt_chain_broken alert and sent to the chat webhook.
func TestE2EMaintenanceJobs(t *testing.T) {
	t.Parallel()
	forModes(t, func(t *testing.T, backend string) {
		const secret = "maintenance-webhook-secret"
		chat, sink := newFakeChat(t, secret)
		_, seedB64 := azSeed(t)
		s := startServer(t, backend, map[string]string{"SVC_RECEIPT_INTEGRITY_INTERVAL_SECS": "1", "SVC_AUDIT_ARCHIVAL_INTERVAL_SECS": "1",
			"SVC_VACUUM_INTERVAL_SECS": "1", "SVC_APPROVAL_CLEANUP_INTERVAL_SECS": "1", "SVC_LEADER_ELECTION_INTERVAL_SECS": "1", "SVC_RATE_LIMIT_CAPACITY": "100000",
			"SVC_WEBHOOK_URL": sink.URL + "/hooks/T000", "SVC_WEBHOOK_SECRET": secret, "SVC_ALLOW_PRIVATE_TARGETS": "true",
			"SVC_RECEIPT_SIGNING_KEY": seedB64}) // signed receipts: the job checks signatures too
		tenantID, admin := s.tenant(t, "maintenance-"+uniq())
		_, tok := s.agent(t, admin, "maintained", nil)
		_, viewer := s.opToken(t, admin, "viewer", "viewer")
		for range 5 {
			azDecide(t, s, tok, azRead(nil), "allow", "")
		}
		oldID := randomUUID()
		insertOldAudit(t, s.dbURL, tenantID, oldID, 100*24*time.Hour)

		var st map[string]any
		defer func() {
			if t.Failed() {
				t.Logf("last status: %v", st)
			}
		}()
		checkFor(t, 30*time.Second, "every maintenance job's run and the chain verified", func() bool {
			st = obj(t, s.want(t, 200, "GET", "/v2/status", viewer, nil))
			chain, _ := st["receipt_chain"].(map[string]any)
			if chain["status"] != "verified" || chain["verified_seq"] != chain["head_seq"] || chain["head_seq"] != 5.0 {
				return false
			}
			for _, name := range []string{"receipt_integrity", "audit_archival", "vacuum", "approval_cleanup"} {
				if j := statusJob(t, st, name); j == nil || j["last_outcome"] != "ok" || j["interval_secs"] == nil {
					return false
				}
			}
			return true
		})
		leader, _ := st["leader_node_id"].(string)
		if leader == "" || statusJob(t, st, "receipt_integrity")["last_node_id"] != leader || st["background_tasks"] != "up" ||
			st["audit_writer"] != "ok" {
			t.Errorf("status: %v", st)
		}
		if j := statusJob(t, st, "audit_archival"); !strings.Contains(fmt.Sprint(j["last_summary"]), "archived") {
			t.Errorf("archival job: %v", j)
		}

		// Archived, and still listed and packed.
		checkFor(t, 15*time.Second, "the 100-day-old event archived", func() bool {
			evs := s.auditEvents(t, admin, "event_type=config_change")
			return slices.ContainsFunc(evs, func(e map[string]any) bool { return e["event_id"] == oldID && e["archived"] == true })
		})
		from := time.Now().UTC().Add(-101 * 24 * time.Hour).Format(time.RFC3339)
		to := time.Now().UTC().Add(-99 * 24 * time.Hour).Format(time.RFC3339)
		p := getPack(t, s, admin, "/v2/compliance/evidence-pack?from="+from+"&to="+to)
		if !strings.Contains(string(p.files["audit_events.jsonl"]), oldID) {
			t.Errorf("the compliance pack of the event's day lacks the archived event: %s", p.files["audit_events.jsonl"])
		}

		// A receipt altered behind the gateway's back; the tenant exports
		// its HIGH alerts to a webhook.
		recv := newWhReceiver(t)
		whCreate(t, s, admin, map[string]any{"url": recv.url("/export"), "min_severity": "high"})
		storetest.TamperReceipt(t, s.dbURL, tenantID, 2)
		checkFor(t, 30*time.Second, "the chain shown broken at seq 2", func() bool {
			st = obj(t, s.want(t, 200, "GET", "/v2/status", viewer, nil))
			chain, _ := st["receipt_chain"].(map[string]any)
			return chain["status"] == "broken" && chain["broken_seq"] == 2.0
		})
		waitAlertRule(t, s, admin, "receipt_chain_broken")
		for _, a := range socAlerts(t, s, admin, "") {
			if a["rule_key"] == "receipt_chain_broken" && a["severity"] != "HIGH" {
				t.Errorf("receipt_chain_broken alert: %v", a)
			}
		}
		checkFor(t, 15*time.Second, "the alert at the chat webhook", func() bool {
			chat.mu.Lock()
			defer chat.mu.Unlock()
			return strings.Contains(strings.Join(chat.raws, "\n"), "receipt_chain_broken")
		})
		checkFor(t, 15*time.Second, "the alert at the export webhook", func() bool {
			return slices.ContainsFunc(recv.at("/export"), func(d whDelivery) bool { return strings.Contains(string(d.body), "receipt_chain_broken") })
		})
		if backend != clusterBackend {
			if v := metricValue(t, s, "svc_receipt_chains_broken"); v != 1 {
				t.Errorf("svc_receipt_chains_broken = %v", v)
			}
			if v := metricValue(t, s, `svc_maintenance_job_runs_total{job="receipt_integrity",outcome="ok"}`); v < 2 {
				t.Errorf("receipt_integrity runs = %v", v)
			}
		}
		// Another tenant's chain is its own.
		_, otherAdmin := s.tenant(t, "maintenance-other-"+uniq())
		other := obj(t, s.want(t, 200, "GET", "/v2/status", otherAdmin, nil))
		if c, _ := other["receipt_chain"].(map[string]any); c["status"] == "broken" {
			t.Errorf("another tenant's status: %v", other)
		}
		s.want(t, http.StatusUnauthorized, "GET", "/v2/status", "", nil)
		envelope(t, s.want(t, http.StatusForbidden, "GET", "/v2/status", tok, nil), 403, "v2", "Forbidden") // an agent's token
	})
}

// TestE2ELeaderTakeover: two clustered nodes on one Postgres. One leads
// and runs the maintenance jobs, the other never runs one, and between
// them a job runs once per interval; the leader killed with SIGKILL, the
// other takes over within the lease plus the election interval (measured
// and logged; the bound allows two seconds of scheduling on a busy
// machine), and the jobs go on there.
func TestE2ELeaderTakeover(t *testing.T) {
	t.Parallel()
	const interval, lease = time.Second, 3 * time.Second
	s := startServer(t, clusterBackend, map[string]string{"SVC_LEADER_ELECTION_INTERVAL_SECS": "1", "SVC_LEADER_LEASE_SECS": "3",
		"SVC_RECEIPT_INTEGRITY_INTERVAL_SECS": "1"})
	_, admin := s.tenant(t, "takeover-"+uniq())
	ready := func(n *server) map[string]any {
		resp, raw := n.do(t, "GET", "/readyz", "", nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/readyz %d: %s", resp.StatusCode, raw)
		}
		return obj(t, raw)
	}
	var leader, standby *server
	checkFor(t, 15*time.Second, "exactly one leader", func() bool {
		a, b := ready(s.peers[0])["leader"] == true, ready(s.peers[1])["leader"] == true
		switch {
		case a && !b:
			leader, standby = s.peers[0], s.peers[1]
		case b && !a:
			leader, standby = s.peers[1], s.peers[0]
		default:
			return false
		}
		return true
	})
	const ran = `svc_maintenance_job_runs_total{job="receipt_integrity",outcome="ok"}`
	runs := func(n *server) float64 {
		return statusJob(t, obj(t, n.want(t, 200, "GET", "/v2/status", admin, nil)), "receipt_integrity")["runs"].(float64)
	}
	checkFor(t, 10*time.Second, "the leader's first integrity run", func() bool { return metricValue(t, leader, ran) > 0 })
	before, start := runs(standby), time.Now()
	time.Sleep(5 * time.Second)
	after, window := runs(standby), time.Since(start)
	if n, most := after-before, window.Seconds()+1; n < 2 || n > most {
		t.Errorf("%v integrity runs across both nodes in %v at one per %v", n, window, interval)
	}
	if v := metricValue(t, standby, ran); v != 0 {
		t.Errorf("the standby ran the integrity job %v times", v)
	}

	killed := time.Now()
	if err := leader.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-leader.done
	checkFor(t, 20*time.Second, "the standby to take over", func() bool { return ready(standby)["leader"] == true })
	took := time.Since(killed)
	t.Logf("takeover %v after SIGKILL (lease %v, election interval %v)", took, lease, interval)
	if took > lease+interval+2*time.Second {
		t.Errorf("takeover took %v, more than lease plus interval (%v) with 2 s to spare", took, lease+interval)
	}
	node := ready(standby)["node_id"]
	checkFor(t, 10*time.Second, "the jobs running on the new leader", func() bool {
		st := obj(t, standby.want(t, 200, "GET", "/v2/status", admin, nil))
		return statusJob(t, st, "receipt_integrity")["last_node_id"] == node && st["leader_node_id"] == node
	})
}
