package policy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown"

	"svc/runstate"
)

// queryVar is the variable of the prepared query that holds the results.
const queryVar = "x"

// Options configure an Engine.
type Options struct {
	// PolicyPath is SVC_POLICY_FILE: a .rego file or a directory of .rego
	// files that replaces the embedded base set. Empty: the embedded set.
	PolicyPath string
}

// Module is one tenant policy module: Name is the policy's name (the
// package must be svc.policies.<Name>), Rego its source.
type Module struct {
	Name string
	Rego string
	// Shadow: the module never decides; EvaluateShadow reports what it
	// alone would have added (CONTRACT §18).
	Shadow bool
}

// Engine evaluates the base policy set and each tenant's policy modules. It
// is safe for concurrent use. Evaluate never prepares or compiles anything:
// NewEngine, ReloadBase and SetTenantPolicies do, and swap their result in
// atomically.
type Engine struct {
	opts       Options
	caps       *ast.Capabilities
	keys       *inputKeys
	docs       *docTerms      // the run documents' terms, by their canonical bytes
	background topdown.Cancel // never cancelled: used when ctx has no Done

	mu       sync.Mutex // serializes ReloadBase and the install step of SetTenantPolicies
	snapshot atomic.Pointer[snapshot]
	prepares atomic.Uint64 // how many queries were prepared (tests read it)
}

// snapshot is an immutable view: the base set, its prepared query and every
// tenant's prepared query. Writers build a new one and swap it in.
type snapshot struct {
	base      *baseSet
	baseQuery rego.PreparedEvalQuery
	baseUses  runstate.Fields
	tenants   map[string]*tenantSet
}

// tenantSet is one tenant's prepared query at one version. The modules are
// kept so that ReloadBase can prepare them again against a new base set.
type tenantSet struct {
	version string
	modules []Module
	query   rego.PreparedEvalQuery
	// usesRun: the members of input.run and input.agent_history the
	// modules read (the shadow modules' too: they see what live calls see).
	usesRun runstate.Fields
	// shadow is the query of the tenant's shadow modules; nil without.
	shadow *shadowSet
}

// shadowSet is the base set with every tenant module, whose results are
// read for the shadow modules only.
type shadowSet struct {
	query rego.PreparedEvalQuery
	names map[string]bool
}

// BaseSources returns the Rego text of the base policy set in force, by
// file name (the compliance evidence pack carries it).
func (e *Engine) BaseSources() map[string]string {
	return maps.Clone(e.snapshot.Load().base.sources)
}

// NewEngine loads the base policy set (opts.PolicyPath or the embedded set),
// compiles it and prepares the base-only query.
func NewEngine(opts Options) (*Engine, error) {
	e := &Engine{
		opts:       opts,
		caps:       capabilities(),
		keys:       newInputKeys(),
		docs:       newDocTerms(),
		background: topdown.NewCancel(),
	}
	s, err := e.loadSnapshot()
	if err != nil {
		return nil, err
	}
	e.snapshot.Store(s)
	return e, nil
}

func (e *Engine) loadSnapshot() (*snapshot, error) {
	base, err := loadBase(e.opts.PolicyPath, e.caps)
	if err != nil {
		return nil, err
	}
	q, uses, err := e.prepare(base, nil)
	if err != nil {
		return nil, err
	}
	return &snapshot{base: base, baseQuery: q, baseUses: uses, tenants: map[string]*tenantSet{}}, nil
}

// ReloadBase re-reads the base policy set (PolicyPath, or the embedded set),
// recompiles it, and prepares every known tenant's modules again against it;
// every previously prepared query is dropped. It is all or nothing: when the
// new base set does not load or compile, or a tenant's modules no longer
// compile with it, ReloadBase returns the error and nothing changes (the
// error names the tenant). Tenants keep their versions, so HasTenant still
// answers true for them.
func (e *Engine) ReloadBase() error {
	e.mu.Lock()
	defer e.mu.Unlock()

	next, err := e.loadSnapshot()
	if err != nil {
		return err
	}
	old := e.snapshot.Load()
	for _, id := range slices.Sorted(maps.Keys(old.tenants)) {
		t := old.tenants[id]
		q, uses, err := e.prepareTenant(next, t.modules)
		if err != nil {
			return fmt.Errorf("policy: reload: tenant %s, version %s: %w", id, t.version, err)
		}
		next.tenants[id] = &tenantSet{version: t.version, modules: t.modules, query: q, usesRun: uses}
	}
	e.snapshot.Store(next)
	return nil
}

