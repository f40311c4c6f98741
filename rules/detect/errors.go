package detect

import (
	"errors"
	"strings"
)

// Sentinel errors. Every error this package returns wraps one of them, so a
// caller (the HTTP layer) can pick the status code with errors.Is and never
// has to read a message.
var (
	// ErrInvalidCondition reports a condition that is empty, not a map,
	// names an unknown field or operator, or gives a value of the wrong
	// type. The *ConditionError that wraps it carries the offending path.
	// HTTP: 400.
	ErrInvalidCondition = errors.New("detect: invalid condition")

	// ErrInvalidSeverity reports a severity other than INFO, LOW, MEDIUM
	// or HIGH (in any case). HTTP: 400.
	ErrInvalidSeverity = errors.New("detect: invalid severity")

	// ErrInvalidRuleKey reports a custom rule key that does not match
	// [a-z0-9_]{1,64}. HTTP: 400.
	ErrInvalidRuleKey = errors.New("detect: invalid rule key")

	// ErrDefaultRuleKey reports a custom rule that uses the key of a
	// default rule. HTTP: 409 (CONTRACT §7).
	ErrDefaultRuleKey = errors.New("detect: rule key belongs to a default rule")
)

// ConditionError is the error every condition parser returns. Path names
// the offending place, starting at "condition": "condition" itself (empty
// condition, not a map, invalid JSON or YAML), "condition.foo" (an unknown
// field, or a bad matcher for field foo), "condition.risk_score.gte" (an
// unknown operator, or a bad value for that operator), or
// "condition.decision.in[1]" (a bad list element). The HTTP layer puts
// Path in the 400's details; Msg says what is wrong there.
type ConditionError struct {
	Path string
	Msg  string
}

// Error implements error.
func (e *ConditionError) Error() string {
	var b strings.Builder
	b.WriteString("detect: invalid condition: ")
	b.WriteString(e.Path)
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap lets errors.Is(err, ErrInvalidCondition) match.
func (e *ConditionError) Unwrap() error { return ErrInvalidCondition }

func condErr(path, msg string) *ConditionError {
	return &ConditionError{Path: path, Msg: msg}
}
