package detect

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

func strp(s string) *string { return &s }

// baseEvent is the event the match table changes one field of.
func baseEvent() Event {
	return Event{
		EventID: "ev-1", TenantID: "t-1", DecisionID: "d-1",
		Kind: KindAuthorizeDecision, Decision: "deny", Tool: "github", Action: "merge_pr",
		Resource: strp("prod/db"), RiskScore: 60, MutatesState: true,
		SourceTrust: "untrusted_external", AgentID: "agent-1",
		MatchedPolicies: []string{"pci", "critical"}, RedactedFields: []string{"parameters.card"},
	}
}

type matchCase struct {
	name  string
	raw   map[string]any
	event func(*Event) // nil: baseEvent as is
	want  bool
}

func op(name string, v any) map[string]any { return map[string]any{name: v} }

// stringFieldCases covers every operator on the six plain string fields,
// each matching and not matching.
func stringFieldCases() []matchCase {
	values := map[string]string{
		FieldKind: KindAuthorizeDecision, FieldDecision: "deny", FieldTool: "github",
		FieldAction: "merge_pr", FieldSourceTrust: "untrusted_external", FieldAgentID: "agent-1",
	}
	var cases []matchCase
	for _, f := range []string{FieldKind, FieldDecision, FieldTool, FieldAction, FieldSourceTrust, FieldAgentID} {
		v := values[f]
		cases = append(cases,
			matchCase{name: f + " scalar equal", raw: map[string]any{f: v}, want: true},
			matchCase{name: f + " scalar other", raw: map[string]any{f: v + "x"}, want: false},
			matchCase{name: f + " scalar case-sensitive", raw: map[string]any{f: strings.ToUpper(v)}, want: false},
			matchCase{name: f + " eq equal", raw: map[string]any{f: op(OpEq, v)}, want: true},
			matchCase{name: f + " eq other", raw: map[string]any{f: op(OpEq, "zzz")}, want: false},
			matchCase{name: f + " ne equal", raw: map[string]any{f: op(OpNe, v)}, want: false},
			matchCase{name: f + " ne other", raw: map[string]any{f: op(OpNe, "zzz")}, want: true},
			matchCase{name: f + " in hit", raw: map[string]any{f: op(OpIn, []any{"zzz", v})}, want: true},
			matchCase{name: f + " in miss", raw: map[string]any{f: op(OpIn, []any{"zzz", "yyy"})}, want: false},
			matchCase{name: f + " prefix hit", raw: map[string]any{f: op(OpPrefix, v[:3])}, want: true},
			matchCase{name: f + " prefix whole", raw: map[string]any{f: op(OpPrefix, v)}, want: true},
			matchCase{name: f + " prefix miss", raw: map[string]any{f: op(OpPrefix, "zz")}, want: false},
			matchCase{name: f + " prefix longer than value", raw: map[string]any{f: op(OpPrefix, v+"x")}, want: false},
		)
	}
	return cases
}