// CompileTenant validates one tenant module as POST/PUT /v1/policies must:
// name matches [a-z0-9_]{1,64} and is not a base module's name, the package is
// exactly svc.policies.<name>, and the module parses and compiles together
// with the base set. It returns nil when the module is valid. It prepares
// nothing and changes nothing.
func (e *Engine) CompileTenant(name, rego string) []CompileError {
	base := e.snapshot.Load().base
	m, errs := parseTenantModule(base, name, rego, e.caps)
	if errs != nil {
		return errs
	}
	file := tenantFilePrefix + name
	if _, cerrs := compileModules(base, map[string]*ast.Module{file: m}, e.caps); len(cerrs) > 0 {
		return toCompileErrors(cerrs, file)
	}
	return nil
}

// SetTenantPolicies installs a tenant's enabled modules at a version: it
// prepares one query for the base set plus mods and replaces the tenant's
// previous query atomically (the last call wins; versions are not ordered).
// With no modules the tenant uses the base-only query under that version. A
// module that fails validation makes the whole call fail with a
// *ModuleError (wrapping ErrInvalidModule) and leaves the previous query in
// place.
func (e *Engine) SetTenantPolicies(tenantID, version string, mods []Module) error {
	mods = slices.Clone(mods)
	enforced := slices.DeleteFunc(slices.Clone(mods), func(m Module) bool { return m.Shadow })
	for {
		s := e.snapshot.Load()
		q, uses, err := e.prepareTenant(s, enforced)
		if err != nil {
			return err
		}
		var shadow *shadowSet
		if len(enforced) < len(mods) {
			sq, shadowUses, err := e.prepareTenant(s, mods)
			if err != nil {
				return err
			}
			shadow = &shadowSet{query: sq, names: map[string]bool{}}
			for _, m := range mods {
				if m.Shadow {
					shadow.names[m.Name] = true
				}
			}
			uses = shadowUses // compiled from every module, the enforced ones too
		}
		e.mu.Lock()
		cur := e.snapshot.Load()
		if cur.base != s.base { // ReloadBase ran meanwhile: prepare again
			e.mu.Unlock()
			continue
		}
		next := &snapshot{base: cur.base, baseQuery: cur.baseQuery, baseUses: cur.baseUses, tenants: maps.Clone(cur.tenants)}
		next.tenants[tenantID] = &tenantSet{version: version, modules: mods, query: q, usesRun: uses, shadow: shadow}
		e.snapshot.Store(next)
		e.mu.Unlock()
		return nil
	}
}

// HasTenant reports whether the tenant's modules at version are installed.
// A caller that sees false loads the tenant's enabled modules and calls
// SetTenantPolicies before it evaluates.
func (e *Engine) HasTenant(tenantID, version string) bool {
	t, ok := e.snapshot.Load().tenants[tenantID]
	return ok && t.version == version
}

// RunFields returns the members of input.run and input.agent_history that
// the policy set deciding the tenant's calls reads (its installed modules
// with the base set, or the base set alone). When it reads none, the caller
// builds no run context and records no attempt: a tenant without run
// policies pays nothing for them; one that reads two members pays for two.
func (e *Engine) RunFields(tenantID string) runstate.Fields {
	s := e.snapshot.Load()
	if t, ok := s.tenants[tenantID]; ok {
		return t.usesRun
	}
	return s.baseUses
}

// Evaluate decides one call with the tenant's prepared query, or with the
// base-only query when the tenant has none installed. It never prepares or
// compiles. An error (wrapping ErrEval) means no decision was reached; the
// caller denies.
func (e *Engine) Evaluate(ctx context.Context, tenantID string, in Input) (Result, error) {
	s := e.snapshot.Load()
	q := s.baseQuery
	if t, ok := s.tenants[tenantID]; ok {
		q = t.query
	}
	raw, err := e.eval(ctx, q, &in)
	if err != nil {
		return Result{}, err
	}
	return Combine(raw), nil
}

