package detect

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// Fuzz targets for the condition language (issue 20). The seed corpus is
// the f.Add calls below plus testdata/fuzz/<target>/; `go test` runs both
// as ordinary tests, scripts/fuzz.sh fuzzes each target for a few seconds.
//
// For any input, JSON or YAML: parsing never panics and fails only with a
// *ConditionError wrapping ErrInvalidCondition. A condition that parses
//   - evaluates without panic on the fuzzed event, the zero event, the
//     tests' base event and a witness event built from its own values;
//   - agrees on each of them with an independent reading of its normalized
//     form (Raw) by the package documentation (oracleMatch);
//   - matches its witness event (which satisfies every clause);
//   - means the same after a round trip through Raw (ParseCondition),
//     through MarshalJSON (ParseConditionJSON, and MarshalJSON is then
//     stable) and through YAML (Raw written with quoted strings,
//     quotedYAML, then ParseConditionYAML).

var conditionJSONSeeds = []string{
	`{"kind":"mcp_manifest_drift","risk_score":{"gte":75},"matched_policies":"pci","mutates_state":false,"resource":null}`,
	`{"mutates_state": true, "source_trust": {"in": ["untrusted_external", "malicious_suspected"]}, "matched_policies": "pci", "resource": {"prefix": "prod/"}, "risk_score": {"gte": 60}}`,
	`{"risk_score":{"lte":100.0}}`, `{"risk_score":1e2}`, `{"risk_score":{"gt":-1}}`, `{"risk_score":{"lt":-9223372036854775808}}`,
	`{"risk_score":{"gt":9223372036854775807}}`, `{"risk_score":12345678901234567890}`, `{"risk_score":{"gte":75.5}}`,
	`{"risk_score":{"in":[1,2,9007199254740993]}}`, `{"risk_score":-0}`, `{"risk_score":1e400}`,
	`{"decision":{"in":["deny","quarantine"]},"agent_id":{"ne":""}}`,
	`{"redacted_fields":{"eq":[]}}`, `{"redacted_fields":{"ne":[]}}`, `{"matched_policies":{"eq":["a","b","a"]}}`,
	`{"matched_policies":{"ne":"pci"}}`, `{"matched_policies":{"in":["x"]}}`, `{"redacted_fields":{"eq":"one"}}`,
	`{"resource":{"ne":null},"tool":{"prefix":"mcp:"}}`, `{"resource":{"in":["a"]}}`, `{"action":{"prefix":""}}`,
	`{"mutates_state":{"in":[true,false]}}`, `{"mutates_state":{"ne":true}}`,
	`{"kind":"x"} {}`, `[{"kind":"x"}]`, `null`, `{}`, `{"severity":"HIGH"}`, `{"risk_score":{"gte":40,"lte":74}}`,
	`{"risk_score":{}}`, `{"tool":{"gt":1}}`, `{"tool":["a"]}`, `{"decision":{"in":[]}}`, `{"decision":{"in":["deny",3]}}`,
	`{"tool":"\u0000\ud800\"","action":"\u00e9"}`, "{\"tool\":\"\xff\"}", `{"kind":`,
}

var conditionYAMLSeeds = []string{
	"kind: mcp_manifest_drift\nrisk_score:\n  gte: 75\nmatched_policies: {in: [critical, mcp_unknown_tool]}\nmutates_state: true\nresource: ~\n",
	"mutates_state: true\nsource_trust: {in: [untrusted_external, malicious_suspected]}\nmatched_policies: pci\nresource: {prefix: \"prod/\"}\nrisk_score: {gte: 60}\n",
	"risk_score: 100\n", "risk_score: {lte: 39.0}\n", "risk_score: 0x10\n", "risk_score: 0o17\n", "risk_score: -0b101\n",
	"risk_score: 9223372036854775807\n", "risk_score: {gt: 18446744073709551615}\n", "risk_score: .inf\n", "risk_score: .nan\n",
	"source_trust:\n  in:\n    - untrusted_external\n    - malicious_suspected\n",
	"tool: \"42\"\n", "tool: 42\n", "resource: {prefix: prod/}\n", "resource: null\n", "resource: {ne: ~}\n",
	"mutates_state: yes\n", "mutates_state: {in: [true, false]}\n", "decision: {in: [deny, 3]}\n",
	"1: x\n", "risk_score: {1: 2}\n", "risk_score: {}\n", "decision:\n", "risk_score: {gteq: 1}\n",
	"matched_policies: [pci]\n", "matched_policies: {eq: []}\n", "redacted_fields: {ne: [a, a, b]}\n",
	"risk_score: {gte: 1\n", "- kind: x\n", "hello\n", "", "{}\n", "--- \nkind: a\n--- \nkind: b\n",
	"kind: &a x\ntool: *a\n", "? [a]\n: b\n", "kind: !!binary aGk=\n", "tool: \"\\xff\\u2028\\0\"\n",
	"{\"kind\":\"x\",\"risk_score\":{\"in\":[1,2]}}",
}

