package detect

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
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

// ParseConditionJSON parses a condition from a JSON object. Numbers are
// read exactly (100 and 100.0 are the integer 100; 1.5 is not an integer).
// Invalid JSON, trailing data, or a value other than an object gives a
// *ConditionError with Path "condition".
func ParseConditionJSON(data []byte) (Condition, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return Condition{}, condErr("condition", "invalid JSON: "+err.Error())
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return Condition{}, condErr("condition", "invalid JSON: unexpected data after the condition object")
	}
	return ParseConditionValue(v)
}

// ParseConditionYAML parses a condition from a YAML mapping (one document;
// yaml.v3 rules, so yes and no are strings, not booleans). Invalid YAML or
// a value other than a mapping gives a *ConditionError with Path
// "condition".
func ParseConditionYAML(data []byte) (Condition, error) {
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		return Condition{}, condErr("condition", "invalid YAML: "+err.Error())
	}
	return ParseConditionValue(v)
}

// ParseConditionValue parses a condition from a decoded JSON or YAML value,
// for a caller that decoded a whole rule body and holds its "condition"
// member: a map with string keys (map[string]any, or map[any]any as
// yaml.v3 may give) is parsed with ParseCondition; nil is an empty
// condition; anything else is an error at Path "condition".
func ParseConditionValue(v any) (Condition, error) {
	if v == nil {
		return Condition{}, condErr("condition", emptyConditionMsg)
	}
	m, isMap, badKey := toStringMap(v)
	if !isMap {
		return Condition{}, condErr("condition", "must be a map from field to matcher, got "+describe(v))
	}
	if badKey {
		return Condition{}, condErr("condition", "field names must be strings")
	}
	return ParseCondition(m)
}

const emptyConditionMsg = "must not be empty: give at least one field and its matcher"

// ParseCondition validates raw, a map from field name to matcher, and
// returns the Condition it describes. Fields are checked in sorted order
// and the first problem is returned as a *ConditionError (wrapping
// ErrInvalidCondition) whose Path names the offending place. The package
// documentation describes the language.
func ParseCondition(raw map[string]any) (Condition, error) {
	if len(raw) == 0 {
		return Condition{}, condErr("condition", emptyConditionMsg)
	}
	names := make([]string, 0, len(raw))
	for name := range raw {
		names = append(names, name)
	}
	sort.Strings(names)
	clauses := make([]clause, 0, len(names))
	for _, name := range names {
		cl, err := parseClause(name, raw[name])
		if err != nil {
			return Condition{}, err
		}
		clauses = append(clauses, cl)
	}
	return Condition{clauses: clauses}, nil
}

func parseClause(name string, matcher any) (clause, error) {
	path := "condition." + name
	f, ok := lookupField(name)
	if !ok {
		return clause{}, condErr(path, "unknown field; fields are "+strings.Join(Fields(), ", "))
	}
	if m, isMap, badKey := toStringMap(matcher); isMap {
		if badKey {
			return clause{}, condErr(path, "operator names must be strings")
		}
		return parseOperatorMap(f, path, m)
	}
	if _, isList := toList(matcher); isList {
		hint := "use {in: [...]}"
		if f.typ == typeStrings {
			hint = "use {in: [...]} for any of the values or {eq: [...]} for exactly the values"
		}
		return clause{}, condErr(path, "a list is not a matcher; "+hint)
	}
	// A scalar: equality. On an array field, equality with one string means
	// the array contains it.
	op := OpEq
	if f.typ == typeStrings {
		op = OpContains
	}
	val, verr := parseValue(f, op, matcher)
	if verr != nil {
		return clause{}, condErr(path+verr.suffix, verr.msg)
	}
	return newClause(f, op, val), nil
}

