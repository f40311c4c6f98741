package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"svc/persistence"
)

const decisionCols = `d.seq, d.id, d.tenant_id, d.agent_id, d.request_id, d.tool, d.action, d.resource, d.action_hash,
	d.decision, d.reason, d.risk_score, d.composite_risk_score, d.matched_policy_ids, d.redacted_fields, d.mutates_state,
	d.trust_level, d.root_trust_level, d.environment, d.run_id, d.parent_run_id, d.trace_id, d.tool_call, d.created_at,
	COALESCE(d.receipt_id, ''), COALESCE(d.receipt_hash, ''), COALESCE(d.audit_id, ''), COALESCE(d.approval_id, ''), COALESCE(d.event_id, ''),
	d.run_context, d.context_hash, d.shadow`

// decisionFrom: a decision's receipt and audit event are columns of its
// own row (one record per decision), so no read joins.
const decisionFrom = ` FROM decisions d`

func scanDecision(row Row) (persistence.Decision, error) {
	var d persistence.Decision
	var policies, redacted, toolCall string
	var runContext, shadow *string
	err := row.Scan(&d.Seq, &d.ID, &d.TenantID, &d.AgentID, &d.RequestID, &d.Tool, &d.Action, &d.Resource, &d.ActionHash,
		&d.Decision, &d.Reason, &d.RiskScore, &d.CompositeRiskScore, &policies, &redacted, &d.MutatesState,
		&d.TrustLevel, &d.RootTrustLevel, &d.Environment, &d.RunID, &d.ParentRunID, &d.TraceID, &toolCall, Time{&d.CreatedAt},
		&d.ReceiptID, &d.ReceiptHash, &d.AuditID, &d.ApprovalID, &d.EventID, &runContext, &d.ContextHash, &shadow)
	if IsNoRows(err) {
		return d, persistence.ErrNotFound
	}
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal([]byte(policies), &d.MatchedPolicyIDs); err != nil {
		return d, fmt.Errorf("sqlstore: matched_policy_ids: %w", err)
	}
	if err := json.Unmarshal([]byte(redacted), &d.RedactedFields); err != nil {
		return d, fmt.Errorf("sqlstore: redacted_fields: %w", err)
	}
	d.ToolCall = json.RawMessage(toolCall)
	if runContext != nil {
		d.RunContext = json.RawMessage(*runContext)
	}
	if shadow != nil {
		if err := json.Unmarshal([]byte(*shadow), &d.Shadow); err != nil {
			return d, fmt.Errorf("sqlstore: shadow: %w", err)
		}
	}
	return d, nil
}

func jsonText(v any) string {
	raw, err := json.Marshal(v)
	if err != nil || string(raw) == "null" {
		return "[]"
	}
	return string(raw)
}

// rowsPerStatement bounds a multi-row INSERT (SQLite allows 32766 bound
// variables; 25 columns × 256 rows stays well below).
const rowsPerStatement = 256

// multiInsert builds multi-row INSERT statements: one statement per table
// per batch (or a few) instead of one per row, which is what makes a group
// commit cheap (one parse, one full-text index flush). Rows go in chunks of
// powers of two (a batch of 37: 32, 4, 1), so a table has at most nine
// statement texts, built once each and then prepared once by the backend:
// with a text for every batch size, parsing was 8–13% of a commit.
func multiInsert(head string, cols int, rows [][]any) []Stmt {
	var out []Stmt
	for start := 0; start < len(rows); {
		n := min(len(rows)-start, rowsPerStatement)
		n = 1 << (bits.Len(uint(n)) - 1) // the largest power of two <= n
		args := make([]any, 0, n*cols)
		for _, row := range rows[start : start+n] {
			args = append(args, row...)
		}
		out = append(out, Stmt{SQL: insertText(head, cols, n), Args: args})
		start += n
	}
	return out
}

type insertKey struct {
	head       string
	cols, rows int
}

var insertTexts sync.Map // insertKey → string

// insertText is head VALUES with rows tuples of cols $N placeholders.
func insertText(head string, cols, rows int) string {
	k := insertKey{head, cols, rows}
	if t, ok := insertTexts.Load(k); ok {
		return t.(string) //nolint:errcheck // only strings are stored
	}
	var b strings.Builder
	b.WriteString(head)
	b.WriteString(" VALUES ")
	for i := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('(')
		for j := range cols {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(i*cols + j + 1))
		}
		b.WriteByte(')')
	}
	t, _ := insertTexts.LoadOrStore(k, b.String())
	return t.(string) //nolint:errcheck // only strings are stored
}

