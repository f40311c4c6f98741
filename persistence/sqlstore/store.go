package sqlstore

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"svc/persistence"
)

// Store implements the tenant-scoped queries of persistence.Store. Backends
// embed it and add connection management.
type Store struct {
	DB      DB
	Dialect Dialect

	// headLast counts the group commits written with their heads advanced
	// conditionally, headMoved those rewritten with the heads locked first.
	headLast, headMoved atomic.Int64
}

// now is the time rows are stamped with, in the microseconds both backends
// keep, so that what a create returns equals what a later read returns.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

func hashText(h []byte) string { return hex.EncodeToString(h) }

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

// ---- tenants ----

const tenantCols = `id, name, auto_rotate_token_on_leak, created_at`

func scanTenant(r Row) (persistence.Tenant, error) {
	var t persistence.Tenant
	err := r.Scan(&t.ID, &t.Name, &t.AutoRotateTokenOnLeak, Time{&t.CreatedAt})
	if IsNoRows(err) {
		return t, persistence.ErrNotFound
	}
	return t, err
}

// CreateTenant implements persistence.TenantStore.
func (s *Store) CreateTenant(ctx context.Context, t persistence.Tenant, admin persistence.OperatorToken, adminHash []byte, audit ...persistence.AuditEvent) error {
	return s.DB.Tx(ctx, func(q Querier) error {
		if _, err := q.Exec(ctx, `INSERT INTO tenants (id, name, auto_rotate_token_on_leak, created_at) VALUES ($1,$2,$3,$4)`,
			t.ID, t.Name, t.AutoRotateTokenOnLeak, t.CreatedAt); err != nil {
			return err
		}
		if err := insertOperatorToken(ctx, q, admin, adminHash); err != nil {
			return err
		}
		return s.insertAudit(ctx, q, audit)
	})
}

// GetTenant implements persistence.TenantStore.
func (s *Store) GetTenant(ctx context.Context, id string) (persistence.Tenant, error) {
	return scanTenant(s.DB.Reader().QueryRow(ctx, `SELECT `+tenantCols+` FROM tenants WHERE id = $1`, id))
}

// GetTenantByName implements persistence.TenantStore.
func (s *Store) GetTenantByName(ctx context.Context, name string) (persistence.Tenant, error) {
	return scanTenant(s.DB.Reader().QueryRow(ctx, `SELECT `+tenantCols+` FROM tenants WHERE name = $1`, name))
}

// ListTenants implements persistence.TenantStore.
func (s *Store) ListTenants(ctx context.Context) ([]persistence.Tenant, error) {
	rows, err := s.DB.Reader().Query(ctx, `SELECT `+tenantCols+` FROM tenants ORDER BY seq`)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanTenant)
}

// DeleteTenant implements persistence.TenantStore. Every tenant table
// references tenants(id) with ON DELETE CASCADE, so one delete removes all.
func (s *Store) DeleteTenant(ctx context.Context, id string) error {
	return s.DB.Tx(ctx, func(q Querier) error {
		n, err := q.Exec(ctx, `DELETE FROM tenants WHERE id = $1`, id)
		if err != nil {
			return err
		}
		if n == 0 {
			return persistence.ErrNotFound
		}
		return nil
	})
}

// UpdateTenantSettings implements persistence.TenantStore.
func (s *Store) UpdateTenantSettings(ctx context.Context, id string, autoRotate bool, audit ...persistence.AuditEvent) (persistence.Tenant, error) {
	var t persistence.Tenant
	err := s.DB.Tx(ctx, func(q Querier) error {
		n, err := q.Exec(ctx, `UPDATE tenants SET auto_rotate_token_on_leak = $1 WHERE id = $2`, autoRotate, id)
		if err != nil {
			return err
		}
		if n == 0 {
			return persistence.ErrNotFound
		}
		if err := s.insertAudit(ctx, q, audit); err != nil {
			return err
		}
		t, err = scanTenant(q.QueryRow(ctx, `SELECT `+tenantCols+` FROM tenants WHERE id = $1`, id))
		return err
	})
	return t, err
}

