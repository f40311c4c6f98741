package svcsdk

import (
	"errors"
	"fmt"
	"net/http"
)

// SvcError is the base of every error this SDK returns: the gateway answered
// something that is not a usable decision, or a local check failed. The tool
// did not run. Every other error type embeds it, so
//
//	var e *svcsdk.SvcError
//	if errors.As(err, &e) { ... }
//
// catches all of them.
type SvcError struct {
	// Status is the HTTP status of the final answer (0 when there was none).
	Status int
	// Reason is the envelope's reason (Forbidden, TooManyRequests, ...).
	Reason string
	// ErrorCode is the envelope's details.error, or a local code such as
	// invalid_redaction_path or svc_unavailable.
	ErrorCode string
	// Message is the error text.
	Message string
	// Body is the parsed body of the final answer, when there was one.
	Body any
	// Header holds the final answer's headers, when there was one.
	Header http.Header
	// Err is the underlying cause (a network error), if any.
	Err error
}

func (e *SvcError) Error() string { return e.Message }

// Unwrap returns the underlying cause.
func (e *SvcError) Unwrap() error { return e.Err }

// As lets errors.As(err, &base) with base a *SvcError match every error type
// of this package (they embed SvcError).
func (e *SvcError) As(target any) bool {
	if t, ok := target.(**SvcError); ok {
		*t = e
		return true
	}
	return false
}

// Base returns the embedded SvcError.
func (e *SvcError) Base() *SvcError { return e }

// Error is implemented by every error type of this package.
type Error interface {
	error
	Base() *SvcError
}

// SvcAuthError: 401 or 403 — the agent token, its status (quarantined,
// revoked) or the request signature was refused. Retrying will not help.
type SvcAuthError struct{ SvcError }

// SvcUnavailable: svc could not be reached, or kept answering 429, 502, 503
// or 504, within the deadline. Fail closed (unless fail-open applies).
type SvcUnavailable struct{ SvcError }

// InvalidRequest: a local pre-check refused the call before anything was
// sent (U+0000, a body over 1 MiB, NaN or infinity, invalid UTF-8, a value
// with no JSON form, an empty tool or action).
type InvalidRequest struct{ SvcError }

// InvalidRedactionPath: a redacted_fields path is malformed (ErrorCode
// invalid_redaction_path): fail closed, the tool does not run.
type InvalidRedactionPath struct{ SvcError }

// Denied: the decision was deny or quarantine (or a 403 before policy, or an
// answer read as deny).
type Denied struct {
	SvcError
	Decision *Decision
}

// ApprovalRequired: require_approval while not waiting (RunOptions.NoWait):
// Decision.ApprovalID names the approval to wait for later.
type ApprovalRequired struct {
	SvcError
	Decision *Decision
}

// ApprovalRejected: an approver rejected the call.
type ApprovalRejected struct {
	SvcError
	Approval *Approval
	Decision *Decision
}

// ApprovalExpired: the approval expired, or the wait's deadline (the earlier
// of approval_expires_at and the caller's timeout) passed while PENDING.
type ApprovalExpired struct {
	SvcError
	Approval *Approval
	Decision *Decision
}

// ReceiptInvalid: the receipt of the decision did not verify (hash,
// signature, key id, ids, or an action hash other than the call's).
type ReceiptInvalid struct {
	SvcError
	Result  *VerifyResult
	Receipt map[string]any
	// Inclusion is the failed check of [Client.VerifyInclusion].
	Inclusion *InclusionResult
}

// ActionHashMismatch: the local svc-jcs-1 hash differs from the one svc (or
// an approval) states where the hash binds what runs: fail closed.
type ActionHashMismatch struct {
	SvcError
	Local, Remote string
}

func base(code, format string, a ...any) SvcError {
	return SvcError{ErrorCode: code, Message: fmt.Sprintf(format, a...)}
}