// decisionRow is a decision's one record: the decision, its receipt's
// columns (sealed by now) and its audit event's id.
func decisionRow(d persistence.Decision, r *persistence.Receipt, approval *persistence.Approval) ([]any, error) {
	toolCall := string(d.ToolCall)
	if toolCall == "" {
		toolCall = "{}"
	}
	var receiptID, receiptHash, prevHash, keyID *string
	var receiptSeq *int64
	var signature *string
	if r != nil {
		if r.TenantID != d.TenantID || r.DecisionID != d.ID || r.ActionHash != d.ActionHash || r.Decision != d.Decision ||
			!r.CreatedAt.Equal(d.CreatedAt) || r.ContextHash != d.ContextHash {
			return nil, fmt.Errorf("%w: receipt %s, decision %s", persistence.ErrReceiptMismatch, r.ID, d.ID)
		}
		receiptID, receiptHash, prevHash, keyID, receiptSeq, signature = &r.ID, &r.Hash, &r.PrevHash, &r.KeyID, &r.Seq, r.Signature
	}
	approvalID := d.ApprovalID
	if approval != nil {
		approvalID = approval.ID
	}
	return []any{d.ID, d.TenantID, d.AgentID, d.RequestID, d.Tool, d.Action, d.Resource, d.ActionHash, d.Decision,
		d.Reason, d.RiskScore, d.CompositeRiskScore, jsonText(d.MatchedPolicyIDs), jsonText(d.RedactedFields),
		d.MutatesState, d.TrustLevel, d.RootTrustLevel, d.Environment, d.RunID, d.ParentRunID, d.TraceID, toolCall,
		d.CreatedAt, d.Nonce, nullIfEmpty(d.AuditID), nullIfEmpty(approvalID),
		receiptID, receiptSeq, receiptHash, prevHash, signature, keyID, nullIfEmpty(d.EventID),
		nullIfEmpty(string(d.RunContext)), d.ContextHash, shadowText(d.Shadow)}, nil
}

// shadowText is decisions.shadow: NULL without shadow outcomes.
func shadowText(s []persistence.ShadowOutcome) *string {
	if len(s) == 0 {
		return nil
	}
	t := jsonText(s)
	return &t
}

func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

const decisionInsertHead = `INSERT INTO decisions (id, tenant_id, agent_id, request_id, tool, action, resource, action_hash, decision,
		reason, risk_score, composite_risk_score, matched_policy_ids, redacted_fields, mutates_state, trust_level,
		root_trust_level, environment, run_id, parent_run_id, trace_id, tool_call, created_at, nonce, audit_id, approval_id,
		receipt_id, receipt_seq, receipt_hash, prev_receipt_hash, signature, key_id, event_id, run_context, context_hash, shadow)`

const decisionInsertCols = 36

// runTaintUpsert raises a run's durable trust floor, never lowers it.
const runTaintUpsert = `INSERT INTO run_taint (tenant_id, run_id, level, seq, via, updated_at) VALUES ($1, $2, $3, $4, $5, $6)
	ON CONFLICT (tenant_id, run_id) DO UPDATE SET level = excluded.level, seq = excluded.seq, via = excluded.via,
	updated_at = excluded.updated_at WHERE run_taint.level < excluded.level`

// CommitDecisions implements persistence.DecisionStore. Each tenant's chain
// head is created when missing, read (locked on Postgres), advanced by the
// sealer and written back within the one transaction. Heads are locked in
// tenant order, so that two nodes' transactions never wait on each other's
// heads in a cycle.
//
// With Dialect.AdvanceHead (Postgres), receipts that arrive sealed already,
// as runs that continue themselves (a lone node seals on arrival), are not
// read and locked first: the rows and a conditional advance of each head
// go with COMMIT, in one round trip instead of two. When a head is not
// where the seal expected it (a write before failed, or another node
// wrote), the transaction rolls back and is written again with the heads
// locked first and the receipts resealed; the chain never forks.
func (s *Store) CommitDecisions(ctx context.Context, writes []persistence.DecisionWrite, seal persistence.Sealer) error {
	if len(writes) == 0 {
		return nil
	}
	chains := map[string][]*persistence.Receipt{}
	for i := range writes {
		if r := writes[i].Receipt; r != nil {
			chains[r.TenantID] = append(chains[r.TenantID], r)
		}
	}
	tenants := slices.Sorted(maps.Keys(chains))
	if s.Dialect.AdvanceHead != "" && len(tenants) > 0 && allSealed(chains) {
		err := s.commitDecisions(ctx, writes, tenants, chains, nil, true)
		if !errors.Is(err, persistence.ErrHeadMoved) && !errors.Is(err, persistence.ErrConflict) {
			if err == nil {
				s.headLast.Add(1)
			}
			return err
		}
		// ErrConflict too: a receipt sealed against a stale head can
		// collide with a stored one (tenant_id, seq).
		s.headMoved.Add(1)
	}
	return s.commitDecisions(ctx, writes, tenants, chains, seal, false)
}