// ---- operator tokens ----

const opCols = `id, tenant_id, name, role, created_at`

func scanOp(r Row) (persistence.OperatorToken, error) {
	var t persistence.OperatorToken
	err := r.Scan(&t.ID, &t.TenantID, &t.Name, &t.Role, Time{&t.CreatedAt})
	if IsNoRows(err) {
		return t, persistence.ErrNotFound
	}
	return t, err
}

func insertOperatorToken(ctx context.Context, q Querier, t persistence.OperatorToken, hash []byte) error {
	_, err := q.Exec(ctx, `INSERT INTO operator_tokens (id, tenant_id, name, role, token_hash, created_at)
		VALUES ($1,$2,$3,$4,$5,$6)`, t.ID, t.TenantID, t.Name, t.Role, hashText(hash), t.CreatedAt)
	return err
}

// CreateOperatorToken implements persistence.OperatorTokenStore.
func (s *Store) CreateOperatorToken(ctx context.Context, t persistence.OperatorToken, hash []byte, audit ...persistence.AuditEvent) error {
	return s.DB.Tx(ctx, func(q Querier) error {
		if err := insertOperatorToken(ctx, q, t, hash); err != nil {
			return err
		}
		return s.insertAudit(ctx, q, audit)
	})
}

// ListOperatorTokens implements persistence.OperatorTokenStore.
func (s *Store) ListOperatorTokens(ctx context.Context, tenantID string) ([]persistence.OperatorToken, error) {
	rows, err := s.DB.Reader().Query(ctx, `SELECT `+opCols+` FROM operator_tokens WHERE tenant_id = $1 ORDER BY seq`, tenantID)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanOp)
}

// DeleteOperatorToken implements persistence.OperatorTokenStore.
func (s *Store) DeleteOperatorToken(ctx context.Context, tenantID, id string, audit ...persistence.AuditEvent) error {
	return s.DB.Tx(ctx, func(q Querier) error {
		n, err := q.Exec(ctx, `DELETE FROM operator_tokens WHERE tenant_id = $1 AND id = $2`, tenantID, id)
		if err != nil {
			return err
		}
		if n == 0 {
			return persistence.ErrNotFound
		}
		return s.insertAudit(ctx, q, audit)
	})
}

// LookupOperatorToken implements persistence.OperatorTokenStore.
func (s *Store) LookupOperatorToken(ctx context.Context, hash []byte) (persistence.OperatorToken, error) {
	// Read from the writer's view would be stricter, but the token row is
	// written before its plaintext is ever returned, so the reader sees it.
	return scanOp(s.DB.Reader().QueryRow(ctx, `SELECT `+opCols+` FROM operator_tokens WHERE token_hash = $1`, hashText(hash)))
}

// ---- agents ----

const agentCols = `id, tenant_id, name, status, risk_tier, allowed_environments, signing_key, created_at, updated_at, last_seen_at`

func scanAgent(r Row) (persistence.Agent, error) {
	var a persistence.Agent
	var envs *string
	err := r.Scan(&a.ID, &a.TenantID, &a.Name, &a.Status, &a.RiskTier, &envs, &a.SigningKey,
		Time{&a.CreatedAt}, Time{&a.UpdatedAt}, NullTime{&a.LastSeenAt})
	if IsNoRows(err) {
		return a, persistence.ErrNotFound
	}
	if err != nil {
		return a, err
	}
	if envs != nil {
		if err := json.Unmarshal([]byte(*envs), &a.AllowedEnvironments); err != nil {
			return a, fmt.Errorf("sqlstore: allowed_environments: %w", err)
		}
		if a.AllowedEnvironments == nil {
			a.AllowedEnvironments = []string{}
		}
	}
	if len(a.SigningKey) == 0 {
		a.SigningKey = nil
	}
	return a, nil
}

