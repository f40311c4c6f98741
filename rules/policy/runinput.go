package policy

import (
	"maps"
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"

	"svc/runstate"
)

// The run documents' fixed strings are interned once, so that building the
// documents' terms on every call allocates none for them (OPA's interning
// table may only be written at initialization).
func init() { ast.InternStringTerm(runstate.Names()...) }

// runFields returns the members of input.run and input.agent_history the
// modules read, and within input.run.tools the entries and counts. It is
// conservative: a reference to input that does not name a fixed first key
// (`input[k]`, `x := input`, `with input as`) reads all of both documents,
// one to input.run (or agent_history) without a fixed member reads all of
// that document, because the run context could be read through it, and a
// reference into tools narrows to an entry only by a constant key or by a
// variable its body binds to input.tool_call.tool (or .action); a module
// that replaces any part of input with `with` reads every entry.
func runFields(modules map[string]*ast.Module) runstate.Fields {
	f := runstate.Fields{Tools: &runstate.ToolSel{}}
	for _, m := range modules {
		f = union(f, moduleRunFields(m))
	}
	if f.Run&runstate.RunMember("tools") == 0 {
		f.Tools = nil // nothing of tools is read: no selection to keep
	}
	if f.Run&runstate.RunMember("trust") == 0 {
		f.Trust = 0
	}
	return f
}

func union(a, b runstate.Fields) runstate.Fields {
	return runstate.Fields{Run: a.Run | b.Run, Agent: a.Agent | b.Agent, Tools: a.Tools.Union(b.Tools), Trust: a.Trust | b.Trust}
}

var (
	inputRoot  = ast.InputRootDocument.Value
	callTool   = ast.MustParseRef("input.tool_call.tool")
	callAction = ast.MustParseRef("input.tool_call.action")
)

// moduleRunFields is what one module reads of the run context.
func moduleRunFields(m *ast.Module) runstate.Fields {
	w := &runWalker{f: runstate.Fields{Tools: &runstate.ToolSel{}}}
	for _, r := range m.Rules {
		for rule := r; rule != nil; rule = rule.Else {
			b := w.bind(nil, rule.Body)
			w.walk(rule.Head, b)
			w.walkBody(rule.Body, b)
		}
	}
	if w.withInput {
		w.f.Tools = nil
	}
	return w.f
}

// runWalker gathers what a module reads of the run context.
type runWalker struct {
	f runstate.Fields
	// withInput: some `with` replaces part of input, so a key bound to
	// the call's tool may name another.
	withInput bool
}

// bindings are the variables a body (or an enclosing one) binds to the
// call's tool ("tool") or action ("action").
type bindings map[ast.Var]string

// bind adds to outer the variables body's own expressions unify with
// input.tool_call.tool or .action (a body that succeeds has them equal).
// outer is never changed.
func (w *runWalker) bind(outer bindings, body ast.Body) bindings {
	b, own := outer, false
	for _, e := range body {
		if !e.IsEquality() || e.Negated {
			continue
		}
		ops := e.Operands()
		for i, t := range ops {
			v, ok := t.Value.(ast.Var)
			if !ok {
				continue
			}
			ref, ok := ops[1-i].Value.(ast.Ref)
			if !ok {
				continue
			}
			var name string
			switch {
			case ref.Equal(callTool):
				name = "tool"
			case ref.Equal(callAction):
				name = "action"
			default:
				continue
			}
			if !own {
				b, own = maps.Clone(outer), true
				if b == nil {
					b = bindings{}
				}
			}
			b[v] = name
		}
	}
	return b
}

// walkBody walks a body's expressions; nested bodies (comprehensions,
// every, negation) bind for themselves and see the enclosing bindings.
func (w *runWalker) walkBody(body ast.Body, b bindings) {
	for _, e := range body {
		for _, with := range e.With {
			if ref, ok := with.Target.Value.(ast.Ref); ok && ref[0].Value.Compare(inputRoot) == 0 {
				w.withInput = true
			}
		}
		w.walk(e, b)
	}
}

// walk visits x's references (and nested bodies) with b in force.
func (w *runWalker) walk(x any, b bindings) {
	ast.NewGenericVisitor(func(x any) bool {
		switch v := x.(type) {
		case ast.Body:
			w.walkBody(v, w.bind(b, v))
			return true
		case ast.Ref:
			return w.ref(v, b)
		case ast.Var:
			if v.Compare(inputRoot) == 0 {
				w.all()
			}
		}
		return false
	}).Walk(x)
}