// HeadAdvances reports how many group commits were written with their
// chain heads advanced conditionally (Dialect.AdvanceHead), and how many
// such attempts failed (a head moved, or a receipt's seq taken) and were
// written again with the heads locked first.
func (s *Store) HeadAdvances() (advanced, moved int64) {
	return s.headLast.Load(), s.headMoved.Load()
}

// allSealed reports whether every tenant's receipts are sealed, each run
// continuing itself link by link.
func allSealed(chains map[string][]*persistence.Receipt) bool {
	for _, rs := range chains {
		if rs[0].Seq < 1 || !persistence.Continues(persistence.ChainHead{Seq: rs[0].Seq - 1, Hash: rs[0].PrevHash}, rs) {
			return false
		}
	}
	return true
}

// commitDecisions writes one group commit. Each head is locked (created
// when missing) first and the receipts sealed against it; or, sealed, the
// receipts are sealed already and Dialect.AdvanceHead moves each head after
// the rows.
func (s *Store) commitDecisions(ctx context.Context, writes []persistence.DecisionWrite, tenants []string,
	chains map[string][]*persistence.Receipt, seal persistence.Sealer, sealed bool) error {
	return s.DB.Tx(ctx, func(q Querier) error {
		// Presented approvals first: one that can no longer be used fails
		// the transaction before anything is sealed.
		for i := range writes {
			if u := writes[i].Use; u != nil {
				if err := useApproval(ctx, q, writes[i].Decision.TenantID, writes[i].Decision.ID, u); err != nil {
					return err
				}
			}
		}
		stmts := make([]Stmt, 0, 2*len(tenants)+4)
		if !sealed {
			for _, t := range tenants {
				// Creates the head at the chain's start, or locks the existing
				// one (an upsert's update takes the row lock, as FOR UPDATE
				// would), and reads it: one statement, one round trip.
				var head persistence.ChainHead
				if err := q.QueryRow(ctx, `INSERT INTO receipt_heads (tenant_id, seq, hash) VALUES ($1, 0, '')
					ON CONFLICT (tenant_id) DO UPDATE SET seq = receipt_heads.seq RETURNING seq, hash`, t).
					Scan(&head.Seq, &head.Hash); err != nil {
					return err
				}
				rs := chains[t]
				if err := seal(t, head, rs); err != nil {
					return err
				}
				last := rs[len(rs)-1]
				stmts = append(stmts, Stmt{SQL: `UPDATE receipt_heads SET seq = $1, hash = $2 WHERE tenant_id = $3`,
					Args: []any{last.Seq, last.Hash, t}})
			}
		}
		var decisions, approvals, callbacks [][]any
		for _, w := range writes {
			row, err := decisionRow(w.Decision, w.Receipt, w.Approval)
			if err != nil {
				return err
			}
			if t := w.Taint; t != nil {
				stmts = append(stmts, Stmt{SQL: runTaintUpsert, Args: []any{t.TenantID, t.RunID, t.Level, t.Seq, t.Via, t.UpdatedAt}})
			}
			decisions = append(decisions, row)
			if w.Approval != nil {
				approvals = append(approvals, approvalRow(w.Approval))
				if w.Approval.Callback != nil {
					callbacks = append(callbacks, callbackRow(w.Approval))
				}
			}
		}
		stmts = append(stmts, multiInsert(decisionInsertHead, decisionInsertCols, decisions)...)
		stmts = append(stmts, multiInsert(approvalInsertHead, 9, approvals)...)
		stmts = append(stmts, multiInsert(callbackInsertHead, 5, callbacks)...)
		if sealed {
			for _, t := range tenants {
				first, last := chains[t][0], chains[t][len(chains[t])-1]
				stmts = append(stmts, Stmt{SQL: s.Dialect.AdvanceHead, Args: []any{t, first.Seq - 1, first.PrevHash, last.Seq, last.Hash}})
			}
		}
		if err := q.Batch(ctx, stmts); err != nil {
			return err
		}
		if s.Dialect.IndexSearch != nil {
			_, err := s.Dialect.IndexSearch(ctx, q, SearchBatch)
			return err
		}
		return nil
	})
}

