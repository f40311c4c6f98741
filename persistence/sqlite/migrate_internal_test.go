package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"svc/persistence"
	"svc/persistence/sqlstore"
)

// A database written before migration 0008 (its full-text indexes split ids
// at their hyphens) is indexed again when it is opened: its rows are found by
// an id pasted whole, both indexes pass FTS5's integrity-check, and deleting
// those rows afterwards (through the new delete triggers) keeps them so.
func TestSearchHyphensMigratesOldRows(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	ms, err := sqlstore.LoadMigrations(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	var before []sqlstore.Migration
	for _, m := range ms {
		if m.Version < 8 {
			before = append(before, m)
		}
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	if _, err := sqlstore.Migrate(ctx, (*dbAdapter)(&Store{reader: db, writer: db}), before, ""); err != nil {
		t.Fatal(err)
	}
	tenantID, agentID := uuid.NewString(), uuid.NewString()
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`INSERT INTO tenants (id, name) VALUES (?, 'old')`, tenantID)
	const rows = 5
	for i := 0; i < rows; i++ {
		exec(`INSERT INTO decisions (id, tenant_id, agent_id, tool, action, action_hash, decision, reason, risk_score, composite_risk_score,
			mutates_state, trust_level, root_trust_level) VALUES (?, ?, ?, 'send-email', 'send', 'ab', 'allow', 'fine', 0, 0, 0, 'unknown', 'unknown')`,
			uuid.NewString(), tenantID, agentID)
		exec(`INSERT INTO audit_events (id, tenant_id, event_type, action, agent_id, details) VALUES (?, ?, 'authorize_decision', 'allow', ?, '{"tool":"send-email"}')`,
			uuid.NewString(), tenantID, agentID)
	}
	// Indexed as the code before 0008 did, straight from the tables.
	exec(`INSERT INTO decisions_fts (rowid, tool, action, resource, decision, reason, matched_policy_ids, agent_id, run_id)
		SELECT seq, tool, action, resource, decision, reason, matched_policy_ids, agent_id, run_id FROM decisions`)
	exec(`INSERT INTO audit_events_fts (rowid, event_type, action, actor, agent_id, details)
		SELECT seq, event_type, action, actor, agent_id, details FROM audit_events`)
	exec(`UPDATE search_progress SET upto = ?`, rows)
	var split int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM decisions_fts WHERE decisions_fts MATCH ?`, `"`+strings.ReplaceAll(agentID, "-", "")+`"`).Scan(&split); err != nil || split != 0 {
		t.Fatalf("before 0008 an id pasted whole matched %d rows (%v); want 0", split, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := Open(ctx, Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ds, err := s.ListDecisions(ctx, tenantID, agentID, persistence.Page{Limit: 50})
	if err != nil || len(ds) != rows {
		t.Fatalf("after 0008, q=<agent id>: %d decisions (%v); want %d", len(ds), err, rows)
	}
	es, err := s.ListAudit(ctx, tenantID, persistence.AuditFilter{Query: "send-email"}, persistence.Page{Limit: 50})
	if err != nil || len(es) != rows {
		t.Fatalf("after 0008, q=send-email: %d audit events (%v); want %d", len(es), err, rows)
	}
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	check := func(when string) {
		t.Helper()
		for _, fts := range []string{"decisions_fts", "audit_events_fts"} {
			stmt := `INSERT INTO ` + fts + ` (` + fts + `, rank) VALUES ('integrity-check', 1)` //nolint:gosec // fixed table names
			if _, err := raw.ExecContext(ctx, stmt); err != nil {
				t.Fatalf("%s: %s integrity-check: %v", when, fts, err)
			}
		}
	}
	check("after the migration")
	if err := s.DeleteTenant(ctx, tenantID); err != nil {
		t.Fatal(err)
	}
	check("after deleting the migrated rows")
	var left int
	if err := raw.QueryRowContext(ctx, `SELECT count(*) FROM decisions_fts WHERE decisions_fts MATCH 'sendemail'`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("after the deletion the index still matches %d rows (%v)", left, err)
	}
}