func TestConditionMatch(t *testing.T) {
	nullResource := func(e *Event) { e.Resource = nil }
	noPolicies := func(e *Event) { e.MatchedPolicies = nil }
	emptyPolicies := func(e *Event) { e.MatchedPolicies = []string{} }
	risk := func(n int) func(*Event) { return func(e *Event) { e.RiskScore = n } }

	cases := []matchCase{
		// resource: a string or null.
		{name: "resource scalar equal", raw: map[string]any{"resource": "prod/db"}, want: true},
		{name: "resource scalar other", raw: map[string]any{"resource": "prod/x"}, want: false},
		{name: "resource eq null event", raw: map[string]any{"resource": op(OpEq, "prod/db")}, event: nullResource, want: false},
		{name: "resource eq empty string vs null", raw: map[string]any{"resource": ""}, event: nullResource, want: false},
		{name: "resource ne null event", raw: map[string]any{"resource": op(OpNe, "prod/db")}, event: nullResource, want: true},
		{name: "resource ne equal", raw: map[string]any{"resource": op(OpNe, "prod/db")}, want: false},
		{name: "resource ne other", raw: map[string]any{"resource": op(OpNe, "prod/x")}, want: true},
		{name: "resource prefix hit", raw: map[string]any{"resource": op(OpPrefix, "prod/")}, want: true},
		{name: "resource prefix null event", raw: map[string]any{"resource": op(OpPrefix, "")}, event: nullResource, want: false},
		{name: "resource empty prefix non-null", raw: map[string]any{"resource": op(OpPrefix, "")}, want: true},
		{name: "resource in null event", raw: map[string]any{"resource": op(OpIn, []any{"prod/db", ""})}, event: nullResource, want: false},
		{name: "resource in hit", raw: map[string]any{"resource": op(OpIn, []string{"prod/db"})}, want: true},
		{name: "resource null scalar null event", raw: map[string]any{"resource": nil}, event: nullResource, want: true},
		{name: "resource null scalar set event", raw: map[string]any{"resource": nil}, want: false},
		{name: "resource eq null null event", raw: map[string]any{"resource": op(OpEq, nil)}, event: nullResource, want: true},
		{name: "resource ne null set event", raw: map[string]any{"resource": op(OpNe, nil)}, want: true},
		{name: "resource ne null null event", raw: map[string]any{"resource": op(OpNe, nil)}, event: nullResource, want: false},

		// risk_score: every operator at its boundary.
		{name: "risk scalar equal", raw: map[string]any{"risk_score": 60}, want: true},
		{name: "risk scalar other", raw: map[string]any{"risk_score": 61}, want: false},
		{name: "risk scalar float64 integral", raw: map[string]any{"risk_score": 60.0}, want: true},
		{name: "risk scalar json.Number", raw: map[string]any{"risk_score": json.Number("60")}, want: true},
		{name: "risk scalar int64", raw: map[string]any{"risk_score": int64(60)}, want: true},
		{name: "risk scalar uint8", raw: map[string]any{"risk_score": uint8(60)}, want: true},
		{name: "risk eq", raw: map[string]any{"risk_score": op(OpEq, 60)}, want: true},
		{name: "risk eq other", raw: map[string]any{"risk_score": op(OpEq, 59)}, want: false},
		{name: "risk ne equal", raw: map[string]any{"risk_score": op(OpNe, 60)}, want: false},
		{name: "risk ne other", raw: map[string]any{"risk_score": op(OpNe, 61)}, want: true},
		{name: "risk gt below", raw: map[string]any{"risk_score": op(OpGt, 59)}, want: true},
		{name: "risk gt equal", raw: map[string]any{"risk_score": op(OpGt, 60)}, want: false},
		{name: "risk gte equal", raw: map[string]any{"risk_score": op(OpGte, 60)}, want: true},
		{name: "risk gte above", raw: map[string]any{"risk_score": op(OpGte, 61)}, want: false},
		{name: "risk lt above", raw: map[string]any{"risk_score": op(OpLt, 61)}, want: true},
		{name: "risk lt equal", raw: map[string]any{"risk_score": op(OpLt, 60)}, want: false},
		{name: "risk lte equal", raw: map[string]any{"risk_score": op(OpLte, 60)}, want: true},
		{name: "risk lte below", raw: map[string]any{"risk_score": op(OpLte, 59)}, want: false},
		{name: "risk in hit", raw: map[string]any{"risk_score": op(OpIn, []any{1, 60.0})}, want: true},
		{name: "risk in miss", raw: map[string]any{"risk_score": op(OpIn, []int{1, 2})}, want: false},
		{name: "risk zero event eq 0", raw: map[string]any{"risk_score": 0}, event: risk(0), want: true},
		{name: "risk negative bound", raw: map[string]any{"risk_score": op(OpGt, -1)}, event: risk(0), want: true},

		// mutates_state.
		{name: "mutates scalar true", raw: map[string]any{"mutates_state": true}, want: true},
		{name: "mutates scalar false", raw: map[string]any{"mutates_state": false}, want: false},
		{name: "mutates eq false on false", raw: map[string]any{"mutates_state": op(OpEq, false)},
			event: func(e *Event) { e.MutatesState = false }, want: true},
		{name: "mutates ne true", raw: map[string]any{"mutates_state": op(OpNe, true)}, want: false},
		{name: "mutates ne false", raw: map[string]any{"mutates_state": op(OpNe, false)}, want: true},
		{name: "mutates in hit", raw: map[string]any{"mutates_state": op(OpIn, []any{false, true})}, want: true},
		{name: "mutates in miss", raw: map[string]any{"mutates_state": op(OpIn, []bool{false})}, want: false},

		// Array fields.
		{name: "policies scalar contains", raw: map[string]any{"matched_policies": "pci"}, want: true},
		{name: "policies scalar missing", raw: map[string]any{"matched_policies": "gdpr"}, want: false},
		{name: "policies scalar nil array", raw: map[string]any{"matched_policies": "pci"}, event: noPolicies, want: false},
		{name: "policies contains hit", raw: map[string]any{"matched_policies": op(OpContains, "critical")}, want: true},
		{name: "policies contains miss", raw: map[string]any{"matched_policies": op(OpContains, "crit")}, want: false},
		{name: "policies eq string is contains", raw: map[string]any{"matched_policies": op(OpEq, "critical")}, want: true},
		{name: "policies eq string miss", raw: map[string]any{"matched_policies": op(OpEq, "gdpr")}, want: false},
		{name: "policies eq list same set other order", raw: map[string]any{"matched_policies": op(OpEq, []any{"critical", "pci", "pci"})}, want: true},
		{name: "policies eq list subset", raw: map[string]any{"matched_policies": op(OpEq, []any{"pci"})}, want: false},
		{name: "policies eq list superset", raw: map[string]any{"matched_policies": op(OpEq, []any{"pci", "critical", "x"})}, want: false},
		{name: "policies eq empty on empty", raw: map[string]any{"matched_policies": op(OpEq, []any{})}, event: emptyPolicies, want: true},
		{name: "policies eq empty on nil", raw: map[string]any{"matched_policies": op(OpEq, []any{})}, event: noPolicies, want: true},
		{name: "policies eq empty on non-empty", raw: map[string]any{"matched_policies": op(OpEq, []any{})}, want: false},
		{name: "policies ne string present", raw: map[string]any{"matched_policies": op(OpNe, "pci")}, want: false},
		{name: "policies ne string absent", raw: map[string]any{"matched_policies": op(OpNe, "gdpr")}, want: true},
		{name: "policies ne list same set", raw: map[string]any{"matched_policies": op(OpNe, []string{"pci", "critical"})}, want: false},
		{name: "policies ne empty list on non-empty", raw: map[string]any{"matched_policies": op(OpNe, []string{})}, want: true},
		{name: "policies in one of", raw: map[string]any{"matched_policies": op(OpIn, []any{"gdpr", "critical"})}, want: true},
		{name: "policies in none of", raw: map[string]any{"matched_policies": op(OpIn, []any{"gdpr", "hipaa"})}, want: false},
		{name: "policies in nil array", raw: map[string]any{"matched_policies": op(OpIn, []any{"pci"})}, event: noPolicies, want: false},
		{name: "redacted scalar contains", raw: map[string]any{"redacted_fields": "parameters.card"}, want: true},
		{name: "redacted contains miss", raw: map[string]any{"redacted_fields": op(OpContains, "parameters")}, want: false},
		{name: "redacted eq list", raw: map[string]any{"redacted_fields": op(OpEq, []any{"parameters.card"})}, want: true},
		{name: "redacted in", raw: map[string]any{"redacted_fields": op(OpIn, []any{"x", "parameters.card"})}, want: true},
		{name: "redacted ne string", raw: map[string]any{"redacted_fields": op(OpNe, "parameters.card")}, want: false},

		// All clauses must hold.
		{name: "and all hold", raw: map[string]any{
			"decision": "deny", "mutates_state": true, "risk_score": op(OpGte, 60),
			"matched_policies": "pci", "resource": op(OpPrefix, "prod/"),
		}, want: true},
		{name: "and one fails", raw: map[string]any{
			"decision": "deny", "mutates_state": true, "risk_score": op(OpGte, 61),
			"matched_policies": "pci", "resource": op(OpPrefix, "prod/"),
		}, want: false},
	}
	cases = append(cases, stringFieldCases()...)

	seen := map[string]bool{}
	for _, tc := range cases {
		if seen[tc.name] {
			t.Fatalf("duplicate case name %q", tc.name)
		}
		seen[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseCondition(tc.raw)
			if err != nil {
				t.Fatalf("ParseCondition: %v", err)
			}
			e := baseEvent()
			if tc.event != nil {
				tc.event(&e)
			}
			if got := c.Match(e); got != tc.want {
				t.Fatalf("Match = %v, want %v (condition %v)", got, tc.want, c.Raw())
			}
			// The normalized form matches the same way.
			c2, err := ParseCondition(c.Raw())
			if err != nil {
				t.Fatalf("re-parse Raw: %v", err)
			}
			if got := c2.Match(e); got != tc.want {
				t.Fatalf("re-parsed Match = %v, want %v", got, tc.want)
			}
		})
	}
}