// RunTaint implements persistence.DecisionStore.
func (s *Store) RunTaint(ctx context.Context, tenantID, runID string) (persistence.RunTaint, error) {
	t := persistence.RunTaint{TenantID: tenantID, RunID: runID}
	err := s.DB.Reader().QueryRow(ctx, `SELECT level, seq, via, updated_at FROM run_taint WHERE tenant_id = $1 AND run_id = $2`,
		tenantID, runID).Scan(&t.Level, &t.Seq, &t.Via, Time{&t.UpdatedAt})
	if IsNoRows(err) {
		return t, persistence.ErrNotFound
	}
	return t, err
}

// RecentRunTaints implements persistence.DecisionStore.
func (s *Store) RecentRunTaints(ctx context.Context, since time.Time) ([]persistence.RunTaint, error) {
	rows, err := s.DB.Reader().Query(ctx, `SELECT tenant_id, run_id, level, seq, via, updated_at FROM run_taint WHERE updated_at >= $1`, since.UTC())
	if err != nil {
		return nil, err
	}
	return collect(rows, func(r Row) (persistence.RunTaint, error) {
		var t persistence.RunTaint
		err := r.Scan(&t.TenantID, &t.RunID, &t.Level, &t.Seq, &t.Via, Time{&t.UpdatedAt})
		return t, err
	})
}

// GetDecision implements persistence.DecisionStore.
func (s *Store) GetDecision(ctx context.Context, tenantID, id string) (persistence.Decision, error) {
	return scanDecision(s.DB.Reader().QueryRow(ctx, `SELECT `+decisionCols+decisionFrom+` WHERE d.tenant_id = $1 AND d.id = $2`, tenantID, id))
}

// FindDecisionByRequest implements persistence.DecisionStore.
func (s *Store) FindDecisionByRequest(ctx context.Context, tenantID, agentID, requestID string) (persistence.Decision, error) {
	return scanDecision(s.DB.Reader().QueryRow(ctx, `SELECT `+decisionCols+decisionFrom+
		` WHERE d.tenant_id = $1 AND d.agent_id = $2 AND d.request_id = $3`, tenantID, agentID, requestID))
}

// RecentNonces implements persistence.DecisionStore.
func (s *Store) RecentNonces(ctx context.Context, since time.Time) ([]persistence.NonceUse, error) {
	rows, err := s.DB.Reader().Query(ctx, `SELECT tenant_id, agent_id, nonce, created_at FROM decisions
		WHERE nonce IS NOT NULL AND created_at >= $1 ORDER BY created_at, seq`, since)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(r Row) (persistence.NonceUse, error) {
		var u persistence.NonceUse
		err := r.Scan(&u.TenantID, &u.AgentID, &u.Nonce, Time{&u.At})
		return u, err
	})
}

// ListDecisions implements persistence.DecisionStore.
func (s *Store) ListDecisions(ctx context.Context, tenantID, query string, p persistence.Page) ([]persistence.Decision, error) {
	q := `SELECT ` + decisionCols + decisionFrom + ` WHERE d.tenant_id = $1`
	args := []any{tenantID}
	if terms := persistence.SanitizeQuery(query); len(terms) > 0 {
		if err := s.catchUpSearch(ctx); err != nil {
			return nil, err
		}
		cond, arg := s.Dialect.DecisionSearch(terms, len(args)+1)
		args = append(args, arg)
		q += ` AND ` + cond
	}
	tail, extra := pageClauseOn("d.seq", p, len(args)+1)
	rows, err := s.DB.Replica().Query(ctx, q+tail, append(args, extra...)...)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanDecision)
}

const receiptCols = `id, tenant_id, decision_id, seq, action_hash, decision, receipt_hash, prev_receipt_hash, signature, key_id, created_at,
	context_hash`

