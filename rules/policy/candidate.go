package policy

import (
	"context"
	"slices"

	"github.com/open-policy-agent/opa/v1/rego"

	"svc/runstate"
)

// Candidate is a policy set prepared for simulation: the base set in force
// with a tenant's candidate modules, evaluated like the tenant's own
// query but never installed, so live calls never see it.
type Candidate struct {
	query   rego.PreparedEvalQuery
	usesRun runstate.Fields
}

// PrepareCandidate validates and prepares the base set with mods (the
// tenant's modules as the candidate would leave them: added, replaced or
// removed already). A module that fails validation: a *ModuleError naming
// it, with the line and column of each error.
func (e *Engine) PrepareCandidate(mods []Module) (*Candidate, error) {
	q, uses, err := e.prepareTenant(e.snapshot.Load(), slices.Clone(mods))
	if err != nil {
		return nil, err
	}
	return &Candidate{query: q, usesRun: uses}, nil
}

// RunFields are the members of input.run and input.agent_history the
// candidate reads.
func (c *Candidate) RunFields() runstate.Fields { return c.usesRun }

// EvaluateCandidate decides one call with the candidate, as Evaluate does
// with the tenant's installed query.
func (e *Engine) EvaluateCandidate(ctx context.Context, c *Candidate, in Input) (Result, error) {
	raw, err := e.eval(ctx, c.query, &in)
	if err != nil {
		return Result{}, err
	}
	return Combine(raw), nil
}
