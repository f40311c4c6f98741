package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"svc/control"
	"svc/persistence"
)

// Reasons of the status envelope and their one HTTP status each (SPEC 7,
// CONTRACT §10). ServiceUnavailable (503) is svc's addition for the 503s
// SPEC requires without naming a reason: load shedding over
// SVC_MAX_CONCURRENT_REQUESTS and, clustered, an unreachable Valkey
// (CONTRACT §11). A database failure is InternalError (500), as SPEC 7 says.
// RequestTimeout (408) is svc's too: a request body that does not arrive
// within SVC_BODY_READ_TIMEOUT_SECS. So is MethodNotAllowed (405): a path
// that exists, asked with a method it does not take (with Allow).
var reasonStatus = map[string]int{
	"BadRequest":           http.StatusBadRequest,
	"Unauthorized":         http.StatusUnauthorized,
	"Forbidden":            http.StatusForbidden,
	"NotFound":             http.StatusNotFound,
	"MethodNotAllowed":     http.StatusMethodNotAllowed,
	"Conflict":             http.StatusConflict,
	"AlreadyExists":        http.StatusConflict,
	"Invalid":              http.StatusUnprocessableEntity,
	"TooManyRequests":      http.StatusTooManyRequests,
	"InternalError":        http.StatusInternalServerError,
	"Unknown":              http.StatusInternalServerError,
	"NotImplemented":       http.StatusNotImplemented,
	"Timeout":              http.StatusGatewayTimeout,
	"UnsupportedMediaType": http.StatusUnsupportedMediaType,
	"ServiceUnavailable":   http.StatusServiceUnavailable,
	"RequestTimeout":       http.StatusRequestTimeout,
}

// Error is an API error, rendered as the status envelope.
type Error struct {
	Reason  string
	Message string
	Details map[string]any
	// RetryAfter, in seconds, is sent as the Retry-After header when > 0.
	RetryAfter int
}

func (e *Error) Error() string { return e.Reason + ": " + e.Message }

// Status is the HTTP status of the error's reason.
func (e *Error) Status() int { return reasonStatus[e.Reason] }

func apiErr(reason, code, format string, args ...any) *Error {
	d := map[string]any{}
	if code != "" {
		d["error"] = code
	}
	return &Error{Reason: reason, Message: fmt.Sprintf(format, args...), Details: d}
}

func badRequest(code, format string, args ...any) *Error {
	return apiErr("BadRequest", code, format, args...)
}

func notFound(what string) *Error { return apiErr("NotFound", "not_found", "%s not found", what) }

// Domain reports whether the error is an answer about the request rather
// than a failure of the storage behind it (control.StorageFailure): all
// are, but a 503 (shared state or the database unreachable).
func (e *Error) Domain() bool { return e.Reason != "ServiceUnavailable" }

// orNotFound turns the store's ErrNotFound into the 404 for `what` and
// passes any other error (or nil) through.
func orNotFound(err error, what string) error {
	if errors.Is(err, persistence.ErrNotFound) {
		return notFound(what)
	}
	return err
}

func forbidden(format string, args ...any) *Error {
	return apiErr("Forbidden", "FORBIDDEN", format, args...)
}

func unauthorized(format string, args ...any) *Error {
	return apiErr("Unauthorized", "unauthorized", format, args...)
}

func invalidField(field, format string, args ...any) *Error {
	e := badRequest("invalid_field", "%s: %s", field, fmt.Sprintf(format, args...))
	e.Details["field"] = field
	return e
}

// envelope is the SPEC 7 status body.
type envelope struct {
	Kind       string         `json:"kind" openapi:"enum=Status"`
	APIVersion string         `json:"apiVersion" openapi:"enum=v1|v2"`
	Status     string         `json:"status" openapi:"enum=Failure"`
	Message    string         `json:"message"`
	Reason     string         `json:"reason"`
	Details    map[string]any `json:"details" openapi:"notnull"`
	Code       int            `json:"code"`
}

// toAPIError turns any error into an API error without leaking internal
// detail: storage sentinels map to their meaning, everything else is an
// InternalError whose text is only logged.
func toAPIError(err error) (*Error, bool) {
	var ae *Error
	var refusal *control.Refusal
	switch {
	case errors.As(err, &ae):
		return ae, false
	case errors.As(err, &refusal):
		return refusalError(refusal), false
	case errors.Is(err, persistence.ErrNotFound):
		return notFound("resource"), false
	case errors.Is(err, persistence.ErrConflict):
		return apiErr("AlreadyExists", "already_exists", "a resource with these values already exists"), false
	case errors.Is(err, persistence.ErrInvalidInput):
		return badRequest("invalid_input", "a value in the request cannot be stored"), false
	case errors.Is(err, persistence.ErrStateConflict):
		return apiErr("Conflict", "conflict", "the operation does not apply in the resource's current state"), false
	case errors.Is(err, context.DeadlineExceeded):
		return apiErr("Timeout", "timeout", "the request took longer than the server's timeout"), true
	case errors.Is(err, persistence.ErrUnavailable), errors.Is(err, persistence.ErrBusy):
		// SPEC 7: a database failure is a 500 (graceful); 503 is kept for load
		// shedding and an unreachable Valkey.
		e := apiErr("InternalError", "database_unavailable", "the database is unavailable; retry later")
		e.RetryAfter = 1
		return e, true
	default:
		return apiErr("InternalError", "internal", "internal error"), true
	}
}

// refusalError is the status error of the control plane's refusal: 404 for
// NotFound, 409 for Conflict (reason Conflict) and Exists (reason
// AlreadyExists), 400 for Invalid (invalid_field with details.field when it
// names a field), 422 for Unprocessable, 503 for Unavailable (Retry-After
// the refusal's, in whole seconds, or 1), 504 for Timeout; the refusal's
// details are added to the envelope's.
func refusalError(r *control.Refusal) *Error {
	var e *Error
	switch r.Kind {
	case control.NotFound:
		e = notFound(r.What)
	case control.Invalid:
		if r.Field != "" {
			e = invalidField(r.Field, "%s", r.Message)
		} else {
			e = badRequest(r.Code, "%s", r.Message)
		}
	case control.Unprocessable:
		e = apiErr("Invalid", r.Code, "%s", r.Message)
	case control.Exists:
		e = apiErr("AlreadyExists", r.Code, "%s", r.Message)
	case control.Unavailable:
		e = unavailable(r.Code, r.Message)
		if r.RetryAfter >= time.Second {
			e.RetryAfter = int(r.RetryAfter / time.Second)
		}
	case control.Timeout:
		e = apiErr("Timeout", r.Code, "%s", r.Message)
	default:
		e = apiErr("Conflict", r.Code, "%s", r.Message)
	}
	for k, v := range r.Details {
		e.Details[k] = v
	}
	return e
}

func writeEnvelope(w http.ResponseWriter, version string, e *Error) {
	status := e.Status()
	if status == 0 {
		e = apiErr("Unknown", "unknown", "%s", e.Message)
		status = http.StatusInternalServerError
	}
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	if version == "" {
		version = "v1"
	}
	body, _ := json.Marshal(envelope{Kind: "Status", APIVersion: version, Status: "Failure", Message: e.Message,
		Reason: e.Reason, Details: e.Details, Code: status})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
