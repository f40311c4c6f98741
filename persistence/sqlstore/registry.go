package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"

	"svc/persistence"
)

// ---- tenant policies ----

const policyCols = `tenant_id, name, rego, description, enabled, version, created_at, updated_at, mode`

func scanPolicy(r Row) (persistence.Policy, error) {
	var p persistence.Policy
	err := r.Scan(&p.TenantID, &p.Name, &p.Rego, &p.Description, &p.Enabled, &p.Version, Time{&p.CreatedAt}, Time{&p.UpdatedAt}, &p.Mode)
	if IsNoRows(err) {
		return p, persistence.ErrNotFound
	}
	return p, err
}

// bumpPolicyVersion advances the tenant's policy version inside q.
func bumpPolicyVersion(ctx context.Context, q Querier, tenantID string) error {
	_, err := q.Exec(ctx, `UPDATE tenants SET policy_version = policy_version + 1 WHERE id = $1`, tenantID)
	return err
}

// CreatePolicy implements persistence.PolicyStore.
func (s *Store) CreatePolicy(ctx context.Context, p persistence.Policy, audit ...persistence.AuditEvent) (persistence.Policy, error) {
	p.Version, p.CreatedAt, p.UpdatedAt = 1, now(), now()
	if p.Mode == "" {
		p.Mode = persistence.PolicyEnforce
	}
	err := s.DB.Tx(ctx, func(q Querier) error {
		if _, err := q.Exec(ctx, `INSERT INTO tenant_policies (`+policyCols+`) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9)`,
			p.TenantID, p.Name, p.Rego, p.Description, p.Enabled, p.Version, p.CreatedAt, p.UpdatedAt, p.Mode); err != nil {
			return err
		}
		if err := bumpPolicyVersion(ctx, q, p.TenantID); err != nil {
			return err
		}
		return s.insertAudit(ctx, q, audit)
	})
	return p, err
}

// UpdatePolicy implements persistence.PolicyStore.
func (s *Store) UpdatePolicy(ctx context.Context, p persistence.Policy, audit ...persistence.AuditEvent) (persistence.Policy, error) {
	var out persistence.Policy
	if p.Mode == "" {
		p.Mode = persistence.PolicyEnforce
	}
	err := s.DB.Tx(ctx, func(q Querier) error {
		n, err := q.Exec(ctx, `UPDATE tenant_policies SET rego = $1, description = $2, enabled = $3, mode = $4, version = version + 1,
			updated_at = $5 WHERE tenant_id = $6 AND name = $7`, p.Rego, p.Description, p.Enabled, p.Mode, now(), p.TenantID, p.Name)
		if err != nil {
			return err
		}
		if n == 0 {
			return persistence.ErrNotFound
		}
		if err := bumpPolicyVersion(ctx, q, p.TenantID); err != nil {
			return err
		}
		if err := s.insertAudit(ctx, q, audit); err != nil {
			return err
		}
		out, err = scanPolicy(q.QueryRow(ctx, `SELECT `+policyCols+` FROM tenant_policies WHERE tenant_id = $1 AND name = $2`, p.TenantID, p.Name))
		return err
	})
	return out, err
}

// DeletePolicy implements persistence.PolicyStore.
func (s *Store) DeletePolicy(ctx context.Context, tenantID, name string, audit ...persistence.AuditEvent) error {
	return s.DB.Tx(ctx, func(q Querier) error {
		n, err := q.Exec(ctx, `DELETE FROM tenant_policies WHERE tenant_id = $1 AND name = $2`, tenantID, name)
		if err != nil {
			return err
		}
		if n == 0 {
			return persistence.ErrNotFound
		}
		if err := bumpPolicyVersion(ctx, q, tenantID); err != nil {
			return err
		}
		return s.insertAudit(ctx, q, audit)
	})
}

// GetPolicy implements persistence.PolicyStore.
func (s *Store) GetPolicy(ctx context.Context, tenantID, name string) (persistence.Policy, error) {
	return scanPolicy(s.DB.Reader().QueryRow(ctx, `SELECT `+policyCols+` FROM tenant_policies WHERE tenant_id = $1 AND name = $2`, tenantID, name))
}

// ListPolicies implements persistence.PolicyStore.
func (s *Store) ListPolicies(ctx context.Context, tenantID string) ([]persistence.Policy, error) {
	rows, err := s.DB.Reader().Query(ctx, `SELECT `+policyCols+` FROM tenant_policies WHERE tenant_id = $1 ORDER BY name`, tenantID)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanPolicy)
}

// PolicyVersion implements persistence.PolicyStore.
func (s *Store) PolicyVersion(ctx context.Context, tenantID string) (int64, error) {
	var v int64
	err := s.DB.Reader().QueryRow(ctx, `SELECT policy_version FROM tenants WHERE id = $1`, tenantID).Scan(&v)
	if IsNoRows(err) {
		return 0, persistence.ErrNotFound
	}
	return v, err
}

// ---- skills ----

func scanSkill(r Row) (persistence.Skill, error) {
	var sk persistence.Skill
	var actions string
	err := r.Scan(&sk.TenantID, &sk.Key, &sk.Description, &actions, &sk.OutputTrust, Time{&sk.CreatedAt}, Time{&sk.UpdatedAt})
	if IsNoRows(err) {
		return sk, persistence.ErrNotFound
	}
	if err != nil {
		return sk, err
	}
	if err := json.Unmarshal([]byte(actions), &sk.Actions); err != nil {
		return sk, fmt.Errorf("sqlstore: skill actions: %w", err)
	}
	return sk, nil
}

