package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"svc/persistence"
)

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
	return s.updateAgentRow(ctx, tenantID, id, stmt, args, nil, audit)
}

// updateAgentRow runs stmt, an UPDATE of agent id's row, with its audit
// events in one transaction, and returns the row as updated. When no row
// changed the answer is ErrNotFound, or noRow's (which may read why).
func (s *Store) updateAgentRow(ctx context.Context, tenantID, id, stmt string, args []any, noRow func(Querier) error,
	audit []persistence.AuditEvent) (persistence.Agent, error) {
	var out persistence.Agent
	err := s.DB.Tx(ctx, func(q Querier) error {
		n, err := q.Exec(ctx, stmt, args...)
		if err != nil {
			return err
		}
		if n == 0 {
			if noRow != nil {
				return noRow(q)
			}
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
	return s.updateAgentRow(ctx, tenantID, id, stmt, args, func(q Querier) error {
		if _, err := getAgentTx(ctx, q, tenantID, id); err != nil {
			return err // ErrNotFound
		}
		return persistence.ErrStateConflict
	}, audit)
}

// RotateAgentToken implements persistence.AgentStore.
func (s *Store) RotateAgentToken(ctx context.Context, tenantID, id string, newHash []byte, audit ...persistence.AuditEvent) (persistence.Agent, error) {
	return s.updateAgentRow(ctx, tenantID, id, `UPDATE agents SET token_hash = $1, updated_at = $2 WHERE tenant_id = $3 AND id = $4 AND status <> 'deleted'`,
		[]any{hashText(newHash), now(), tenantID, id}, nil, audit)
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
