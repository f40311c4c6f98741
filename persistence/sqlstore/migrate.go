package sqlstore

import (
	"context"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

// Migration is one numbered schema step.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// LoadMigrations reads files named NNNN_description.sql from dir of fsys,
// ordered by number.
func LoadMigrations(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: migrations: %w", err)
	}
	var out []Migration
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".sql") {
			continue
		}
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("sqlstore: migration %q is not named NNNN_description.sql", name)
		}
		raw, err := fs.ReadFile(fsys, dir+"/"+name)
		if err != nil {
			return nil, fmt.Errorf("sqlstore: migration %q: %w", name, err)
		}
		out = append(out, Migration{Version: v, Name: name, SQL: string(raw)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("sqlstore: two migrations numbered %d", out[i].Version)
		}
	}
	return out, nil
}

// Migrate applies every migration newer than the database's version, each
// in its own transaction, after running lockSQL in that transaction (an
// advisory lock on Postgres; SQLite's write transaction is the lock). It
// returns the versions it applied.
func Migrate(ctx context.Context, db DB, migrations []Migration, lockSQL string) ([]int, error) {
	var applied []int
	for _, m := range migrations {
		done := false
		err := db.Tx(ctx, func(q Querier) error {
			if lockSQL != "" {
				if _, err := q.Exec(ctx, lockSQL); err != nil {
					return err
				}
			}
			if _, err := q.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
				version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`); err != nil {
				return err
			}
			var n int
			if err := q.QueryRow(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = $1`, m.Version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				done = true
				return nil
			}
			if _, err := q.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("sqlstore: migration %s: %w", m.Name, err)
			}
			_, err := q.Exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
				m.Version, m.Name, now().Format(TimeLayout))
			return err
		})
		if err != nil {
			return applied, err
		}
		if !done {
			applied = append(applied, m.Version)
		}
	}
	return applied, nil
}
