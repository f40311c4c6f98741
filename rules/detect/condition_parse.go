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
