package sqlite

import (
	"context"
	"fmt"
	"strings"

	"svc/persistence/sqlstore"
)

// matchQuery is FTS5 query text matching every term, the last as a prefix,
// each within the columns colspec names ("" for all).
func matchQuery(terms []string, colspec string) string {
	quoted := make([]string, len(terms))
	for i, t := range terms {
		quoted[i] = colspec + `"` + t + `"`
	}
	quoted[len(quoted)-1] += "*"
	return strings.Join(quoted, " ")
}

// auditSearch matches every term, the last as a prefix, in the audit
// events' FTS5 index.
func auditSearch(terms []string, n int) (string, any) {
	return fmt.Sprintf(`seq IN (SELECT rowid FROM audit_events_fts WHERE audit_events_fts MATCH $%d)`, n), matchQuery(terms, "")
}

// decisionSearch matches every term, the last as a prefix, in the
// decisions' FTS5 index, outside the column that only the decision's
// audit event is searched by (event).
func decisionSearch(terms []string, n int) (string, any) {
	return fmt.Sprintf(`d.seq IN (SELECT rowid FROM decisions_fts WHERE decisions_fts MATCH $%d)`, n), matchQuery(terms, "- event : ")
}

// authorizeSearch matches every term, the last as a prefix, in every
// column of the decisions' FTS5 index (a decision read as its audit event).
func authorizeSearch(terms []string, n int) (string, any) {
	return fmt.Sprintf(`d.seq IN (SELECT rowid FROM decisions_fts WHERE decisions_fts MATCH $%d)`, n), matchQuery(terms, "")
}

// bulkIndexes are what the group writer keeps in bulk: the FTS5 indexes
// (migration 0007) and, since migration 0013, the decisions by agent and by
// run. Each holds its table's rows with seq above search_progress.upto
// (by its name), read through the view that removes hyphens for the
// full-text ones (migrations 0008 and 0012). bulk is the backlog at which
// a group commit adds them (a search or an evidence read first adds
// whatever waits); chunk bounds the rows one call adds, so that the commit
// that carries it stays short.
var bulkIndexes = []struct {
	name, table, insert string
	bulk, chunk         int64
}{
	{"decisions", "decisions", `INSERT INTO decisions_fts (rowid, tool, action, resource, decision, reason, matched_policy_ids, agent_id, run_id, event)
		SELECT seq, tool, action, resource, decision, reason, matched_policy_ids, agent_id, run_id, event FROM decisions_search
		WHERE seq > $1 AND seq <= $2`, sqlstore.SearchBatch, searchChunk},
	{"audit_events", "audit_events", `INSERT INTO audit_events_fts (rowid, event_type, action, actor, agent_id, details)
		SELECT seq, event_type, action, actor, agent_id, details FROM audit_events_search WHERE seq > $1 AND seq <= $2`,
		sqlstore.SearchBatch, searchChunk},
	// Sorted, so that each agent's and each run's leaf page is written once
	// per bulk; larger bulks than the full-text ones, since a leaf per
	// agent is what a row-by-row index paid in every commit.
	{"decision_agents", "decisions", `INSERT INTO decision_agents (tenant_id, agent_id, created_at, seq, composite_risk_score)
		SELECT tenant_id, agent_id, created_at, seq, composite_risk_score FROM decisions WHERE seq > $1 AND seq <= $2
		ORDER BY tenant_id, agent_id, created_at, seq`, linkBatch, linkBatch},
	{"decision_runs", "decisions", `INSERT INTO decision_runs (tenant_id, run_id, seq)
		SELECT tenant_id, run_id, seq FROM decisions WHERE seq > $1 AND seq <= $2 AND run_id IS NOT NULL
		ORDER BY tenant_id, run_id, seq`, linkBatch, linkBatch},
}

// searchChunk bounds the rows one full-text step adds per index.
const searchChunk = 2048

// linkBatch is the bulk of the agent and run tables: at 5,000 decisions/s
// a commit carries it about five times a second.
const linkBatch = 1024

// progressQuery reads, per bulk index, the last row added and the last row
// written (one row, so that the writer runs it prepared). Decisions and
// audit events share one sequence, so last - upto counts the other table's
// rows in between too: an upper bound of the backlog.
var progressQuery = func() string {
	var cols []string
	for _, ix := range bulkIndexes {
		cols = append(cols, fmt.Sprintf("(SELECT upto FROM search_progress WHERE name = '%s'), (SELECT COALESCE(max(seq), 0) FROM %s)", ix.name, ix.table))
	}
	return "SELECT " + strings.Join(cols, ", ")
}()

func readProgress(ctx context.Context, q sqlstore.Querier) (upto, last []int64, err error) {
	upto, last = make([]int64, len(bulkIndexes)), make([]int64, len(bulkIndexes))
	dest := make([]any, 0, 2*len(bulkIndexes))
	for i := range bulkIndexes {
		dest = append(dest, &upto[i], &last[i])
	}
	err = q.QueryRow(ctx, progressQuery).Scan(dest...)
	return upto, last, err
}

// indexSearch implements sqlstore.Dialect.IndexSearch: each bulk index
// that has at least max(atLeast, its bulk) rows waiting (atLeast 1: any)
// gets up to its chunk of them, within q.
func indexSearch(ctx context.Context, q sqlstore.Querier, atLeast int64) (bool, error) {
	upto, last, err := readProgress(ctx, q)
	if err != nil {
		return false, err
	}
	more := false
	for i, ix := range bulkIndexes {
		threshold := atLeast
		if atLeast > 1 {
			threshold = max(atLeast, ix.bulk)
		}
		if last[i]-upto[i] < threshold || last[i] <= upto[i] {
			continue
		}
		// The chunk ends at its chunk-th waiting row (seq values of a
		// table have gaps: the other table's rows).
		to := last[i]
		var nth int64
		err := q.QueryRow(ctx, `SELECT seq FROM `+ix.table+` WHERE seq > $1 ORDER BY seq LIMIT 1 OFFSET $2`, upto[i], ix.chunk-1).Scan(&nth)
		switch {
		case err == nil && nth < last[i]:
			to, more = nth, true
		case err != nil && !sqlstore.IsNoRows(err):
			return false, err
		}
		if _, err := q.Exec(ctx, ix.insert, upto[i], to); err != nil {
			return false, err
		}
		if _, err := q.Exec(ctx, `UPDATE search_progress SET upto = $1 WHERE name = $2`, to, ix.name); err != nil {
			return false, err
		}
	}
	return more, nil
}

// searchBacklog implements sqlstore.Dialect.SearchBacklog.
func searchBacklog(ctx context.Context, q sqlstore.Querier) (int64, error) {
	upto, last, err := readProgress(ctx, q)
	var n int64
	for i := range upto {
		n += max(last[i]-upto[i], 0)
	}
	return n, err
}