func addConditionSeeds(f *testing.F, seeds []string) {
	res := "prod/db"
	f.Add([]byte(seeds[0]), "github", res, true, 60, true, "pci,critical")
	for i, s := range seeds {
		f.Add([]byte(s), []string{"", "mcp:x", "tool"}[i%3], []string{"", "prod/", "x"}[i%3], i%2 == 0,
			[]int{0, 75, -1, math.MaxInt, math.MinInt}[i%5], i%3 == 0, []string{"", "pci", "a,b", ","}[i%4])
	}
}

func FuzzConditionJSON(f *testing.F) {
	addConditionSeeds(f, conditionJSONSeeds)
	f.Fuzz(func(t *testing.T, data []byte, tool, resource string, hasResource bool, risk int, mutates bool, policies string) {
		c, err := ParseConditionJSON(data)
		checkCondition(t, data, c, err, fuzzEvent(tool, resource, hasResource, risk, mutates, policies))
	})
}

func FuzzConditionYAML(f *testing.F) {
	addConditionSeeds(f, conditionYAMLSeeds)
	f.Fuzz(func(t *testing.T, data []byte, tool, resource string, hasResource bool, risk int, mutates bool, policies string) {
		c, err := ParseConditionYAML(data)
		checkCondition(t, data, c, err, fuzzEvent(tool, resource, hasResource, risk, mutates, policies))
	})
}

// fuzzEvent spreads the fuzzed values over every matchable field.
func fuzzEvent(tool, resource string, hasResource bool, risk int, mutates bool, policies string) Event {
	e := Event{
		Kind: tool, Decision: resource, Tool: tool, Action: resource, SourceTrust: policies, AgentID: tool,
		RiskScore: risk, MutatesState: mutates,
	}
	if hasResource {
		e.Resource = &resource
	}
	if policies != "" {
		e.MatchedPolicies = strings.Split(policies, ",")
		e.RedactedFields = []string{tool, resource}
	}
	return e
}

func checkCondition(t *testing.T, in []byte, c Condition, err error, fuzzed Event) {
	t.Helper()
	if err != nil {
		var ce *ConditionError
		if !errors.As(err, &ce) || !errors.Is(err, ErrInvalidCondition) || !strings.HasPrefix(ce.Path, "condition") {
			t.Fatalf("input %q: error %v (%T) is not a *ConditionError wrapping ErrInvalidCondition", in, err, err)
		}
		if !c.IsZero() {
			t.Fatalf("input %q: error %v with a non-zero condition", in, err)
		}
		return
	}
	if c.IsZero() {
		t.Fatalf("input %q: a parser returned the zero condition without an error", in)
	}
	raw := c.Raw()
	events := []Event{fuzzed, {}, baseEvent()}
	if w, ok := witness(t, raw); ok {
		if !c.Match(w) {
			t.Fatalf("input %q: condition %v does not match its witness event %+v", in, raw, w)
		}
		events = append(events, w)
	}
	for _, e := range events {
		if got, want := c.Match(e), oracleMatch(t, raw, e); got != want {
			t.Fatalf("input %q: condition %v: Match = %v, the documented semantics say %v\nevent %+v", in, raw, got, want, e)
		}
	}

	same := func(how string, c2 Condition, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("input %q: %s: the normalized form %v does not parse: %v", in, how, raw, err)
		}
		if got := c2.Raw(); !reflect.DeepEqual(got, raw) {
			t.Fatalf("input %q: %s changed the condition\n from %#v\n   to %#v", in, how, raw, got)
		}
		for _, e := range events {
			if c.Match(e) != c2.Match(e) {
				t.Fatalf("input %q: %s changed the match of event %+v", in, how, e)
			}
		}
	}

	c2, err := ParseCondition(c.Raw())
	same("ParseCondition(Raw)", c2, err)

	out, err := json.Marshal(c)
	if err != nil {
		t.Fatalf("input %q: MarshalJSON: %v", in, err)
	}
	c3, err := ParseConditionJSON(out)
	same("MarshalJSON then ParseConditionJSON", c3, err)
	if out2, err := json.Marshal(c3); err != nil || string(out2) != string(out) {
		t.Fatalf("input %q: MarshalJSON not stable: %s then %s (%v)", in, out, out2, err)
	}
	var viaUnmarshal Condition
	if err := json.Unmarshal(out, &viaUnmarshal); err != nil {
		t.Fatalf("input %q: UnmarshalJSON(%s): %v", in, out, err)
	}
	same("UnmarshalJSON", viaUnmarshal, nil)

	y, err := quotedYAML(raw)
	if err != nil {
		t.Fatalf("input %q: yaml of %v: %v", in, raw, err)
	}
	c4, err := ParseConditionYAML(y)
	same("quotedYAML(Raw) then ParseConditionYAML", c4, err)
}

