package runstate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ParseContext reads the run context a decision kept (Context.Canonical,
// {"agent_history":…,"run":…}) back into its documents, for a policy
// evaluated again over recorded decisions (simulation): the same input
// the policy saw. A number without a fraction or an exponent is an int64,
// any other a float64 (Rego compares them by value).
func ParseContext(canonical []byte) (*Context, error) {
	dec := json.NewDecoder(bytes.NewReader(canonical))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("runstate: run context: %w", err)
	}
	top, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("runstate: run context is not an object")
	}
	c := &Context{Canonical: canonical}
	for key, dst := range map[string]*Obj{"run": &c.Run, "agent_history": &c.AgentHistory} {
		raw, present := top[key]
		if !present {
			continue
		}
		d, err := toDoc(raw, key == "run")
		if err != nil {
			return nil, err
		}
		o, ok := d.(Obj)
		if !ok {
			return nil, fmt.Errorf("runstate: run context: %s is not an object", key)
		}
		*dst = o
	}
	return c, nil
}

// toDoc converts a decoded JSON value; null is allowed only as the run's
// id (the ambient run).
func toDoc(v any, run bool) (Doc, error) {
	switch x := v.(type) {
	case map[string]any:
		o := make(Obj, 0, len(x))
		for k, e := range x {
			if e == nil && run && k == "id" {
				o = append(o, Member{Key: k, Value: Null{}})
				continue
			}
			d, err := toDoc(e, false)
			if err != nil {
				return nil, err
			}
			o = append(o, Member{Key: k, Value: d})
		}
		return o.Sorted(), nil
	case []any:
		a := make(Arr, len(x))
		for i, e := range x {
			d, err := toDoc(e, false)
			if err != nil {
				return nil, err
			}
			a[i] = d
		}
		return a, nil
	case json.Number:
		if !strings.ContainsAny(string(x), ".eE") {
			if n, err := x.Int64(); err == nil {
				return n, nil
			}
		}
		f, err := x.Float64()
		if err != nil {
			return nil, fmt.Errorf("runstate: run context: number %s: %w", x, err)
		}
		return f, nil
	case string, bool:
		return x, nil
	}
	return nil, fmt.Errorf("runstate: run context: unexpected value %v", v)
}