// ShadowOutcome is what one shadow module alone would have added to a
// call's decision.
type ShadowOutcome struct {
	Policy   string
	Decision string
}

// HasShadow reports whether the tenant's installed set has shadow modules.
func (e *Engine) HasShadow(tenantID string) bool {
	t, ok := e.snapshot.Load().tenants[tenantID]
	return ok && t.shadow != nil
}

// EvaluateShadow evaluates the tenant's shadow modules on a call: for each
// that produced a result, the decision its results alone combine to (a
// quarantine annotation reads as quarantine), sorted by module. None
// without shadow modules. An error never concerns the live decision: the
// caller records no outcome.
func (e *Engine) EvaluateShadow(ctx context.Context, tenantID string, in Input) ([]ShadowOutcome, error) {
	t, ok := e.snapshot.Load().tenants[tenantID]
	if !ok || t.shadow == nil {
		return nil, nil
	}
	raw, err := e.eval(ctx, t.shadow.query, &in)
	if err != nil {
		return nil, err
	}
	byModule := map[string][]RawResult{}
	for _, r := range raw {
		if t.shadow.names[r.Module] {
			byModule[r.Module] = append(byModule[r.Module], r)
		}
	}
	out := make([]ShadowOutcome, 0, len(byModule))
	for _, name := range slices.Sorted(maps.Keys(byModule)) {
		res := Combine(byModule[name])
		d := res.Decision
		if res.Quarantine {
			d = "quarantine"
		}
		out = append(out, ShadowOutcome{Policy: name, Decision: d})
	}
	return out, nil
}

// eval runs a prepared query and returns the raw results.
func (e *Engine) eval(ctx context.Context, q rego.PreparedEvalQuery, in *Input) ([]RawResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrEval, err)
	}
	v, err := e.keys.value(in, e.docs)
	if err != nil {
		return nil, err
	}
	// rego starts a goroutine per evaluation to watch ctx unless it is given
	// a Cancel; a context.AfterFunc is cheaper.
	cancel := e.background
	if ctx.Done() != nil {
		cancel = topdown.NewCancel()
		stop := context.AfterFunc(ctx, cancel.Cancel)
		defer stop()
	}
	rs, err := q.Eval(ctx,
		rego.EvalParsedInput(v),
		rego.EvalExternalCancel(cancel),
		rego.EvalMetrics(metrics.NoOp()),
		rego.EvalGenerateJSON(decodeResults),
	)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrEval, err)
	}
	if len(rs) != 1 {
		return nil, fmt.Errorf("%w: query returned %d rows", ErrEval, len(rs))
	}
	raw, ok := rs[0].Bindings[queryVar].([]RawResult)
	if !ok {
		return nil, fmt.Errorf("%w: unexpected query result", ErrEval)
	}
	return raw, nil
}

// prepareTenant validates and compiles mods with s's base set and prepares
// the query; with no modules it returns the base-only query.
func (e *Engine) prepareTenant(s *snapshot, mods []Module) (rego.PreparedEvalQuery, runstate.Fields, error) {
	if len(mods) == 0 {
		return s.baseQuery, s.baseUses, nil
	}
	parsed := make(map[string]*ast.Module, len(mods))
	for _, m := range mods {
		pm, errs := parseTenantModule(s.base, m.Name, m.Rego, e.caps)
		if errs != nil {
			return rego.PreparedEvalQuery{}, runstate.Fields{}, &ModuleError{Module: m.Name, Errors: errs}
		}
		file := tenantFilePrefix + m.Name
		if _, dup := parsed[file]; dup {
			return rego.PreparedEvalQuery{}, runstate.Fields{}, &ModuleError{Module: m.Name, Errors: []CompileError{{Message: "module given twice"}}}
		}
		parsed[file] = pm
	}
	return e.prepare(s.base, parsed)
}

