package sqlstore

import (
	"context"

	"svc/persistence"
)

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
