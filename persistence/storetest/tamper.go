package storetest

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // the driver of sql.Open("sqlite")
)

// TamperReceipt overwrites the stored receipt_hash of a tenant's receipt at
// seq, behind the gateway's back, as an attacker with database access
// would: its hash check fails there, and the next receipt's link. dbURL is
// a gateway's DATABASE_URL (sqlite://PATH or postgres://...).
func TamperReceipt(t testing.TB, dbURL, tenantID string, seq int64) {
	t.Helper()
	const forged = "0000000000000000000000000000000000000000000000000000000000000000"
	ctx := context.Background()
	if path, ok := strings.CutPrefix(dbURL, "sqlite://"); ok {
		db, err := sql.Open("sqlite", "file:"+path)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = db.Close() }()
		if _, err := db.ExecContext(ctx, `UPDATE decisions SET receipt_hash = ? WHERE tenant_id = ? AND receipt_seq = ?`, forged, tenantID, seq); err != nil {
			t.Fatalf("storetest: tamper: %v", err)
		}
		return
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	if _, err := conn.Exec(ctx, `UPDATE decisions SET receipt_hash = $1 WHERE tenant_id = $2 AND receipt_seq = $3`, forged, tenantID, seq); err != nil {
		t.Fatalf("storetest: tamper: %v", err)
	}
}
