package httpapi

// The OpenAPI schemas of the request and response types, from their Go
// types and `openapi` struct tags (required, enum, pattern, format, bounds).

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3gen"

	"svc/persistence"
)

// Schema rules from struct tags. A field's `openapi` tag is a
// comma-separated list of:
//
//	required          the request must carry the field, not null (a
//	                  response's field is required whenever it is not
//	                  omitempty)
//	notnull, nullable override the default nullability: pointers, slices,
//	                  maps and untyped values are nullable, as
//	                  encoding/json writes and reads null for them
//	enum=a|b|c        the allowed values ("" for the empty string)
//	pattern=NAME      one of namedPatterns
//	format=F          uuid, date-time, uri, ...
//	minLength=N, maxLength=N, min=X, max=X, minItems=N, maxItems=N,
//	minProperties=N   limits
//	items.R, values.R rule R for the items of an array or the values of a
//	                  map
//
// fieldRules holds the same rules for types whose declarations live
// outside package httpapi and messages.
var fieldRules = map[reflect.Type]map[string]string{
	reflect.TypeFor[persistence.SkillAction](): {"risk": "required,enum=low|medium|high|critical"},
}

// namedPatterns are the patterns the tags may name (ECMA 262 syntax, which
// kin-openapi translates for Go).
var namedPatterns = map[string]string{
	// nonblank: at least one character that strings.TrimSpace keeps.
	"nonblank": `[^\t\n\v\f\r \u0085\u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000]`,
	// key: a policy name or rule key.
	"key": `^[a-z0-9_]{1,64}$`,
	// severity: INFO, LOW, MEDIUM or HIGH in any case.
	"severity": `^([Ii][Nn][Ff][Oo]|[Ll][Oo][Ww]|[Mm][Ee][Dd][Ii][Uu][Mm]|[Hh][Ii][Gg][Hh])$`,
	// webhook_severity and webhook_format: info or high, json or cef, in
	// any case, surrounding white space ignored.
	"webhook_severity": `^\s*([Ii][Nn][Ff][Oo]|[Hh][Ii][Gg][Hh])\s*$`,
	"webhook_format":   `^\s*([Jj][Ss][Oo][Nn]|[Cc][Ee][Ff])\s*$`,
	// http_url: an absolute http or https URL without white space.
	"http_url": `^[Hh][Tt][Tt][Pp][Ss]?://[^\s/?#]+[^\s]*$`,
	// signing_key: "generate" or standard base64 of at least 32 bytes (44
	// characters).
	"signing_key": `^(generate|([A-Za-z0-9+/]{4}){10}([A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4}|([A-Za-z0-9+/]{4})+([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})))$`,
	// codehost_hook_key: a code-host webhook secret, "generate" or 32 to
	// 256 printable ASCII characters without spaces.
	"codehost_hook_key": `^(generate|[!-~]{32,256})$`,
}

// customizeSchema applies the tag rules to each struct's properties.
func customizeSchema(response bool) openapi3gen.SchemaCustomizerFn {
	return func(_ string, t reflect.Type, _ reflect.StructTag, schema *openapi3.Schema) error {
		if t.Kind() == reflect.Interface || t == reflect.TypeFor[json.RawMessage]() {
			// Any JSON value, null included (a map's any values, a raw
			// message); a struct field may still say notnull.
			schema.Nullable = true
		}
		if t.Kind() != reflect.Struct || schema.Properties == nil {
			return nil
		}
		for _, f := range jsonFields(t) {
			prop := schema.Properties[f.name]
			if prop == nil || prop.Value == nil {
				continue
			}
			ps := prop.Value
			switch f.typ.Kind() {
			case reflect.Slice, reflect.Map, reflect.Interface, reflect.Pointer:
				ps.Nullable = true
			}
			if response && !f.omitempty {
				schema.Required = append(schema.Required, f.name)
			}
			rules := f.tag
			if extra := fieldRules[t][f.name]; extra != "" {
				rules = extra
			}
			if rules == "" {
				continue
			}
			for _, rule := range strings.Split(rules, ",") {
				if rule == "required" && !response {
					schema.Required = append(schema.Required, f.name)
				}
				if err := applyRule(ps, rule); err != nil {
					return fmt.Errorf("httpapi: %s.%s: %w", t.Name(), f.name, err)
				}
			}
		}
		sort.Strings(schema.Required)
		return nil
	}
}

