package sqlstore

import (
	"context"
	"errors"
	"fmt"
)

// ---- the installation's own secrets ----

// InstallationSecret implements persistence.SecretStore. A stored value is
// read first (the usual case: no write). Otherwise fresh is inserted with
// ON CONFLICT DO NOTHING and the row read back in the same transaction: on
// Postgres an insert that conflicts with a concurrent one waits for that
// one's commit, and the read after it (read committed) sees the winner's
// value; SQLite's one writer takes the transactions one after the other.
func (s *Store) InstallationSecret(ctx context.Context, name string, fresh []byte) ([]byte, error) {
	if name == "" || len(fresh) == 0 {
		return nil, errors.New("sqlstore: an installation secret needs a name and a value")
	}
	var stored []byte
	err := s.DB.Reader().QueryRow(ctx, `SELECT value FROM installation_secrets WHERE name = $1`, name).Scan(&stored)
	switch {
	case err == nil:
		return stored, nil
	case !IsNoRows(err):
		return nil, err
	}
	err = s.DB.Tx(ctx, func(q Querier) error {
		if _, err := q.Exec(ctx, `INSERT INTO installation_secrets (name, value, created_at) VALUES ($1, $2, $3)
			ON CONFLICT (name) DO NOTHING`, name, fresh, now()); err != nil {
			return err
		}
		return q.QueryRow(ctx, `SELECT value FROM installation_secrets WHERE name = $1`, name).Scan(&stored)
	})
	if err != nil {
		return nil, fmt.Errorf("sqlstore: installation secret %q: %w", name, err)
	}
	return stored, nil
}
