package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"svc/persistence"
)

// ---- audit ----

// insertAudit writes audit events within q. Audit events and decisions
// number their rows from one sequence (the audit list merges them), which
// Postgres draws from a shared sequence by default and SQLite allocates
// here (Dialect.AllocSeq).
func (s *Store) insertAudit(ctx context.Context, q Querier, events []persistence.AuditEvent) error {
	if len(events) == 0 {
		return nil
	}
	var next int64
	if s.Dialect.AllocSeq != nil {
		last, err := s.Dialect.AllocSeq(ctx, q, len(events))
		if err != nil {
			return err
		}
		next = last - int64(len(events)) + 1
	}
	for _, e := range events {
		details := "{}"
		if e.Details != nil {
			raw, err := json.Marshal(e.Details)
			if err != nil {
				return fmt.Errorf("sqlstore: audit details: %w", err)
			}
			details = string(raw)
		}
		at := e.CreatedAt
		if at.IsZero() {
			at = now()
		}
		var err error
		if next > 0 {
			_, err = q.Exec(ctx, `INSERT INTO audit_events
				(seq, id, tenant_id, event_type, action, actor, agent_id, decision_id, details, created_at)
				VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)`,
				next, e.ID, e.TenantID, e.EventType, e.Action, e.Actor, e.AgentID, e.DecisionID, details, at)
			next++
		} else {
			_, err = q.Exec(ctx, `INSERT INTO audit_events
				(id, tenant_id, event_type, action, actor, agent_id, decision_id, details, created_at)
				VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9)`,
				e.ID, e.TenantID, e.EventType, e.Action, e.Actor, e.AgentID, e.DecisionID, details, at)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// AppendAudit implements persistence.AuditStore.
func (s *Store) AppendAudit(ctx context.Context, events []persistence.AuditEvent) error {
	if len(events) == 0 {
		return nil
	}
	return s.DB.Tx(ctx, func(q Querier) error { return s.insertAudit(ctx, q, events) })
}

// ListAudit implements persistence.AuditStore. The list merges two kinds
// of rows, newest first by their shared sequence: administrative events
// (audit_events) and decisions read as their authorize_decision events
// (persistence.Decision.AuditEvent). Each side reads at most the rows the
// page can show, through its (tenant_id, seq) index: a decision only the
// columns its event is made of.
func (s *Store) ListAudit(ctx context.Context, tenantID string, f persistence.AuditFilter, p persistence.Page) ([]persistence.AuditEvent, error) {
	terms := persistence.SanitizeQuery(f.Query)
	if len(terms) > 0 {
		if err := s.catchUpSearch(ctx); err != nil {
			return nil, err
		}
	}
	args := []any{tenantID}
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	window := p.Limit + 1
	var after string // the cursor's placeholder
	if p.After > 0 {
		after = arg(p.After)
	} else {
		window += p.Offset
	}
	limit := arg(window)
	var sides []string
	if f.EventType == "" || f.EventType == persistence.EventAuthorizeDecision {
		side := `SELECT 1 AS kind, d.seq, d.audit_id, d.tenant_id, '` + persistence.EventAuthorizeDecision + `' AS event_type, d.decision, '' AS actor,
			d.agent_id, d.id, d.audit_details, d.created_at, d.tool, d.action, d.reason, d.matched_policy_ids, d.action_hash,
			COALESCE(d.receipt_id, ''), COALESCE(d.approval_id, '')
			FROM decisions d WHERE d.tenant_id = $1 AND d.audit_id IS NOT NULL`
		if after != "" {
			side += ` AND d.seq < ` + after
		}
		if len(terms) > 0 {
			cond, v := s.Dialect.AuthorizeSearch(terms, len(args)+1)
			args = append(args, v)
			side += ` AND ` + cond
		}
		sides = append(sides, side+` ORDER BY d.seq DESC LIMIT `+limit)
	}
	var eventType string
	if f.EventType != "" {
		eventType = arg(f.EventType)
	}
	// Administrative events: the hot table, and the archive (kind 2) that
	// the archival job moves old ones to, which has no full-text index: a
	// keyword search does not reach it (docs/operations.md, "Maintenance jobs").
	for kind, table := range []string{"audit_events", "audit_archive"} {
		if kind == 1 && len(terms) > 0 {
			break
		}
		side := fmt.Sprintf(`SELECT %d, seq, id, tenant_id, event_type, action, actor, agent_id, decision_id, details, created_at,
		'', '', '', '[]', '', '', '' FROM %s WHERE tenant_id = $1`, kind*2, table)
		if after != "" {
			side += ` AND seq < ` + after
		}
		if eventType != "" {
			side += ` AND event_type = ` + eventType
		}
		if len(terms) > 0 {
			cond, v := s.Dialect.AuditSearch(terms, len(args)+1)
			args = append(args, v)
			side += ` AND ` + cond
		}
		sides = append(sides, side+` ORDER BY seq DESC LIMIT `+limit)
	}
	parts := make([]string, len(sides))
	for i, side := range sides {
		parts[i] = fmt.Sprintf(`SELECT * FROM (%s) s%d`, side, i)
	}
	q := `SELECT * FROM (` + strings.Join(parts, ` UNION ALL `) + `) u`
	q += ` ORDER BY seq DESC LIMIT ` + arg(p.Limit+1)
	if p.After <= 0 {
		q += ` OFFSET ` + arg(p.Offset)
	}
	rows, err := s.DB.Replica().Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanAuditRow)
}

// scanAuditRow reads one row of ListAudit's merge: an audit event's own
// columns, and for a decision (kind 1) the columns its event derives from.
func scanAuditRow(r Row) (persistence.AuditEvent, error) {
	var kind int
	var e persistence.AuditEvent
	var details *string
	var d persistence.Decision
	var policies string
	if err := r.Scan(&kind, &e.Seq, &e.ID, &e.TenantID, &e.EventType, &e.Action, &e.Actor, &e.AgentID, &e.DecisionID, &details,
		Time{&e.CreatedAt}, &d.Tool, &d.Action, &d.Reason, &policies, &d.ActionHash, &d.ReceiptID, &d.ApprovalID); err != nil {
		return e, err
	}
	var parsed map[string]any
	if details != nil {
		if err := json.Unmarshal([]byte(*details), &parsed); err != nil {
			return e, fmt.Errorf("sqlstore: audit details: %w", err)
		}
	}
	if kind != 1 { // an administrative event, 2 from the archive
		e.Details, e.Archived = parsed, kind == 2
		return e, nil
	}
	if err := json.Unmarshal([]byte(policies), &d.MatchedPolicyIDs); err != nil {
		return e, fmt.Errorf("sqlstore: matched_policy_ids: %w", err)
	}
	d.Seq, d.ID, d.TenantID, d.AgentID, d.Decision, d.AuditID, d.CreatedAt = e.Seq, e.DecisionID, e.TenantID, e.AgentID, e.Action, e.ID, e.CreatedAt
	if parsed != nil {
		d = d.WithAuditDetails(parsed)
	}
	return d.AuditEvent(), nil
}
