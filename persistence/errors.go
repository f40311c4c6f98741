package persistence

import "errors"

var (
	// ErrNotFound: no row matches the id within the tenant (a row of another
	// tenant is not found either).
	ErrNotFound = errors.New("persistence: not found")
	// ErrConflict: a uniqueness constraint was violated (a duplicate name,
	// tool binding or token).
	ErrConflict = errors.New("persistence: already exists")
	// ErrStateConflict: a conditional update found the row in a state from
	// which the transition does not apply.
	ErrStateConflict = errors.New("persistence: state conflict")
	// ErrBusy: the database was busy or locked and the operation may be
	// retried.
	ErrBusy = errors.New("persistence: database busy")
	// ErrUnavailable: the database could not be reached.
	ErrUnavailable = errors.New("persistence: database unavailable")
	// ErrHeadMoved: a group commit whose receipts were sealed ahead of time
	// found its tenant's chain head elsewhere than where they continue it
	// (a transaction before it failed); it is resealed and written again.
	ErrHeadMoved = errors.New("persistence: receipt chain head moved")
	// ErrInvalidInput: the database refused a value it cannot hold (U+0000
	// or an untranslatable character in text, a malformed uuid, a string
	// over its column's length). The HTTP layer refuses such input before
	// it reaches a store; this keeps a miss a 400, never a 500.
	ErrInvalidInput = errors.New("persistence: value not storable")
	// ErrReceiptMismatch: a receipt handed to CommitDecisions names another
	// tenant, decision, action hash, decision value or time than its
	// decision; the two are stored as one record, so they must agree.
	ErrReceiptMismatch = errors.New("persistence: receipt does not match its decision")
)