func scanReceipt(row Row) (persistence.Receipt, error) {
	var r persistence.Receipt
	err := row.Scan(&r.ID, &r.TenantID, &r.DecisionID, &r.Seq, &r.ActionHash, &r.Decision, &r.Hash, &r.PrevHash,
		&r.Signature, &r.KeyID, Time{&r.CreatedAt}, &r.ContextHash)
	if IsNoRows(err) {
		return r, persistence.ErrNotFound
	}
	return r, err
}

// ListReceipts implements persistence.DecisionStore.
func (s *Store) ListReceipts(ctx context.Context, tenantID string, p persistence.Page) ([]persistence.Receipt, error) {
	tail, extra := pageClause(p, 2)
	rows, err := s.DB.Replica().Query(ctx, `SELECT `+receiptCols+` FROM receipts WHERE tenant_id = $1`+tail,
		append([]any{tenantID}, extra...)...)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanReceipt)
}

// GetReceipt implements persistence.DecisionStore.
func (s *Store) GetReceipt(ctx context.Context, tenantID, id string) (persistence.Receipt, error) {
	return scanReceipt(s.DB.Reader().QueryRow(ctx, `SELECT `+receiptCols+` FROM receipts WHERE tenant_id = $1 AND id = $2`, tenantID, id))
}

// ReceiptRange implements persistence.DecisionStore.
func (s *Store) ReceiptRange(ctx context.Context, tenantID string, fromSeq, toSeq int64, limit int) ([]persistence.Receipt, error) {
	if toSeq <= 0 {
		toSeq = 1<<62 - 1
	}
	rows, err := s.DB.Reader().Query(ctx, `SELECT `+receiptCols+` FROM receipts
		WHERE tenant_id = $1 AND seq >= $2 AND seq <= $3 ORDER BY seq LIMIT $4`, tenantID, fromSeq, toSeq, limit)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanReceipt)
}

// ReceiptsByID implements persistence.DecisionStore (in the order of ids;
// unknown ids are skipped).
func (s *Store) ReceiptsByID(ctx context.Context, tenantID string, ids []string) ([]persistence.Receipt, error) {
	if len(ids) == 0 {
		return []persistence.Receipt{}, nil
	}
	args, in := inList([]any{tenantID}, ids)
	rows, err := s.DB.Reader().Query(ctx, `SELECT `+receiptCols+` FROM receipts WHERE tenant_id = $1 AND id IN (`+in+`)`, args...)
	if err != nil {
		return nil, err
	}
	found, err := collect(rows, scanReceipt)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]persistence.Receipt, len(found))
	for _, r := range found {
		byID[r.ID] = r
	}
	out := make([]persistence.Receipt, 0, len(ids))
	for _, id := range ids {
		if r, ok := byID[id]; ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// ChainHead implements persistence.DecisionStore.
func (s *Store) ChainHead(ctx context.Context, tenantID string) (persistence.ChainHead, error) {
	var h persistence.ChainHead
	err := s.DB.Reader().QueryRow(ctx, `SELECT seq, hash FROM receipt_heads WHERE tenant_id = $1`, tenantID).Scan(&h.Seq, &h.Hash)
	if IsNoRows(err) {
		return persistence.ChainHead{}, nil
	}
	return h, err
}

// TenantStats implements persistence.DecisionStore.
func (s *Store) TenantStats(ctx context.Context, tenantID string) (persistence.TenantStats, error) {
	st := persistence.TenantStats{ByDecision: map[string]int64{}, TrustLevelBreakdown: map[string]int64{}}
	r := s.DB.Replica()
	group := func(col string, into map[string]int64) error {
		rows, err := r.Query(ctx, `SELECT `+col+`, COUNT(*) FROM decisions WHERE tenant_id = $1 GROUP BY `+col, tenantID)
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
		}
		return rows.Err()
	}
	if err := group("decision", st.ByDecision); err != nil {
		return st, err
	}
	if err := group("root_trust_level", st.TrustLevelBreakdown); err != nil {
		return st, err
	}
	for _, n := range st.ByDecision {
		st.TotalDecisions += n
	}
	err := r.QueryRow(ctx, `SELECT COUNT(*), COALESCE(SUM(CASE WHEN status = 'active' THEN 1 ELSE 0 END), 0)
		FROM agents WHERE tenant_id = $1 AND status <> 'deleted'`, tenantID).Scan(&st.AgentsTotal, &st.AgentsActive)
	return st, err
}