type errCase struct {
	name    string
	raw     any
	path    string
	msgPart string
}

func TestConditionErrors(t *testing.T) {
	cases := []errCase{
		// The condition itself.
		{name: "nil", raw: nil, path: "condition", msgPart: "must not be empty"},
		{name: "empty map", raw: map[string]any{}, path: "condition", msgPart: "must not be empty"},
		{name: "string", raw: "kind: x", path: "condition", msgPart: "must be a map"},
		{name: "list", raw: []any{map[string]any{"kind": "x"}}, path: "condition", msgPart: "got a list"},
		{name: "non-string field name", raw: map[any]any{1: "x"}, path: "condition", msgPart: "field names must be strings"},

		// Fields.
		{name: "unknown field", raw: map[string]any{"foo": "x"}, path: "condition.foo", msgPart: "unknown field"},
		{name: "field names are case-sensitive", raw: map[string]any{"Kind": "x"}, path: "condition.Kind", msgPart: "unknown field"},
		{name: "bookkeeping field not matchable", raw: map[string]any{"event_id": "x"}, path: "condition.event_id", msgPart: "unknown field"},
		{name: "first problem in sorted order", raw: map[string]any{"zzz": 1, "aaa": 1}, path: "condition.aaa", msgPart: "unknown field"},
		{name: "sorted order across kinds", raw: map[string]any{"tool": 1, "decision": 1}, path: "condition.decision", msgPart: "must be a string"},

		// Operator maps.
		{name: "unknown operator", raw: map[string]any{"risk_score": op("between", 1)}, path: "condition.risk_score.between", msgPart: "unknown operator"},
		{name: "operator names case-sensitive", raw: map[string]any{"risk_score": op("GTE", 1)}, path: "condition.risk_score.GTE", msgPart: "unknown operator"},
		{name: "zero operators", raw: map[string]any{"risk_score": map[string]any{}}, path: "condition.risk_score", msgPart: "got none"},
		{name: "two operators", raw: map[string]any{"risk_score": map[string]any{"gte": 40, "lte": 74}}, path: "condition.risk_score", msgPart: "got 2 (gte, lte)"},
		{name: "unknown beside known", raw: map[string]any{"risk_score": map[string]any{"gte": 40, "foo": 1}}, path: "condition.risk_score.foo", msgPart: "unknown operator"},
		{name: "non-string operator name", raw: map[string]any{"risk_score": map[any]any{1: 2}}, path: "condition.risk_score", msgPart: "operator names must be strings"},

		// Lists are not matchers.
		{name: "list on string field", raw: map[string]any{"decision": []any{"deny"}}, path: "condition.decision", msgPart: "use {in: [...]}"},
		{name: "list on array field", raw: map[string]any{"matched_policies": []any{"pci"}}, path: "condition.matched_policies", msgPart: "{eq: [...]}"},
		{name: "typed list on int field", raw: map[string]any{"risk_score": []int{1}}, path: "condition.risk_score", msgPart: "not a matcher"},

		// Scalar type mismatches.
		{name: "risk string", raw: map[string]any{"risk_score": "high"}, path: "condition.risk_score", msgPart: "must be an integer, got a string"},
		{name: "risk numeric string", raw: map[string]any{"risk_score": "75"}, path: "condition.risk_score", msgPart: "must be an integer"},
		{name: "risk fraction", raw: map[string]any{"risk_score": 1.5}, path: "condition.risk_score", msgPart: "got a non-integer number"},
		{name: "risk bool", raw: map[string]any{"risk_score": true}, path: "condition.risk_score", msgPart: "got a boolean"},
		{name: "risk null", raw: map[string]any{"risk_score": nil}, path: "condition.risk_score", msgPart: "got null"},
		{name: "risk huge float", raw: map[string]any{"risk_score": 1e300}, path: "condition.risk_score", msgPart: "out of range"},
		{name: "risk NaN", raw: map[string]any{"risk_score": math.NaN()}, path: "condition.risk_score", msgPart: "must be an integer"},
		{name: "risk +Inf", raw: map[string]any{"risk_score": math.Inf(1)}, path: "condition.risk_score", msgPart: "must be an integer"},
		{name: "risk uint64 max", raw: map[string]any{"risk_score": uint64(math.MaxUint64)}, path: "condition.risk_score", msgPart: "out of range"},
		{name: "risk json.Number fraction", raw: map[string]any{"risk_score": json.Number("7.5")}, path: "condition.risk_score", msgPart: "non-integer"},
		{name: "mutates string", raw: map[string]any{"mutates_state": "true"}, path: "condition.mutates_state", msgPart: "must be a boolean"},
		{name: "mutates number", raw: map[string]any{"mutates_state": 1}, path: "condition.mutates_state", msgPart: "must be a boolean"},
		{name: "mutates null", raw: map[string]any{"mutates_state": nil}, path: "condition.mutates_state", msgPart: "got null"},
		{name: "decision number", raw: map[string]any{"decision": 1}, path: "condition.decision", msgPart: "must be a string, got a number"},
		{name: "decision bool", raw: map[string]any{"decision": false}, path: "condition.decision", msgPart: "must be a string"},
		{name: "decision null", raw: map[string]any{"decision": nil}, path: "condition.decision", msgPart: "got null"},
		{name: "resource number", raw: map[string]any{"resource": 5}, path: "condition.resource", msgPart: "must be a string"},
		{name: "policies number", raw: map[string]any{"matched_policies": 5}, path: "condition.matched_policies", msgPart: "must be a string"},
		{name: "policies null", raw: map[string]any{"matched_policies": nil}, path: "condition.matched_policies", msgPart: "got null"},

		// Operator value type mismatches.
		{name: "gte string", raw: map[string]any{"risk_score": op(OpGte, "1")}, path: "condition.risk_score.gte", msgPart: "must be an integer"},
		{name: "gt fraction", raw: map[string]any{"risk_score": op(OpGt, 0.5)}, path: "condition.risk_score.gt", msgPart: "must be an integer"},
		{name: "lt null", raw: map[string]any{"risk_score": op(OpLt, nil)}, path: "condition.risk_score.lt", msgPart: "got null"},
		{name: "lte list", raw: map[string]any{"risk_score": op(OpLte, []any{1})}, path: "condition.risk_score.lte", msgPart: "got a list"},
		{name: "risk eq string", raw: map[string]any{"risk_score": op(OpEq, "x")}, path: "condition.risk_score.eq", msgPart: "must be an integer"},
		{name: "risk ne bool", raw: map[string]any{"risk_score": op(OpNe, true)}, path: "condition.risk_score.ne", msgPart: "must be an integer"},
		{name: "mutates eq string", raw: map[string]any{"mutates_state": op(OpEq, "yes")}, path: "condition.mutates_state.eq", msgPart: "must be a boolean"},
		{name: "mutates ne number", raw: map[string]any{"mutates_state": op(OpNe, 0)}, path: "condition.mutates_state.ne", msgPart: "must be a boolean"},
		{name: "decision eq number", raw: map[string]any{"decision": op(OpEq, 1)}, path: "condition.decision.eq", msgPart: "must be a string"},
		{name: "decision eq null", raw: map[string]any{"decision": op(OpEq, nil)}, path: "condition.decision.eq", msgPart: "got null"},
		{name: "tool ne map", raw: map[string]any{"tool": op(OpNe, map[string]any{"a": 1})}, path: "condition.tool.ne", msgPart: "got a map"},
		{name: "tool prefix number", raw: map[string]any{"tool": op(OpPrefix, 1)}, path: "condition.tool.prefix", msgPart: "must be a string"},
		{name: "resource prefix null", raw: map[string]any{"resource": op(OpPrefix, nil)}, path: "condition.resource.prefix", msgPart: "got null"},
		{name: "policies contains list", raw: map[string]any{"matched_policies": op(OpContains, []any{"a"})}, path: "condition.matched_policies.contains", msgPart: "must be a string"},
		{name: "policies contains null", raw: map[string]any{"matched_policies": op(OpContains, nil)}, path: "condition.matched_policies.contains", msgPart: "got null"},
		{name: "policies eq number", raw: map[string]any{"matched_policies": op(OpEq, 5)}, path: "condition.matched_policies.eq", msgPart: "a string or a list of strings"},
		{name: "policies eq list element", raw: map[string]any{"matched_policies": op(OpEq, []any{"a", 1})}, path: "condition.matched_policies.eq[1]", msgPart: "must be a string"},
		{name: "redacted ne bool", raw: map[string]any{"redacted_fields": op(OpNe, true)}, path: "condition.redacted_fields.ne", msgPart: "a string or a list of strings"},

		// in: a non-empty list of the element type.
		{name: "in not a list", raw: map[string]any{"decision": op(OpIn, "deny")}, path: "condition.decision.in", msgPart: "must be a list, got a string"},
		{name: "in null", raw: map[string]any{"decision": op(OpIn, nil)}, path: "condition.decision.in", msgPart: "must be a list, got null"},
		{name: "in empty", raw: map[string]any{"decision": op(OpIn, []any{})}, path: "condition.decision.in", msgPart: "non-empty"},
		{name: "in empty typed", raw: map[string]any{"risk_score": op(OpIn, []int{})}, path: "condition.risk_score.in", msgPart: "non-empty"},
		{name: "in string element", raw: map[string]any{"decision": op(OpIn, []any{"deny", 3})}, path: "condition.decision.in[1]", msgPart: "must be a string"},
		{name: "in resource null element", raw: map[string]any{"resource": op(OpIn, []any{nil})}, path: "condition.resource.in[0]", msgPart: "got null"},
		{name: "in risk element", raw: map[string]any{"risk_score": op(OpIn, []any{1, "2"})}, path: "condition.risk_score.in[1]", msgPart: "must be an integer"},
		{name: "in risk fraction element", raw: map[string]any{"risk_score": op(OpIn, []any{1.5})}, path: "condition.risk_score.in[0]", msgPart: "non-integer"},
		{name: "in mutates element", raw: map[string]any{"mutates_state": op(OpIn, []any{true, 1})}, path: "condition.mutates_state.in[1]", msgPart: "must be a boolean"},
		{name: "in policies element", raw: map[string]any{"matched_policies": op(OpIn, []any{1})}, path: "condition.matched_policies.in[0]", msgPart: "must be a string"},
		{name: "in policies empty", raw: map[string]any{"matched_policies": op(OpIn, []string{})}, path: "condition.matched_policies.in", msgPart: "non-empty"},
	}

	// Operators that do not apply to a field type.
	inapplicable := map[string][]string{
		OpGt:       {FieldKind, FieldResource, FieldMutatesState, FieldMatchedPolicies},
		OpGte:      {FieldDecision, FieldMutatesState, FieldRedactedFields},
		OpLt:       {FieldTool, FieldMutatesState, FieldMatchedPolicies},
		OpLte:      {FieldAction, FieldMutatesState, FieldRedactedFields},
		OpPrefix:   {FieldRiskScore, FieldMutatesState, FieldMatchedPolicies, FieldRedactedFields},
		OpContains: {FieldDecision, FieldResource, FieldSourceTrust, FieldAgentID, FieldRiskScore, FieldMutatesState},
	}
	for o, fields := range inapplicable {
		for _, f := range fields {
			cases = append(cases, errCase{
				name: o + " on " + f, raw: map[string]any{f: op(o, 1)},
				path: "condition." + f + "." + o, msgPart: "operator " + o + " does not apply to " + f,
			})
		}
	}

	seen := map[string]bool{}
	for _, tc := range cases {
		if seen[tc.name] {
			t.Fatalf("duplicate case name %q", tc.name)
		}
		seen[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConditionValue(tc.raw)
			assertCondErr(t, c, err, tc.path, tc.msgPart)
			if m, ok := tc.raw.(map[string]any); ok {
				_, err2 := ParseCondition(m)
				if err2 == nil || err2.Error() != err.Error() {
					t.Fatalf("ParseCondition gave %v, ParseConditionValue %v", err2, err)
				}
			}
		})
	}
}

