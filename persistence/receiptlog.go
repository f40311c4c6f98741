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

// Witness statuses: never asked yet, cosigned the latest checkpoint it was
// given, refused one as inconsistent with what it cosigned before (the log
// was rewritten or forked: a HIGH alert), or could not be asked (down,
// misconfigured, an answer that does not verify).
const (
	WitnessPending = "pending"
	WitnessOK      = "ok"
	WitnessRefused = "refused"
	WitnessFailing = "failing"
)

// MaxWitnesses bounds the witnesses of one tenant.
const MaxWitnesses = 8

// ReceiptWitness is a witness a tenant has its checkpoints cosigned by
// (C2SP tlog-witness).
type ReceiptWitness struct {
	Seq      int64
	ID       string
	TenantID string
	// URL is the witness's submission prefix: checkpoints are POSTed to
	// URL + "/add-checkpoint".
	URL string
	// Key is the witness's cosignature verifier key (a note vkey); its name
	// names the witness's cosignature lines.
	Key string
	// Size is the size of the last checkpoint it cosigned, 0 before one.
	Size      int64
	Status    string
	Error     string
	CheckedAt *time.Time
	CreatedAt time.Time
}

// WitnessStore keeps the tenants' witnesses and what they answered.
type WitnessStore interface {
	// CreateWitness adds a witness. ErrConflict when the tenant has one
	// with its key, or MaxWitnesses already.
	CreateWitness(ctx context.Context, w ReceiptWitness, audit ...AuditEvent) (ReceiptWitness, error)
	// ListWitnesses returns the tenant's witnesses, oldest first.
	ListWitnesses(ctx context.Context, tenantID string) ([]ReceiptWitness, error)
	// DeleteWitness removes one; ErrNotFound when the tenant has no such
	// witness.
	DeleteWitness(ctx context.Context, tenantID, id string, audit ...AuditEvent) error
	// WitnessesBehind lists the witnesses of every tenant whose cosigned
	// size is smaller than their tenant's latest checkpoint, but those that
	// refused one (a refusal stands until the witness is configured anew).
	WitnessesBehind(ctx context.Context) ([]ReceiptWitness, error)
	// RecordWitness stores a witness's answer: the size it has cosigned,
	// its status and error, and when. ErrNotFound when it was deleted.
	RecordWitness(ctx context.Context, tenantID, id string, size int64, status, errText string, at time.Time) error
	// AddCosignatures appends signature lines (each ending in a newline)
	// to the note of the tenant's checkpoint of size, in one statement, so
	// that two witnesses' cosignatures added at once are both kept.
	// ErrNotFound when there is no such checkpoint.
	AddCosignatures(ctx context.Context, tenantID string, size int64, lines string) error
}
