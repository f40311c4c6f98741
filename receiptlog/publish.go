package receiptlog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"svc/persistence"
)

// appendBatch is how many receipts one append reads and stores;
// maxAppendsPerPass bounds one Publish (a tenant far behind catches up
// over several passes).
const (
	appendBatch       = 2000
	maxAppendsPerPass = 50
)

// Publish brings the tenant's tree up to its committed chain and, when the
// tree is then larger than its latest checkpoint, signs one and keeps it.
// It returns the latest checkpoint (persistence.ErrNotFound when the
// tenant has none: no receipts yet). Two nodes publishing at once append
// the same hashes once (the store's conditional append) and sign at most
// one checkpoint of a size.
func Publish(ctx context.Context, st Store, tenantID string, keys Keys, now time.Time) (persistence.Checkpoint, error) {
	var size int64
	for range maxAppendsPerPass {
		n, err := Append(ctx, st, tenantID, appendBatch)
		if errors.Is(err, persistence.ErrConflict) {
			continue // another writer appended: read its size and go on
		}
		if err != nil {
			return persistence.Checkpoint{}, err
		}
		if n == size {
			break
		}
		size = n
	}
	latest, err := st.LatestCheckpoint(ctx, tenantID)
	if err != nil && !errors.Is(err, persistence.ErrNotFound) {
		return latest, err
	}
	if size == 0 || size <= latest.Size {
		return latest, err
	}
	root, err := Root(ctx, st, tenantID, size)
	if err != nil {
		return latest, err
	}
	note, err := SignCheckpoint(keys.Signer.Name(), size, root, keys.Signer)
	if err != nil {
		return latest, fmt.Errorf("receiptlog: sign checkpoint: %w", err)
	}
	c := persistence.Checkpoint{TenantID: tenantID, Size: size, Root: root, Note: note, CreatedAt: now.UTC()}
	if err := st.SaveCheckpoint(ctx, c); err != nil {
		if errors.Is(err, persistence.ErrConflict) { // another node signed this size
			return st.LatestCheckpoint(ctx, tenantID)
		}
		return latest, err
	}
	return c, nil
}
