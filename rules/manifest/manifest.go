// Package manifest holds the rules of an MCP server's tool manifest
// (CONTRACT §8): its svc-jcs-1 hash, what changed between the tools the
// gateway knows and the ones a discovery found, how risky that drift is,
// and what the tool-poisoning scan (rules/inspect) found in the tools'
// descriptions and schemas. Pure: no storage, no network.
package manifest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"svc/canonical"
	"svc/rules/inspect"
)

// Tool statuses (SPEC 2.3).
const (
	StatusPending  = "pending"
	StatusApproved = "approved"
	StatusDisabled = "disabled"
)

// Limits on one manifest.
const (
	MaxTools           = 1000
	MaxNameLen         = 128
	MaxDescriptionLen  = 16 << 10
	MaxSchemaLen       = 64 << 10
	maxFindingsPerTool = 16
)

// ErrInvalid wraps every reason a manifest is refused.
var ErrInvalid = errors.New("manifest: invalid")

// Tool is one tool of a manifest: its name as the server gives it, its
// description, and its input schema as canonical JSON.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	// ReadOnly is annotations.readOnlyHint: not part of the tool's hash
	// (an annotation is a hint, CONTRACT §15 reads it for mutates_state).
	ReadOnly bool `json:"-"`
	// hash is the tool's svc-jcs-1 hash, set by Normalize, which made
	// the schema canonical JSON.
	hash string
}

// Key is the tool's lookup key: its name normalized as an authorize call's
// action is (SPEC 4.2 rule 7), so that the call "mcp:<server>" with action
// "Get_Weather" finds the tool "get_weather".
func (t Tool) Key() string { return canonical.NormalizeIdentifier(t.Name) }

