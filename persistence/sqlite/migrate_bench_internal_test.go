package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"svc/persistence/sqlstore"
)

// BenchmarkOneRecordMigration times migration 0012 on a database of
// SVC_BENCH_MIGRATION_ROWS decisions (default 20,000) written in the old
// layout: each decision with its receipt and authorize_decision event.
func BenchmarkOneRecordMigration(b *testing.B) {
	rows := 20000
	if n, err := strconv.Atoi(os.Getenv("SVC_BENCH_MIGRATION_ROWS")); err == nil && n > 0 {
		rows = n
	}
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		path := filepath.Join(b.TempDir(), "before.db")
		old, err := Open(ctx, Options{Path: path, upTo: 11})
		if err != nil {
			b.Fatal(err)
		}
		script := strings.ReplaceAll(oldLayoutRows, "$ROWS", strconv.Itoa(rows))
		if err := old.DB.Tx(ctx, func(q sqlstore.Querier) error {
			for _, stmt := range strings.Split(script, ";\n") {
				if _, err := q.Exec(ctx, stmt); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		if err := old.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		s, err := Open(ctx, Options{Path: path})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_ = s.Close()
	}
	b.ReportMetric(float64(rows), "decisions")
}

// oldLayoutRows writes $ROWS decisions of one tenant, one a second, as the
// code before migration 0012 did: the decision, its receipt and its
// authorize_decision audit event, indexed for search.
const oldLayoutRows = `INSERT INTO tenants (id, name) VALUES ('t1', 'big');
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < $ROWS)
INSERT INTO decisions (id, tenant_id, agent_id, tool, action, action_hash, decision, reason, risk_score, composite_risk_score,
  matched_policy_ids, redacted_fields, mutates_state, trust_level, root_trust_level, tool_call, created_at, receipt_id)
SELECT printf('d-%08d', i), 't1', printf('agent-%d', i % 50), 'crm', 'read', printf('%064d', i), 'allow', 'default_allow_read', 0, 0,
  '["default_allow_read"]', '[]', 0, 'unknown', 'unknown', '{}', strftime('%Y-%m-%d %H:%M:%f', '2026-01-01', printf('+%d seconds', i)),
  printf('r-%08d', i) FROM n;
INSERT INTO receipts (id, tenant_id, seq, decision_id, action_hash, decision, receipt_hash, prev_receipt_hash, signature, key_id, created_at)
SELECT receipt_id, tenant_id, seq, id, action_hash, decision, printf('%064d', seq), printf('%064d', seq - 1), 'sig', 'k', created_at FROM decisions;
INSERT INTO audit_events (id, tenant_id, event_type, action, actor, agent_id, decision_id, details, created_at)
SELECT printf('a-%08d', seq), tenant_id, 'authorize_decision', decision, 'agent:' || agent_id, agent_id, id,
  '{"action":"allow","tool":"crm","receipt_id":"' || receipt_id || '"}', created_at FROM decisions;
INSERT INTO decisions_fts (decisions_fts) VALUES ('rebuild');
INSERT INTO audit_events_fts (audit_events_fts) VALUES ('rebuild');
UPDATE search_progress SET upto = (SELECT max(seq) FROM decisions) WHERE name = 'decisions';
UPDATE search_progress SET upto = (SELECT max(seq) FROM audit_events) WHERE name = 'audit_events'`