// all reads everything.
func (w *runWalker) all() {
	w.f.Run, w.f.Agent, w.f.Tools, w.f.Trust = runstate.AllFields.Run, runstate.AllFields.Agent, nil, runstate.AllTrust
}

// ref notes what a reference reads; it reports whether the walk should
// skip the reference's own terms (it walked them itself).
func (w *runWalker) ref(v ast.Ref, b bindings) bool {
	if v[0].Value.Compare(inputRoot) != 0 {
		return false
	}
	key, ok := ast.String(""), len(v) >= 2
	if ok {
		key, ok = v[1].Value.(ast.String)
	}
	if !ok {
		w.all()
		return true
	}
	member := func(all uint32, bit func(string) uint32) uint32 {
		if len(v) < 3 {
			return all
		}
		if name, ok := v[2].Value.(ast.String); ok {
			return bit(string(name))
		}
		return all
	}
	switch key {
	case "run":
		bits := member(runstate.AllFields.Run, runstate.RunMember)
		w.f.Run |= bits
		if bits&runstate.RunMember("tools") != 0 {
			w.tools(v, b)
		}
		if bits&runstate.RunMember("trust") != 0 {
			// input.run.trust.<member> reads that member; anything else
			// (input.run.trust whole, input.run.trust[k]) all of them.
			leaf := uint8(runstate.AllTrust)
			if len(v) >= 4 && bits == runstate.RunMember("trust") {
				if name, ok := v[3].Value.(ast.String); ok {
					leaf = runstate.TrustMember(string(name))
				}
			}
			w.f.Trust |= leaf
		}
	case "agent_history":
		w.f.Agent |= member(runstate.AllFields.Agent, runstate.AgentMember)
	}
	// A dynamic index further on may itself read the run.
	for _, t := range v[2:] {
		w.walk(t, b)
	}
	return true
}

// tools notes the entry and counts a reference into input.run.tools reads.
func (w *runWalker) tools(v ast.Ref, b bindings) {
	if w.f.Tools == nil {
		return
	}
	if len(v) < 4 || !v[2].Equal(ast.InternedTerm("tools")) {
		w.f.Tools = nil // input.run, input.run[k] or input.run.tools whole
		return
	}
	key := func(i int, name string) runstate.Key {
		if len(v) <= i {
			return runstate.Key{}
		}
		switch k := v[i].Value.(type) {
		case ast.String:
			return runstate.Key{Kind: runstate.KeyName, Name: string(k)}
		case ast.Var:
			if b[k] == name {
				return runstate.Key{Kind: runstate.KeyCall}
			}
		case ast.Ref:
			if (name == "tool" && k.Equal(callTool)) || (name == "action" && k.Equal(callAction)) {
				return runstate.Key{Kind: runstate.KeyCall}
			}
		}
		return runstate.Key{}
	}
	p := runstate.ToolPattern{Tool: key(3, "tool"), Action: key(4, "action")}
	if !slices.Contains(w.f.Tools.Patterns, p) {
		w.f.Tools.Patterns = append(w.f.Tools.Patterns, p)
	}
	leaves := uint8(runstate.AllLeaves)
	if len(v) >= 6 {
		if name, ok := v[5].Value.(ast.String); ok {
			leaves = runstate.ToolLeaf(string(name))
		}
	}
	w.f.Tools.Leaves |= leaves
}

// docValue turns a runstate document into an ast value, field by field.
func docValue(d runstate.Doc) *ast.Term {
	switch v := d.(type) {
	case runstate.Obj:
		kv := make([][2]*ast.Term, len(v))
		for i, m := range v {
			kv[i] = [2]*ast.Term{ast.InternedTerm(m.Key), docValue(m.Value)}
		}
		return ast.ObjectTerm(kv...)
	case runstate.Arr:
		ts := make([]*ast.Term, len(v))
		for i, e := range v {
			ts[i] = docValue(e)
		}
		return ast.ArrayTerm(ts...)
	case string:
		return ast.InternedTerm(v)
	case int64:
		return ast.InternedTerm(int(v))
	case float64:
		return ast.FloatNumberTerm(v)
	case bool:
		return ast.InternedTerm(v)
	}
	return ast.InternedNullTerm
}
