package policy

import (
	"github.com/open-policy-agent/opa/v1/ast"

	"svc/runstate"
)

// usesRun reports whether any module refers to input.run or
// input.agent_history. It is conservative: a reference to input that does
// not name a fixed first key (`input[k]`, `x := input`, `with input as`)
// counts as a use, because the run context could be read through it.
func usesRun(modules map[string]*ast.Module) bool {
	for _, m := range modules {
		if refersToRun(m) {
			return true
		}
	}
	return false
}

// refersToRun walks x (a module or a term) for a use of the run context.
func refersToRun(x any) bool {
	uses := false
	input := ast.InputRootDocument.Value
	ast.NewGenericVisitor(func(x any) bool {
		if uses {
			return true
		}
		switch v := x.(type) {
		case ast.Ref:
			if v[0].Value.Compare(input) != 0 {
				return false
			}
			key, ok := ast.String(""), len(v) >= 2
			if ok {
				key, ok = v[1].Value.(ast.String)
			}
			if !ok || key == "run" || key == "agent_history" {
				uses = true
				return true
			}
			// input.<another key>: only a dynamic index further on may
			// still read the run.
			for _, t := range v[2:] {
				if refersToRun(t) {
					uses = true
				}
			}
			return true
		case ast.Var:
			if v.Compare(input) == 0 {
				uses = true
			}
		}
		return false
	}).Walk(x)
	return uses
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
