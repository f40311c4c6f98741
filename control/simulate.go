package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"svc/actors"
	"svc/persistence"
	"svc/rules/policy"
	"svc/rules/simulate"
	"svc/runstate"
)

// Policy simulation (CONTRACT §18): a candidate policy set re-decides a
// tenant's recorded decisions, read a page at a time in the order they
// were made; nothing is written. One simulation runs per tenant and at
// most simulationSlots per node, so one tenant cannot take every core from
// the others' live calls; a simulation yields between pages.

// Simulation limits.
const (
	// DefaultSimulationLimit is how many of the newest decisions of the
	// range a simulation re-decides without a limit.
	DefaultSimulationLimit = 10_000
	// MaxSimulationLimit bounds limit.
	MaxSimulationLimit = 1_000_000
	// DefaultSimulationRange is the range without from and to: the last
	// 24 hours.
	DefaultSimulationRange = 24 * time.Hour
	// maxCandidateModules bounds the candidate modules and removals.
	maxCandidateModules = 100
	simulationPage      = 500
	simulationSlots     = 2
)

// Simulation is a simulation as an operator asks for it: Policies are
// tenant modules added or replacing those of the same name, Remove names
// tenant policies left out; the newest Limit decisions of [From, To) are
// re-decided in Mode (simulate.AsRecorded or simulate.Refold).
type Simulation struct {
	Policies []policy.Module
	Remove   []string
	From, To time.Time
	Limit    int
	Mode     string
}

// SimulationResult is a simulation's report, with what it covered.
type SimulationResult struct {
	simulate.Report
	Mode     string
	From, To time.Time
}

// simulations bounds the simulations running on this node.
type simulations struct {
	mu      sync.Mutex
	running map[string]bool
	slots   chan struct{}
}

func newSimulations() *simulations {
	return &simulations{running: map[string]bool{}, slots: make(chan struct{}, simulationSlots)}
}

// acquire takes the tenant's simulation and a node slot, or refuses.
func (s *simulations) acquire(tenantID string) (release func(), err error) {
	busy := &Refusal{Kind: Unavailable, What: "simulation", Code: "simulation_busy", RetryAfter: 5 * time.Second}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running[tenantID] {
		busy.Message = "a simulation of this tenant's decisions is running already; try again when it ends"
		return nil, busy
	}
	select {
	case s.slots <- struct{}{}:
	default:
		busy.Message = "this node runs as many simulations as it may; try again shortly"
		return nil, busy
	}
	s.running[tenantID] = true
	return func() {
		s.mu.Lock()
		delete(s.running, tenantID)
		s.mu.Unlock()
		<-s.slots
	}, nil
}

// Simulate re-decides the tenant's recorded decisions with the candidate
// policy set. A candidate module that does not compile: Invalid
// (policy_compile_error, naming the module, each error's line and
// column); a removal of a policy the tenant does not have, an unknown mode
// or a range that ends before it starts: Invalid.
func (p *Plane) Simulate(ctx context.Context, op Operator, sim Simulation) (SimulationResult, error) {
	if err := normalizeSimulation(&sim); err != nil {
		return SimulationResult{}, err
	}
	mods, err := p.candidateModules(ctx, op.TenantID, sim)
	if err != nil {
		return SimulationResult{}, err
	}
	cand, err := p.d.Engine.PrepareCandidate(mods)
	var me *policy.ModuleError
	if errors.As(err, &me) {
		return SimulationResult{}, &Refusal{Kind: Invalid, Code: "policy_compile_error",
			Message: fmt.Sprintf("module %s does not compile", me.Module),
			Details: map[string]any{"module": me.Module, "errors": compileDetails("", me.Errors)}}
	}
	if err != nil {
		return SimulationResult{}, err
	}
	release, err := p.sims.acquire(op.TenantID)
	if err != nil {
		return SimulationResult{}, err
	}
	defer release()
	eval := func(ctx context.Context, in policy.Input) (policy.Result, error) {
		return p.d.Engine.EvaluateCandidate(ctx, cand, in)
	}
	sr := simulate.New(eval, sim.Mode, cand.RunFields())
	facts := newCallFacts(p.d.Store, op.TenantID)
	floor, err := p.d.Store.SimulationFloor(ctx, op.TenantID, sim.From, sim.To, sim.Limit)
	if err != nil {
		return SimulationResult{}, err
	}
	y := p.yielder()
	for after := floor; ; {
		y.start()
		page, err := p.d.Store.SimulationDecisions(ctx, op.TenantID, sim.From, sim.To, after, simulationPage)
		if err != nil {
			return SimulationResult{}, err
		}
		for i := range page {
			r := facts.recorded(ctx, &page[i])
			if err := sr.Add(ctx, &r); err != nil {
				return SimulationResult{}, err
			}
		}
		if len(page) < simulationPage {
			return SimulationResult{Report: sr.Report(), Mode: sim.Mode, From: sim.From, To: sim.To}, nil
		}
		after = page[len(page)-1].Seq
		if err := y.yield(ctx); err != nil {
			return SimulationResult{}, err
		}
	}
}