func assertCondErr(t *testing.T, c Condition, err error, path, msgPart string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, condition %v", c.Raw())
	}
	if !c.IsZero() {
		t.Fatalf("condition returned with the error: %v", c.Raw())
	}
	if !errors.Is(err, ErrInvalidCondition) {
		t.Fatalf("error %v does not wrap ErrInvalidCondition", err)
	}
	var ce *ConditionError
	if !errors.As(err, &ce) {
		t.Fatalf("error %T is not a *ConditionError", err)
	}
	if ce.Path != path {
		t.Fatalf("Path = %q, want %q (msg %q)", ce.Path, path, ce.Msg)
	}
	if !strings.Contains(ce.Msg, msgPart) {
		t.Fatalf("Msg = %q, want it to contain %q", ce.Msg, msgPart)
	}
	if want := "detect: invalid condition: " + path + ": " + ce.Msg; err.Error() != want {
		t.Fatalf("Error() = %q, want %q", err.Error(), want)
	}
}

func TestParseConditionJSON(t *testing.T) {
	cases := []struct {
		name    string
		body    string
		wantRaw map[string]any // nil when an error is expected
		path    string
		msgPart string
	}{
		{
			name: "nested operators and scalars",
			body: `{"kind":"mcp_manifest_drift","risk_score":{"gte":75},"matched_policies":"pci","mutates_state":false,"resource":null}`,
			wantRaw: map[string]any{
				"kind": op(OpEq, "mcp_manifest_drift"), "risk_score": op(OpGte, 75),
				"matched_policies": op(OpContains, "pci"), "mutates_state": op(OpEq, false),
				"resource": op(OpEq, nil),
			},
		},
		{name: "integral float", body: `{"risk_score":{"lte":100.0}}`, wantRaw: map[string]any{"risk_score": op(OpLte, 100)}},
		{name: "exponent integer", body: `{"risk_score":1e2}`, wantRaw: map[string]any{"risk_score": op(OpEq, 100)}},
		{name: "negative", body: `{"risk_score":{"gt":-1}}`, wantRaw: map[string]any{"risk_score": op(OpGt, -1)}},
		{name: "in lists", body: `{"decision":{"in":["deny","quarantine"]},"risk_score":{"in":[1,2]}}`,
			wantRaw: map[string]any{"decision": op(OpIn, []string{"deny", "quarantine"}), "risk_score": op(OpIn, []int{1, 2})}},
		{name: "eq empty array", body: `{"redacted_fields":{"eq":[]}}`, wantRaw: map[string]any{"redacted_fields": op(OpEq, []string{})}},
		{name: "surrounding whitespace", body: " \n{\"tool\":\"x\"}\n ", wantRaw: map[string]any{"tool": op(OpEq, "x")}},
		{name: "fraction", body: `{"risk_score":{"gte":75.5}}`, path: "condition.risk_score.gte", msgPart: "non-integer"},
		{name: "integer beyond int64", body: `{"risk_score":12345678901234567890}`, path: "condition.risk_score", msgPart: "out of range"},
		{name: "invalid JSON", body: `{"kind":`, path: "condition", msgPart: "invalid JSON"},
		{name: "empty body", body: ``, path: "condition", msgPart: "invalid JSON"},
		{name: "trailing data", body: `{"kind":"x"} {}`, path: "condition", msgPart: "unexpected data"},
		{name: "top-level array", body: `[{"kind":"x"}]`, path: "condition", msgPart: "must be a map"},
		{name: "top-level null", body: `null`, path: "condition", msgPart: "must not be empty"},
		{name: "empty object", body: `{}`, path: "condition", msgPart: "must not be empty"},
		{name: "unknown field", body: `{"kind":"x","severity":"HIGH"}`, path: "condition.severity", msgPart: "unknown field"},
		{name: "two operators", body: `{"risk_score":{"gte":40,"lte":74}}`, path: "condition.risk_score", msgPart: "exactly one operator"},
		{name: "string for bool", body: `{"mutates_state":"true"}`, path: "condition.mutates_state", msgPart: "must be a boolean"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConditionJSON([]byte(tc.body))
			if tc.wantRaw == nil {
				assertCondErr(t, c, err, tc.path, tc.msgPart)
				return
			}
			if err != nil {
				t.Fatalf("ParseConditionJSON: %v", err)
			}
			if got := c.Raw(); !reflect.DeepEqual(got, tc.wantRaw) {
				t.Fatalf("Raw = %#v, want %#v", got, tc.wantRaw)
			}
		})
	}
}

