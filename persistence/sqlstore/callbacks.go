package sqlstore

import (
	"context"
	"strconv"
	"time"

	"svc/persistence"
)

// Approval callbacks (persistence.ApprovalCallbackStore): one row per
// approval whose call registered a webhook, written with the approval.

const callbackInsertHead = `INSERT INTO approval_callbacks (approval_id, tenant_id, url, secret, created_at)`

func callbackRow(a *persistence.Approval) []any {
	return []any{a.ID, a.TenantID, a.Callback.URL, a.Callback.Secret, a.CreatedAt}
}

// dueCallbackQuery selects the callbacks due at $1 (see DueCallbacks).
var dueCallbackQuery = `SELECT a.seq, a.id, a.tenant_id, a.decision_id, a.agent_id, a.tool_call, a.action_hash, a.status, a.reason,
	a.approver_user_id, a.created_at, a.decided_at, a.expires_at, a.consumed_at, a.consumed_decision_id, c.url, c.secret, c.attempts
	FROM approval_callbacks c JOIN approvals a ON a.id = c.approval_id
	WHERE c.done_at IS NULL AND c.attempts < ` + strconv.Itoa(persistence.MaxCallbackAttempts) + ` AND (c.claimed_until IS NULL OR c.claimed_until < $1)
	AND (a.status <> 'PENDING' OR a.expires_at <= $1)`

func scanDueCallback(row Row) (persistence.DueCallback, error) {
	var d persistence.DueCallback
	a := &d.Approval
	var toolCall string
	err := row.Scan(&a.Seq, &a.ID, &a.TenantID, &a.DecisionID, &a.AgentID, &toolCall, &a.ActionHash, &a.Status, &a.Reason,
		&a.ApproverUserID, Time{&a.CreatedAt}, NullTime{&a.DecidedAt}, Time{&a.ExpiresAt}, NullTime{&a.ConsumedAt},
		&a.ConsumedDecisionID, &d.Callback.URL, &d.Callback.Secret, &d.Attempts)
	if IsNoRows(err) {
		return d, persistence.ErrNotFound
	}
	a.ToolCall = []byte(toolCall)
	return d, err
}

// DueCallbacks implements persistence.ApprovalCallbackStore.
func (s *Store) DueCallbacks(ctx context.Context, now time.Time, limit int) ([]persistence.DueCallback, error) {
	rows, err := s.DB.Reader().Query(ctx, dueCallbackQuery+` ORDER BY c.created_at LIMIT $2`, now, limit)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanDueCallback)
}

// DueCallback implements persistence.ApprovalCallbackStore.
func (s *Store) DueCallback(ctx context.Context, tenantID, approvalID string, now time.Time) (persistence.DueCallback, error) {
	return scanDueCallback(s.DB.Reader().QueryRow(ctx, dueCallbackQuery+` AND c.tenant_id = $2 AND c.approval_id = $3`, now, tenantID, approvalID))
}

// ClaimCallbackAttempt implements persistence.ApprovalCallbackStore.
func (s *Store) ClaimCallbackAttempt(ctx context.Context, approvalID string, now, until time.Time) (bool, error) {
	var n int64
	err := s.DB.Tx(ctx, func(q Querier) (err error) {
		n, err = q.Exec(ctx, `UPDATE approval_callbacks SET attempts = attempts + 1, claimed_until = $1
			WHERE approval_id = $2 AND done_at IS NULL AND attempts < `+strconv.Itoa(persistence.MaxCallbackAttempts)+` AND (claimed_until IS NULL OR claimed_until < $3)`,
			until, approvalID, now)
		return err
	})
	return n == 1, err
}

// FinishCallback implements persistence.ApprovalCallbackStore.
func (s *Store) FinishCallback(ctx context.Context, approvalID, outcome string, status int, at time.Time) error {
	return s.DB.Tx(ctx, func(q Querier) error {
		_, err := q.Exec(ctx, `UPDATE approval_callbacks SET done_at = $1, outcome = $2, last_status = $3, claimed_until = NULL
			WHERE approval_id = $4`, at, outcome, status, approvalID)
		return err
	})
}

// RetryCallbackAt implements persistence.ApprovalCallbackStore.
func (s *Store) RetryCallbackAt(ctx context.Context, approvalID string, at time.Time) error {
	return s.DB.Tx(ctx, func(q Querier) error {
		_, err := q.Exec(ctx, `UPDATE approval_callbacks SET claimed_until = $1 WHERE approval_id = $2 AND done_at IS NULL`, at, approvalID)
		return err
	})
}
