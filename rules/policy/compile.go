package policy

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// baseFiles is the embedded base policy set. It is read-only.
//
//go:embed base/*.rego
var baseFiles embed.FS

// Builtins that tenant and base modules may not call: they reach the network
// or the process environment, and rules/ does no I/O.
const deniedBuiltins = "http.send,net.lookup_ip_addr,opa.runtime"

// tenantFilePrefix names tenant modules inside a compiler, so that errors
// can be told apart from errors in base modules.
const tenantFilePrefix = "tenant:"

// baseSet is a parsed, validated base policy set. It is never modified after
// loadBase returns it; compilers copy its modules.
type baseSet struct {
	modules map[string]*ast.Module // by file name
	names   map[string]struct{}    // policy module names (svc.policies.<name>)
	sources map[string]string      // the Rego text, by file name
}

// parserOptions are the options every module and query is parsed with.
func parserOptions(caps *ast.Capabilities) ast.ParserOptions {
	return ast.ParserOptions{RegoVersion: ast.RegoV1, Capabilities: caps}
}

// capabilities returns OPA's capabilities without deniedBuiltins.
func capabilities() *ast.Capabilities {
	caps := ast.CapabilitiesForThisVersion()
	denied := strings.Split(deniedBuiltins, ",")
	caps.Builtins = slices.DeleteFunc(caps.Builtins, func(b *ast.Builtin) bool {
		return slices.Contains(denied, b.Name)
	})
	return caps
}

// validName reports whether name matches [a-z0-9_]{1,64} (CONTRACT §6).
func validName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i := range len(name) {
		c := name[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// policyName returns <name> when the module's package is svc.policies.<name>,
// with inNamespace true whenever the package lies under svc.policies.
func policyName(m *ast.Module) (name string, inNamespace bool) {
	path := m.Package.Path // data.svc.policies.<name>...
	if len(path) < 3 || !path[1].Equal(ast.StringTerm("svc")) || !path[2].Equal(ast.StringTerm("policies")) {
		return "", false
	}
	if len(path) != 4 {
		return "", true
	}
	s, ok := path[3].Value.(ast.String)
	if !ok {
		return "", true
	}
	return string(s), true
}

// loadBase reads, parses and checks the base policy set: the embedded one
// when path is empty, else the .rego file at path or every .rego file directly
// in the directory at path (files ending in _test.rego are skipped). Compile
// errors show when the set is prepared.
func loadBase(path string, caps *ast.Capabilities) (*baseSet, error) {
	var sources map[string]string
	var err error
	if path == "" {
		sources, err = readEmbedded()
	} else {
		sources, err = readPolicyPath(path)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLoad, err)
	}
	if len(sources) == 0 {
		return nil, fmt.Errorf("%w: no .rego file in %s", ErrLoad, path)
	}

	base := &baseSet{modules: make(map[string]*ast.Module, len(sources)), names: map[string]struct{}{}, sources: sources}
	for file, src := range sources {
		m, err := ast.ParseModuleWithOpts(file, src, parserOptions(caps))
		if err != nil {
			return nil, &ModuleError{Module: file, Errors: toCompileErrors(err, file)}
		}
		name, inNS := policyName(m)
		switch {
		case m.Package.Path.HasPrefix(collectPackage):
			return nil, &ModuleError{Module: file, Errors: []CompileError{packageError(m,
				"the package "+strings.TrimPrefix(collectPackage.String(), "data.")+" is reserved")}}
		case !inNS: // a helper library outside svc.policies: allowed
		case !validName(name):
			return nil, &ModuleError{Module: file, Errors: []CompileError{packageError(m,
				"a module under svc.policies must have the package svc.policies.<name>, <name> matching [a-z0-9_]{1,64}")}}
		default:
			base.names[name] = struct{}{}
		}
		if errs, _ := checkResults(m); errs != nil {
			return nil, &ModuleError{Module: file, Errors: errs}
		}
		base.modules[file] = m
	}
	return base, nil
}

// readEmbedded returns the embedded base set by file name.
func readEmbedded() (map[string]string, error) {
	names, err := fs.Glob(baseFiles, "base/*.rego")
	if err != nil {
		return nil, err
	}
	sources := make(map[string]string, len(names))
	for _, name := range names {
		b, err := baseFiles.ReadFile(name)
		if err != nil {
			return nil, err
		}
		sources[name] = string(b)
	}
	return sources, nil
}

// readPolicyPath returns the .rego file at path, or the .rego files directly
// in the directory at path (not *_test.rego), by path. Files are read
// through an os.Root, so nothing outside the directory is read.
func readPolicyPath(path string) (map[string]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	dir, names := filepath.Dir(path), []string{filepath.Base(path)}
	if info.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, err
		}
		dir, names = path, nil
		for _, en := range entries {
			n := en.Name()
			if en.Type().IsRegular() && strings.HasSuffix(n, ".rego") && !strings.HasSuffix(n, "_test.rego") {
				names = append(names, n)
			}
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = root.Close() }()
	sources := make(map[string]string, len(names))
	for _, n := range names {
		b, err := root.ReadFile(n)
		if err != nil {
			return nil, err
		}
		sources[filepath.Join(dir, n)] = string(b)
	}
	return sources, nil
}