func TestParseConditionYAML(t *testing.T) {
	cases := []struct {
		name    string
		body    string
		wantRaw map[string]any
		path    string
		msgPart string
	}{
		{
			name: "int and nested operator map",
			body: "kind: mcp_manifest_drift\nrisk_score:\n  gte: 75\nmatched_policies: {in: [critical, mcp_unknown_tool]}\nmutates_state: true\nresource: ~\n",
			wantRaw: map[string]any{
				"kind": op(OpEq, "mcp_manifest_drift"), "risk_score": op(OpGte, 75),
				"matched_policies": op(OpIn, []string{"critical", "mcp_unknown_tool"}),
				"mutates_state":    op(OpEq, true), "resource": op(OpEq, nil),
			},
		},
		{name: "plain int scalar", body: "risk_score: 100\n", wantRaw: map[string]any{"risk_score": op(OpEq, 100)}},
		{name: "integral float", body: "risk_score: {lte: 39.0}\n", wantRaw: map[string]any{"risk_score": op(OpLte, 39)}},
		{name: "hex int", body: "risk_score: 0x10\n", wantRaw: map[string]any{"risk_score": op(OpEq, 16)}},
		{name: "block list for in", body: "source_trust:\n  in:\n    - untrusted_external\n    - malicious_suspected\n",
			wantRaw: map[string]any{"source_trust": op(OpIn, []string{"untrusted_external", "malicious_suspected"})}},
		{name: "quoted number is a string", body: "tool: \"42\"\n", wantRaw: map[string]any{"tool": op(OpEq, "42")}},
		{name: "prefix", body: "resource: {prefix: prod/}\n", wantRaw: map[string]any{"resource": op(OpPrefix, "prod/")}},
		{name: "yes is not a boolean", body: "mutates_state: yes\n", path: "condition.mutates_state", msgPart: "must be a boolean (true or false), got a string"},
		{name: "unquoted number for string field", body: "tool: 42\n", path: "condition.tool", msgPart: "must be a string, got a number"},
		{name: "fraction under operator", body: "risk_score: {gte: 1.5}\n", path: "condition.risk_score.gte", msgPart: "non-integer"},
		{name: "bad list element", body: "decision: {in: [deny, 3]}\n", path: "condition.decision.in[1]", msgPart: "must be a string"},
		{name: "non-string field key", body: "1: x\n", path: "condition", msgPart: "field names must be strings"},
		{name: "non-string operator key", body: "risk_score: {1: 2}\n", path: "condition.risk_score", msgPart: "operator names must be strings"},
		{name: "empty operator map", body: "risk_score: {}\n", path: "condition.risk_score", msgPart: "got none"},
		{name: "empty value is null", body: "decision:\n", path: "condition.decision", msgPart: "got null"},
		{name: "unknown operator", body: "risk_score: {gteq: 1}\n", path: "condition.risk_score.gteq", msgPart: "unknown operator"},
		{name: "list is not a matcher", body: "matched_policies: [pci]\n", path: "condition.matched_policies", msgPart: "not a matcher"},
		{name: "invalid YAML", body: "risk_score: {gte: 1\n", path: "condition", msgPart: "invalid YAML"},
		{name: "top-level list", body: "- kind: x\n", path: "condition", msgPart: "must be a map"},
		{name: "top-level scalar", body: "hello\n", path: "condition", msgPart: "must be a map"},
		{name: "empty document", body: "", path: "condition", msgPart: "must not be empty"},
		{name: "empty mapping", body: "{}\n", path: "condition", msgPart: "must not be empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConditionYAML([]byte(tc.body))
			if tc.wantRaw == nil {
				assertCondErr(t, c, err, tc.path, tc.msgPart)
				return
			}
			if err != nil {
				t.Fatalf("ParseConditionYAML: %v", err)
			}
			if got := c.Raw(); !reflect.DeepEqual(got, tc.wantRaw) {
				t.Fatalf("Raw = %#v, want %#v", got, tc.wantRaw)
			}
		})
	}
}

