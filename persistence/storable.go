package persistence

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Storable reports whether every backend can store w as it is: no text in
// it (strings, JSON documents, map keys and values) holds U+0000 or bad
// UTF-8, which Postgres refuses and SQLite would keep, so that the two
// would disagree. The HTTP layer refuses such input; the group writer asks
// again before it answers a decision ahead of its commit (SPEC 4.2 rule
// 10), so that no decision is answered that cannot be recorded.
func Storable(w *DecisionWrite) error {
	if p := unstorable(reflect.ValueOf(w).Elem()); p != nil {
		slices.Reverse(p)
		return errors.New("persistence: U+0000 or bad UTF-8 at " + strings.Join(p, "."))
	}
	return nil
}

// StorableText reports whether every backend stores s alike: valid UTF-8
// without U+0000.
func StorableText(s string) bool { return strings.IndexByte(s, 0) < 0 && utf8.ValidString(s) }

var rawJSONType = reflect.TypeFor[[]byte]()

// unstorable returns the path (innermost first) of the first text in v
// that no backend stores alike, or nil. Paths are built only on a find.
func unstorable(v reflect.Value) []string {
	switch v.Kind() {
	case reflect.String:
		if !StorableText(v.String()) {
			return []string{}
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return unstorable(v.Elem())
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() {
				if p := unstorable(v.Field(i)); p != nil {
					return append(p, f.Name)
				}
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().ConvertibleTo(rawJSONType) {
			return unstorableJSON(v.Bytes())
		}
		for i := range v.Len() {
			if p := unstorable(v.Index(i)); p != nil {
				return append(p, strconv.Itoa(i))
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if p := unstorable(it.Key()); p != nil {
				return append(p, "(key)")
			}
			if p := unstorable(it.Value()); p != nil {
				k, _ := it.Key().Interface().(string)
				return append(p, k)
			}
		}
	}
	return nil
}

// unstorableJSON checks a JSON document (json.RawMessage), where U+0000
// appears escaped.
func unstorableJSON(b []byte) []string {
	if !utf8.Valid(b) {
		return []string{}
	}
	if !bytes.Contains(b, []byte(`\u0000`)) {
		return nil
	}
	// Perhaps the text of an escaped backslash: decode to tell.
	var doc any
	if json.Unmarshal(b, &doc) != nil {
		return []string{}
	}
	return unstorable(reflect.ValueOf(&doc).Elem())
}