func envText(envs []string) (*string, error) {
	if envs == nil {
		return nil, nil
	}
	raw, err := json.Marshal(envs)
	if err != nil {
		return nil, err
	}
	s := string(raw)
	return &s, nil
}

// CreateAgent implements persistence.AgentStore.
func (s *Store) CreateAgent(ctx context.Context, a persistence.Agent, tokenHash []byte, audit ...persistence.AuditEvent) error {
	envs, err := envText(a.AllowedEnvironments)
	if err != nil {
		return err
	}
	return s.DB.Tx(ctx, func(q Querier) error {
		if _, err := q.Exec(ctx, `INSERT INTO agents
			(id, tenant_id, name, status, risk_tier, allowed_environments, signing_key, token_hash, created_at, updated_at)
			VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)`,
			a.ID, a.TenantID, a.Name, a.Status, a.RiskTier, envs, a.SigningKey, hashText(tokenHash), a.CreatedAt, a.UpdatedAt); err != nil {
			return err
		}
		return s.insertAudit(ctx, q, audit)
	})
}

// GetAgent implements persistence.AgentStore.
func (s *Store) GetAgent(ctx context.Context, tenantID, id string) (persistence.Agent, error) {
	return scanAgent(s.DB.Reader().QueryRow(ctx, `SELECT `+agentCols+` FROM agents WHERE tenant_id = $1 AND id = $2`, tenantID, id))
}

func getAgentTx(ctx context.Context, q Querier, tenantID, id string) (persistence.Agent, error) {
	return scanAgent(q.QueryRow(ctx, `SELECT `+agentCols+` FROM agents WHERE tenant_id = $1 AND id = $2`, tenantID, id))
}

// pageClause appends the cursor or offset window to a query whose WHERE
// clause is already open, returning the SQL tail and the extra arguments.
// n is the next placeholder number.
func pageClause(p persistence.Page, n int) (string, []any) { return pageClauseOn("seq", p, n) }

// pageClauseOn is pageClause over a named (possibly qualified) column.
func pageClauseOn(col string, p persistence.Page, n int) (string, []any) {
	limit := p.Limit + 1
	if p.After > 0 {
		return fmt.Sprintf(` AND %s < $%d ORDER BY %s DESC LIMIT $%d`, col, n, col, n+1), []any{p.After, limit}
	}
	return fmt.Sprintf(` ORDER BY %s DESC LIMIT $%d OFFSET $%d`, col, n, n+1), []any{limit, p.Offset}
}

// ListAgents implements persistence.AgentStore.
func (s *Store) ListAgents(ctx context.Context, tenantID string, f persistence.AgentFilter, p persistence.Page) ([]persistence.Agent, error) {
	q := `SELECT seq, ` + agentCols + ` FROM agents WHERE tenant_id = $1`
	args := []any{tenantID}
	if f.Status != "" {
		q += ` AND status = $2`
		args = append(args, f.Status)
	} else {
		q += ` AND status <> 'deleted'`
	}
	tail, extra := pageClause(p, len(args)+1)
	rows, err := s.DB.Replica().Query(ctx, q+tail, append(args, extra...)...)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(r Row) (persistence.Agent, error) {
		var seq int64
		a, err := scanAgent(seqRow{r, &seq})
		return withSeq(a, seq, err)
	})
}

