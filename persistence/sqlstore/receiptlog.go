package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"svc/persistence"
)

// logChunk is how many 32-byte hashes one receipt_log_hashes row holds:
// 256 (8 KB) made proofs at 10 million receipts twice as fast as 1024
// for 5% more storage (bench/HISTORY.md).
const logChunk = 256

// LogSize implements persistence.ReceiptLogStore.
func (s *Store) LogSize(ctx context.Context, tenantID string) (leaves, hashes int64, err error) {
	err = s.DB.Reader().QueryRow(ctx, `SELECT leaves, hashes FROM receipt_log WHERE tenant_id = $1`, tenantID).Scan(&leaves, &hashes)
	if IsNoRows(err) {
		return 0, 0, nil
	}
	return leaves, hashes, err
}

// LogHashes implements persistence.ReceiptLogStore: one query for the
// chunks that hold indexes.
func (s *Store) LogHashes(ctx context.Context, tenantID string, indexes []int64) ([][32]byte, error) {
	out := make([][32]byte, len(indexes))
	if len(indexes) == 0 {
		return out, nil
	}
	var chunks []int64
	for _, i := range indexes {
		if i < 0 {
			return nil, fmt.Errorf("%w: log hash %d", persistence.ErrNotFound, i)
		}
		chunks = append(chunks, i/logChunk)
	}
	slices.Sort(chunks)
	chunks = slices.Compact(chunks)
	args := []any{tenantID}
	marks := ""
	for _, c := range chunks {
		args = append(args, c)
		if marks != "" {
			marks += ","
		}
		marks += fmt.Sprintf("$%d", len(args))
	}
	rows, err := s.DB.Reader().Query(ctx, `SELECT chunk, data FROM receipt_log_hashes WHERE tenant_id = $1 AND chunk IN (`+marks+`)`, args...)
	if err != nil {
		return nil, err
	}
	data := map[int64][]byte{}
	if _, err := collect(rows, func(r Row) (struct{}, error) {
		var c int64
		var b []byte
		err := r.Scan(&c, &b)
		data[c] = b
		return struct{}{}, err
	}); err != nil {
		return nil, err
	}
	for k, i := range indexes {
		b, off := data[i/logChunk], (i%logChunk)*32
		if int64(len(b)) < off+32 {
			return nil, fmt.Errorf("%w: log hash %d of tenant %s", persistence.ErrNotFound, i, tenantID)
		}
		copy(out[k][:], b[off:off+32])
	}
	return out, nil
}

// AppendLog implements persistence.ReceiptLogStore. The tree's row is
// moved first, conditionally (which also locks it on Postgres), so that of
// two writers one appends and the other gets ErrConflict without having
// written a chunk.
func (s *Store) AppendLog(ctx context.Context, tenantID string, oldLeaves, oldHashes, newLeaves int64, hashes []byte) error {
	if len(hashes)%32 != 0 || newLeaves < oldLeaves {
		return fmt.Errorf("%w: log append of %d bytes, %d to %d leaves", persistence.ErrInvalidInput, len(hashes), oldLeaves, newLeaves)
	}
	newHashes := oldHashes + int64(len(hashes))/32
	now := time.Now().UTC()
	return s.DB.Tx(ctx, func(q Querier) error {
		var moved int64
		var err error
		if oldLeaves == 0 {
			moved, err = q.Exec(ctx, `INSERT INTO receipt_log (tenant_id, leaves, hashes, updated_at) VALUES ($1, $2, $3, $4)
				ON CONFLICT (tenant_id) DO NOTHING`, tenantID, newLeaves, newHashes, now)
		} else {
			moved, err = q.Exec(ctx, `UPDATE receipt_log SET leaves = $2, hashes = $3, updated_at = $4
				WHERE tenant_id = $1 AND leaves = $5 AND hashes = $6`, tenantID, newLeaves, newHashes, now, oldLeaves, oldHashes)
		}
		if err != nil {
			return err
		}
		if moved != 1 {
			return fmt.Errorf("%w: tenant %s's receipt log is no longer at %d leaves", persistence.ErrConflict, tenantID, oldLeaves)
		}
		// The partial last chunk is read and written again whole.
		first := oldHashes / logChunk
		var buf []byte
		if oldHashes%logChunk != 0 {
			err := q.QueryRow(ctx, `SELECT data FROM receipt_log_hashes WHERE tenant_id = $1 AND chunk = $2`, tenantID, first).Scan(&buf)
			if err != nil {
				return fmt.Errorf("sqlstore: the receipt log's last chunk: %w", err)
			}
			if int64(len(buf)) != (oldHashes%logChunk)*32 {
				return fmt.Errorf("sqlstore: the receipt log's last chunk holds %d bytes, want %d", len(buf), (oldHashes%logChunk)*32)
			}
		}
		buf = append(buf, hashes...)
		for c := first; len(buf) > 0; c++ {
			n := min(len(buf), logChunk*32)
			if _, err := q.Exec(ctx, `INSERT INTO receipt_log_hashes (tenant_id, chunk, data) VALUES ($1, $2, $3)
				ON CONFLICT (tenant_id, chunk) DO UPDATE SET data = excluded.data`, tenantID, c, buf[:n]); err != nil {
				return err
			}
			buf = buf[n:]
		}
		return nil
	})
}

