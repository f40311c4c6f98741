package detect

import (
	"encoding/json"
	"slices"
	"strings"
)

// Condition field names (CONTRACT §7).
const (
	FieldKind            = "kind"
	FieldDecision        = "decision"
	FieldTool            = "tool"
	FieldAction          = "action"
	FieldResource        = "resource"
	FieldRiskScore       = "risk_score"
	FieldMutatesState    = "mutates_state"
	FieldSourceTrust     = "source_trust"
	FieldAgentID         = "agent_id"
	FieldMatchedPolicies = "matched_policies"
	FieldRedactedFields  = "redacted_fields"
)

// Condition operators (CONTRACT §7).
const (
	OpEq       = "eq"
	OpNe       = "ne"
	OpGt       = "gt"
	OpGte      = "gte"
	OpLt       = "lt"
	OpLte      = "lte"
	OpIn       = "in"
	OpContains = "contains"
	OpPrefix   = "prefix"
)

// Fields lists the condition field names in a stable (sorted) order.
func Fields() []string {
	return []string{
		FieldAction, FieldAgentID, FieldDecision, FieldKind, FieldMatchedPolicies,
		FieldMutatesState, FieldRedactedFields, FieldResource, FieldRiskScore,
		FieldSourceTrust, FieldTool,
	}
}

// Operators lists the operator names in a stable (sorted) order.
func Operators() []string {
	return []string{OpContains, OpEq, OpGt, OpGte, OpIn, OpLt, OpLte, OpNe, OpPrefix}
}

// valueType is the type of a condition field.
type valueType int

const (
	typeString  valueType = iota // a string (resource: a string or null)
	typeInt                      // risk_score
	typeBool                     // mutates_state
	typeStrings                  // an array of strings
)

func (t valueType) String() string {
	switch t {
	case typeInt:
		return "an integer field"
	case typeBool:
		return "a boolean field"
	case typeStrings:
		return "an array field"
	default:
		return "a string field"
	}
}

// operators returns the operators that apply to a field of type t.
func (t valueType) operators() []string {
	switch t {
	case typeInt:
		return []string{OpEq, OpNe, OpGt, OpGte, OpLt, OpLte, OpIn}
	case typeBool:
		return []string{OpEq, OpNe, OpIn}
	case typeStrings:
		return []string{OpEq, OpNe, OpIn, OpContains}
	default:
		return []string{OpEq, OpNe, OpIn, OpPrefix}
	}
}

// field describes one condition field: its name, type and how to read it
// from an Event.
type field struct {
	name     string
	typ      valueType
	nullable bool // resource: the event's value may be null
}

func lookupField(name string) (field, bool) {
	switch name {
	case FieldKind, FieldDecision, FieldTool, FieldAction, FieldSourceTrust, FieldAgentID:
		return field{name: name, typ: typeString}, true
	case FieldResource:
		return field{name: name, typ: typeString, nullable: true}, true
	case FieldRiskScore:
		return field{name: name, typ: typeInt}, true
	case FieldMutatesState:
		return field{name: name, typ: typeBool}, true
	case FieldMatchedPolicies, FieldRedactedFields:
		return field{name: name, typ: typeStrings}, true
	}
	return field{}, false
}

// str reads a string field; ok is false when the value is null.
func (f field) str(e Event) (s string, ok bool) {
	switch f.name {
	case FieldKind:
		return e.Kind, true
	case FieldDecision:
		return e.Decision, true
	case FieldTool:
		return e.Tool, true
	case FieldAction:
		return e.Action, true
	case FieldSourceTrust:
		return e.SourceTrust, true
	case FieldAgentID:
		return e.AgentID, true
	case FieldResource:
		if e.Resource == nil {
			return "", false
		}
		return *e.Resource, true
	}
	return "", false
}

func (f field) list(e Event) []string {
	if f.name == FieldMatchedPolicies {
		return e.MatchedPolicies
	}
	return e.RedactedFields
}

// clause is one field's matcher after parsing: the field, the operator and
// the operator's value in the one member its type calls for.
type clause struct {
	f  field
	op string

	kind  valueKind // which member holds the value
	str   string
	num   int
	flag  bool
	strs  []string
	nums  []int
	flags []bool
}

// valueKind says which member of a clause holds its value.
type valueKind int

const (
	valNull  valueKind = iota // eq or ne null (resource)
	valStr                    // str
	valNum                    // num
	valFlag                   // flag
	valStrs                   // strs (in; eq and ne on an array field)
	valNums                   // nums (in on risk_score)
	valFlags                  // flags (in on mutates_state)
)

// newClause stores a value parseValue accepted.
func newClause(f field, op string, v any) clause {
	cl := clause{f: f, op: op}
	switch x := v.(type) {
	case string:
		cl.kind, cl.str = valStr, x
	case int:
		cl.kind, cl.num = valNum, x
	case bool:
		cl.kind, cl.flag = valFlag, x
	case []string:
		cl.kind, cl.strs = valStrs, x
	case []int:
		cl.kind, cl.nums = valNums, x
	case []bool:
		cl.kind, cl.flags = valFlags, x
	default:
		cl.kind = valNull
	}
	return cl
}

