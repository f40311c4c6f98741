// Package packcontents assembles evidence packs (SPEC 4.5; issue 24): what
// goes into an incident's pack and into a tenant's compliance pack, read
// from the store and written through an [evidencepack.Writer], which hashes
// every file into the signed manifest.
//
// It is its own package because it is neither transport nor format: http/
// answers the two download routes (their query, headers and aborting a
// response that failed midway) and calls it; evidencepack is the format,
// which `svc verify-pack` uses offline and which therefore stays free of
// the store; and a pack changes nothing, so it is no control-plane road.
//
// # What a pack holds
//
// The records are shown as the API shows them (the same JSON fields), but
// through this package's own views, so what a pack carries is decided
// here: no pack file carries a token, a token hash, a signing key, a secret
// or a tool parameter (SPEC 1.8). Decisions go without their tool call,
// approvals without parameters (tool and action only), agents without
// token or key, the tenant without its code-host secret.
//
// # Reading
//
// It reads through [Reads], the few read methods of the store it needs.
// An incident's pack is read whole before its first byte is written (an
// incident's records are few, and a failure is still an error answer); a
// compliance pack is read a page at a time as it is written, so a pack of
// any size takes little memory.
package packcontents
