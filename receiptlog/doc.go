// Package receiptlog keeps each tenant's receipts as the leaves of an RFC
// 6962 Merkle tree and signs checkpoints of it (CONTRACT §17): leaf i (from
// 0) is the receipt with seq i+1, hashed as SHA-256(0x00 ‖ receipt_hash).
//
// The tree hashing, the proofs and the note format are
// golang.org/x/mod/sumdb/tlog and golang.org/x/mod/sumdb/note, the Go
// checksum database's own: kept by the Go team, already a dependency of
// svc (through the module graph), and the layout the research chose
// (tlog's stored hashes, a few per leaf, so that a proof reads O(log n) of
// them and an append O(1) amortized). The transparency-dev modules were
// the alternative; their Merkle module's last tag is from 2023 and its
// main branch changed proof semantics in 2026, so they serve here only as
// the independent implementation the tests cross-check proofs with.
//
// The tree is built from the committed chain, not on the authorize path: a
// leader's job appends what was committed since its last pass and signs a
// checkpoint when the tree grew. Its content is a function of the chain,
// which the database arbitrates, so two nodes that append at once write
// the same hashes, and the store's conditional append lets one of them do
// it.
package receiptlog
