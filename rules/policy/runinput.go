package policy

import (
	"github.com/open-policy-agent/opa/v1/ast"

	"svc/runstate"
)

// The run documents' fixed strings are interned once, so that building the
// documents' terms on every call allocates none for them (OPA's interning
// table may only be written at initialization).
func init() { ast.InternStringTerm(runstate.Names()...) }

// runFields returns the members of input.run and input.agent_history the
// modules read. It is conservative: a reference to input that does not
// name a fixed first key (`input[k]`, `x := input`, `with input as`)
// reads all of both documents, and one to input.run (or agent_history)
// without a fixed member reads all of that document, because the run
// context could be read through it.
func runFields(modules map[string]*ast.Module) runstate.Fields {
	var f runstate.Fields
	for _, m := range modules {
		f = union(f, readsRun(m))
	}
	return f
}

func union(a, b runstate.Fields) runstate.Fields {
	return runstate.Fields{Run: a.Run | b.Run, Agent: a.Agent | b.Agent}
}

// readsRun walks x (a module or a term) for reads of the run context.
func readsRun(x any) runstate.Fields {
	var f runstate.Fields
	input := ast.InputRootDocument.Value
	ast.NewGenericVisitor(func(x any) bool {
		switch v := x.(type) {
		case ast.Ref:
			if v[0].Value.Compare(input) != 0 {
				return false
			}
			key, ok := ast.String(""), len(v) >= 2
			if ok {
				key, ok = v[1].Value.(ast.String)
			}
			if !ok {
				f = runstate.AllFields
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
				f.Run |= member(runstate.AllFields.Run, runstate.RunMember)
			case "agent_history":
				f.Agent |= member(runstate.AllFields.Agent, runstate.AgentMember)
			}
			// A dynamic index further on may itself read the run.
			for _, t := range v[2:] {
				f = union(f, readsRun(t))
			}
			return true
		case ast.Var:
			if v.Compare(input) == 0 {
				f = runstate.AllFields
			}
		}
		return false
	}).Walk(x)
	return f
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
