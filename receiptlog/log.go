package receiptlog

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"

	"svc/persistence"
)

// Store is what the log needs of the persistence store.
type Store = persistence.ReceiptLogStore

// LeafHash is the tree's hash of a receipt: SHA-256(0x00 ‖ the 32 bytes
// of its receipt_hash).
func LeafHash(receiptHash string) (tlog.Hash, error) {
	b, err := hex.DecodeString(receiptHash)
	if err != nil || len(b) != 32 {
		return tlog.Hash{}, fmt.Errorf("receiptlog: receipt_hash %q is not 64 hex digits", receiptHash)
	}
	return tlog.RecordHash(b), nil
}

// reader reads one tenant's stored hashes, and the ones an append has
// computed but not stored yet.
type reader struct {
	ctx     context.Context
	st      Store
	tenant  string
	pending map[int64]tlog.Hash
}

func (r *reader) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	var missing []int64
	for _, i := range indexes {
		if _, ok := r.pending[i]; !ok {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		got, err := r.st.LogHashes(r.ctx, r.tenant, missing)
		if err != nil {
			return nil, err
		}
		for k, i := range missing {
			r.pending[i] = got[k]
		}
	}
	for k, i := range indexes {
		out[k] = r.pending[i]
	}
	return out, nil
}

// Reader returns a tlog.HashReader of the tenant's stored tree.
func Reader(ctx context.Context, st Hashes, tenantID string) tlog.HashReader {
	return tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) {
		got, err := st.LogHashes(ctx, tenantID, indexes)
		if err != nil {
			return nil, err
		}
		out := make([]tlog.Hash, len(got))
		for i := range got {
			out[i] = got[i]
		}
		return out, nil
	})
}

// ErrGap is a chain whose seqs are not contiguous from the stored tree's
// size: a receipt is missing (or was removed) where the tree goes on.
var ErrGap = errors.New("receiptlog: the receipt chain has a gap")

// Append extends the tenant's tree with the committed receipts after its
// last leaf, at most limit of them, and returns the tree's size.
// persistence.ErrConflict when another writer appended meanwhile.
func Append(ctx context.Context, st Store, tenantID string, limit int) (int64, error) {
	leaves, stored, err := st.LogSize(ctx, tenantID)
	if err != nil {
		return 0, err
	}
	if want := tlog.StoredHashCount(leaves); stored != want {
		return leaves, fmt.Errorf("receiptlog: tenant %s's tree of %d leaves stores %d hashes, want %d", tenantID, leaves, stored, want)
	}
	rs, err := st.LogLeaves(ctx, tenantID, leaves+1, limit)
	if err != nil || len(rs) == 0 {
		return leaves, err
	}
	r := &reader{ctx: ctx, st: st, tenant: tenantID, pending: map[int64]tlog.Hash{}}
	buf := make([]byte, 0, 64*len(rs))
	for i := range rs {
		n := leaves + int64(i)
		if rs[i].Seq != n+1 {
			return leaves, fmt.Errorf("%w: tenant %s, seq %d where %d comes next", ErrGap, tenantID, rs[i].Seq, n+1)
		}
		leaf, err := LeafHash(rs[i].Hash)
		if err != nil {
			return leaves, err
		}
		hs, err := tlog.StoredHashesForRecordHash(n, leaf, r)
		if err != nil {
			return leaves, err
		}
		base := tlog.StoredHashIndex(0, n)
		for j, h := range hs {
			r.pending[base+int64(j)] = h
			buf = append(buf, h[:]...)
		}
	}
	size := leaves + int64(len(rs))
	if err := st.AppendLog(ctx, tenantID, leaves, stored, size, buf); err != nil {
		return leaves, err
	}
	return size, nil
}
