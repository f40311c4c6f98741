// Package evidencepack writes and verifies evidence packs (SPEC 4.5): ZIP
// archives that prove themselves offline. It is its own package because
// both the gateway (which writes packs into its responses) and the svc
// binary's verify-pack command (which checks them with no server) use it,
// and neither is an actor, a rule, storage or transport.
//
// # Layout
//
// A pack holds its files, then manifest.json, which lists every other file
// with its SHA-256 and size, and, when the gateway signs receipts,
// manifest.sig: the Ed25519 signature of the manifest's SHA-256 with the
// receipt key (receipt.SignManifest; the same key_id as the receipts).
//
// # Streaming
//
// A Writer writes each file through into the archive as it is produced,
// hashing it on the way, so a pack of any size leaves the gateway without
// being held in memory or on disk; only the manifest's list of names and
// hashes is kept.
//
// # Verification
//
// Verify checks that manifest.json names the pack's format and a kind
// whose files (RequiredFiles) it lists, that every file it lists is there
// with its hash and size, that no file is there that it does not list,
// that no member's name leaves the directory the pack is unpacked into
// (CheckName: nothing absolute, no ".." or "." segment, '\' taken as a
// separator too, no ':' or control character), and the signature: with a
// public key given (pinned), the pack must be signed with it; without one,
// a signed pack is checked against the public key its manifest names, and
// an unsigned pack is valid only as unsigned (the report says so). A valid
// unsigned pack proves its integrity and nothing about its origin: anyone
// can write one. The Writer refuses what Verify refuses (an unsafe name, an
// unknown kind, a kind's file not written), so the gateway never writes a
// pack that fails.
package evidencepack