// Hash is the svc-jcs-1 hash of the one tool.
func (t Tool) Hash() string {
	if t.hash != "" {
		return t.hash
	}
	return sum(t.appendJCS(nil, t.canonicalSchema()))
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// canonicalSchema is the tool's schema as canonical JSON: as it is once
// Normalize made it so, else made so here ("null" when there is none, as
// encoding/json writes a nil json.RawMessage).
func (t Tool) canonicalSchema() []byte {
	if t.hash != "" {
		return t.InputSchema
	}
	schema := []byte(t.InputSchema)
	if len(schema) == 0 {
		schema = []byte("null")
	}
	c, err := canonical.JCS(schema)
	if err != nil {
		panic("manifest: a tool's schema is not JSON: " + err.Error())
	}
	return c
}

// appendJCS appends the tool's RFC 8785 form with its canonical schema:
// the object {"description","inputSchema","name"} (RFC 8785 orders
// members by their names' UTF-16 code units, which is this order),
// written directly rather than encoded and parsed again (which cost about
// 20 times the tool's size): the strings as encoding/json coerces them to
// UTF-8 and RFC 8785 writes them (canonical.AppendString), then the
// schema. TestHashIsJCSOfTheTools holds the bytes equal to
// canonical.Marshal's.
func (t Tool) appendJCS(b, schema []byte) []byte {
	b = append(b, `{"description":`...)
	b = canonical.AppendString(b, coerceUTF8(t.Description))
	b = append(b, `,"inputSchema":`...)
	b = append(b, schema...)
	b = append(b, `,"name":`...)
	b = canonical.AppendString(b, coerceUTF8(t.Name))
	return append(b, '}')
}

// coerceUTF8 replaces each byte of s that is not UTF-8 with U+FFFD, as
// encoding/json does.
func coerceUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// text is what the poisoning scan reads: the description and the schema
// (whose property descriptions the model reads too), appended to b.
func (t Tool) text(b []byte) []byte {
	b = append(b, t.Description...)
	b = append(b, '\n')
	return append(b, t.InputSchema...)
}

// nameFault says what makes a tool's name unfit to be stored and shown:
// text that is not UTF-8 (or that a decoder replaced: U+FFFD), a control
// character (U+0000 among them, which Postgres cannot store and SQLite
// would) or a format character (zero-width and direction marks, which
// make two names look alike). "" when the name is fit.
func nameFault(name string) string {
	if !utf8.ValidString(name) {
		return "is not UTF-8"
	}
	for _, r := range name {
		switch {
		case r == utf8.RuneError:
			return "has U+FFFD, the mark of text that was not UTF-8"
		case unicode.IsControl(r):
			return fmt.Sprintf("has the control character U+%04X", r)
		case unicode.Is(unicode.Cf, r):
			return fmt.Sprintf("has the format character U+%04X", r)
		}
	}
	return ""
}

// Normalize checks and prepares the tools a server listed: names present,
// at most MaxNameLen bytes and unique once normalized (two names that
// differ only in case would let one shadow the other); descriptions and
// schemas within their limits; schemas JSON objects, made canonical. It
// returns the tools sorted by name.
func Normalize(tools []Tool) ([]Tool, error) {
	if len(tools) > MaxTools {
		return nil, fmt.Errorf("%w: %d tools, at most %d", ErrInvalid, len(tools), MaxTools)
	}
	out := make([]Tool, 0, len(tools))
	seen := make(map[string]string, len(tools))
	var buf []byte
	for i, t := range tools {
		switch {
		case strings.TrimSpace(t.Name) == "":
			return nil, fmt.Errorf("%w: tool %d has no name", ErrInvalid, i)
		case len(t.Name) > MaxNameLen:
			return nil, fmt.Errorf("%w: tool %d: name longer than %d bytes", ErrInvalid, i, MaxNameLen)
		case nameFault(t.Name) != "":
			return nil, fmt.Errorf("%w: tool %q: its name %s", ErrInvalid, t.Name, nameFault(t.Name))
		case !utf8.ValidString(t.Description):
			return nil, fmt.Errorf("%w: tool %q: description is not UTF-8", ErrInvalid, t.Name)
		case strings.IndexByte(t.Description, 0) >= 0:
			return nil, fmt.Errorf("%w: tool %q: description has U+0000", ErrInvalid, t.Name)
		case len(t.Description) > MaxDescriptionLen:
			return nil, fmt.Errorf("%w: tool %q: description longer than %d bytes", ErrInvalid, t.Name, MaxDescriptionLen)
		case len(t.InputSchema) > MaxSchemaLen:
			return nil, fmt.Errorf("%w: tool %q: input schema longer than %d bytes", ErrInvalid, t.Name, MaxSchemaLen)
		}
		if other, dup := seen[t.Key()]; dup {
			return nil, fmt.Errorf("%w: tools %q and %q have the same name once normalized", ErrInvalid, other, t.Name)
		}
		seen[t.Key()] = t.Name
		schema := t.InputSchema
		if len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		// A JSON object, checked without decoding it: RFC 8785 parses it.
		if !json.Valid(schema) || bytes.TrimLeft(schema, " \t\r\n")[0] != '{' {
			return nil, fmt.Errorf("%w: tool %q: input schema is not a JSON object", ErrInvalid, t.Name)
		}
		c, err := canonical.JCS(schema)
		if err != nil {
			return nil, fmt.Errorf("%w: tool %q: input schema: %w", ErrInvalid, t.Name, err)
		}
		buf = t.appendJCS(buf[:0], c)
		out = append(out, Tool{Name: t.Name, Description: t.Description, InputSchema: c, ReadOnly: t.ReadOnly, hash: sum(buf)})
	}
	slices.SortFunc(out, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Hash is the manifest hash: svc-jcs-1 (SHA-256 of the RFC 8785 bytes) of
// the normalized tools sorted by name, as lower-case hex. The bytes are
// hashed as they are written, one tool at a time: the manifest is never
// encoded whole.
func Hash(tools []Tool) string {
	sorted := slices.SortedFunc(slices.Values(tools), func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
	h := sha256.New()
	buf := []byte{'['}
	for i, t := range sorted {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = t.appendJCS(buf, t.canonicalSchema())
		_, _ = h.Write(buf) // a hash.Hash never fails
		buf = buf[:0]
	}
	_, _ = h.Write(append(buf, ']'))
	return hex.EncodeToString(h.Sum(nil))
}

// Finding is one category the poisoning scan found in one tool, and how
// many times; never the text.
type Finding struct {
	Tool     string `json:"tool"`
	Category string `json:"category"`
	Count    int    `json:"count"`
}

// Scan is the poisoning scan of one tool.
func Scan(t Tool) []Finding {
	return findings(t.Name, inspect.Tool(t.text(nil)))
}

func findings(tool string, fs []inspect.Finding) []Finding {
	out := make([]Finding, 0, len(fs))
	for _, f := range fs {
		out = append(out, Finding{Tool: tool, Category: f.Category, Count: f.Count})
	}
	if len(out) > maxFindingsPerTool {
		out = out[:maxFindingsPerTool]
	}
	return out
}

// poisoned reports the findings that make a drift high risk: instructions
// to the model, hidden text, injection phrases and new URLs. Personal data
// and keys in a description are reported but are not, alone, an attack.
func poisoned(f Finding) bool {
	switch f.Category {
	case inspect.PromptInjection, inspect.HiddenText, inspect.ModelDirective, inspect.NewURL:
		return true
	}
	return false
}

// Known is a tool the gateway already holds, with its status and, when
// known, its hash as stored (else it is computed).
type Known struct {
	Tool
	Status string
	Hash   string
}

func (k Known) hashed() string {
	if k.Hash != "" {
		return k.Hash
	}
	return k.Tool.Hash()
}

// Drift is what a discovery changed against the tools the gateway knew.
type Drift struct {
	Added   []string  `json:"added"`
	Removed []string  `json:"removed"`
	Changed []string  `json:"changed"`
	Risk    int       `json:"risk_score"`
	Found   []Finding `json:"findings"`
	// ApprovedChanged are the changed tools that were approved.
	ApprovedChanged []string `json:"-"`
}

// Empty reports a discovery that changed nothing.
func (d Drift) Empty() bool { return len(d.Added)+len(d.Removed)+len(d.Changed) == 0 }

// Compare finds the added, removed and changed tools (by name) between the
// known tools and the live ones (both normalized), scans the added and
// changed ones for poisoning (a changed one also for URLs its previous
// text lacked), and scores the drift (Risk).
func Compare(known []Known, live []Tool) Drift {
	d := Drift{Added: []string{}, Removed: []string{}, Changed: []string{}, Found: []Finding{}}
	byName := make(map[string]Known, len(known))
	for _, k := range known {
		byName[k.Name] = k
	}
	liveNames := make(map[string]bool, len(live))
	var scratch []byte
	for _, t := range live {
		liveNames[t.Name] = true
		k, ok := byName[t.Name]
		switch {
		case !ok:
			d.Added = append(d.Added, t.Name)
			scratch = t.text(scratch[:0]) // one buffer for every added tool's text
			d.Found = append(d.Found, findings(t.Name, inspect.Tool(scratch))...)
		case k.hashed() != t.Hash():
			d.Changed = append(d.Changed, t.Name)
			if k.Status == StatusApproved {
				d.ApprovedChanged = append(d.ApprovedChanged, t.Name)
			}
			d.Found = append(d.Found, findings(t.Name, inspect.Changed(k.text(nil), t.text(nil)))...)
		}
	}
	for _, k := range known {
		if !liveNames[k.Name] {
			d.Removed = append(d.Removed, k.Name)
		}
	}
	slices.Sort(d.Added)
	slices.Sort(d.Removed)
	slices.Sort(d.Changed)
	d.Risk = Risk(d)
	return d
}

// Risk scores a drift in CONTRACT §8's bands: 75 to 100 when an approved
// tool changed or an added or changed tool carries a poisoning finding;
// 40 to 74 when tools were added or changed otherwise; 10 to 39 when tools
// were only removed; 0 for no change. Within a band, each further tool
// adds 5 points.
func Risk(d Drift) int {
	bad := map[string]bool{}
	for _, f := range d.Found {
		if poisoned(f) {
			bad[f.Tool] = true
		}
	}
	band := func(lo, hi, n int) int { return min(hi, lo+5*(n-1)) }
	switch {
	case len(d.ApprovedChanged) > 0 || len(bad) > 0:
		n := len(d.ApprovedChanged)
		for t := range bad {
			if !slices.Contains(d.ApprovedChanged, t) {
				n++
			}
		}
		return band(75, 100, n)
	case len(d.Added)+len(d.Changed) > 0:
		return band(40, 74, len(d.Added)+len(d.Changed))
	case len(d.Removed) > 0:
		return band(10, 39, len(d.Removed))
	}
	return 0
}
