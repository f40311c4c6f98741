package postgres

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"svc/persistence/storetest"
)

// BenchmarkOneRecordMigration times migration 0014 on a database of
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
		url := storetest.PostgresURL(b)
		old, err := Open(ctx, Options{URL: url, PoolSize: 2, upTo: 13})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := old.pool.Exec(ctx, strings.ReplaceAll(oldLayoutRows, "$ROWS", strconv.Itoa(rows))); err != nil {
			b.Fatal(err)
		}
		old.close()
		b.StartTimer()
		s, err := Open(ctx, Options{URL: url, PoolSize: 2})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		s.close()
	}
	b.ReportMetric(float64(rows), "decisions")
}

// oldLayoutRows writes $ROWS decisions of one tenant, one a second, as the
// code before migration 0014 did: the decision, its receipt and its
// authorize_decision audit event.
const oldLayoutRows = `INSERT INTO tenants (id, name) VALUES ('t1', 'big');
INSERT INTO decisions (id, tenant_id, agent_id, tool, action, action_hash, decision, reason, risk_score, composite_risk_score,
  matched_policy_ids, redacted_fields, mutates_state, trust_level, root_trust_level, tool_call, created_at, receipt_id)
SELECT format('d-%s', i), 't1', format('agent-%s', i % 50), 'crm', 'read', lpad(i::text, 64, '0'), 'allow', 'default_allow_read', 0, 0,
  '["default_allow_read"]', '[]', false, 'unknown', 'unknown', '{}', timestamptz '2026-01-01' + i * interval '1 second', format('r-%s', i)
FROM generate_series(1, $ROWS) i;
INSERT INTO receipts (id, tenant_id, seq, decision_id, action_hash, decision, receipt_hash, prev_receipt_hash, signature, key_id, created_at)
SELECT receipt_id, tenant_id, seq, id, action_hash, decision, lpad(seq::text, 64, '0'), lpad((seq - 1)::text, 64, '0'), 'sig', 'k', created_at FROM decisions;
INSERT INTO audit_events (id, tenant_id, event_type, action, actor, agent_id, decision_id, details, created_at)
SELECT format('a-%s', seq), tenant_id, 'authorize_decision', decision, 'agent:' || agent_id, agent_id, id,
  '{"action":"allow","tool":"crm","receipt_id":"' || receipt_id || '"}', created_at FROM decisions`
