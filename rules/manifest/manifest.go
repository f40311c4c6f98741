// Package manifest holds the rules of an MCP server's tool manifest
// (CONTRACT §8): its svc-jcs-1 hash, what changed between the tools the
// gateway knows and the ones a discovery found, how risky that drift is,
// and what the tool-poisoning scan (rules/inspect) found in the tools'
// descriptions and schemas. Pure: no storage, no network.
package manifest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

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
}

// Key is the tool's lookup key: its name normalized as an authorize call's
// action is (SPEC 4.2 rule 7), so that the call "mcp:<server>" with action
// "Get_Weather" finds the tool "get_weather".
func (t Tool) Key() string { return canonical.NormalizeIdentifier(t.Name) }

// Hash is the svc-jcs-1 hash of the one tool.
func (t Tool) Hash() string {
	raw, err := canonical.Marshal(t)
	if err != nil { // Normalize made the schema canonical JSON already
		panic("manifest: a normalized tool does not encode: " + err.Error())
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// text is what the poisoning scan reads: the description and the schema
// (whose property descriptions the model reads too).
func (t Tool) text() []byte {
	return []byte(t.Description + "\n" + string(t.InputSchema))
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
	for i, t := range tools {
		switch {
		case strings.TrimSpace(t.Name) == "":
			return nil, fmt.Errorf("%w: tool %d has no name", ErrInvalid, i)
		case len(t.Name) > MaxNameLen:
			return nil, fmt.Errorf("%w: tool %d: name longer than %d bytes", ErrInvalid, i, MaxNameLen)
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
		var obj map[string]any
		if err := json.Unmarshal(schema, &obj); err != nil || obj == nil {
			return nil, fmt.Errorf("%w: tool %q: input schema is not a JSON object", ErrInvalid, t.Name)
		}
		c, err := canonical.JCS(schema)
		if err != nil {
			return nil, fmt.Errorf("%w: tool %q: input schema: %w", ErrInvalid, t.Name, err)
		}
		out = append(out, Tool{Name: t.Name, Description: t.Description, InputSchema: c})
	}
	slices.SortFunc(out, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Hash is the manifest hash: svc-jcs-1 (SHA-256 of the RFC 8785 bytes) of
// the normalized tools sorted by name, as lower-case hex.
func Hash(tools []Tool) string {
	sorted := slices.SortedFunc(slices.Values(tools), func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
	if sorted == nil {
		sorted = []Tool{}
	}
	raw, err := canonical.Marshal(sorted)
	if err != nil {
		panic("manifest: normalized tools do not encode: " + err.Error())
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
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
	return findings(t.Name, inspect.Tool(t.text()))
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

// Known is a tool the gateway already holds, with its status.
type Known struct {
	Tool
	Status string
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
	for _, t := range live {
		liveNames[t.Name] = true
		k, ok := byName[t.Name]
		switch {
		case !ok:
			d.Added = append(d.Added, t.Name)
			d.Found = append(d.Found, Scan(t)...)
		case k.Hash() != t.Hash():
			d.Changed = append(d.Changed, t.Name)
			if k.Status == StatusApproved {
				d.ApprovedChanged = append(d.ApprovedChanged, t.Name)
			}
			d.Found = append(d.Found, findings(t.Name, inspect.Changed(k.text(), t.text()))...)
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
