// Package receipt computes, signs and verifies the tamper-evident decision
// receipts of svc (SPEC 2.4, CONTRACT §13): one hash chain per tenant, each
// receipt optionally signed with Ed25519, and the JSON-lines export that the
// offline command `svc verify-receipts FILE` checks.
//
// # Why a package of its own
//
// A receipt is evidence, and evidence must be checkable by someone who does
// not run the gateway: an auditor with an export file, an SDK, another
// implementation. So the hashing, signing and checking rules live here, apart
// from their users. The chain actor calls [Seal] while it owns the tenant's
// chain head; the HTTP layer calls [Verify] and [VerifyChain] for the verify
// endpoints and [WriteExport] for the export; the CLI calls [VerifyExport].
// The package is no actor (it holds no chain head and no state), no rule (it
// decides nothing), no storage (it never reads or writes a database) and no
// transport (its only I/O is the io.Writer and io.Reader it is handed). It
// has no package-level mutable state and depends only on the standard
// library and svc/canonical.
//
// # Receipt hashing scheme svc-receipt-1
//
// receipt_hash is the lower-case hex SHA-256 of the RFC 8785 (JCS) canonical
// bytes ([canonical.Marshal]) of the JSON object with exactly these members:
//
//	receipt_id, tenant_id, decision_id, seq, action_hash, decision,
//	prev_receipt_hash, key_id, created_at
//
// that is, every field of the receipt except receipt_hash itself and
// signature. seq is a JSON number (exact up to 2^53); every other member is
// a string, hashed byte for byte as stored: created_at is RFC 3339 UTC with
// exactly six fractional digits ([TimeLayout], for example
// 2026-01-02T03:04:05.123456Z), prev_receipt_hash is "" at the chain head
// (seq 1) and otherwise the previous receipt's receipt_hash, and key_id is ""
// for an unsigned receipt. Because prev_receipt_hash is hashed, each receipt
// commits to the whole chain before it; because key_id is hashed, a signed
// receipt cannot be passed off as an unsigned one by dropping its signature.
// The scheme name is [HashScheme]; a change of any of these rules needs a new
// name (SPEC 9.5).
//
// # Receipt hashing scheme svc-receipt-2
//
// A receipt of a decision made under run context (CONTRACT §16: the
// tenant's policies read input.run or input.agent_history) carries one
// more field, context_hash: the lower-case hex SHA-256 of the RFC 8785
// bytes of {"agent_history": …, "run": …} exactly as the policy saw them
// (the decision keeps those bytes as its run_context). Its receipt_hash is
// computed as svc-receipt-1's with context_hash added to the hashed object
// ([HashSchemeContext]). A receipt without context_hash (the field absent or
// empty) is svc-receipt-1, so one chain mixes both, and a verifier picks the
// scheme by the field ([Scheme]). Dropping, adding or changing a
// context_hash changes receipt_hash, so the receipt commits to what the
// policy saw as it does to the call (action_hash).
//
// # Signing
//
// The gateway's key is an Ed25519 key derived from a 32-byte seed
// (SVC_RECEIPT_SIGNING_KEY). Its key_id is the first 16 hex characters of the
// SHA-256 of the 32-byte public key ([KeyID]). The signature covers the 32
// raw bytes of receipt_hash (not its hex text) and travels as standard base64
// with padding; an unsigned receipt has signature null and key_id "".
//
// # Verification
//
// [Verify] checks one receipt: hash_valid says that the fields match
// receipt_hash; signature_valid (null when unsigned) says that the signature
// over the stored receipt_hash verifies with a public key whose key_id is the
// receipt's. The two are independent, so a report tells a rewritten field
// (hash) from a forged or damaged signature. [VerifyChain] adds the links:
// consecutive seq numbers, each prev_receipt_hash equal to the previous
// receipt_hash, one tenant, and optionally the chain head. Errors are
// reported per index, as the verify-chain endpoint returns them.
//
// What this proves, and what it does not: editing, removing, reordering or
// inserting a receipt anywhere but at the end breaks a hash or a link, and
// without the private key a signed receipt cannot be rewritten, only
// re-hashed, which its signature then exposes. Two changes leave a
// consistent chain behind: dropping receipts from the end (signed or not),
// and rewriting an unsigned chain from the first changed receipt onwards.
// Only a head hash known from elsewhere (the gateway's current head, a copy
// an auditor kept) exposes those. An unsigned receipt verifies on its hash
// alone even when a public key is supplied, so a chain that must be signed
// throughout is checked by also requiring a non-nil SignatureValid. A chain
// that crosses a key rotation verifies only the receipts whose key_id
// matches the key supplied; the others report "unknown key_id".
//
// # Export format svc-receipts-export-1
//
// JSON lines. Line 1 is the header
//
//	{"format":"svc-receipts-export-1","tenant_id":...,"key_id":...,
//	 "public_key":<standard base64 of the Ed25519 public key, or null>,
//	 "count":N,"head_hash":<the stored chain head's receipt_hash, or "">,
//	 "head_seq":<the stored chain head's seq>,
//	 "header_signature":<signed exports only: standard base64 Ed25519>}
//
// and each further line is one receipt in seq order, starting at seq 1.
// header_signature signs the bytes
//
//	"svc-receipts-export-1 header" NUL tenant_id NUL key_id NUL count NUL head_seq NUL head_hash
//
// (count and head_seq in decimal, head_seq -1 when absent) with the
// receipts' key. [VerifyExport] checks the header (format, key_id against
// public_key, header_signature), every receipt and link from the head, every
// tenant_id against the header's, count against the number of receipt lines
// and head_seq and head_hash against the last receipt, so a receipt removed
// at the end is caught too; in an unsigned export, only unless the header was
// rewritten to match. Errors about the header or the file as a whole
// carry index -1; a receipt line that does not parse, or is longer than
// 1 MiB, is an error entry at its index, never a panic.
//
// # Bounded memory
//
// [VerifyExport] reads the export as a stream and holds one line (at most
// 1 MiB; a longer one is read past, not held), one batch of signatures and
// the first [MaxReportedErrors] failures of the receipts, counting the
// rest in Report.ErrorCount: an export of any size, however broken, is
// verified in a few tens of MB.
package receipt
