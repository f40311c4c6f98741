// Package conformance holds the SDK conformance contract of svc: the Go
// reference behaviour every client SDK must match, the generator of the
// shared vectors in testdata/sdk/, and the runner that checks every SDK's
// conformance driver against them (CONTRACT §14).
//
// # What lives here
//
//   - reference.go: the reference functions, the one place where the
//     SDK-side rules that svc itself never executes are written in Go:
//     request signing ([Sign]), redaction of a redact decision's paths
//     ([Redact]), retry and error classification of an answer ([Retries],
//     [ErrorClass]), what an SDK does with a 200 authorize answer
//     ([Outcome]) and the per-receipt check ([VerifyReceipt]). The rules
//     that svc does execute (canonical JSON, the action hash, receipt
//     hashing and signing) are not repeated here: the vectors come from
//     the svc/canonical and svc/receipt packages themselves.
//   - refdriver/: a conformance driver built on those functions and
//     packages. It proves that the vectors, the runner and the Go
//     reference agree, and is a worked example of the driver protocol.
//   - The tests. TestGenerate regenerates every file of testdata/sdk/ in
//     memory and fails when the committed files differ, so the vectors
//     cannot drift from the Go reference; with -update it writes them
//     (go test ./sdk/conformance -run TestGenerate -update), refusing to
//     change or drop an entry already published. TestDrivers runs every
//     sdk/<language>/conformance-driver, and the reference driver, over
//     every vector of testdata/jcs/ and testdata/sdk/, and checks `svc
//     verify-receipts` against the receipt vectors;
//     TestRunnerCatchesFaultyDrivers checks that runner against drivers
//     that are wrong on purpose. TestUnicodeTables
//     pins the Unicode version of the toolchain (svc-jcs-1 is defined on
//     Unicode 15.0.0).
//
// testdata/sdk/README.md states the semantics, the file formats and the
// driver protocol in prose, for SDK authors who do not read Go.
//
// The package holds no state and does no I/O; the gateway does not import
// it.
package conformance