// quotedYAML writes raw as YAML with every string double-quoted. Left to
// choose, yaml.v3's encoder writes some strings as block scalars that do
// not decode to themselves ("\n0" comes back "0", "\t\n0" not at all);
// svc never writes YAML (rules are read from it and served as JSON), so
// the property is about reading, and quoted strings keep the encoder out
// of it.
func quotedYAML(raw map[string]any) ([]byte, error) {
	return yaml.Marshal(yamlNode(raw))
}

// yamlNode builds the YAML node of a normalized condition value (maps with
// string keys, strings, ints, bools, nil and lists of them) by hand: the
// library's own Node.Encode goes through its encoder's text.
func yamlNode(v any) *yaml.Node {
	scalar := func(tag, value string, style yaml.Style) *yaml.Node {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: value, Style: style}
	}
	switch v := v.(type) {
	case map[string]any:
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		for _, k := range slices.Sorted(maps.Keys(v)) {
			n.Content = append(n.Content, scalar("!!str", k, yaml.DoubleQuotedStyle), yamlNode(v[k]))
		}
		return n
	case string:
		return scalar("!!str", v, yaml.DoubleQuotedStyle)
	case int:
		return scalar("!!int", strconv.Itoa(v), 0)
	case bool:
		return scalar("!!bool", strconv.FormatBool(v), 0)
	case nil:
		return scalar("!!null", "null", 0)
	case []string:
		return yamlSeq(v)
	case []int:
		return yamlSeq(v)
	case []bool:
		return yamlSeq(v)
	}
	panic(fmt.Sprintf("yamlNode: unexpected %T", v))
}

// yamlSeq is the YAML sequence of a list's items.
func yamlSeq[T any](xs []T) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Content: []*yaml.Node{}}
	for _, x := range xs {
		n.Content = append(n.Content, yamlNode(x))
	}
	return n
}

// oracleMatch evaluates the normalized form of a condition (Raw: each field
// to a one-operator map, values string, int, bool, nil, []string, []int or
// []bool) by the package documentation, independently of clause.match.
func oracleMatch(t *testing.T, raw map[string]any, e Event) bool {
	t.Helper()
	match := true
	for name, m := range raw {
		ops, ok := m.(map[string]any)
		if !ok || len(ops) != 1 {
			t.Fatalf("Raw()[%q] = %#v, want a one-operator map", name, m)
		}
		for op, v := range ops {
			if !oracleClause(t, name, op, v, e) {
				match = false
			}
		}
	}
	return match
}