// UpdateAgent implements persistence.AgentStore.
func (s *Store) UpdateAgent(ctx context.Context, tenantID, id string, p persistence.AgentPatch, audit ...persistence.AuditEvent) (persistence.Agent, error) {
	var sets []string
	var args []any
	add := func(col string, v any) {
		args = append(args, v)
		sets = append(sets, fmt.Sprintf("%s = $%d", col, len(args)))
	}
	if p.Name != nil {
		add("name", *p.Name)
	}
	if p.RiskTier != nil {
		add("risk_tier", *p.RiskTier)
	}
	if p.AllowedEnvironments != nil {
		envs, err := envText(*p.AllowedEnvironments)
		if err != nil {
			return persistence.Agent{}, err
		}
		add("allowed_environments", envs)
	}
	if p.SigningKey != nil {
		var key []byte
		if len(*p.SigningKey) > 0 {
			key = *p.SigningKey
		}
		add("signing_key", key)
	}
	add("updated_at", now())
	args = append(args, tenantID, id)
	stmt := fmt.Sprintf(`UPDATE agents SET %s WHERE tenant_id = $%d AND id = $%d AND status <> 'deleted'`,
		strings.Join(sets, ", "), len(args)-1, len(args))
	var out persistence.Agent
	err := s.DB.Tx(ctx, func(q Querier) error {
		n, err := q.Exec(ctx, stmt, args...)
		if err != nil {
			return err
		}
		if n == 0 {
			return persistence.ErrNotFound
		}
		if err := s.insertAudit(ctx, q, audit); err != nil {
			return err
		}
		out, err = getAgentTx(ctx, q, tenantID, id)
		return err
	})
	return out, err
}

// TransitionAgent implements persistence.AgentStore.
func (s *Store) TransitionAgent(ctx context.Context, tenantID, id string, from []string, to string, audit ...persistence.AuditEvent) (persistence.Agent, error) {
	args, in := inList([]any{to, now(), tenantID, id}, from)
	stmt := `UPDATE agents SET status = $1, updated_at = $2 WHERE tenant_id = $3 AND id = $4 AND status IN (` + in + `)`
	var out persistence.Agent
	err := s.DB.Tx(ctx, func(q Querier) error {
		n, err := q.Exec(ctx, stmt, args...)
		if err != nil {
			return err
		}
		if n == 0 {
			if _, err := getAgentTx(ctx, q, tenantID, id); err != nil {
				return err // ErrNotFound
			}
			return persistence.ErrStateConflict
		}
		if err := s.insertAudit(ctx, q, audit); err != nil {
			return err
		}
		out, err = getAgentTx(ctx, q, tenantID, id)
		return err
	})
	return out, err
}

// RotateAgentToken implements persistence.AgentStore.
func (s *Store) RotateAgentToken(ctx context.Context, tenantID, id string, newHash []byte, audit ...persistence.AuditEvent) (persistence.Agent, error) {
	var out persistence.Agent
	err := s.DB.Tx(ctx, func(q Querier) error {
		n, err := q.Exec(ctx, `UPDATE agents SET token_hash = $1, updated_at = $2 WHERE tenant_id = $3 AND id = $4 AND status <> 'deleted'`,
			hashText(newHash), now(), tenantID, id)
		if err != nil {
			return err
		}
		if n == 0 {
			return persistence.ErrNotFound
		}
		if err := s.insertAudit(ctx, q, audit); err != nil {
			return err
		}
		out, err = getAgentTx(ctx, q, tenantID, id)
		return err
	})
	return out, err
}

// LookupAgentToken implements persistence.AgentStore.
func (s *Store) LookupAgentToken(ctx context.Context, hash []byte) (persistence.Agent, error) {
	return scanAgent(s.DB.Reader().QueryRow(ctx, `SELECT `+agentCols+` FROM agents WHERE token_hash = $1`, hashText(hash)))
}

// TouchAgents implements persistence.AgentStore.
func (s *Store) TouchAgents(ctx context.Context, beats []persistence.Heartbeat) error {
	if len(beats) == 0 {
		return nil
	}
	return s.DB.Tx(ctx, func(q Querier) error {
		for _, b := range beats {
			if _, err := q.Exec(ctx, `UPDATE agents SET last_seen_at = $1
				WHERE tenant_id = $2 AND id = $3 AND (last_seen_at IS NULL OR last_seen_at < $1)`,
				b.At.UTC(), b.TenantID, b.AgentID); err != nil {
				return err
			}
		}
		return nil
	})
}

