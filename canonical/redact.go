package canonical

import (
	"errors"
	"strconv"
	"strings"
)

// ErrInvalidRedactionPath is returned by [Redact] for a path it refuses
// (the SDK contract's error code invalid_redaction_path).
var ErrInvalidRedactionPath = errors.New("invalid_redaction_path")

// Redact returns a deep copy of parameters with every path of paths
// removed, as an SDK applies a redact decision's redacted_fields before the
// tool runs. A path is "parameters" followed by "."-separated segments:
//
//   - "parameters" alone empties the parameters to {};
//   - a segment walks an object by exact key (no normalization); on an
//     array, a segment that is a canonical decimal index (ASCII digits, no
//     sign, no leading zero: "0", "12") selects that element;
//   - the last segment removes the key from its object, or replaces the
//     array element by null (the other indexes do not shift);
//   - a path that does not resolve (a missing key, an index out of range or
//     not canonical, a walk into a scalar or null) changes nothing;
//   - paths apply in order.
//
// Every path is checked before any applies: an empty path, one that is not
// "parameters" and does not start with "parameters.", or one with an empty
// segment fails the whole call with [ErrInvalidRedactionPath] (fail
// closed: the SDK does not run the tool). A key that contains a "." cannot
// be addressed. nil parameters are {}.
func Redact(parameters map[string]any, paths []string) (map[string]any, error) {
	parsed := make([][]string, len(paths))
	for i, p := range paths {
		segs, err := parseRedactionPath(p)
		if err != nil {
			return nil, err
		}
		parsed[i] = segs
	}
	out, _ := deepCopy(parameters).(map[string]any)
	if out == nil {
		out = map[string]any{}
	}
	for _, segs := range parsed {
		if len(segs) == 0 {
			out = map[string]any{}
			continue
		}
		var cur any = out
		for _, seg := range segs[:len(segs)-1] {
			cur = step(cur, seg)
		}
		last := segs[len(segs)-1]
		switch c := cur.(type) {
		case map[string]any:
			delete(c, last)
		case []any:
			if i, ok := arrayIndex(last, len(c)); ok {
				c[i] = nil
			}
		}
	}
	return out, nil
}

// parseRedactionPath returns the segments after "parameters" (none for
// "parameters" itself).
func parseRedactionPath(p string) ([]string, error) {
	if p == "parameters" {
		return []string{}, nil
	}
	rest, ok := strings.CutPrefix(p, "parameters.")
	if !ok {
		return nil, ErrInvalidRedactionPath
	}
	segs := strings.Split(rest, ".")
	for _, s := range segs {
		if s == "" {
			return nil, ErrInvalidRedactionPath
		}
	}
	return segs, nil
}

// step walks one segment from cur; nil when it does not resolve (nil
// walks nowhere, so the rest of the path changes nothing).
func step(cur any, seg string) any {
	switch c := cur.(type) {
	case map[string]any:
		return c[seg]
	case []any:
		if i, ok := arrayIndex(seg, len(c)); ok {
			return c[i]
		}
	}
	return nil
}

// arrayIndex parses seg as a canonical decimal index below n.
func arrayIndex(seg string, n int) (int, bool) {
	if seg == "" || (len(seg) > 1 && seg[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(seg); i++ {
		if seg[i] < '0' || seg[i] > '9' {
			return 0, false
		}
	}
	i, err := strconv.Atoi(seg)
	if err != nil || i >= n {
		return 0, false
	}
	return i, true
}

// deepCopy copies a decoded JSON value (maps and slices are new; scalars are
// immutable).
func deepCopy(v any) any {
	switch c := v.(type) {
	case map[string]any:
		if c == nil {
			return map[string]any(nil)
		}
		m := make(map[string]any, len(c))
		for k, e := range c {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		if c == nil {
			return []any(nil)
		}
		s := make([]any, len(c))
		for i, e := range c {
			s[i] = deepCopy(e)
		}
		return s
	}
	return v
}
