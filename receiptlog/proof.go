package receiptlog

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"
)

// Hashes is what a proof reads of the store: the tenant's stored tree.
type Hashes interface {
	LogSize(ctx context.Context, tenantID string) (leaves, hashes int64, err error)
	LogHashes(ctx context.Context, tenantID string, indexes []int64) ([][32]byte, error)
}

// ErrBeyondTree is a proof asked of a tree larger than the one stored, or
// of a leaf outside its tree.
var ErrBeyondTree = errors.New("receiptlog: beyond the tree")

// Inclusion returns the RFC 6962 inclusion proof (audit path) of the
// receipt with seq in the tree of size.
func Inclusion(ctx context.Context, st Hashes, tenantID string, seq, size int64) ([]tlog.Hash, error) {
	if err := within(ctx, st, tenantID, size); err != nil {
		return nil, err
	}
	if seq < 1 || seq > size {
		return nil, fmt.Errorf("%w: receipt %d is not in a tree of %d", ErrBeyondTree, seq, size)
	}
	p, err := tlog.ProveRecord(size, seq-1, Reader(ctx, st, tenantID))
	return p, err
}

// Consistency returns the RFC 6962 consistency proof from the tree of
// size from to the tree of size to (empty when they are equal).
func Consistency(ctx context.Context, st Hashes, tenantID string, from, to int64) ([]tlog.Hash, error) {
	if err := within(ctx, st, tenantID, to); err != nil {
		return nil, err
	}
	if from < 1 || from > to {
		return nil, fmt.Errorf("%w: from %d to %d", ErrBeyondTree, from, to)
	}
	return tlog.ProveTree(to, from, Reader(ctx, st, tenantID))
}

// Root returns the root hash of the tree of size.
func Root(ctx context.Context, st Hashes, tenantID string, size int64) (tlog.Hash, error) {
	if err := within(ctx, st, tenantID, size); err != nil {
		return tlog.Hash{}, err
	}
	return tlog.TreeHash(size, Reader(ctx, st, tenantID))
}

func within(ctx context.Context, st Hashes, tenantID string, size int64) error {
	leaves, _, err := st.LogSize(ctx, tenantID)
	if err != nil {
		return err
	}
	if size < 1 || size > leaves {
		return fmt.Errorf("%w: a tree of %d leaves, %d stored", ErrBeyondTree, size, leaves)
	}
	return nil
}