// yieldShare is the most of a core a simulation takes while its node is
// busy deciding live calls (at least yieldBusyRate a second during its
// last page): it then rests (1/yieldShare - 1) times as long as the page
// took. Measured with make bench (target sim, c=32): at 25% the authorize
// p99 rose by a third; at 5% it stays within this machine's noise. A node
// deciding fewer calls lets a simulation run at full speed.
const (
	yieldShare    = 0.05
	yieldBusyRate = 200.0
)

// yielder slows a simulation down while the node decides live calls.
type yielder struct {
	live      LiveCalls
	began     time.Time
	decisions uint64
}

func (p *Plane) yielder() *yielder { return &yielder{live: p.d.Live} }

func (y *yielder) start() {
	y.began = time.Now()
	if y.live != nil {
		y.decisions, _, _ = y.live.Stats()
	}
}

// yield rests after a page during which the node was busy deciding live
// calls, and lets the scheduler run others in any case.
func (y *yielder) yield(ctx context.Context) error {
	runtime.Gosched()
	if y.live == nil {
		return nil
	}
	now, _, _ := y.live.Stats()
	rest := restAfter(time.Since(y.began), now-y.decisions)
	if rest == 0 {
		return nil
	}
	t := time.NewTimer(rest)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// restAfter is how long a simulation rests after a page that took took,
// during which its node decided live calls: none while the node decided
// fewer than yieldBusyRate a second, else long enough that the page's
// share of the time is yieldShare.
func restAfter(took time.Duration, live uint64) time.Duration {
	if took <= 0 || float64(live) < yieldBusyRate*took.Seconds() {
		return 0
	}
	return time.Duration(float64(took) * (1/yieldShare - 1))
}

func normalizeSimulation(sim *Simulation) error {
	switch sim.Mode {
	case "":
		sim.Mode = simulate.AsRecorded
	case simulate.AsRecorded, simulate.Refold:
	default:
		return invalid("mode", "must be %s or %s, not %q", simulate.AsRecorded, simulate.Refold, sim.Mode)
	}
	if sim.Limit == 0 {
		sim.Limit = DefaultSimulationLimit
	}
	if sim.Limit < 1 || sim.Limit > MaxSimulationLimit {
		return invalid("limit", "must be between 1 and %d", MaxSimulationLimit)
	}
	if sim.To.IsZero() {
		sim.To = time.Now()
	}
	if sim.From.IsZero() {
		sim.From = sim.To.Add(-DefaultSimulationRange)
	}
	if !sim.From.Before(sim.To) {
		return invalid("from", "must be before to")
	}
	if len(sim.Policies) > maxCandidateModules || len(sim.Remove) > maxCandidateModules {
		return invalid("policies", "at most %d candidate modules and %d removals", maxCandidateModules, maxCandidateModules)
	}
	return nil
}

// candidateModules are the tenant's enabled policies as the candidate
// leaves them (shadow policies never decide, so they are not in it; a
// candidate module of a shadow policy's name decides).
func (p *Plane) candidateModules(ctx context.Context, tenantID string, sim Simulation) ([]policy.Module, error) {
	cur, err := p.d.Store.ListPolicies(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, pol := range cur {
		known[pol.Name] = true
	}
	drop := map[string]bool{}
	for _, name := range sim.Remove {
		if !known[name] {
			return nil, invalid("remove", "the tenant has no policy named %q", name)
		}
		drop[name] = true
	}
	given := map[string]bool{}
	for _, m := range sim.Policies {
		if given[m.Name] {
			return nil, invalid("policies", "module %q is given twice", m.Name)
		}
		if drop[m.Name] {
			return nil, invalid("policies", "module %q is both given and removed", m.Name)
		}
		given[m.Name] = true
	}
	mods := append([]policy.Module(nil), sim.Policies...)
	for _, pol := range cur {
		if pol.Enabled && pol.Mode != persistence.PolicyShadow && !given[pol.Name] && !drop[pol.Name] {
			mods = append(mods, policy.Module{Name: pol.Name, Rego: pol.Rego})
		}
	}
	return mods, nil
}

// callFacts rebuilds a recorded decision's input: the call, its effective
// trust, its environment, mutates_state (the request's claim or the
// registry's, as the decision recorded it) and its run context as
// recorded; the agent, the skill registry and the MCP registry as they are
// now (read once per agent, tool and MCP tool).
type callFacts struct {
	store    persistence.Store
	tenantID string
	agents   map[string]policy.AgentInput
	skills   map[string]*persistence.Skill
	mcp      map[string]*policy.MCPInput
}

// maxFactEntries bounds each cache of callFacts; past it the facts are read
// again (a simulation of many agents or tools reads more, never grows).
const maxFactEntries = 10_000

func newCallFacts(store persistence.Store, tenantID string) *callFacts {
	return &callFacts{store: store, tenantID: tenantID, agents: map[string]policy.AgentInput{}, skills: map[string]*persistence.Skill{},
		mcp: map[string]*policy.MCPInput{}}
}

func (f *callFacts) recorded(ctx context.Context, d *persistence.Decision) simulate.Recorded {
	r := simulate.Recorded{DecisionID: d.ID, AgentID: d.AgentID, Decision: d.Decision, Reason: d.Reason, MatchedPolicies: d.MatchedPolicyIDs,
		At: d.CreatedAt.UnixMilli()}
	if d.RunID != nil {
		r.RunID = *d.RunID
	}
	var tc policy.ToolCall
	dec := json.NewDecoder(bytes.NewReader(d.ToolCall))
	dec.UseNumber()
	if len(d.ToolCall) == 0 || dec.Decode(&tc) != nil || tc.Tool == "" {
		r.NoCall = true
		return r
	}
	if tc.Parameters == nil {
		tc.Parameters = map[string]any{}
	}
	in := policy.Input{TenantID: f.tenantID, Agent: f.agent(ctx, d.AgentID), ToolCall: tc, MutatesState: d.MutatesState,
		TrustLevel: d.RootTrustLevel, RootTrustLevel: d.RootTrustLevel} // the effective trust the policy saw
	if d.Environment != nil {
		in.Environment = *d.Environment
	}
	if sk := f.skill(ctx, tc.Tool); sk != nil {
		if act, ok := sk.Actions[tc.Action]; ok {
			in.Skill, r.Facts.Skill = actors.SkillFacts(*sk, tc.Action, act)
		}
	}
	if server, ok := strings.CutPrefix(tc.Tool, "mcp:"); ok {
		in.MCP = f.mcpInput(ctx, server, tc.Action)
	}
	if len(d.RunContext) > 0 {
		if c, err := runstate.ParseContext(d.RunContext); err == nil {
			in.Run, in.AgentHistory, in.RunKey = c.Run, c.AgentHistory, d.RunContext
			r.Context = c
		}
	}
	r.Facts.RequestMutates = d.MutatesState
	r.Input = in
	return r
}

func (f *callFacts) agent(ctx context.Context, id string) policy.AgentInput {
	if a, ok := f.agents[id]; ok {
		return a
	}
	in := policy.AgentInput{ID: id}
	if a, err := f.store.GetAgent(ctx, f.tenantID, id); err == nil {
		in = policy.AgentInput{ID: a.ID, Name: a.Name, RiskTier: a.RiskTier, Status: a.Status}
	}
	if len(f.agents) < maxFactEntries {
		f.agents[id] = in
	}
	return in
}

func (f *callFacts) skill(ctx context.Context, key string) *persistence.Skill {
	if sk, ok := f.skills[key]; ok {
		return sk
	}
	var out *persistence.Skill
	if sk, err := f.store.GetSkill(ctx, f.tenantID, key); err == nil {
		out = &sk
	}
	if len(f.skills) < maxFactEntries {
		f.skills[key] = out
	}
	return out
}

func (f *callFacts) mcpInput(ctx context.Context, server, tool string) *policy.MCPInput {
	key := server + "\x00" + tool
	if in, ok := f.mcp[key]; ok {
		return in
	}
	in := &policy.MCPInput{ServerKey: server}
	if srv, err := f.store.GetMCPServer(ctx, f.tenantID, server); err == nil {
		in.ServerStatus, in.TrustLevel = srv.Status, srv.TrustLevel
		if t, err := f.store.GetMCPTool(ctx, f.tenantID, server, tool); err == nil {
			in.ToolStatus = t.Status
		}
	}
	if len(f.mcp) < maxFactEntries {
		f.mcp[key] = in
	}
	return in
}
