package postgres

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"svc/persistence"
)

// vacuumTables are the tables that grow by appends or churn by updates:
// decisions (and the receipts in them), the audit trail and its archive,
// alerts and incidents, approvals, the chain heads and agents (every
// decision moves a head; heartbeats update agents).
var vacuumTables = []string{"decisions", "audit_events", "audit_archive", "alerts", "incidents", "approvals",
	"receipt_heads", "agents"}

// Vacuum implements persistence.MaintenanceStore: VACUUM (ANALYZE) of the
// append-heavy tables, which makes dead rows' space reusable and refreshes
// the planner's statistics. It takes no lock that blocks writes (SHARE
// UPDATE EXCLUSIVE), so LongestStall stays zero. VACUUM cannot run in a
// transaction: it goes as a simple-protocol statement of its own.
func (s *Store) Vacuum(ctx context.Context) (persistence.VacuumResult, error) {
	_, err := s.pool.Exec(ctx, `VACUUM (ANALYZE) `+strings.Join(vacuumTables, ", "), pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return persistence.VacuumResult{}, mapErr(err)
	}
	return persistence.VacuumResult{Tables: vacuumTables}, nil
}
