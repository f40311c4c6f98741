package httpapi

import (
	"strings"
	"time"

	"svc/control"
	"svc/rules/policy"
	"svc/rules/simulate"
)

// simulateBody is POST /policies/simulate (CONTRACT §18).
type simulateBody struct {
	Policies []simulateModule `json:"policies" openapi:"maxItems=100"`
	Remove   []string         `json:"remove" openapi:"maxItems=100"`
	From     *string          `json:"from" openapi:"format=date-time"`
	To       *string          `json:"to" openapi:"format=date-time"`
	Limit    *int             `json:"limit" openapi:"min=1,max=1000000"`
	Mode     *string          `json:"mode" openapi:"enum=as_recorded|refold"`
}

type simulateModule struct {
	Name string `json:"name" openapi:"required,pattern=key"`
	Rego string `json:"rego" openapi:"required,minLength=1"`
}

// simulationView is the simulation's answer.
type simulationView struct {
	Evaluated      int            `json:"evaluated"`
	Changed        int            `json:"changed"`
	Skipped        int            `json:"skipped"`
	SkippedReasons map[string]int `json:"skipped_reasons"`
	Transitions    map[string]int `json:"transitions"`
	Changes        []changeView   `json:"changes"`
	// Beside CONTRACT §18's fields: what the simulation covered and what
	// it could not see.
	Mode                  string    `json:"mode" openapi:"enum=as_recorded|refold"`
	From                  time.Time `json:"from"`
	To                    time.Time `json:"to"`
	WithoutContext        int       `json:"without_context"`
	Counterfactual        int       `json:"counterfactual"`
	CounterfactualChanged int       `json:"counterfactual_changed"`
	RunsDiverged          int       `json:"runs_diverged"`
}

type changeView struct {
	DecisionID     string   `json:"decision_id" openapi:"format=uuid"`
	Recorded       string   `json:"recorded"`
	Simulated      string   `json:"simulated"`
	Policies       []string `json:"policies"`
	Counterfactual bool     `json:"counterfactual"`
}

func (s *Server) registerSimulation() {
	s.register(Route{Method: "POST", Path: "/policies/simulate", Access: AccessAdmin, Tag: "policies", Body: &simulateBody{},
		Resp: simulationView{}, Errors: []int{503},
		Summary: "Re-decide the tenant's recorded decisions with a candidate policy set, writing nothing (CONTRACT §18): policies " +
			"(name and rego: tenant modules added, or replacing the policy of that name), remove (names of tenant policies left out), " +
			"from and to (RFC 3339; default the last 24 hours), limit (the newest this many decisions of the range; default 10,000, " +
			"at most 1,000,000), mode (as_recorded, the default: each decision on the run context it kept; refold: the calls of a " +
			"run after its first changed decision are marked counterfactual, counted apart, and evaluated on their run context " +
			"re-settled with the simulated outcomes: the run's and the agent's decision counts, consecutive denies, last allowed " +
			"call, recent decisions and deny windows as the candidate would have left them). Each decision's input is rebuilt: " +
			"the call, its effective trust, environment, mutates_state and run context as recorded; the agent, the skill registry " +
			"and the MCP registry as they are now. Decisions no policy made alone are skipped (skipped_reasons: agent_frozen, " +
			"replay, approval_presented, policy_failed, no_tool_call, candidate_error); without_context counts those evaluated " +
			"without the run context the candidate reads (recorded before it was kept). The answer: evaluated, changed, skipped, " +
			"transitions (\"<recorded>-><simulated>\": count), changes (at most 1,000: decision_id, recorded, simulated, the " +
			"policies that differ, counterfactual). A candidate module that does not compile: 400 policy_compile_error with " +
			"details.module and details.errors (line, col, message). One simulation per tenant and two per node at a time: 503 " +
			"simulation_busy with Retry-After.",
		Handle: s.simulatePolicies})
}

// simulatePolicies serves POST /policies/simulate.
func (s *Server) simulatePolicies(c *Call) (any, error) {
	b := bodyOf[simulateBody](c)
	sim := control.Simulation{Remove: b.Remove}
	for _, m := range b.Policies {
		if !policyNameRE.MatchString(m.Name) {
			return nil, invalidField("policies", "module name %q must match [a-z0-9_]{1,64}", m.Name)
		}
		sim.Policies = append(sim.Policies, policy.Module{Name: m.Name, Rego: m.Rego})
	}
	for name, dst := range map[string]struct {
		v *string
		t *time.Time
	}{"from": {b.From, &sim.From}, "to": {b.To, &sim.To}} {
		if dst.v == nil {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(*dst.v))
		if err != nil {
			return nil, invalidField(name, "must be an RFC 3339 time, not %q", *dst.v)
		}
		*dst.t = t
	}
	if b.Limit != nil {
		if *b.Limit < 1 {
			return nil, invalidField("limit", "must be between 1 and %d", control.MaxSimulationLimit)
		}
		sim.Limit = *b.Limit
	}
	if b.Mode != nil {
		sim.Mode = *b.Mode
		if sim.Mode == "" {
			return nil, invalidField("mode", "must be %s or %s", simulate.AsRecorded, simulate.Refold)
		}
	}
	r, err := s.Control.Simulate(c.Ctx(), operator(c.Principal), sim)
	if err != nil {
		return nil, err
	}
	v := simulationView{Evaluated: r.Evaluated, Changed: r.Changed, Skipped: r.Skipped, SkippedReasons: r.SkippedReasons,
		Transitions: r.Transitions, Changes: make([]changeView, len(r.Changes)), Mode: r.Mode, From: r.From.UTC(), To: r.To.UTC(),
		WithoutContext: r.WithoutContext, Counterfactual: r.Counterfactual, CounterfactualChanged: r.CounterfactualChanged,
		RunsDiverged: r.RunsDiverged}
	for i, ch := range r.Changes {
		v.Changes[i] = changeView{DecisionID: ch.DecisionID, Recorded: ch.Recorded, Simulated: ch.Simulated, Policies: ch.Policies,
			Counterfactual: ch.Counterfactual}
	}
	return v, nil
}