func parseOperatorMap(f field, path string, m map[string]any) (clause, error) {
	ops := make([]string, 0, len(m))
	for op := range m {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	for _, op := range ops {
		if !slices.Contains(Operators(), op) {
			return clause{}, condErr(path+"."+op, "unknown operator; operators are "+strings.Join(Operators(), ", "))
		}
	}
	if len(ops) != 1 {
		got := "none"
		if len(ops) > 1 {
			got = strconv.Itoa(len(ops)) + " (" + strings.Join(ops, ", ") + ")"
		}
		return clause{}, condErr(path, "an operator map needs exactly one operator, got "+got)
	}
	op := ops[0]
	opPath := path + "." + op
	if !slices.Contains(f.typ.operators(), op) {
		return clause{}, condErr(opPath, fmt.Sprintf("operator %s does not apply to %s (%s); use %s",
			op, f.name, f.typ, strings.Join(f.typ.operators(), ", ")))
	}
	val, verr := parseValue(f, op, m[op])
	if verr != nil {
		return clause{}, condErr(opPath+verr.suffix, verr.msg)
	}
	if f.typ == typeStrings && op == OpEq {
		if s, isStr := val.(string); isStr {
			// Normalize: eq with one string on an array field is contains.
			return newClause(f, OpContains, s), nil
		}
	}
	return newClause(f, op, val), nil
}

// valueError is a problem with an operator's value; suffix is "" for the
// value itself or "[i]" for element i of a list.
type valueError struct {
	suffix string
	msg    string
}

// parseValue checks and converts the value of operator op on field f.
func parseValue(f field, op string, v any) (any, *valueError) {
	if op == OpIn {
		return parseList(f, v, true)
	}
	if f.typ == typeStrings && (op == OpEq || op == OpNe) {
		if _, isList := toList(v); isList {
			return parseList(f, v, false)
		}
		if s, ok := v.(string); ok {
			if !utf8.ValidString(s) {
				return nil, &valueError{msg: invalidTextMsg}
			}
			return s, nil
		}
		return nil, &valueError{msg: "must be a string or a list of strings, got " + describe(v)}
	}
	if v == nil && f.nullable && (op == OpEq || op == OpNe) {
		return nil, nil
	}
	x, msg := parseScalar(f.typ, v)
	if msg != "" {
		return nil, &valueError{msg: msg}
	}
	return x, nil
}

// parseScalar checks one value of the field's element type; msg is
// non-empty when the value is wrong.
func parseScalar(t valueType, v any) (x any, msg string) {
	switch t {
	case typeInt:
		n, ok := toInt(v)
		if !ok {
			return nil, "must be an integer, got " + describe(v)
		}
		return n, ""
	case typeBool:
		b, ok := v.(bool)
		if !ok {
			return nil, "must be a boolean (true or false), got " + describe(v)
		}
		return b, ""
	default:
		s, ok := v.(string)
		if !ok {
			return nil, "must be a string, got " + describe(v)
		}
		if !utf8.ValidString(s) {
			// A YAML !!binary value can hold any bytes; a condition compares
			// text, and JSON (its stored form) cannot keep them.
			return nil, invalidTextMsg
		}
		return s, ""
	}
}

const invalidTextMsg = "must be valid UTF-8 text"

// parseList checks a list of the field's element type; nonEmpty is set for
// the in operator.
func parseList(f field, v any, nonEmpty bool) (any, *valueError) {
	items, ok := toList(v)
	if !ok {
		return nil, &valueError{msg: "must be a list, got " + describe(v)}
	}
	if nonEmpty && len(items) == 0 {
		return nil, &valueError{msg: "must be a non-empty list"}
	}
	elem := f.typ
	if elem == typeStrings {
		elem = typeString
	}
	var (
		strs  = []string{} // eq [] on an array field marshals as []
		ints  []int
		bools []bool
	)
	for i, item := range items {
		x, msg := parseScalar(elem, item)
		if msg != "" {
			return nil, &valueError{suffix: "[" + strconv.Itoa(i) + "]", msg: msg}
		}
		switch x := x.(type) {
		case string:
			strs = append(strs, x)
		case int:
			ints = append(ints, x)
		case bool:
			bools = append(bools, x)
		}
	}
	switch elem {
	case typeInt:
		return ints, nil
	case typeBool:
		return bools, nil
	default:
		return strs, nil
	}
}

// maxExactInt is the largest integer a float64 holds exactly (2^53).
const maxExactInt = 1 << 53

// toInt accepts Go integers, integral floats (JSON numbers decoded as
// float64, YAML 100.0) within ±2^53, and json.Number. Booleans and strings
// are not numbers.
func toInt(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case int8:
		return int(n), true
	case int16:
		return int(n), true
	case int32:
		return int(n), true
	case int64:
		return intFrom64(n)
	case uint:
		return uintToInt(uint64(n))
	case uint8:
		return int(n), true
	case uint16:
		return int(n), true
	case uint32:
		return uintToInt(uint64(n))
	case uint64:
		return uintToInt(n)
	case float32:
		return floatToInt(float64(n))
	case float64:
		return floatToInt(n)
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return intFrom64(i)
		}
		f, err := n.Float64()
		if err != nil {
			return 0, false
		}
		return floatToInt(f)
	}
	return 0, false
}

func intFrom64(n int64) (int, bool) {
	if n > math.MaxInt || n < math.MinInt {
		return 0, false
	}
	return int(n), true
}

func uintToInt(n uint64) (int, bool) {
	if n > math.MaxInt {
		return 0, false
	}
	return int(n), true
}

func floatToInt(f float64) (int, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f) || f > maxExactInt || f < -maxExactInt {
		return 0, false
	}
	return int(f), true
}

// toList returns the elements of a slice or array (not a string); ok is
// false for anything else.
func toList(v any) ([]any, bool) {
	if l, ok := v.([]any); ok {
		return l, true
	}
	rv := reflect.ValueOf(v)
	if !rv.IsValid() || (rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array) {
		return nil, false
	}
	out := make([]any, rv.Len())
	for i := range out {
		out[i] = rv.Index(i).Interface()
	}
	return out, true
}

// toStringMap returns v as a map with string keys. isMap is false when v is
// not a map; badKey is set when v is a map with a key that is not a string
// (yaml.v3 decodes such mappings into map[any]any).
func toStringMap(v any) (m map[string]any, isMap, badKey bool) {
	if m, ok := v.(map[string]any); ok {
		return m, true, false
	}
	rv := reflect.ValueOf(v)
	if !rv.IsValid() || rv.Kind() != reflect.Map {
		return nil, false, false
	}
	m = make(map[string]any, rv.Len())
	iter := rv.MapRange()
	for iter.Next() {
		k := iter.Key()
		if k.Kind() == reflect.Interface {
			k = k.Elem()
		}
		if !k.IsValid() || k.Kind() != reflect.String {
			return nil, true, true
		}
		m[k.String()] = iter.Value().Interface()
	}
	return m, true, false
}

// describe names the JSON/YAML type of v for error messages.
func describe(v any) string {
	if v == nil {
		return "null"
	}
	switch v.(type) {
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number, float32, float64, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		if _, ok := toInt(v); ok {
			return "a number"
		}
		if f, err := strconv.ParseFloat(fmt.Sprint(v), 64); err == nil && f == math.Trunc(f) {
			return "a number out of range"
		}
		return "a non-integer number"
	}
	if _, ok := toList(v); ok {
		return "a list"
	}
	if _, ok, _ := toStringMap(v); ok {
		return "a map"
	}
	return fmt.Sprintf("%T", v)
}
