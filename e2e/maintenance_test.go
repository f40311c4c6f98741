package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"svc/persistence/storetest"
	"svc/testkit"
	"svc/testkit/gateway"
)

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
	gateway.ForModes(t, func(t *testing.T, backend string) {
		const secret = "maintenance-webhook-secret"
		chat, sink := newFakeChat(t, secret)
		_, seedB64 := gateway.AzSeed(t)
		s := gateway.Start(t, backend, map[string]string{"SVC_RECEIPT_INTEGRITY_INTERVAL_SECS": "1", "SVC_AUDIT_ARCHIVAL_INTERVAL_SECS": "1",
			"SVC_VACUUM_INTERVAL_SECS": "1", "SVC_APPROVAL_CLEANUP_INTERVAL_SECS": "1", "SVC_LEADER_ELECTION_INTERVAL_SECS": "1", "SVC_RATE_LIMIT_CAPACITY": "100000",
			"SVC_WEBHOOK_URL": sink.URL + "/hooks/T000", "SVC_WEBHOOK_SECRET": secret, "SVC_ALLOW_PRIVATE_TARGETS": "true",
			"SVC_RECEIPT_SIGNING_KEY": seedB64}) // signed receipts: the job checks signatures too
		tenantID, admin := s.Tenant(t, "maintenance-"+testkit.Uniq())
		_, tok := s.Agent(t, admin, "maintained", nil)
		_, viewer := s.OpToken(t, admin, "viewer", "viewer")
		for range 5 {
			gateway.AzDecide(t, s, tok, gateway.AzRead(nil), "allow", "")
		}
		oldID := testkit.RandomUUID()
		insertOldAudit(t, s.DBURL, tenantID, oldID, 100*24*time.Hour)

		var st map[string]any
		defer func() {
			if t.Failed() {
				t.Logf("last status: %v", st)
			}
		}()
		testkit.Eventually(t, 30*time.Second, "every maintenance job's run and the chain verified", func() bool {
			st = testkit.Obj(t, s.Want(t, 200, "GET", "/v2/status", viewer, nil))
			chain, _ := st["receipt_chain"].(map[string]any)
			if chain["status"] != "verified" || chain["verified_seq"] != chain["head_seq"] || chain["head_seq"] != 5.0 {
				return false
			}
			for _, name := range []string{"receipt_integrity", "audit_archival", "vacuum", "approval_cleanup"} {
				if j := gateway.StatusJob(t, st, name); j == nil || j["last_outcome"] != "ok" || j["interval_secs"] == nil {
					return false
				}
			}
			return true
		})
		leader, _ := st["leader_node_id"].(string)
		if leader == "" || gateway.StatusJob(t, st, "receipt_integrity")["last_node_id"] != leader || st["background_tasks"] != "up" ||
			st["audit_writer"] != "ok" {
			t.Errorf("status: %v", st)
		}
		if j := gateway.StatusJob(t, st, "audit_archival"); !strings.Contains(fmt.Sprint(j["last_summary"]), "archived") {
			t.Errorf("archival job: %v", j)
		}

		// Archived, and still listed and packed.
		testkit.Eventually(t, 15*time.Second, "the 100-day-old event archived", func() bool {
			evs := s.AuditEvents(t, admin, "event_type=config_change")
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
		storetest.TamperReceipt(t, s.DBURL, tenantID, 2)
		testkit.Eventually(t, 30*time.Second, "the chain shown broken at seq 2", func() bool {
			st = testkit.Obj(t, s.Want(t, 200, "GET", "/v2/status", viewer, nil))
			chain, _ := st["receipt_chain"].(map[string]any)
			return chain["status"] == "broken" && chain["broken_seq"] == 2.0
		})
		waitAlertRule(t, s, admin, "receipt_chain_broken")
		for _, a := range socAlerts(t, s, admin, "") {
			if a["rule_key"] == "receipt_chain_broken" && a["severity"] != "HIGH" {
				t.Errorf("receipt_chain_broken alert: %v", a)
			}
		}
		testkit.Eventually(t, 15*time.Second, "the alert at the chat webhook", func() bool {
			chat.mu.Lock()
			defer chat.mu.Unlock()
			return strings.Contains(strings.Join(chat.raws, "\n"), "receipt_chain_broken")
		})
		testkit.Eventually(t, 15*time.Second, "the alert at the export webhook", func() bool {
			return slices.ContainsFunc(recv.at("/export"), func(d whDelivery) bool { return strings.Contains(string(d.body), "receipt_chain_broken") })
		})
		if backend != gateway.ClusterBackend {
			if v := gateway.MetricValue(t, s, "svc_receipt_chains_broken"); v != 1 {
				t.Errorf("svc_receipt_chains_broken = %v", v)
			}
			if v := gateway.MetricValue(t, s, `svc_maintenance_job_runs_total{job="receipt_integrity",outcome="ok"}`); v < 2 {
				t.Errorf("receipt_integrity runs = %v", v)
			}
		}
		// Another tenant's chain is its own.
		_, otherAdmin := s.Tenant(t, "maintenance-other-"+testkit.Uniq())
		other := testkit.Obj(t, s.Want(t, 200, "GET", "/v2/status", otherAdmin, nil))
		if c, _ := other["receipt_chain"].(map[string]any); c["status"] == "broken" {
			t.Errorf("another tenant's status: %v", other)
		}
		s.Want(t, http.StatusUnauthorized, "GET", "/v2/status", "", nil)
		gateway.Envelope(t, s.Want(t, http.StatusForbidden, "GET", "/v2/status", tok, nil), 403, "v2", "Forbidden") // an agent's token
	})
}
