package policy

import (
	"errors"
	"strconv"
	"strings"
)

// Sentinel errors. Every error this package returns wraps one of them, so a
// caller can tell them apart with errors.Is without reading messages.
var (
	// ErrInvalidModule reports a policy module that does not parse, does not
	// compile together with the base set, has the wrong package, or has an
	// invalid name. The *ModuleError that wraps it carries the positions.
	ErrInvalidModule = errors.New("policy: invalid policy module")

	// ErrLoad reports that the policy path (SVC_POLICY_FILE) could not be
	// read or holds no .rego file.
	ErrLoad = errors.New("policy: cannot load the base policy set")

	// ErrEval reports that evaluating the prepared query failed (for example
	// a cancelled context, a builtin error in strict mode, or a conflict such
	// as a complete rule with two values). The caller denies: fail closed.
	ErrEval = errors.New("policy: evaluation failed")
)

// CompileError is one problem in a policy module, positioned in that
// module's source. Line and Col are 1-based; both are 0 when the problem has
// no position in the module (for example a conflict with a base module).
type CompileError struct {
	Line    int    `json:"line"`
	Col     int    `json:"col"`
	Message string `json:"message"`
}

// ModuleError is returned (wrapping ErrInvalidModule) when a module given to
// NewEngine, ReloadBase or SetTenantPolicies is rejected. Module is the
// module's name (tenant modules) or file path (base modules).
type ModuleError struct {
	Module string
	Errors []CompileError
}

// Error implements error.
func (e *ModuleError) Error() string {
	var b strings.Builder
	b.WriteString("policy: invalid policy module ")
	b.WriteString(strconv.Quote(e.Module))
	for i, ce := range e.Errors {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		if ce.Line > 0 {
			b.WriteString(strconv.Itoa(ce.Line))
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(ce.Col))
			b.WriteString(": ")
		}
		b.WriteString(ce.Message)
	}
	return b.String()
}

// Unwrap lets errors.Is(err, ErrInvalidModule) match.
func (e *ModuleError) Unwrap() error { return ErrInvalidModule }
