package runstate

import "slices"

// ToolSel narrows input.run.tools to what a tenant's policies can read:
// the (tool, action) entries some reference names, and the counts of each
// entry it reads. A policy that reads `input.run.tools[input.tool_call.tool]
// [input.tool_call.action].attempts` and `input.run.tools.payments.verify
// .allowed` sees at most two entries of one count each, whatever the run
// did; the context the decision keeps and its receipt commits to is that
// narrowed document, what the policy saw. A nil *ToolSel is every entry
// with every count (a reference the engine could not narrow).
type ToolSel struct {
	Patterns []ToolPattern
	// Leaves are the counts read ([ToolLeaf] bits); AllLeaves for a
	// reference to a whole entry.
	Leaves uint8
}

// ToolPattern is one reference's entry: its tool and its action keys.
type ToolPattern struct {
	Tool, Action Key
}

// Key is one key of a reference into input.run.tools.
type Key struct {
	Kind KeyKind
	Name string // KeyName's
}

// KeyKind says what a reference's key is.
type KeyKind uint8

const (
	// KeyAny: any key (an iteration, or a value the engine cannot tell).
	KeyAny KeyKind = iota
	// KeyCall: the call's own tool (or action): input.tool_call.tool.
	KeyCall
	// KeyName: a constant name.
	KeyName
)

// The counts of a (tool, action) entry, in bit order.
var toolLeaves = [...]string{"allowed", "attempts", "first_seq", "last_seq", "since_last_s"}

// AllLeaves reads every count of an entry.
const AllLeaves = 1<<len(toolLeaves) - 1

// ToolLeaf is the bit of an entry's count, 0 for a name that is none.
func ToolLeaf(name string) uint8 {
	for i, n := range toolLeaves {
		if n == name {
			return 1 << i
		}
	}
	return 0
}

// Union is what s or o reads; nil (everything) if either is.
func (s *ToolSel) Union(o *ToolSel) *ToolSel {
	if s == nil || o == nil {
		return nil
	}
	u := &ToolSel{Patterns: slices.Clone(s.Patterns), Leaves: s.Leaves | o.Leaves}
	for _, p := range o.Patterns {
		if !slices.Contains(u.Patterns, p) {
			u.Patterns = append(u.Patterns, p)
		}
	}
	return u
}

// match reports whether a key of the run's names matches k for a call of
// name.
func (k Key) match(got, call string) bool {
	switch k.Kind {
	case KeyCall:
		return got == call
	case KeyName:
		return got == k.Name
	}
	return true
}

// selects reports whether s reads the entry (tool, action) for a call of
// (callTool, callAction).
func (s *ToolSel) selects(t *Tool, callTool, callAction string) bool {
	if s == nil {
		return true
	}
	for _, p := range s.Patterns {
		if p.Tool.match(t.T, callTool) && p.Action.match(t.A, callAction) {
			return true
		}
	}
	return false
}

// leaves is the counts s reads.
func (s *ToolSel) leaves() uint8 {
	if s == nil {
		return AllLeaves
	}
	return s.Leaves
}