// prepare compiles the base set with the tenant modules and prepares query;
// it reports the members of the run context the modules read.
func (e *Engine) prepare(base *baseSet, tenant map[string]*ast.Module) (rego.PreparedEvalQuery, runstate.Fields, error) {
	e.prepares.Add(1)
	c, errs := compileModules(base, tenant, e.caps)
	if len(errs) > 0 {
		return rego.PreparedEvalQuery{}, runstate.Fields{}, moduleErrorFor(errs)
	}
	query := emptyQuery
	if mod := collectModule(c); mod != nil {
		withCollect := maps.Clone(tenant)
		if withCollect == nil {
			withCollect = map[string]*ast.Module{}
		}
		withCollect["svc_internal_collect"] = mod
		var errs ast.Errors
		if c, errs = compileModules(base, withCollect, e.caps); len(errs) > 0 {
			return rego.PreparedEvalQuery{}, runstate.Fields{}, fmt.Errorf("%w: %w", errCollect, errs)
		}
		query = collectQuery
	}
	body, err := ast.ParseBodyWithOpts(query, parserOptions(e.caps))
	if err != nil {
		return rego.PreparedEvalQuery{}, runstate.Fields{}, fmt.Errorf("policy: parse query: %w", err)
	}
	pq, err := rego.New(
		rego.Compiler(c),
		rego.ParsedQuery(body),
		rego.Capabilities(e.caps),
		rego.StrictBuiltinErrors(true),
	).PrepareForEval(context.Background())
	if err != nil {
		return rego.PreparedEvalQuery{}, runstate.Fields{}, fmt.Errorf("policy: prepare query: %w", err)
	}
	return pq, runFields(c.Modules), nil
}

// moduleErrorFor attributes compile errors to the module of the first one.
func moduleErrorFor(errs ast.Errors) error {
	file := ""
	if errs[0].Location != nil {
		file = errs[0].Location.File
	}
	name := file
	if n, ok := strings.CutPrefix(file, tenantFilePrefix); ok {
		name = n
	}
	return &ModuleError{Module: name, Errors: toCompileErrors(errs, file)}
}

// decodeResults turns the query's collected results, a set of [module name,
// result] pairs, into RawResults. It is rego's GenerateJSON hook, so no
// generic JSON value is built on the way.
func decodeResults(t *ast.Term, _ *rego.EvalContext) (any, error) {
	pairs, ok := t.Value.(ast.Set)
	if !ok {
		return nil, errors.New("policy: results are not a set")
	}
	out := make([]RawResult, 0, pairs.Len())
	var err error
	pairs.Foreach(func(p *ast.Term) {
		pair, ok := p.Value.(*ast.Array)
		if !ok || pair.Len() != 2 {
			err = errors.New("policy: malformed module results")
			return
		}
		name, _ := pair.Elem(0).Value.(ast.String)
		out = append(out, decodeResult(string(name), pair.Elem(1).Value))
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// decodeResult reads one results object. Anything malformed yields a result
// with Decision "" (a deny for Combine) so that a broken policy fails closed.
func decodeResult(module string, v ast.Value) RawResult {
	r := RawResult{Module: module, Policy: module}
	obj, ok := v.(ast.Object)
	if !ok {
		return r
	}
	if s, ok := stringField(obj, "decision"); ok {
		r.Decision = s
	}
	if s, ok := stringField(obj, "reason"); ok {
		r.Reason = s
	}
	if s, ok := stringField(obj, "policy"); ok && s != "" {
		r.Policy = s
	}
	if f := obj.Get(ast.InternedTerm("redact_fields")); f != nil {
		arr, ok := f.Value.(*ast.Array)
		if !ok {
			r.Decision = ""
			return r
		}
		r.RedactFields = make([]string, 0, arr.Len())
		for i := range arr.Len() {
			s, ok := arr.Elem(i).Value.(ast.String)
			if !ok {
				r.Decision = ""
				return r
			}
			r.RedactFields = append(r.RedactFields, string(s))
		}
	}
	return r
}

func stringField(obj ast.Object, key string) (string, bool) {
	t := obj.Get(ast.InternedTerm(key))
	if t == nil {
		return "", false
	}
	s, ok := t.Value.(ast.String)
	return string(s), ok
}
