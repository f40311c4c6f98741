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
	ExecSQL(t, dbURL, `UPDATE decisions SET receipt_hash = $1 WHERE tenant_id = $2 AND receipt_seq = $3`, forged, tenantID, seq)
}

// ExecSQL runs one statement on a gateway's database behind its back
// (dbURL is a DATABASE_URL: sqlite://PATH or postgres://...), with
// Postgres-style $N placeholders on both. On SQLite it waits up to 10 s
// for the running gateway's writer to let go of the file.
func ExecSQL(t testing.TB, dbURL, query string, args ...any) {
	t.Helper()
	ctx := context.Background()
	if path, ok := strings.CutPrefix(dbURL, "sqlite://"); ok {
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = db.Close() }()
		if _, err := db.ExecContext(ctx, strings.ReplaceAll(query, "$", "?"), args...); err != nil {
			t.Fatalf("storetest: %s: %v", query, err)
		}
		return
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	if _, err := conn.Exec(ctx, query, args...); err != nil {
		t.Fatalf("storetest: %s: %v", query, err)
	}
}
