package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"svc/persistence"
)

// ---- custom rules ----

const ruleCols = `tenant_id, rule_key, alert_name, severity, enabled, condition, created_at, updated_at`

func scanRule(row Row) (persistence.CustomRule, error) {
	var r persistence.CustomRule
	var cond string
	err := row.Scan(&r.TenantID, &r.Key, &r.AlertName, &r.Severity, &r.Enabled, &cond, Time{&r.CreatedAt}, Time{&r.UpdatedAt})
	if IsNoRows(err) {
		return r, persistence.ErrNotFound
	}
	r.Condition = json.RawMessage(cond)
	return r, err
}

// PutRule implements persistence.SOCStore.
func (s *Store) PutRule(ctx context.Context, r persistence.CustomRule, audit ...persistence.AuditEvent) (persistence.CustomRule, error) {
	var out persistence.CustomRule
	err := s.DB.Tx(ctx, func(q Querier) error {
		if _, err := q.Exec(ctx, `INSERT INTO soc_rules (`+ruleCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $7)
			ON CONFLICT (tenant_id, rule_key) DO UPDATE SET alert_name = excluded.alert_name, severity = excluded.severity,
			enabled = excluded.enabled, condition = excluded.condition, updated_at = excluded.updated_at`,
			r.TenantID, r.Key, r.AlertName, r.Severity, r.Enabled, string(r.Condition), r.UpdatedAt); err != nil {
			return err
		}
		if err := s.insertAudit(ctx, q, audit); err != nil {
			return err
		}
		var err error
		out, err = scanRule(q.QueryRow(ctx, `SELECT `+ruleCols+` FROM soc_rules WHERE tenant_id = $1 AND rule_key = $2`, r.TenantID, r.Key))
		return err
	})
	return out, err
}

// DeleteRule implements persistence.SOCStore.
func (s *Store) DeleteRule(ctx context.Context, tenantID, key string, audit ...persistence.AuditEvent) error {
	return s.DB.Tx(ctx, func(q Querier) error {
		n, err := q.Exec(ctx, `DELETE FROM soc_rules WHERE tenant_id = $1 AND rule_key = $2`, tenantID, key)
		if err != nil {
			return err
		}
		if n == 0 {
			return persistence.ErrNotFound
		}
		return s.insertAudit(ctx, q, audit)
	})
}

// ListRules implements persistence.SOCStore.
func (s *Store) ListRules(ctx context.Context, tenantID string) ([]persistence.CustomRule, error) {
	rows, err := s.DB.Reader().Query(ctx, `SELECT `+ruleCols+` FROM soc_rules WHERE tenant_id = $1 ORDER BY rule_key`, tenantID)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanRule)
}

// ---- alerts ----

const alertCols = `seq, id, tenant_id, rule_key, alert_name, severity, source, agent_id, decision_id, source_event_id, summary, created_at`

func scanAlert(row Row) (persistence.Alert, error) {
	var a persistence.Alert
	err := row.Scan(&a.Seq, &a.ID, &a.TenantID, &a.RuleKey, &a.AlertName, &a.Severity, &a.Source, &a.AgentID, &a.DecisionID,
		&a.SourceEventID, &a.Summary, Time{&a.CreatedAt})
	if IsNoRows(err) {
		return a, persistence.ErrNotFound
	}
	return a, err
}

// AppendAlerts implements persistence.SOCStore.
func (s *Store) AppendAlerts(ctx context.Context, alerts []persistence.Alert) error {
	if len(alerts) == 0 {
		return nil
	}
	rows := make([][]any, len(alerts))
	for i, a := range alerts {
		rows[i] = []any{a.ID, a.TenantID, a.RuleKey, a.AlertName, a.Severity, a.Source, a.AgentID, a.DecisionID, a.SourceEventID,
			a.Summary, a.CreatedAt}
	}
	return s.DB.Tx(ctx, func(q Querier) error {
		return q.Batch(ctx, multiInsert(`INSERT INTO alerts (id, tenant_id, rule_key, alert_name, severity, source, agent_id,
			decision_id, source_event_id, summary, created_at)`, 11, rows))
	})
}

// sinceOrPage is the tail of a list: rows after SinceSeq oldest first (a
// watch), or a page newest first.
func sinceOrPage(since int64, p persistence.Page, n int) (string, []any) {
	if since != 0 {
		return fmt.Sprintf(` AND seq > $%d ORDER BY seq ASC LIMIT $%d`, n, n+1), []any{since, p.Limit + 1}
	}
	return pageClause(p, n)
}

// ListAlerts implements persistence.SOCStore.
func (s *Store) ListAlerts(ctx context.Context, tenantID string, f persistence.AlertFilter, p persistence.Page) ([]persistence.Alert, error) {
	q := `SELECT ` + alertCols + ` FROM alerts WHERE tenant_id = $1`
	args := []any{tenantID}
	for _, c := range []struct{ col, v string }{{"severity", f.Severity}, {"agent_id", f.AgentID}} {
		if c.v != "" {
			args = append(args, c.v)
			q += fmt.Sprintf(` AND %s = $%d`, c.col, len(args))
		}
	}
	for _, rule := range f.ExcludeRules {
		args = append(args, rule)
		q += fmt.Sprintf(` AND rule_key <> $%d`, len(args))
	}
	tail, extra := sinceOrPage(f.SinceSeq, p, len(args)+1)
	rows, err := s.DB.Replica().Query(ctx, q+tail, append(args, extra...)...)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanAlert)
}

// ---- incidents ----

const incidentCols = `seq, id, tenant_id, kind, severity, status, agent_id, summary, source_event_ids, opened_at, closed_at, close_reason`

func scanIncident(row Row) (persistence.Incident, error) {
	var in persistence.Incident
	var ids string
	err := row.Scan(&in.Seq, &in.ID, &in.TenantID, &in.Kind, &in.Severity, &in.Status, &in.AgentID, &in.Summary, &ids,
		Time{&in.OpenedAt}, NullTime{&in.ClosedAt}, &in.CloseReason)
	if IsNoRows(err) {
		return in, persistence.ErrNotFound
	}
	if err != nil {
		return in, err
	}
	if err := json.Unmarshal([]byte(ids), &in.SourceEventIDs); err != nil {
		return in, fmt.Errorf("sqlstore: source_event_ids: %w", err)
	}
	return in, nil
}

// OpenIncidents implements persistence.SOCStore.
func (s *Store) OpenIncidents(ctx context.Context, incs []persistence.Incident) error {
	if len(incs) == 0 {
		return nil
	}
	rows := make([][]any, len(incs))
	for i, in := range incs {
		rows[i] = []any{in.ID, in.TenantID, in.Kind, in.Severity, persistence.IncidentOpen, in.AgentID, in.Summary,
			jsonText(in.SourceEventIDs), in.OpenedAt}
	}
	return s.DB.Tx(ctx, func(q Querier) error {
		return q.Batch(ctx, multiInsert(`INSERT INTO incidents (id, tenant_id, kind, severity, status, agent_id, summary,
			source_event_ids, opened_at)`, 9, rows))
	})
}

// GetIncident implements persistence.SOCStore.
func (s *Store) GetIncident(ctx context.Context, tenantID, id string) (persistence.Incident, error) {
	return scanIncident(s.DB.Reader().QueryRow(ctx, `SELECT `+incidentCols+` FROM incidents WHERE tenant_id = $1 AND id = $2`, tenantID, id))
}

// ListIncidents implements persistence.SOCStore.
func (s *Store) ListIncidents(ctx context.Context, tenantID string, f persistence.IncidentFilter, p persistence.Page) ([]persistence.Incident, error) {
	q := `SELECT ` + incidentCols + ` FROM incidents WHERE tenant_id = $1`
	args := []any{tenantID}
	for _, c := range []struct{ col, v string }{{"status", f.Status}, {"severity", f.Severity}, {"agent_id", f.AgentID}, {"kind", f.Kind}} {
		if c.v != "" {
			args = append(args, c.v)
			q += fmt.Sprintf(` AND %s = $%d`, c.col, len(args))
		}
	}
	tail, extra := sinceOrPage(f.SinceSeq, p, len(args)+1)
	rows, err := s.DB.Replica().Query(ctx, q+tail, append(args, extra...)...)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanIncident)
}

// CloseIncident implements persistence.SOCStore.
func (s *Store) CloseIncident(ctx context.Context, tenantID, id string, reason *string, at time.Time, audit ...persistence.AuditEvent) (persistence.Incident, error) {
	var out persistence.Incident
	err := s.DB.Tx(ctx, func(q Querier) error {
		n, err := q.Exec(ctx, `UPDATE incidents SET status = 'closed', closed_at = $1, close_reason = $2
			WHERE tenant_id = $3 AND id = $4 AND status = 'open'`, at, reason, tenantID, id)
		if err != nil {
			return err
		}
		get := func() (persistence.Incident, error) {
			return scanIncident(q.QueryRow(ctx, `SELECT `+incidentCols+` FROM incidents WHERE tenant_id = $1 AND id = $2`, tenantID, id))
		}
		if n == 0 {
			if _, err := get(); err != nil {
				return err
			}
			return persistence.ErrStateConflict
		}
		if err := s.insertAudit(ctx, q, audit); err != nil {
			return err
		}
		out, err = get()
		return err
	})
	return out, err
}

// SOCSummary implements persistence.SOCStore.
func (s *Store) SOCSummary(ctx context.Context, tenantID string) (persistence.SOCSummary, error) {
	out := persistence.SOCSummary{AlertsBySeverity: map[string]int64{}, IncidentsByStatus: map[string]int64{}, IncidentsBySeverity: map[string]int64{}}
	r := s.DB.Reader()
	group := func(query string, into map[string]int64, total *int64) error {
		rows, err := r.Query(ctx, query, tenantID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k string
			var n int64
			if err := rows.Scan(&k, &n); err != nil {
				return err
			}
			into[k] = n
			if total != nil {
				*total += n
			}
		}
		return rows.Err()
	}
	if err := group(`SELECT severity, COUNT(*) FROM alerts WHERE tenant_id = $1 GROUP BY severity`, out.AlertsBySeverity, &out.AlertsTotal); err != nil {
		return out, err
	}
	if err := group(`SELECT status, COUNT(*) FROM incidents WHERE tenant_id = $1 GROUP BY status`, out.IncidentsByStatus, &out.IncidentsTotal); err != nil {
		return out, err
	}
	err := group(`SELECT severity, COUNT(*) FROM incidents WHERE tenant_id = $1 AND status = 'open' GROUP BY severity`, out.IncidentsBySeverity, nil)
	return out, err
}

// DecisionsBetween implements persistence.SOCStore.
func (s *Store) DecisionsBetween(ctx context.Context, tenantID string, from, to time.Time, limit int) ([]persistence.Decision, error) {
	rows, err := s.DB.Reader().Query(ctx, `SELECT `+decisionCols+decisionFrom+
		` WHERE d.tenant_id = $1 AND d.created_at >= $2 AND d.created_at < $3 ORDER BY d.seq DESC LIMIT $4`, tenantID, from, to, limit)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanDecision)
}
