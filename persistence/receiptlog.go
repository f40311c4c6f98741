package persistence

import (
	"context"
	"time"
)

// ReceiptLogStore keeps each tenant's Merkle tree over its receipts and the
// checkpoints signed of it (CONTRACT §17). The tree is stored as the hashes
// golang.org/x/mod/sumdb/tlog stores (tlog.StoredHashes: each leaf adds its
// own hash and those of the subtrees it completes), an append-only array
// of 32-byte hashes per tenant; the store knows nothing of trees, only of
// that array and of how many leaves it holds.
type ReceiptLogStore interface {
	// LogSize reports how many leaves the tenant's tree holds and how many
	// hashes are stored for them (0, 0 for a tenant without one).
	LogSize(ctx context.Context, tenantID string) (leaves, hashes int64, err error)
	// LogHashes returns the stored hashes at indexes, in their order.
	// ErrNotFound when one is not stored.
	LogHashes(ctx context.Context, tenantID string, indexes []int64) ([][32]byte, error)
	// AppendLog stores hashes (concatenated, 32 bytes each) after the
	// tree's first oldHashes ones, when it still holds oldLeaves leaves,
	// and records newLeaves. ErrConflict when another writer moved it
	// first (nothing is written then).
	AppendLog(ctx context.Context, tenantID string, oldLeaves, oldHashes, newLeaves int64, hashes []byte) error
	// SaveCheckpoint keeps a signed checkpoint of a size the tree has
	// stored. ErrConflict when one of its size is kept already.
	SaveCheckpoint(ctx context.Context, c Checkpoint) error
	// LatestCheckpoint returns the tenant's largest checkpoint; ErrNotFound
	// when none was signed.
	LatestCheckpoint(ctx context.Context, tenantID string) (Checkpoint, error)
	// LogLeaves returns the receipt_hash of the tenant's receipts with
	// seq >= fromSeq, in seq order, at most limit of them: what the log's
	// leaves are made of, read without the rest of each receipt.
	LogLeaves(ctx context.Context, tenantID string, fromSeq int64, limit int) ([]LogLeaf, error)
	// LogsBehind lists the tenants whose tree lacks committed receipts, or
	// whose latest checkpoint is smaller than their tree.
	LogsBehind(ctx context.Context) ([]string, error)
	// CheckpointsBefore lists the tenant's checkpoints smaller than size,
	// largest first, at most limit of them.
	CheckpointsBefore(ctx context.Context, tenantID string, size int64, limit int) ([]Checkpoint, error)
}

// LogLeaf is a receipt as the log reads it.
type LogLeaf struct {
	Seq  int64
	Hash string // receipt_hash, 64 lower-case hex digits
}

// Checkpoint is a signed note of a tenant's tree head (C2SP
// tlog-checkpoint).
type Checkpoint struct {
	TenantID string
	Size     int64
	// Root is the tree's RFC 6962 root hash.
	Root [32]byte
	// Note is the signed note as served (origin, size, base64 root, then
	// the signature lines).
	Note      string
	CreatedAt time.Time
}
