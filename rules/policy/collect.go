package policy

import (
	"errors"
	"maps"
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"
)

// collectPackage is the package that gathers every policy module's results
// into one set (its path is outside svc.policies, where no policy module
// may live, and no base module uses it).
var collectPackage = ast.MustParseRef("data.svc_internal_collect")

// collectQuery reads the gathered results: a set of [module name, result]
// pairs.
const collectQuery = queryVar + " = data.svc_internal_collect.results"

// emptyQuery is the query of a policy set that defines no results at all.
const emptyQuery = queryVar + " = set()"

// collectModule copies every `results` rule of the compiled policy modules
// of c into one package, each as
//
//	results contains [<module name>, <its result>] if { <its body> }
//
// so that one evaluation of one virtual document finds every module's
// results: OPA pays about 1.5 µs per package whose results a query reads
// (the lookup, the rule index, the set, the virtual cache), which made five
// small tenant modules cost 9 µs, and 2.5 µs in one package (measured with
// BenchmarkEvaluateRunPolicies). The bodies are the compiled ones, whose
// references are already resolved (a module's own rules are
// data.svc.policies.<name>.<rule>), so they mean the same in the new
// package; the modules themselves are compiled as before. It returns nil
// when no module defines results.
func collectModule(c *ast.Compiler) *ast.Module {
	mod := &ast.Module{Package: &ast.Package{Path: collectPackage}}
	results := ast.VarTerm("results")
	for _, file := range slices.Sorted(maps.Keys(c.Modules)) {
		m := c.Modules[file]
		name, _ := policyName(m)
		if name == "" {
			continue
		}
		for _, r := range m.Rules {
			if ref := r.Head.Ref(); len(ref) != 1 || !ref[0].Equal(results) {
				continue
			}
			head := ast.RefHead(ast.Ref{results}, nil)
			head.Key = ast.ArrayTerm(ast.StringTerm(name), r.Head.Key.Copy())
			head.Location = r.Head.Location
			rule := &ast.Rule{Head: head, Body: r.Body.Copy(), Location: r.Location, Module: mod}
			mod.Rules = append(mod.Rules, rule)
		}
	}
	if len(mod.Rules) == 0 {
		return nil
	}
	return mod
}

// errCollect is an internal failure to compile the gathered results (a
// policy that compiled alone always compiles gathered).
var errCollect = errors.New("policy: gathering the modules' results")
