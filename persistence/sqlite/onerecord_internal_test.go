package sqlite

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
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

	script, err := os.ReadFile("rollback/0012_one_record.sql")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.ExecContext(ctx, string(script)); err != nil {
		t.Fatalf("rollback: %v", err)
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
