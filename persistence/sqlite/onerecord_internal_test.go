package sqlite

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"svc/persistence/storetest"
)

// A database written before migration 0012 (a decision was three rows:
// decision, receipt, audit event) reads the same afterwards: decisions,
// a receipt chain that verifies, and the audit list in time order. The
// rollback script then takes it back to 0011 with the rows written since,
// and 0012 applied again finds them all.
func TestOneRecordMigratesPopulatedDatabase(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "before.db")
	old, err := Open(ctx, Options{Path: path, upTo: 11})
	if err != nil {
		t.Fatal(err)
	}
	before := storetest.PopulateBeforeOneRecord(t, old.DB)
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	before = storetest.CheckOneRecord(t, s, before)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	// Newest first, as README's rollback story says.
	for _, name := range []string{"rollback/0022_shadow_policies.sql", "rollback/0021_receipt_witnesses.sql", "rollback/0020_receipt_log.sql", "rollback/0019_run_context.sql", "rollback/0018_mcp_proxy.sql", "rollback/0017_approval_callbacks.sql", "rollback/0016_codehost.sql", "rollback/0015_maintenance.sql", "rollback/0014_mcp.sql", "rollback/0013_evidence_links.sql", "rollback/0012_one_record.sql"} {
		script, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := raw.ExecContext(ctx, string(script)); err != nil {
			t.Fatalf("rollback %s: %v", name, err)
		}
	}
	var receipts, events, version int
	if err := raw.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM receipts), (SELECT count(*) FROM audit_events WHERE event_type = 'authorize_decision'),
		(SELECT max(version) FROM schema_migrations)`).Scan(&receipts, &events, &version); err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, ds := range before.Decisions {
		want += len(ds)
	}
	if receipts != want || events != want || version != 11 {
		t.Fatalf("after the rollback: %d receipts, %d authorize events, schema %d; want %d, %d, 11", receipts, events, version, want, want)
	}
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}

	again, err := Open(ctx, Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	storetest.CheckOneRecord(t, again, before)
}

// Each read of a decision's record goes through the index listed for it in
// migration 0012 (without statistics, SQLite once planned a receipt by id
// through the tenant's chain index, reading the whole chain).
func TestRecordReadsUseTheirIndexes(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "plans.db")
	s, err := Open(ctx, Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// A sort of rows that tie on created_at (by seq, the last ORDER BY
	// term) is the only extra step a plan may take.
	const tieSort = "USE TEMP B-TREE FOR LAST TERM OF ORDER BY"
	for _, c := range []struct{ query, index string }{
		{`SELECT id FROM receipts WHERE tenant_id = 'a' AND id = 'b'`, "decisions_receipt (receipt_id=?)"},
		{`SELECT id FROM receipts WHERE tenant_id = 'a' AND id IN ('b', 'c')`, "decisions_receipt (receipt_id=?)"},
		{`SELECT id FROM receipts WHERE tenant_id = 'a' AND seq >= 1 AND seq <= 5 ORDER BY seq`, "decisions_receipt_seq (tenant_id=? AND receipt_seq>? AND receipt_seq<?)"},
		{`SELECT d.reason FROM decisions d WHERE d.tenant_id = 'a' AND d.id = 'b'`, "sqlite_autoindex_decisions_1 (id=?)"},
		{`SELECT d.reason FROM decisions d WHERE d.tenant_id = 'a' AND d.agent_id = 'x' AND d.request_id = 'r'`, "decisions_request (tenant_id=? AND agent_id=? AND request_id=?)"},
		{`SELECT d.reason FROM decisions d WHERE d.tenant_id = 'a' AND d.audit_id IS NOT NULL ORDER BY d.seq DESC LIMIT 10`, "decisions_tenant (tenant_id=?)"},
		// The evidence graph, the packs and the scoreboard (migration 0013):
		// the side tables kept in bulk, read by their keys.
		{`SELECT seq FROM decision_agents WHERE tenant_id = 'a' AND agent_id = 'x' ORDER BY created_at DESC, seq DESC LIMIT 50`, "PRIMARY KEY (tenant_id=? AND agent_id=?)"},
		{`SELECT seq FROM decision_runs WHERE tenant_id = 'a' AND run_id = 'r' ORDER BY seq DESC LIMIT 1000`, "PRIMARY KEY (tenant_id=? AND run_id=?)"},
		{`SELECT SUM(CASE WHEN created_at < '2' THEN composite_risk_score ELSE 0 END), COUNT(*) FROM decision_agents WHERE tenant_id = 'a' AND agent_id = 'x' AND created_at >= '1' AND created_at < '3'`, "PRIMARY KEY (tenant_id=? AND agent_id=? AND created_at>? AND created_at<?)"},
		{`SELECT id FROM alerts WHERE tenant_id = 'a' AND source_event_id IN ('e', 'f')`, "alerts_source_event (tenant_id=? AND source_event_id=?)"},
		// The inline MCP proxy's approval by agent and action hash (0018).
		{`SELECT id FROM approvals WHERE tenant_id = 'a' AND agent_id = 'x' AND action_hash = 'h' AND status = 'APPROVED'
			AND consumed_at IS NULL AND expires_at > '1' ORDER BY seq DESC LIMIT 1`, "approvals_usable (tenant_id=? AND agent_id=? AND action_hash=?)"},
	} {
		rows, err := s.reader.QueryContext(ctx, `EXPLAIN QUERY PLAN `+c.query)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		_ = rows.Close()
		if len(plan) == 2 && plan[1] == tieSort {
			plan = plan[:1]
		}
		if len(plan) != 1 || !strings.HasSuffix(plan[0], "USING INDEX "+c.index) && !strings.HasSuffix(plan[0], "USING COVERING INDEX "+c.index) &&
			!strings.HasSuffix(plan[0], "USING "+c.index) {
			t.Errorf("%s\nplanned as %q, want one search using index %s", c.query, plan, c.index)
		}
	}
}
