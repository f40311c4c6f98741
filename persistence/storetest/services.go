// Package storetest holds the storage contract suite that every
// persistence.Store implementation must pass, and the helpers that give
// integration tests a real Postgres database or Valkey server.
//
// # Services
//
// `make test` (scripts/testenv.sh) starts Postgres and a Valkey-compatible
// server on loopback and exports SVC_TEST_POSTGRES_URL and
// SVC_TEST_VALKEY_URL. When a variable is missing the tests that need it fail
// under CI=true and are skipped, loudly, otherwise.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/valkey-io/valkey-go"
)

func require(t testing.TB, env, what string) string {
	t.Helper()
	v := os.Getenv(env)
	if v != "" {
		return v
	}
	msg := fmt.Sprintf("\n\n*** %s is not set: %s integration test NOT RUN. Run `make test` to provision it. ***\n", env, what)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// ValkeyURL returns the Valkey-compatible server's URL, or fails/skips.
func ValkeyURL(t testing.TB) string {
	t.Helper()
	return require(t, "SVC_TEST_VALKEY_URL", "Valkey")
}

// PostgresServerURL returns the URL of the provisioned Postgres server's
// shared test database, or fails/skips.
func PostgresServerURL(t testing.TB) string {
	t.Helper()
	return require(t, "SVC_TEST_POSTGRES_URL", "Postgres")
}

// PostgresURL creates a fresh, empty database for the test on the
// provisioned server and returns its URL; the database is dropped when the
// test ends.
func PostgresURL(t testing.TB) string {
	t.Helper()
	base := PostgresServerURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("storetest: connect to %s: %v", base, err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "t_" + strings.ToLower(hex.EncodeToString(b[:]))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("storetest: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			return
		}
		defer func() { _ = c.Close(context.Background()) }()
		_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("storetest: parse %s: %v", base, err)
	}
	u.Path = "/" + name
	return u.String()
}

// Replica is a streaming standby of the provisioned Postgres server
// (scripts/testenv.sh).
type Replica struct {
	// URL reaches, on the standby, the database that primaryURL names.
	URL string
}

// ReplicaOf returns the standby's URL for the primary's database
// primaryURL (made by PostgresURL), once the standby has replayed its
// creation, or fails/skips. The test must not leave replay paused: Resume
// is registered as a cleanup.
func ReplicaOf(t testing.TB, primaryURL string) *Replica {
	t.Helper()
	port := require(t, "SVC_TEST_PG_REPLICA_PORT", "Postgres streaming standby")
	u, err := url.Parse(primaryURL)
	if err != nil {
		t.Fatalf("storetest: parse %s: %v", primaryURL, err)
	}
	u.Host = "127.0.0.1:" + port
	r := &Replica{URL: u.String()}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := pgx.Connect(ctx, r.URL)
		if err == nil {
			_ = c.Close(ctx)
			cancel()
			break
		}
		cancel()
		if time.Now().After(deadline) {
			t.Fatalf("storetest: the standby did not show %s within 30 s: %v", u.Path, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Cleanup(func() { r.Resume(t) })
	return r
}

// exec runs one statement on the standby's database.
func (r *Replica) exec(t testing.TB, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, r.URL)
	if err != nil {
		t.Fatalf("storetest: connect to the standby: %v", err)
	}
	defer func() { _ = c.Close(context.Background()) }()
	if _, err := c.Exec(ctx, sql); err != nil {
		t.Fatalf("storetest: %s on the standby: %v", sql, err)
	}
}

// Pause stops the standby replaying WAL: from now on it lags behind every
// write to the primary until Resume.
func (r *Replica) Pause(t testing.TB) { t.Helper(); r.exec(t, "SELECT pg_wal_replay_pause()") }

// Resume lets the standby replay again.
func (r *Replica) Resume(t testing.TB) { t.Helper(); r.exec(t, "SELECT pg_wal_replay_resume()") }

// DeleteValkeyKeys deletes the keys matching pattern on the provisioned
// Valkey (SVC_TEST_VALKEY_URL; nothing when it is unset), for a test
// binary's TestMain to clear what earlier runs on a reused environment
// left. Failures are printed, not fatal: the tests that depend on it fail
// on their own.
func DeleteValkeyKeys(pattern string) {
	raw := os.Getenv("SVC_TEST_VALKEY_URL")
	if raw == "" {
		return
	}
	opt, err := valkey.ParseURL(raw)
	if err != nil {
		fmt.Fprintln(os.Stderr, "storetest: SVC_TEST_VALKEY_URL:", err)
		return
	}
	c, err := valkey.NewClient(opt)
	if err != nil {
		fmt.Fprintln(os.Stderr, "storetest: valkey:", err)
		return
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for cursor := uint64(0); ; {
		e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Build()).AsScanEntry()
		if err != nil {
			fmt.Fprintln(os.Stderr, "storetest: valkey scan:", err)
			return
		}
		if len(e.Elements) > 0 {
			if err := c.Do(ctx, c.B().Del().Key(e.Elements...).Build()).Error(); err != nil {
				fmt.Fprintln(os.Stderr, "storetest: valkey del:", err)
				return
			}
		}
		if cursor = e.Cursor; cursor == 0 {
			return
		}
	}
}