// SaveCheckpoint implements persistence.ReceiptLogStore.
func (s *Store) SaveCheckpoint(ctx context.Context, c persistence.Checkpoint) error {
	return s.DB.Tx(ctx, func(q Querier) error {
		if _, err := q.Exec(ctx, `INSERT INTO receipt_checkpoints (tenant_id, tree_size, root_hash, note, created_at) VALUES ($1, $2, $3, $4, $5)`,
			c.TenantID, c.Size, c.Root[:], c.Note, c.CreatedAt.UTC()); err != nil {
			return err
		}
		_, err := q.Exec(ctx, `UPDATE receipt_log SET signed = $2 WHERE tenant_id = $1 AND signed < $2`, c.TenantID, c.Size)
		return err
	})
}

const checkpointCols = `tenant_id, tree_size, root_hash, note, created_at`

func scanCheckpoint(r Row) (persistence.Checkpoint, error) {
	var c persistence.Checkpoint
	var root []byte
	var at *time.Time
	err := r.Scan(&c.TenantID, &c.Size, &root, &c.Note, NullTime{&at})
	if IsNoRows(err) {
		return c, persistence.ErrNotFound
	}
	if err == nil && len(root) != 32 {
		err = fmt.Errorf("sqlstore: checkpoint root of %d bytes", len(root))
	}
	copy(c.Root[:], root)
	if at != nil {
		c.CreatedAt = *at
	}
	return c, err
}

// LatestCheckpoint implements persistence.ReceiptLogStore.
func (s *Store) LatestCheckpoint(ctx context.Context, tenantID string) (persistence.Checkpoint, error) {
	return scanCheckpoint(s.DB.Reader().QueryRow(ctx, `SELECT `+checkpointCols+` FROM receipt_checkpoints
		WHERE tenant_id = $1 ORDER BY tree_size DESC LIMIT 1`, tenantID))
}

// LogLeaves implements persistence.ReceiptLogStore: the chain's index and
// each row's receipt_hash, no other column.
func (s *Store) LogLeaves(ctx context.Context, tenantID string, fromSeq int64, limit int) ([]persistence.LogLeaf, error) {
	rows, err := s.DB.Reader().Query(ctx, `SELECT receipt_seq, receipt_hash FROM decisions
		WHERE tenant_id = $1 AND receipt_seq >= $2 ORDER BY receipt_seq LIMIT $3`, tenantID, fromSeq, limit)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(r Row) (persistence.LogLeaf, error) {
		var l persistence.LogLeaf
		return l, r.Scan(&l.Seq, &l.Hash)
	})
}

// LogsBehind implements persistence.ReceiptLogStore: one row per tenant
// with receipts.
func (s *Store) LogsBehind(ctx context.Context) ([]string, error) {
	rows, err := s.DB.Reader().Query(ctx, `SELECT h.tenant_id FROM receipt_heads h LEFT JOIN receipt_log l ON l.tenant_id = h.tenant_id
		WHERE h.seq > COALESCE(l.leaves, 0) OR COALESCE(l.leaves, 0) > COALESCE(l.signed, 0) ORDER BY h.tenant_id`)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(r Row) (string, error) {
		var id string
		return id, r.Scan(&id)
	})
}

// CheckpointsBefore implements persistence.ReceiptLogStore.
func (s *Store) CheckpointsBefore(ctx context.Context, tenantID string, size int64, limit int) ([]persistence.Checkpoint, error) {
	rows, err := s.DB.Reader().Query(ctx, `SELECT `+checkpointCols+` FROM receipt_checkpoints
		WHERE tenant_id = $1 AND tree_size < $2 ORDER BY tree_size DESC LIMIT $3`, tenantID, size, limit)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanCheckpoint)
}