// ---- permissions ----

// AddPermission implements persistence.AgentStore.
func (s *Store) AddPermission(ctx context.Context, p persistence.Permission, audit ...persistence.AuditEvent) error {
	return s.DB.Tx(ctx, func(q Querier) error {
		if _, err := getAgentTx(ctx, q, p.TenantID, p.AgentID); err != nil {
			return err
		}
		if _, err := q.Exec(ctx, `INSERT INTO agent_permissions (tenant_id, agent_id, tool_key, created_at) VALUES ($1,$2,$3,$4)`,
			p.TenantID, p.AgentID, p.ToolKey, p.CreatedAt); err != nil {
			return err
		}
		return s.insertAudit(ctx, q, audit)
	})
}

// ListPermissions implements persistence.AgentStore.
func (s *Store) ListPermissions(ctx context.Context, tenantID, agentID string) ([]persistence.Permission, error) {
	rows, err := s.DB.Reader().Query(ctx, `SELECT tenant_id, agent_id, tool_key, created_at FROM agent_permissions
		WHERE tenant_id = $1 AND agent_id = $2 ORDER BY tool_key`, tenantID, agentID)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(r Row) (persistence.Permission, error) {
		var p persistence.Permission
		err := r.Scan(&p.TenantID, &p.AgentID, &p.ToolKey, Time{&p.CreatedAt})
		return p, err
	})
}

// DeletePermission implements persistence.AgentStore.
func (s *Store) DeletePermission(ctx context.Context, tenantID, agentID, toolKey string, audit ...persistence.AuditEvent) error {
	return s.DB.Tx(ctx, func(q Querier) error {
		n, err := q.Exec(ctx, `DELETE FROM agent_permissions WHERE tenant_id = $1 AND agent_id = $2 AND tool_key = $3`,
			tenantID, agentID, toolKey)
		if err != nil {
			return err
		}
		if n == 0 {
			return persistence.ErrNotFound
		}
		return s.insertAudit(ctx, q, audit)
	})
}

// ---- audit ----

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

// ---- lease ----

// AcquireLease implements persistence.LeaseStore.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	t := now()
	var got bool
	err := s.DB.Tx(ctx, func(q Querier) error {
		n, err := q.Exec(ctx, `INSERT INTO leader_lease (name, holder, expires_at) VALUES ($1, $2, $3)
			ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
			WHERE leader_lease.holder = excluded.holder OR leader_lease.expires_at < $4`,
			name, holder, t.Add(ttl), t)
		got = n > 0
		return err
	})
	return got, err
}

// ReleaseLease implements persistence.LeaseStore.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string) error {
	return s.DB.Tx(ctx, func(q Querier) error {
		_, err := q.Exec(ctx, `DELETE FROM leader_lease WHERE name = $1 AND holder = $2`, name, holder)
		return err
	})
}

// ProbeWrite implements persistence.Store: one row, rewritten in a write
// transaction on the writer's connection.
func (s *Store) ProbeWrite(ctx context.Context) error {
	return s.DB.Tx(ctx, func(q Querier) error {
		_, err := q.Exec(ctx, `INSERT INTO writer_probe (id, probed_at) VALUES (1, $1)
			ON CONFLICT (id) DO UPDATE SET probed_at = excluded.probed_at`, now().Format(TimeLayout))
		return err
	})
}

// ---- helpers ----

// seqRow scans a leading seq column and hands the rest to the inner scan.
type seqRow struct {
	r   Row
	seq *int64
}

func (s seqRow) Scan(dest ...any) error { return s.r.Scan(append([]any{s.seq}, dest...)...) }

func withSeq(a persistence.Agent, seq int64, err error) (persistence.Agent, error) {
	a.Seq = seq
	return a, err
}

func collect[T any](rows Rows, scan func(Row) (T, error)) ([]T, error) {
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}