// applyRule applies one tag rule to a property's schema.
func applyRule(ps *openapi3.Schema, rule string) error {
	key, val, _ := strings.Cut(rule, "=")
	if sub, rest, ok := strings.Cut(key, "."); ok && (sub == "items" || sub == "values") {
		var target *openapi3.SchemaRef
		if sub == "items" {
			target = ps.Items
		} else {
			target = ps.AdditionalProperties.Schema
		}
		if target == nil || target.Value == nil {
			return fmt.Errorf("rule %q: no %s schema", rule, sub)
		}
		return applyRule(target.Value, rest+strings.TrimPrefix(rule, key))
	}
	num := func() (uint64, error) { return strconv.ParseUint(val, 10, 64) }
	switch key {
	case "required", "notnull":
		ps.Nullable = false
	case "nullable":
		ps.Nullable = true
	case "enum":
		for _, v := range strings.Split(val, "|") {
			ps.Enum = append(ps.Enum, v)
		}
	case "pattern":
		p, ok := namedPatterns[val]
		if !ok {
			return fmt.Errorf("unknown pattern %q", val)
		}
		ps.Pattern = p
	case "format":
		ps.Format = val
	case "object":
		// A JSON object whose members the description names (a Go type
		// that encodes itself as one, such as runstate.Obj).
		*ps = *openapi3.NewObjectSchema()
	case "minLength", "maxLength", "minItems", "maxItems", "minProperties":
		n, err := num()
		if err != nil {
			return fmt.Errorf("rule %q: %w", rule, err)
		}
		switch key {
		case "minLength":
			ps.MinLength = n
		case "maxLength":
			ps.MaxLength = &n
		case "minItems":
			ps.MinItems = n
		case "maxItems":
			ps.MaxItems = &n
		case "minProperties":
			ps.MinProps = n
		}
	case "min", "max":
		x, err := strconv.ParseFloat(val, 64)
		if err != nil {
			return fmt.Errorf("rule %q: %w", rule, err)
		}
		if key == "min" {
			ps.Min = &x
		} else {
			ps.Max = &x
		}
	default:
		return fmt.Errorf("unknown rule %q", rule)
	}
	return nil
}

// jsonField is one member of a struct's JSON object.
type jsonField struct {
	name      string
	typ       reflect.Type
	omitempty bool
	tag       string
}

// jsonFields lists the members encoding/json writes for struct type t,
// embedded structs' promoted fields included (the shallowest wins).
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	depth := map[string]int{}
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			continue // promoted: its fields are listed on their own
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if d, seen := depth[name]; seen && d <= len(f.Index) {
			continue
		}
		depth[name] = len(f.Index)
		jf := jsonField{name: name, typ: ft, omitempty: strings.Contains(","+opts+",", ",omitempty,"), tag: f.Tag.Get("openapi")}
		replaced := false
		for i := range out {
			if out[i].name == name {
				out[i], replaced = jf, true
			}
		}
		if !replaced {
			out = append(out, jf)
		}
	}
	return out
}

func describedString(desc string) *openapi3.Schema {
	sch := openapi3.NewStringSchema()
	sch.Description = desc
	return sch
}

func stringHeader(desc string, required bool) *openapi3.HeaderRef {
	return &openapi3.HeaderRef{Value: &openapi3.Header{Parameter: openapi3.Parameter{
		Description: desc, Required: required, Schema: openapi3.NewStringSchema().NewRef()}}}
}

// pathParamSchema is the schema of a path parameter. Identifiers are UUID
// text (a malformed one answers 404 like an unknown one, CONTRACT §10).
func pathParamSchema(name string) *openapi3.Schema {
	switch name {
	case "agent_id", "approval_id", "decision_id", "receipt_id", "incident_id", "subscription_id", "token_id", "tenant_id":
		return openapi3.NewUUIDSchema()
	case "name", "rule_key":
		return openapi3.NewStringSchema().WithPattern(`^[a-z0-9_]{1,64}$`)
	case "skill_key", "tool_key":
		return openapi3.NewStringSchema().WithMinLength(1).WithMaxLength(128)
	}
	return openapi3.NewStringSchema()
}

// queryParamSchema is the schema of a query parameter, with the limits the
// handlers enforce.
func queryParamSchema(rt Route, q QueryParam) *openapi3.Schema {
	switch q.Name {
	case "limit", "offset":
		return openapi3.NewIntegerSchema().WithMin(0)
	case "severity":
		return openapi3.NewStringSchema().WithPattern(namedPatterns["severity"])
	case "watch":
		return openapi3.NewBoolSchema()
	case "status":
		if rt.Path == "/incidents" {
			return openapi3.NewStringSchema().WithPattern(`^([Oo][Pp][Ee][Nn]|[Cc][Ll][Oo][Ss][Ee][Dd])?$`)
		}
	}
	switch q.Type {
	case "integer":
		return openapi3.NewIntegerSchema()
	case "boolean":
		return openapi3.NewBoolSchema()
	}
	return openapi3.NewStringSchema()
}