// TestDocExample checks the example of the package documentation, YAML and
// JSON, and its normalized form.
func TestDocExample(t *testing.T) {
	yamlBody := `mutates_state: true
source_trust: {in: [untrusted_external, malicious_suspected]}
matched_policies: pci
resource: {prefix: "prod/"}
risk_score: {gte: 60}
`
	jsonBody := `{"mutates_state": true,
 "source_trust": {"in": ["untrusted_external", "malicious_suspected"]},
 "matched_policies": "pci",
 "resource": {"prefix": "prod/"},
 "risk_score": {"gte": 60}}`
	want := `{"matched_policies":{"contains":"pci"},"mutates_state":{"eq":true},` +
		`"resource":{"prefix":"prod/"},"risk_score":{"gte":60},` +
		`"source_trust":{"in":["untrusted_external","malicious_suspected"]}}`

	cy, err := ParseConditionYAML([]byte(yamlBody))
	if err != nil {
		t.Fatal(err)
	}
	cj, err := ParseConditionJSON([]byte(jsonBody))
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]Condition{"yaml": cy, "json": cj} {
		got, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Fatalf("%s: MarshalJSON = %s, want %s", name, got, want)
		}
		e := baseEvent()
		if !c.Match(e) {
			t.Fatalf("%s: does not match the base event", name)
		}
		e.SourceTrust = "trusted_internal_signed"
		if c.Match(e) {
			t.Fatalf("%s: matches a trusted source", name)
		}
	}
}