const skillCols = `tenant_id, skill_key, description, actions, output_trust, created_at, updated_at`

// PutSkill implements persistence.SkillStore (create or replace).
func (s *Store) PutSkill(ctx context.Context, sk persistence.Skill, audit ...persistence.AuditEvent) (persistence.Skill, error) {
	raw, err := json.Marshal(sk.Actions)
	if err != nil {
		return sk, err
	}
	t := now()
	var out persistence.Skill
	err = s.DB.Tx(ctx, func(q Querier) error {
		if _, err := q.Exec(ctx, `INSERT INTO skills (`+skillCols+`) VALUES ($1,$2,$3,$4,$5,$6,$6)
			ON CONFLICT (tenant_id, skill_key) DO UPDATE SET description = excluded.description, actions = excluded.actions,
			output_trust = excluded.output_trust, updated_at = excluded.updated_at`, sk.TenantID, sk.Key, sk.Description, string(raw), sk.OutputTrust, t); err != nil {
			return err
		}
		if err := s.insertAudit(ctx, q, audit); err != nil {
			return err
		}
		out, err = scanSkill(q.QueryRow(ctx, `SELECT `+skillCols+` FROM skills WHERE tenant_id = $1 AND skill_key = $2`, sk.TenantID, sk.Key))
		return err
	})
	return out, err
}

// GetSkill implements persistence.SkillStore.
func (s *Store) GetSkill(ctx context.Context, tenantID, key string) (persistence.Skill, error) {
	return scanSkill(s.DB.Reader().QueryRow(ctx, `SELECT `+skillCols+` FROM skills WHERE tenant_id = $1 AND skill_key = $2`, tenantID, key))
}

// ListSkills implements persistence.SkillStore.
func (s *Store) ListSkills(ctx context.Context, tenantID string) ([]persistence.Skill, error) {
	rows, err := s.DB.Reader().Query(ctx, `SELECT `+skillCols+` FROM skills WHERE tenant_id = $1 ORDER BY skill_key`, tenantID)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanSkill)
}

// DeleteSkill implements persistence.SkillStore.
func (s *Store) DeleteSkill(ctx context.Context, tenantID, key string, audit ...persistence.AuditEvent) error {
	return s.DB.Tx(ctx, func(q Querier) error {
		n, err := q.Exec(ctx, `DELETE FROM skills WHERE tenant_id = $1 AND skill_key = $2`, tenantID, key)
		if err != nil {
			return err
		}
		if n == 0 {
			return persistence.ErrNotFound
		}
		return s.insertAudit(ctx, q, audit)
	})
}

// ---- risk settings ----

// GetRiskSettings implements persistence.RiskStore.
func (s *Store) GetRiskSettings(ctx context.Context, tenantID string) (persistence.RiskSettings, error) {
	var rs persistence.RiskSettings
	var weights *string
	err := s.DB.Reader().QueryRow(ctx, `SELECT risk_weights, denial_threshold, window_minutes FROM tenants WHERE id = $1`, tenantID).
		Scan(&weights, &rs.DenialThreshold, &rs.WindowMinutes)
	if IsNoRows(err) {
		return rs, persistence.ErrNotFound
	}
	if err != nil {
		return rs, err
	}
	if weights != nil {
		if err := json.Unmarshal([]byte(*weights), &rs.Weights); err != nil {
			return rs, fmt.Errorf("sqlstore: risk_weights: %w", err)
		}
	}
	return rs, nil
}

func (s *Store) updateTenant(ctx context.Context, tenantID, set string, args []any, audit []persistence.AuditEvent) error {
	return s.DB.Tx(ctx, func(q Querier) error {
		n, err := q.Exec(ctx, `UPDATE tenants SET `+set+fmt.Sprintf(` WHERE id = $%d`, len(args)+1), append(args, tenantID)...)
		if err != nil {
			return err
		}
		if n == 0 {
			return persistence.ErrNotFound
		}
		return s.insertAudit(ctx, q, audit)
	})
}

// PutRiskWeights implements persistence.RiskStore.
func (s *Store) PutRiskWeights(ctx context.Context, tenantID string, w map[string]float64, audit ...persistence.AuditEvent) error {
	raw, err := json.Marshal(w)
	if err != nil {
		return err
	}
	return s.updateTenant(ctx, tenantID, `risk_weights = $1`, []any{string(raw)}, audit)
}

// PutRiskEscalation implements persistence.RiskStore.
func (s *Store) PutRiskEscalation(ctx context.Context, tenantID string, threshold, windowMinutes int, audit ...persistence.AuditEvent) error {
	return s.updateTenant(ctx, tenantID, `denial_threshold = $1, window_minutes = $2`, []any{threshold, windowMinutes}, audit)
}

// EscalateTier implements persistence.RiskStore.
func (s *Store) EscalateTier(ctx context.Context, tenantID, agentID, from, to string, audit ...persistence.AuditEvent) (bool, error) {
	moved := false
	err := s.DB.Tx(ctx, func(q Querier) error {
		n, err := q.Exec(ctx, `UPDATE agents SET risk_tier = $1, updated_at = $2 WHERE tenant_id = $3 AND id = $4 AND risk_tier = $5`,
			to, now(), tenantID, agentID, from)
		if err != nil || n == 0 {
			return err
		}
		moved = true
		return s.insertAudit(ctx, q, audit)
	})
	return moved, err
}
