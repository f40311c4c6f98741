package postgres

import (
	"context"
	"os"
	"testing"

	"svc/persistence/storetest"
)

// A database written before migration 0014 (a decision was three rows:
// decision, receipt, audit event) reads the same afterwards: decisions,
// a receipt chain that verifies, and the audit list in time order. The
// rollback script then takes it back to 0013 with the rows written since,
// and 0014 applied again finds them all.
func TestOneRecordMigratesPopulatedDatabase(t *testing.T) {
	ctx := context.Background()
	url := storetest.PostgresURL(t)
	old, err := Open(ctx, Options{URL: url, PoolSize: 2, upTo: 13})
	if err != nil {
		t.Fatal(err)
	}
	before := storetest.PopulateBeforeOneRecord(t, old.DB)
	old.close()
	s, err := Open(ctx, Options{URL: url, PoolSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	before = storetest.CheckOneRecord(t, s, before)

	// Newest first, as docs/operations.md's rollback story says.
	for _, name := range []string{"rollback/0024_shadow_policies.sql", "rollback/0023_receipt_witnesses.sql", "rollback/0022_receipt_log.sql", "rollback/0021_run_context.sql", "rollback/0020_mcp_proxy.sql", "rollback/0019_approval_callbacks.sql", "rollback/0018_codehost.sql", "rollback/0017_maintenance.sql", "rollback/0016_mcp.sql", "rollback/0015_evidence_links.sql", "rollback/0014_one_record.sql"} {
		script, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.pool.Exec(ctx, string(script)); err != nil {
			t.Fatalf("rollback %s: %v", name, err)
		}
	}
	var receipts, events, version int
	if err := s.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM receipts), (SELECT count(*) FROM audit_events WHERE event_type = 'authorize_decision'),
		(SELECT max(version) FROM schema_migrations)`).Scan(&receipts, &events, &version); err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, ds := range before.Decisions {
		want += len(ds)
	}
	if receipts != want || events != want || version != 13 {
		t.Fatalf("after the rollback: %d receipts, %d authorize events, schema %d; want %d, %d, 13", receipts, events, version, want, want)
	}
	s.close()

	again, err := Open(ctx, Options{URL: url, PoolSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = again.Close() }()
	storetest.CheckOneRecord(t, again, before)
}
