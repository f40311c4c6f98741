package httpapi

// Reading a request: its URL checked, its body read within the limits and
// the deadline, decoded strictly (JSON, or YAML where a route takes it).

import (
	"gopkg.in/yaml.v3"

	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"reflect"
	"strings"
	"unicode/utf8"

	"svc/persistence"
)

// ReadBody reads and decodes the body of a SelfAuth route, which the
// router leaves unread so that a bad credential is answered (and counted)
// before a bad body; a no-op elsewhere.
func (c *Call) ReadBody() error {
	if c.readBody == nil {
		return nil
	}
	read := c.readBody
	c.readBody = nil
	if e := read(); e != nil {
		return e
	}
	return nil
}

// bodyOf returns the decoded request body as the route's Body type T (the
// router decoded it into a fresh *T before calling the handler).
func bodyOf[T any](c *Call) *T {
	if v, ok := c.body.(*T); ok {
		return v
	}
	return new(T)
}

// HasField reports whether the JSON body carries the top-level field (to
// tell an explicit null from an absent field).
func (c *Call) HasField(name string) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(c.Raw, &m) != nil {
		return false
	}
	_, ok := m[name]
	return ok
}

// checkURL refuses, before any work, a path or query value that no store
// holds alike (CONTRACT §10): U+0000 or bad UTF-8 in a path segment is the
// 404 of any malformed id; in a query key or value, 400 nul_character (or
// invalid_query) naming the parameter.
func checkURL(c *Call) *Error {
	for _, p := range c.Params {
		if !persistence.StorableText(p.Value) {
			return notFound("resource")
		}
	}
	if c.R.URL.RawQuery == "" {
		return nil
	}
	for k, vs := range c.R.URL.Query() {
		for _, v := range append([]string{k}, vs...) {
			switch {
			case strings.IndexByte(v, 0) >= 0:
				e := badRequest("nul_character", "query parameter %q contains U+0000, which is not accepted", k)
				e.Details["field"] = k
				return e
			case !utf8.ValidString(v):
				e := badRequest("invalid_query", "query parameter %q is not valid UTF-8", k)
				e.Details["field"] = k
				return e
			}
		}
	}
	return nil
}

// readRaw reads the body under the size cap and checks its content type
// (JSON, or YAML where the route accepts it, converted to JSON), JSON
// validity and UTF-8; nil for an empty body.
func (s *Server) readRaw(c *Call, rt Route) ([]byte, *Error) {
	raw, e := s.readCapped(c)
	if e != nil {
		return nil, e
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	ct := c.R.Header.Get("Content-Type")
	mt, _, perr := mime.ParseMediaType(ct)
	yamlBody := rt.AcceptYAML && perr == nil && (mt == "application/yaml" || mt == "application/x-yaml" || mt == "text/yaml")
	if yamlBody {
		if !utf8.Valid(raw) {
			return nil, badRequest("invalid_yaml", "request body is not valid UTF-8")
		}
		converted, err := yamlToJSON(raw)
		if err != nil {
			return nil, badRequest("invalid_yaml", "request body is not valid YAML: %v", err)
		}
		raw = converted
	} else if ct == "" || perr != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		if rt.AcceptYAML {
			return nil, apiErr("UnsupportedMediaType", "unsupported_media_type", "Content-Type must be application/json or application/yaml")
		}
		return nil, apiErr("UnsupportedMediaType", "unsupported_media_type", "Content-Type must be application/json")
	}
	if e := checkJSON(raw); e != nil {
		return nil, e
	}
	return raw, nil
}

// checkUnusedBody holds a route that takes no body to the same rules when
// a client sends one anyway (CONTRACT §10): over the cap 400, another
// content type 415, not JSON 400; an empty body is fine and a valid one is
// ignored.
func (s *Server) checkUnusedBody(c *Call, rt Route) *Error {
	raw, e := s.readRaw(c, rt)
	if e == nil {
		c.Raw = raw
	}
	return e
}

// readBody enforces the content type, the size cap and JSON validity
// (readRaw), then decodes into a fresh value of the route's Body type.
func (s *Server) readBody(c *Call, rt Route) *Error {
	raw, e := s.readRaw(c, rt)
	if e != nil {
		return e
	}
	if raw == nil {
		if !rt.OptionalBody {
			return badRequest("invalid_json", "request body is empty; a JSON object is required")
		}
		raw = []byte("{}")
	}
	c.Raw = raw
	v := reflect.New(reflect.TypeOf(rt.Body).Elem()).Interface()
	if e := decodeStrict(raw, v); e != nil {
		return e
	}
	c.body = v
	return nil
}

// yamlToJSON re-encodes a YAML document as JSON (a body of an AcceptYAML
// route), so that it is decoded and checked exactly like a JSON body.
func yamlToJSON(raw []byte) ([]byte, error) {
	var v any
	if err := yaml.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("not representable as JSON: %w", err)
	}
	return out, nil
}