// compileModules compiles the base set together with the tenant modules
// (keyed by tenantFilePrefix + name). The returned compiler is only usable
// when errs is empty.
func compileModules(base *baseSet, tenant map[string]*ast.Module, caps *ast.Capabilities) (*ast.Compiler, ast.Errors) {
	all := make(map[string]*ast.Module, len(base.modules)+len(tenant))
	for k, m := range base.modules {
		all[k] = m
	}
	for k, m := range tenant {
		all[k] = m
	}
	c := ast.NewCompiler().
		WithCapabilities(caps).
		WithDefaultRegoVersion(ast.RegoV1)
	c.Compile(all)
	return c, c.Errors
}

// parseTenantModule parses and checks one tenant module without compiling
// it: the name must be valid and unused by the base set, and the package
// must be exactly svc.policies.<name>.
func parseTenantModule(base *baseSet, name, src string, caps *ast.Capabilities) (*ast.Module, []CompileError) {
	file := tenantFilePrefix + name
	if !validName(name) {
		return nil, []CompileError{{Message: fmt.Sprintf("policy name %q does not match [a-z0-9_]{1,64}", name)}}
	}
	m, err := ast.ParseModuleWithOpts(file, src, parserOptions(caps))
	if err != nil {
		return nil, toCompileErrors(err, file)
	}
	if got, _ := policyName(m); got != name {
		return nil, []CompileError{packageError(m, fmt.Sprintf("package must be svc.policies.%s, not %s",
			name, strings.TrimPrefix(m.Package.Path.String(), "data.")))}
	}
	if _, taken := base.names[name]; taken {
		return nil, []CompileError{packageError(m, fmt.Sprintf("policy name %q is taken by the base policy set", name))}
	}
	errs, defined := checkResults(m)
	if errs != nil {
		return nil, errs
	}
	if !defined {
		return nil, []CompileError{packageError(m, "the module defines no results: add rules such as "+
			`results contains {"decision": "deny", "reason": "..."} if { ... }`)}
	}
	return m, nil
}

// checkResults checks that every rule defining `results` is a multi-value
// rule of the set itself (`results contains x if ...`): a complete rule
// (`results := ...`) may be undefined, and an object rule is no set. It
// reports whether the module defines results at all.
func checkResults(m *ast.Module) (errs []CompileError, defined bool) {
	for _, r := range m.Rules {
		ref := r.Head.Ref()
		if len(ref) == 0 || !ref[0].Equal(ast.VarTerm("results")) {
			continue
		}
		defined = true
		if len(ref) != 1 || r.Head.RuleKind() != ast.MultiValue || r.Default {
			ce := CompileError{Message: "results must be a set built with `results contains {...} if { ... }`"}
			if loc := r.Location; loc != nil {
				ce.Line, ce.Col = loc.Row, loc.Col
			}
			errs = append(errs, ce)
		}
	}
	return errs, defined
}

func packageError(m *ast.Module, msg string) CompileError {
	ce := CompileError{Message: msg}
	if loc := m.Package.Location; loc != nil {
		ce.Line, ce.Col = loc.Row, loc.Col
	}
	return ce
}

// toCompileErrors turns a parse or compile error into CompileErrors. Errors
// located in file keep their line and column; the others keep their position
// in the message and get line and column 0.
func toCompileErrors(err error, file string) []CompileError {
	var astErrs ast.Errors
	if !errors.As(err, &astErrs) {
		var one *ast.Error
		if !errors.As(err, &one) {
			return []CompileError{{Message: err.Error()}}
		}
		astErrs = ast.Errors{one}
	}
	out := make([]CompileError, 0, len(astErrs))
	for _, e := range astErrs {
		if e.Location != nil && e.Location.File == file {
			out = append(out, CompileError{Line: e.Location.Row, Col: e.Location.Col, Message: e.Code + ": " + e.Message})
			continue
		}
		out = append(out, CompileError{Message: e.Error()})
	}
	return out
}