func oracleClause(t *testing.T, name, op string, v any, e Event) bool {
	t.Helper()
	bad := func() bool {
		t.Fatalf("Raw(): field %s operator %s value %#v (%T) is not in the normalized form", name, op, v, v)
		return false
	}
	switch name {
	case FieldRiskScore:
		n := e.RiskScore
		if op == OpIn {
			l, ok := v.([]int)
			if !ok || len(l) == 0 {
				return bad()
			}
			return slices.Contains(l, n)
		}
		x, ok := v.(int)
		if !ok {
			return bad()
		}
		switch op {
		case OpEq:
			return n == x
		case OpNe:
			return n != x
		case OpGt:
			return n > x
		case OpGte:
			return n >= x
		case OpLt:
			return n < x
		case OpLte:
			return n <= x
		}
	case FieldMutatesState:
		b := e.MutatesState
		switch x := v.(type) {
		case bool:
			switch op {
			case OpEq:
				return b == x
			case OpNe:
				return b != x
			}
		case []bool:
			if op == OpIn && len(x) > 0 {
				return slices.Contains(x, b)
			}
		}
	case FieldMatchedPolicies, FieldRedactedFields:
		arr := e.MatchedPolicies
		if name == FieldRedactedFields {
			arr = e.RedactedFields
		}
		has := make(map[string]bool, len(arr))
		for _, s := range arr {
			has[s] = true
		}
		switch x := v.(type) {
		case string:
			switch op {
			case OpContains:
				return has[x]
			case OpNe:
				return !has[x]
			}
		case []string:
			want := make(map[string]bool, len(x))
			for _, s := range x {
				want[s] = true
			}
			switch op {
			case OpEq:
				return reflect.DeepEqual(has, want)
			case OpNe:
				return !reflect.DeepEqual(has, want)
			case OpIn:
				if len(x) == 0 {
					return bad()
				}
				for s := range want {
					if has[s] {
						return true
					}
				}
				return false
			}
		}
	default:
		var s string
		present := true
		switch name {
		case FieldKind:
			s = e.Kind
		case FieldDecision:
			s = e.Decision
		case FieldTool:
			s = e.Tool
		case FieldAction:
			s = e.Action
		case FieldSourceTrust:
			s = e.SourceTrust
		case FieldAgentID:
			s = e.AgentID
		case FieldResource:
			present = e.Resource != nil
			if present {
				s = *e.Resource
			}
		default:
			t.Fatalf("Raw() has unknown field %q", name)
		}
		switch x := v.(type) {
		case nil:
			if name == FieldResource {
				switch op {
				case OpEq:
					return !present
				case OpNe:
					return present
				}
			}
		case string:
			switch op {
			case OpEq:
				return present && s == x
			case OpNe:
				return !present || s != x
			case OpPrefix:
				return present && strings.HasPrefix(s, x)
			}
		case []string:
			if op == OpIn && len(x) > 0 {
				return present && slices.Contains(x, s)
			}
		}
	}
	return bad()
}

// witness builds an event that satisfies every clause of raw; ok is false
// when one cannot be built (risk_score gt MaxInt or lt MinInt, which no
// event satisfies).
func witness(t *testing.T, raw map[string]any) (e Event, ok bool) {
	t.Helper()
	e.Resource = new(string)
	for name, m := range raw {
		ops, isMap := m.(map[string]any)
		if !isMap {
			t.Fatalf("Raw()[%q] = %#v, want a one-operator map", name, m)
		}
		for op, v := range ops {
			switch name {
			case FieldRiskScore:
				var n int
				switch x := v.(type) {
				case int:
					n = x
				case []int:
					n = x[0]
				}
				switch {
				case op == OpGt && n == math.MaxInt, op == OpLt && n == math.MinInt:
					return e, false
				case op == OpGt:
					n++
				case op == OpLt:
					n--
				case op == OpNe:
					n ^= 1
				}
				e.RiskScore = n
			case FieldMutatesState:
				switch x := v.(type) {
				case bool:
					e.MutatesState = x != (op == OpNe)
				case []bool:
					e.MutatesState = x[0]
				}
			case FieldMatchedPolicies, FieldRedactedFields:
				var arr []string
				switch x := v.(type) {
				case string:
					if op != OpNe {
						arr = []string{x}
					}
				case []string:
					switch op {
					case OpEq:
						arr = x
					case OpIn:
						arr = x[:1]
					case OpNe:
						arr = []string{strings.Join(x, "") + "x"} // longer than any member of x
					}
				}
				if name == FieldMatchedPolicies {
					e.MatchedPolicies = arr
				} else {
					e.RedactedFields = arr
				}
			default:
				var s string
				switch x := v.(type) {
				case nil:
					if name == FieldResource && op == OpEq {
						e.Resource = nil
						continue
					}
				case string:
					s = x
					if op == OpNe {
						s += "x"
					}
				case []string:
					s = x[0]
				}
				switch name {
				case FieldKind:
					e.Kind = s
				case FieldDecision:
					e.Decision = s
				case FieldTool:
					e.Tool = s
				case FieldAction:
					e.Action = s
				case FieldSourceTrust:
					e.SourceTrust = s
				case FieldAgentID:
					e.AgentID = s
				case FieldResource:
					e.Resource = &s
				}
			}
		}
	}
	return e, true
}
