package sqlstore

import (
	"context"
	"fmt"
	"time"

	"svc/persistence"
)

const approvalCols = `seq, id, tenant_id, decision_id, agent_id, tool_call, action_hash, status, reason, approver_user_id,
	created_at, decided_at, expires_at, consumed_at, consumed_decision_id`

func scanApproval(row Row) (persistence.Approval, error) {
	var a persistence.Approval
	var toolCall string
	err := row.Scan(&a.Seq, &a.ID, &a.TenantID, &a.DecisionID, &a.AgentID, &toolCall, &a.ActionHash, &a.Status, &a.Reason,
		&a.ApproverUserID, Time{&a.CreatedAt}, NullTime{&a.DecidedAt}, Time{&a.ExpiresAt}, NullTime{&a.ConsumedAt},
		&a.ConsumedDecisionID)
	if IsNoRows(err) {
		return a, persistence.ErrNotFound
	}
	a.ToolCall = []byte(toolCall)
	return a, err
}

func approvalRow(a *persistence.Approval) []any {
	status := a.Status
	if status == "" {
		status = persistence.ApprovalPending
	}
	return []any{a.ID, a.TenantID, a.DecisionID, a.AgentID, string(a.ToolCall), a.ActionHash, status, a.CreatedAt, a.ExpiresAt}
}

const approvalInsertHead = `INSERT INTO approvals (id, tenant_id, decision_id, agent_id, tool_call, action_hash, status, created_at, expires_at)`

// useApproval consumes a presented approval inside a decision's
// transaction (persistence.ApprovalUse): one conditional update.
func useApproval(ctx context.Context, q Querier, tenantID, decisionID string, u *persistence.ApprovalUse) error {
	n, err := q.Exec(ctx, `UPDATE approvals SET consumed_at = $1, consumed_decision_id = $2
		WHERE tenant_id = $3 AND id = $4 AND agent_id = $5 AND action_hash = $6
		AND status = 'APPROVED' AND consumed_at IS NULL AND expires_at > $1`,
		u.At, decisionID, tenantID, u.ApprovalID, u.AgentID, u.ActionHash)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%w: approval %s is no longer grantable", persistence.ErrStateConflict, u.ApprovalID)
	}
	return nil
}

// GetApproval implements persistence.ApprovalStore.
func (s *Store) GetApproval(ctx context.Context, tenantID, id string) (persistence.Approval, error) {
	return scanApproval(s.DB.Reader().QueryRow(ctx, `SELECT `+approvalCols+` FROM approvals WHERE tenant_id = $1 AND id = $2`, tenantID, id))
}

func getApprovalTx(ctx context.Context, q Querier, tenantID, id string) (persistence.Approval, error) {
	return scanApproval(q.QueryRow(ctx, `SELECT `+approvalCols+` FROM approvals WHERE tenant_id = $1 AND id = $2`, tenantID, id))
}

// ApprovalForDecision implements persistence.ApprovalStore.
func (s *Store) ApprovalForDecision(ctx context.Context, tenantID, decisionID string) (persistence.Approval, error) {
	return scanApproval(s.DB.Reader().QueryRow(ctx, `SELECT `+approvalCols+` FROM approvals WHERE tenant_id = $1 AND decision_id = $2`,
		tenantID, decisionID))
}

// ListApprovals implements persistence.ApprovalStore.
func (s *Store) ListApprovals(ctx context.Context, tenantID, agentID string, p persistence.Page) ([]persistence.Approval, error) {
	q := `SELECT ` + approvalCols + ` FROM approvals WHERE tenant_id = $1`
	args := []any{tenantID}
	if agentID != "" {
		q += ` AND agent_id = $2`
		args = append(args, agentID)
	}
	tail, extra := pageClause(p, len(args)+1)
	rows, err := s.DB.Replica().Query(ctx, q+tail, append(args, extra...)...)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanApproval)
}

