// Package config turns the process environment into a typed, validated
// [Config] for the gateway. It is read once at startup; a change needs a
// restart.
//
// # What it reads
//
// Every setting is an environment variable: DATABASE_URL plus the variables
// with the SVC_ prefix (SPEC part 8 and CONTRACT §1 and §11). [Settings]
// lists each one with its default and meaning, in a stable order; the
// configuration table of docs/configuration.md follows it (a test checks
// every row), and a test proves that [Load]
// reads exactly the variables [Settings] lists.
//
// Values are trimmed of surrounding blanks, and a variable that is empty (or
// blank) counts as unset. Booleans accept true, false, 1, 0, yes and no in any
// case. Durations are whole numbers of seconds, except
// SVC_AUDIT_BATCH_FLUSH_MS, which is milliseconds.
//
// # Parse, validate, construct
//
// [Load] works in three steps, so that no half-checked value leaks out:
//
//  1. Parse: read the text of every documented variable through the getenv
//     function it is given ([FromEnvironment] passes [os.LookupEnv]).
//  2. Validate: convert each text to its type or take its documented default,
//     check ranges (no negative counts, no zero where zero makes no sense,
//     known URL schemes, a loopback debug listener, a 32-byte receipt seed),
//     derive DBBackend and SQLitePath from DATABASE_URL, fill the defaults
//     that depend on the backend (pool size, test-before-acquire), and check
//     the rules that tie settings together (TLS certificate and key, cluster
//     mode, leader lease longer than the election interval).
//  3. Construct: return the finished [Config], and only when every check
//     passed. There is never a partially valid Config.
//
// # Errors
//
// An invalid value never falls back to the default. Validation collects every
// problem and returns them together, joined with [errors.Join], so an operator
// sees all of them at once. Each problem is a [*SettingError] that names the
// variable, for example:
//
//	config: SVC_RATE_LIMIT_CAPACITY: "abc" is not a number
//
// and wraps [ErrInvalid], so errors.Is(err, config.ErrInvalid) holds for the
// joined error. Messages quote numbers, booleans and addresses, but never the
// value of a secret or of a URL that may carry credentials (DATABASE_URL,
// SVC_DB_READ_REPLICA_URL, SVC_VALKEY_URL, SVC_WEBHOOK_URL,
// SVC_RECEIPT_SIGNING_KEY).
package config