func newInvalidRequest(code, format string, a ...any) *InvalidRequest {
	return &InvalidRequest{base(code, format, a...)}
}

func newRedactionError(format string, a ...any) *InvalidRedactionPath {
	return &InvalidRedactionPath{base("invalid_redaction_path", format, a...)}
}

func decisionBase(msg string, d *Decision) SvcError {
	e := SvcError{Message: msg}
	if d != nil {
		e.Status, e.Body, e.ErrorCode = d.Status, d.Raw, d.Reason
	}
	return e
}

func newDenied(msg string, d *Decision) *Denied {
	return &Denied{SvcError: decisionBase(msg, d), Decision: d}
}

func newApprovalRequired(msg string, d *Decision) *ApprovalRequired {
	return &ApprovalRequired{SvcError: decisionBase(msg, d), Decision: d}
}

// fromResponse builds the error a final answer raises, from its status and
// error envelope (CONTRACT 10): SvcAuthError for 401 and 403, SvcUnavailable
// for 429, 502, 503 and 504, SvcError for anything else.
func fromResponse(status int, body any, h http.Header, prefix string) error {
	e := envelopeError(status, body, h, prefix)
	switch ErrorClass(status) {
	case "SvcAuthError":
		return &SvcAuthError{e}
	case "SvcUnavailable":
		return &SvcUnavailable{e}
	}
	return &e
}

func envelopeError(status int, body any, h http.Header, prefix string) SvcError {
	e := SvcError{Status: status, Body: body, Header: h}
	if m, ok := body.(map[string]any); ok {
		e.Reason, _ = m["reason"].(string)
		msg, _ := m["message"].(string)
		if d, ok := m["details"].(map[string]any); ok {
			e.ErrorCode, _ = d["error"].(string)
		}
		e.Message = msg
	}
	text := fmt.Sprintf("%sHTTP %d", prefix, status)
	if e.Reason != "" {
		text += " " + e.Reason
	}
	if e.ErrorCode != "" {
		text += " (" + e.ErrorCode + ")"
	}
	if e.Message != "" {
		text += ": " + e.Message
	}
	e.Message = text
	return e
}

// ErrorClass names the typed error a final answer with this status raises:
// "" for 2xx, "SvcAuthError" for 401 and 403, "SvcUnavailable" for 429, 502,
// 503 and 504, "SvcError" for every other status.
func ErrorClass(status int) string {
	switch {
	case status >= 200 && status < 300:
		return ""
	case status == 401 || status == 403:
		return "SvcAuthError"
	case ShouldRetry(status):
		return "SvcUnavailable"
	}
	return "SvcError"
}

// TypeName returns the name of the error's type as the conformance driver
// reports it (SvcError, Denied, ...), and "" for an error that is not this
// package's (a cancelled context among them: the driver names that
// "Cancelled" itself).
func TypeName(err error) string {
	// The outermost error of this package in err's chain names it: errors.As
	// with an interface target stops at the first error that implements it,
	// so an unwrapped error is named by its own type, and a wrapped one
	// (fmt.Errorf("...: %w", err)) by the error it wraps.
	var e Error
	if !errors.As(err, &e) {
		return ""
	}
	switch e.(type) {
	case *SvcAuthError:
		return "SvcAuthError"
	case *SvcUnavailable:
		return "SvcUnavailable"
	case *InvalidRequest:
		return "InvalidRequest"
	case *InvalidRedactionPath:
		return "InvalidRedactionPath"
	case *Denied:
		return "Denied"
	case *ApprovalRequired:
		return "ApprovalRequired"
	case *ApprovalRejected:
		return "ApprovalRejected"
	case *ApprovalExpired:
		return "ApprovalExpired"
	case *ReceiptInvalid:
		return "ReceiptInvalid"
	case *ActionHashMismatch:
		return "ActionHashMismatch"
	case *SvcError:
		return "SvcError"
	}
	return ""
}
