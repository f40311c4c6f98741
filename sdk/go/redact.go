package svcsdk

import (
	"strconv"
	"strings"
)

// Redact returns a deep copy of parameters with every path of redactedFields
// removed, as a redact decision requires before the tool runs
// (testdata/sdk/redaction.json):
//
//   - "parameters" alone empties the parameters to {};
//   - "parameters.a.b" walks objects by exact key and arrays by canonical
//     decimal index (0, 12; not 01, -1, +1);
//   - the last segment deletes the key, or sets the array element to null;
//   - a path that does not resolve changes nothing; paths apply in order;
//   - an empty path, one that does not start with "parameters" /
//     "parameters.", or one with an empty segment is refused with
//     [*InvalidRedactionPath] before any path applies.
//
// The caller's map is never changed.
func Redact(parameters map[string]any, redactedFields []string) (map[string]any, error) {
	return redact(parameters, redactedFields, nil, false)
}

// RedactMask is [Redact] that sets every redacted value to mask instead of
// removing it.
func RedactMask(parameters map[string]any, redactedFields []string, mask any) (map[string]any, error) {
	return redact(parameters, redactedFields, mask, true)
}

func parsePath(path string) ([]string, error) {
	if path == "" {
		return nil, newRedactionError("redaction path %q is not a non-empty string", path)
	}
	if path == "parameters" {
		return []string{}, nil
	}
	if !strings.HasPrefix(path, "parameters.") {
		return nil, newRedactionError("redaction path %q does not start with 'parameters.'", path)
	}
	segs := strings.Split(path[len("parameters."):], ".")
	for _, s := range segs {
		if s == "" {
			return nil, newRedactionError("redaction path %q has an empty segment", path)
		}
	}
	return segs, nil
}

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

func redact(parameters map[string]any, fields []string, mask any, useMask bool) (map[string]any, error) {
	paths := make([][]string, 0, len(fields))
	for _, f := range fields {
		segs, err := parsePath(f)
		if err != nil {
			return nil, err
		}
		paths = append(paths, segs)
	}
	cp, err := jsonValue(parameters)
	if err != nil {
		return nil, &InvalidRequest{base(canonCode(err), "parameters: %v", err)}
	}
	out, _ := cp.(map[string]any)
	if out == nil {
		out = map[string]any{}
	}
	var maskValue any
	if useMask {
		if maskValue, err = jsonValue(mask); err != nil {
			return nil, &InvalidRequest{base(canonCode(err), "mask: %v", err)}
		}
	}
	maskCopy := func() any {
		if !useMask {
			return nil
		}
		c, _ := jsonValue(maskValue)
		return c
	}
	for _, segs := range paths {
		if len(segs) == 0 {
			out = map[string]any{}
			continue
		}
		var cur any = out
		for _, seg := range segs[:len(segs)-1] {
			switch c := cur.(type) {
			case map[string]any:
				v, ok := c[seg]
				if !ok {
					cur = nil
				} else {
					cur = v
				}
			case []any:
				i, ok := arrayIndex(seg, len(c))
				if !ok {
					cur = nil
				} else {
					cur = c[i]
				}
			default:
				cur = nil
			}
			if cur == nil {
				break
			}
		}
		last := segs[len(segs)-1]
		switch c := cur.(type) {
		case map[string]any:
			if _, ok := c[last]; ok {
				if useMask {
					c[last] = maskCopy()
				} else {
					delete(c, last)
				}
			}
		case []any:
			if i, ok := arrayIndex(last, len(c)); ok {
				c[i] = maskCopy()
			}
		}
	}
	return out, nil
}