// DecideApproval implements persistence.ApprovalStore.
func (s *Store) DecideApproval(ctx context.Context, d persistence.ApprovalDecision, audit ...persistence.AuditEvent) (persistence.Approval, error) {
	var out persistence.Approval
	if d.Status != persistence.ApprovalApproved && d.Status != persistence.ApprovalRejected {
		return out, fmt.Errorf("sqlstore: an approval is decided APPROVED or REJECTED, not %q", d.Status)
	}
	if (d.ActionHash == "") != (len(d.ToolCall) == 0) {
		return out, fmt.Errorf("sqlstore: an edit sets both tool_call and action_hash")
	}
	err := s.DB.Tx(ctx, func(q Querier) error {
		stmt := `UPDATE approvals SET status = $1, approver_user_id = $2, reason = $3, decided_at = $4`
		args := []any{d.Status, d.ApproverUserID, d.Reason, d.At}
		if d.ActionHash != "" {
			stmt += `, tool_call = $5, action_hash = $6`
			args = append(args, string(d.ToolCall), d.ActionHash)
		}
		n := len(args)
		stmt += fmt.Sprintf(` WHERE tenant_id = $%d AND id = $%d AND status = 'PENDING' AND expires_at > $4`, n+1, n+2)
		args = append(args, d.TenantID, d.ID)
		changed, err := q.Exec(ctx, stmt, args...)
		if err != nil {
			return err
		}
		if changed == 0 {
			if _, err := getApprovalTx(ctx, q, d.TenantID, d.ID); err != nil {
				return err // ErrNotFound
			}
			return persistence.ErrStateConflict
		}
		if err := s.insertAudit(ctx, q, audit); err != nil {
			return err
		}
		out, err = getApprovalTx(ctx, q, d.TenantID, d.ID)
		return err
	})
	return out, err
}

// ConsumeApproval implements persistence.ApprovalStore.
func (s *Store) ConsumeApproval(ctx context.Context, tenantID, id, agentID string, at time.Time, audit ...persistence.AuditEvent) (persistence.Approval, error) {
	var out persistence.Approval
	err := s.DB.Tx(ctx, func(q Querier) error {
		stmt := `UPDATE approvals SET consumed_at = $1 WHERE tenant_id = $2 AND id = $3
			AND status = 'APPROVED' AND consumed_at IS NULL AND expires_at > $1`
		args := []any{at, tenantID, id}
		if agentID != "" {
			stmt += ` AND agent_id = $4`
			args = append(args, agentID)
		}
		changed, err := q.Exec(ctx, stmt, args...)
		if err != nil {
			return err
		}
		if changed == 0 {
			a, err := getApprovalTx(ctx, q, tenantID, id)
			if err != nil {
				return err
			}
			if agentID != "" && a.AgentID != agentID {
				return persistence.ErrNotFound // another agent's approval is unknown to this one
			}
			return persistence.ErrStateConflict
		}
		if err := s.insertAudit(ctx, q, audit); err != nil {
			return err
		}
		out, err = getApprovalTx(ctx, q, tenantID, id)
		return err
	})
	return out, err
}

// DeleteStaleApprovals implements persistence.ApprovalStore.
func (s *Store) DeleteStaleApprovals(ctx context.Context, cutoff time.Time) (int64, error) {
	var n int64
	err := s.DB.Tx(ctx, func(q Querier) error {
		var err error
		n, err = q.Exec(ctx, `DELETE FROM approvals WHERE (decided_at IS NOT NULL AND decided_at < $1) OR expires_at < $1`, cutoff)
		return err
	})
	return n, err
}

// CountPendingApprovals implements persistence.ApprovalStore.
func (s *Store) CountPendingApprovals(ctx context.Context, tenantID string, at time.Time) (int64, error) {
	var n int64
	err := s.DB.Reader().QueryRow(ctx, `SELECT COUNT(*) FROM approvals WHERE tenant_id = $1 AND status = 'PENDING' AND expires_at > $2`,
		tenantID, at).Scan(&n)
	return n, err
}

// UsableApproval implements persistence.ApprovalStore. It reads the
// primary (the authorize path decides on it); the approvals_usable index
// (tenant_id, agent_id, action_hash, seq) finds the newest first.
func (s *Store) UsableApproval(ctx context.Context, tenantID, agentID, actionHash string, at time.Time) (persistence.Approval, error) {
	return scanApproval(s.DB.Reader().QueryRow(ctx, `SELECT `+approvalCols+` FROM approvals
		WHERE tenant_id = $1 AND agent_id = $2 AND action_hash = $3
		AND status = 'APPROVED' AND consumed_at IS NULL AND expires_at > $4
		ORDER BY seq DESC LIMIT 1`, tenantID, agentID, actionHash, at))
}
