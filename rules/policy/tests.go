package policy

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/tester"
)

// TestReport is what RunTests found: the tests that passed and failed,
// and the modules the gateway would refuse.
type TestReport struct {
	Passed, Failed int
	// Refused are the policy modules the gateway would not accept (POST
	// /v2/policies), each with why.
	Refused []string
}

// OK reports whether every test passed and every module is acceptable.
func (r TestReport) OK() bool { return r.Failed == 0 && len(r.Refused) == 0 }

// RunTests runs the Rego unit tests of a tenant's policy directory (`svc
// policy test`): files maps each .rego file's name to its text. Modules
// of package svc.policies.<name> (but files named *_test.rego) are checked
// as the gateway checks a tenant policy; test modules may import them and
// the base set. The tests run with OPA's test runner,
// in process, against the base set in force (opts.PolicyPath or the
// embedded one), with the gateway's capabilities; the results are written
// to w as `opa test` prints them.
func RunTests(ctx context.Context, opts Options, files map[string]string, w io.Writer) (TestReport, error) {
	caps := capabilities()
	base, err := loadBase(opts.PolicyPath, caps)
	if err != nil {
		return TestReport{}, err
	}
	var rep TestReport
	mods := maps.Clone(base.modules)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		src := files[name]
		m, err := ast.ParseModuleWithOpts(name, src, parserOptions(caps))
		if err != nil {
			return rep, fmt.Errorf("%s: %w", name, err)
		}
		if pname, inNamespace := policyName(m); inNamespace && !strings.HasSuffix(name, "_test.rego") {
			if _, errs := parseTenantModule(base, pname, src, caps); errs != nil {
				e := errs[0]
				rep.Refused = append(rep.Refused, fmt.Sprintf("%s:%d:%d: %s", name, e.Line, e.Col, e.Message))
			}
		}
		if _, dup := mods[name]; dup {
			return rep, fmt.Errorf("%s: a file of the base policy set has this name", name)
		}
		mods[name] = m
	}
	ch, err := tester.NewRunner().
		SetModules(mods).
		SetDefaultRegoVersion(ast.RegoV1).
		RaiseBuiltinErrors(true).
		CapturePrintOutput(true).
		RunTests(ctx, nil)
	if err != nil {
		return rep, err
	}
	results := make(chan *tester.Result)
	done := make(chan error, 1)
	go func() { done <- (tester.PrettyReporter{Output: w, Verbose: true}).Report(results) }()
	for r := range ch {
		if r.Pass() {
			rep.Passed++
		} else {
			rep.Failed++
		}
		results <- r
	}
	close(results)
	if err := <-done; err != nil {
		return rep, err
	}
	for _, why := range rep.Refused {
		_, _ = fmt.Fprintf(w, "REFUSED: %s\n", why)
	}
	return rep, nil
}

// CandidateModules are the tenant policy modules of a policy directory
// (`svc policy simulate`): every file of package svc.policies.<name> but
// the *_test.rego files, named by their package.
func CandidateModules(files map[string]string) ([]Module, error) {
	caps := capabilities()
	var out []Module
	seen := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if strings.HasSuffix(name, "_test.rego") {
			continue
		}
		m, err := ast.ParseModuleWithOpts(name, files[name], parserOptions(caps))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		pname, inNamespace := policyName(m)
		if !inNamespace {
			continue
		}
		if pname == "" {
			return nil, fmt.Errorf("%s: package %s is not svc.policies.<name>", name, strings.TrimPrefix(m.Package.Path.String(), "data."))
		}
		if other, dup := seen[pname]; dup {
			return nil, fmt.Errorf("%s and %s are both policy %s", other, name, pname)
		}
		seen[pname] = name
		out = append(out, Module{Name: pname, Rego: files[name]})
	}
	return out, nil
}