// value returns the clause's value as Raw shows it (lists copied).
func (cl clause) value() any {
	switch cl.kind {
	case valStr:
		return cl.str
	case valNum:
		return cl.num
	case valFlag:
		return cl.flag
	case valStrs:
		return slices.Clone(cl.strs)
	case valNums:
		return slices.Clone(cl.nums)
	case valFlags:
		return slices.Clone(cl.flags)
	}
	return nil
}

// Condition is a parsed, validated condition: a map from field to matcher,
// all of which must hold. It is immutable and safe for concurrent use. The
// zero Condition has no clauses; it matches every event and is what
// IsZero reports, but no parser returns it (an empty condition is an
// error).
type Condition struct {
	clauses []clause // sorted by field name
}

// IsZero reports whether c has no clauses.
func (c Condition) IsZero() bool { return len(c.clauses) == 0 }

// Match reports whether every clause of c holds for e.
func (c Condition) Match(e Event) bool {
	for _, cl := range c.clauses {
		if !cl.match(e) {
			return false
		}
	}
	return true
}

func (cl clause) match(e Event) bool {
	switch cl.f.typ {
	case typeInt:
		return cl.matchInt(e.RiskScore)
	case typeBool:
		return cl.matchBool(e.MutatesState)
	case typeStrings:
		return cl.matchStrings(cl.f.list(e))
	default:
		s, ok := cl.f.str(e)
		return cl.matchString(s, ok)
	}
}

// matchString matches a string field; ok is false when the event's value
// is null, which matches only ne (and eq null).
func (cl clause) matchString(s string, ok bool) bool {
	switch cl.op {
	case OpEq:
		if cl.kind == valNull {
			return !ok
		}
		return ok && s == cl.str
	case OpNe:
		if cl.kind == valNull {
			return ok
		}
		return !ok || s != cl.str
	case OpIn:
		return ok && slices.Contains(cl.strs, s)
	case OpPrefix:
		return ok && strings.HasPrefix(s, cl.str)
	}
	return false
}

func (cl clause) matchInt(n int) bool {
	switch cl.op {
	case OpEq:
		return n == cl.num
	case OpNe:
		return n != cl.num
	case OpGt:
		return n > cl.num
	case OpGte:
		return n >= cl.num
	case OpLt:
		return n < cl.num
	case OpLte:
		return n <= cl.num
	case OpIn:
		return slices.Contains(cl.nums, n)
	}
	return false
}

func (cl clause) matchBool(b bool) bool {
	switch cl.op {
	case OpEq:
		return b == cl.flag
	case OpNe:
		return b != cl.flag
	case OpIn:
		return slices.Contains(cl.flags, b)
	}
	return false
}

func (cl clause) matchStrings(arr []string) bool {
	switch cl.op {
	case OpContains:
		return slices.Contains(arr, cl.str)
	case OpEq:
		return sameSet(arr, cl.strs)
	case OpNe:
		if cl.kind == valStr {
			return !slices.Contains(arr, cl.str)
		}
		return !sameSet(arr, cl.strs)
	case OpIn:
		for _, s := range cl.strs {
			if slices.Contains(arr, s) {
				return true
			}
		}
	}
	return false
}

// sameSet reports whether a and b hold the same distinct strings, ignoring
// order and repetition.
func sameSet(a, b []string) bool {
	for _, s := range a {
		if !slices.Contains(b, s) {
			return false
		}
	}
	for _, s := range b {
		if !slices.Contains(a, s) {
			return false
		}
	}
	return true
}

// Raw returns c in its normalized form, a fresh map the caller may keep or
// change: every field maps to a one-operator map, scalars written as
// {"eq": value}, and an equality on an array field with one string written
// as {"contains": value}. Values are string, int, bool, nil (resource
// null), []string, []int or []bool. ParseCondition(c.Raw()) gives back an
// equal Condition. The zero Condition gives an empty map.
func (c Condition) Raw() map[string]any {
	m := make(map[string]any, len(c.clauses))
	for _, cl := range c.clauses {
		m[cl.f.name] = map[string]any{cl.op: cl.value()}
	}
	return m
}

// MarshalJSON writes the normalized form of Raw, keys sorted.
func (c Condition) MarshalJSON() ([]byte, error) {
	return json.Marshal(c.Raw())
}

// UnmarshalJSON parses a condition with ParseConditionJSON, so a stored
// condition is validated again when it is read back.
func (c *Condition) UnmarshalJSON(data []byte) error {
	parsed, err := ParseConditionJSON(data)
	if err != nil {
		return err
	}
	*c = parsed
	return nil
}