func TestConditionJSONRoundTrip(t *testing.T) {
	bodies := []string{
		`{"resource":null}`,
		`{"resource":{"ne":null},"tool":{"prefix":"mcp:"}}`,
		`{"matched_policies":{"eq":["a","b"]},"redacted_fields":{"ne":[]}}`,
		`{"mutates_state":{"in":[true,false]},"risk_score":{"in":[0,100]}}`,
		`{"agent_id":{"ne":"unknown"},"risk_score":{"lt":-5}}`,
	}
	for _, body := range bodies {
		t.Run(body, func(t *testing.T) {
			c, err := ParseConditionJSON([]byte(body))
			if err != nil {
				t.Fatal(err)
			}
			out, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			c2, err := ParseConditionJSON(out)
			if err != nil {
				t.Fatalf("re-parse %s: %v", out, err)
			}
			if !reflect.DeepEqual(c.Raw(), c2.Raw()) {
				t.Fatalf("round trip changed %v into %v", c.Raw(), c2.Raw())
			}
			out2, _ := json.Marshal(c2)
			if string(out) != string(out2) {
				t.Fatalf("marshal not stable: %s then %s", out, out2)
			}
		})
	}
}

func TestConditionInStruct(t *testing.T) {
	type stored struct {
		Key       string    `json:"rule_key"`
		Condition Condition `json:"condition"`
	}
	var s stored
	if err := json.Unmarshal([]byte(`{"rule_key":"k","condition":{"decision":"deny"}}`), &s); err != nil {
		t.Fatal(err)
	}
	if !s.Condition.Match(Event{Decision: "deny"}) || s.Condition.Match(Event{Decision: "allow"}) {
		t.Fatalf("unmarshalled condition matches wrongly: %v", s.Condition.Raw())
	}
	out, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"rule_key":"k","condition":{"decision":{"eq":"deny"}}}`; string(out) != want {
		t.Fatalf("Marshal = %s, want %s", out, want)
	}
	err = json.Unmarshal([]byte(`{"condition":{"decision":{"gt":1}}}`), &s)
	var ce *ConditionError
	if !errors.As(err, &ce) || ce.Path != "condition.decision.gt" {
		t.Fatalf("Unmarshal of an invalid condition: %v", err)
	}
}

func TestConditionZeroAndRawCopy(t *testing.T) {
	var zero Condition
	if !zero.IsZero() || !zero.Match(Event{}) {
		t.Fatal("zero Condition must be zero and match everything")
	}
	if raw := zero.Raw(); raw == nil || len(raw) != 0 {
		t.Fatalf("zero Raw = %#v, want an empty map", raw)
	}
	if out, _ := json.Marshal(zero); string(out) != "{}" {
		t.Fatalf("zero MarshalJSON = %s", out)
	}

	c, err := ParseCondition(map[string]any{"decision": op(OpIn, []any{"deny"})})
	if err != nil {
		t.Fatal(err)
	}
	if c.IsZero() {
		t.Fatal("parsed condition reports zero")
	}
	raw := c.Raw()
	inner, ok := raw["decision"].(map[string]any)
	if !ok {
		t.Fatalf("Raw()[decision] is %T", raw["decision"])
	}
	list, ok := inner[OpIn].([]string)
	if !ok {
		t.Fatalf("Raw()[decision][in] is %T", inner[OpIn])
	}
	list[0] = "allow"
	raw["tool"] = "x"
	if !c.Match(Event{Decision: "deny"}) || c.Match(Event{Decision: "allow"}) {
		t.Fatal("changing Raw's result changed the condition")
	}
	if len(c.Raw()) != 1 {
		t.Fatal("Raw shares its map")
	}

	// The input map is not retained either.
	in := []any{"deny"}
	c2, err := ParseCondition(map[string]any{"decision": op(OpIn, in)})
	if err != nil {
		t.Fatal(err)
	}
	in[0] = "allow"
	if !c2.Match(Event{Decision: "deny"}) {
		t.Fatal("changing the input list changed the condition")
	}
}

func TestFieldsAndOperatorsLists(t *testing.T) {
	for _, f := range Fields() {
		if _, ok := lookupField(f); !ok {
			t.Errorf("Fields lists %q, which lookupField does not know", f)
		}
	}
	if len(Fields()) != 11 {
		t.Errorf("Fields has %d names, want 11", len(Fields()))
	}
	if len(Operators()) != 9 {
		t.Errorf("Operators has %d names, want 9", len(Operators()))
	}
	for _, list := range [][]string{Fields(), Operators()} {
		for i := 1; i < len(list); i++ {
			if list[i-1] >= list[i] {
				t.Errorf("not sorted: %v", list)
			}
		}
	}
}

func TestToInt(t *testing.T) {
	cases := []struct {
		name string
		in   any
		want int
		ok   bool
	}{
		{name: "int", in: 7, want: 7, ok: true},
		{name: "int8", in: int8(-7), want: -7, ok: true},
		{name: "int16", in: int16(300), want: 300, ok: true},
		{name: "int32", in: int32(-70000), want: -70000, ok: true},
		{name: "int64", in: int64(1 << 40), want: 1 << 40, ok: true},
		{name: "uint", in: uint(7), want: 7, ok: true},
		{name: "uint8", in: uint8(255), want: 255, ok: true},
		{name: "uint16", in: uint16(65535), want: 65535, ok: true},
		{name: "uint32", in: uint32(1 << 31), want: 1 << 31, ok: true},
		{name: "uint64 small", in: uint64(9), want: 9, ok: true},
		{name: "uint64 too big", in: uint64(math.MaxUint64), ok: false},
		{name: "float32 integral", in: float32(75), want: 75, ok: true},
		{name: "float32 fraction", in: float32(0.5), ok: false},
		{name: "float64 2^53", in: float64(1 << 53), want: 1 << 53, ok: true},
		{name: "float64 beyond 2^53", in: float64(1 << 54), ok: false},
		{name: "float64 negative zero", in: math.Copysign(0, -1), want: 0, ok: true},
		{name: "json.Number int", in: json.Number("-12"), want: -12, ok: true},
		{name: "json.Number float", in: json.Number("12.0"), want: 12, ok: true},
		{name: "json.Number garbage", in: json.Number("x"), ok: false},
		{name: "string", in: "12", ok: false},
		{name: "bool", in: true, ok: false},
		{name: "nil", in: nil, ok: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := toInt(tc.in)
			if ok != tc.ok || (ok && got != tc.want) {
				t.Fatalf("toInt(%#v) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// A string that is not UTF-8 (YAML's !!binary can make one) is refused
// where it stands: a condition compares text, and its stored JSON form
// could not keep the bytes.
func TestConditionRefusesInvalidUTF8(t *testing.T) {
	for _, tc := range []struct{ src, path string }{
		{"kind: !!binary 0000\n", "condition.kind"},
		{"tool: {in: [ok, !!binary 0000]}\n", "condition.tool.in[1]"},
		{"matched_policies: {ne: !!binary 0000}\n", "condition.matched_policies.ne"},
	} {
		_, err := ParseConditionYAML([]byte(tc.src))
		var ce *ConditionError
		if !errors.As(err, &ce) || ce.Path != tc.path || !strings.Contains(ce.Error(), "UTF-8") {
			t.Errorf("%q: %v, want an error at %s naming UTF-8", tc.src, err, tc.path)
		}
	}
}
