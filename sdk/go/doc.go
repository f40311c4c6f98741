// Package svcsdk is the Go client of svc, the authorization gateway for AI
// agents: ask svc before every tool call, run the tool only when svc allows
// it, and prove it afterwards.
//
// Import it as
//
//	import svcsdk "svc/sdk/go"
//
// The module requires nothing beyond the standard library and
// golang.org/x/text (for NFC). It behaves exactly like the reference Python
// SDK (sdk/python): the same request body, signing, retry, deadline,
// redaction, approval, edit, receipt and fail-closed rules, and the same
// typed errors (every one an [*SvcError] for errors.As). See README.md.
//
// Every method that does I/O or waits takes a [context.Context] first;
// cancelling it ends the call at once with an error for which
// errors.Is(err, context.Canceled) holds.
package svcsdk

// Version is the SDK's version, sent in the User-Agent.
const Version = "0.1.0"
