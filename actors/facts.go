package actors

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	lru "github.com/hashicorp/golang-lru/v2"

	"svc/messages"
	"svc/persistence"
	"svc/persistence/sharedstate"
	"svc/rules/authz"
	"svc/rules/policy"
	"svc/runstate"
)

// What the agent actors read to decide a call (SPEC 4.2 rules 3 to 9 and
// 13), and the node's caches of it: the skill registry, each tenant's
// policy version and risk settings. One factSource serves every agent actor of
// a node; its caches are safe for concurrent use and dropped by the
// invalidation hub.

// agentFacts is what an agent actor reads to decide a call: exactly the
// methods its rules call (agent.go), so that the rule order can be tested
// over a fake. *factSource is the node's implementation.
type agentFacts interface {
	// touch records the agent's last-seen time (rule 3, best effort).
	touch(h messages.Heartbeat)
	limits(ctx context.Context, tenantID, agentID string) (authz.Limits, error)
	bindings(ctx context.Context, tenantID, agentID string) ([]string, error)
	// claimNonce takes the agent's replay nonce for the replay window
	// (rule 13): fresh false when it was taken before.
	claimNonce(ctx context.Context, tenantID, agentID, nonce string) (fresh bool, err error)
	skill(ctx context.Context, tenantID, key string) skillEntry
	// mcpInput is the policy input's mcp object of an "mcp:" tool.
	mcpInput(ctx context.Context, tenantID, serverKey, toolKey string) *policy.MCPInput
	ensurePolicies(ctx context.Context, tenantID string) error
	evaluatePolicy(ctx context.Context, tenantID string, in policy.Input) (policy.Result, error)
	// shadowOutcomes evaluates the tenant's shadow policies on the call
	// (nil without any, or when they fail); recordShadow turns them into
	// the decision's record and counts them (shadow.go).
	shadowOutcomes(ctx context.Context, tenantID string, in policy.Input) []policy.ShadowOutcome
	recordShadow(outs []policy.ShadowOutcome) []persistence.ShadowOutcome
	// approvalTTL is the lifetime of a new approval; on false when the
	// node creates and checks no approvals.
	approvalTTL() (ttl time.Duration, on bool)
	// checkApproval is the check of a presented approval without
	// reserving it (a dry run), reserveApproval the check that reserves
	// it: "" when it grants the call, else the deny reason (CONTRACT §4).
	checkApproval(ctx context.Context, tenantID, id, agentID, hash string) (string, error)
	reserveApproval(ctx context.Context, tenantID, id, agentID, hash string) (string, error)
	riskSettings(ctx context.Context, tenantID string) persistence.RiskSettings
	recentDenials(ctx context.Context, tenantID, agentID string) int
	// runFields: what the tenant's policies read of the run context
	// (CONTRACT §16); when they read some, runContext reserves the call's
	// attempt (a dry run peeks) and returns what the policy sees
	// (runcontext.go).
	runFields(tenantID string) runstate.Fields
	runContext(ctx context.Context, m *messages.Authorize, a *runstate.Attempt, f runstate.Fields) (*runTicket, error)
	logger() hclog.Logger
}

var _ agentFacts = (*factSource)(nil)

type factSource struct {
	store     persistence.Store
	shared    sharedstate.State
	engine    *policy.Engine
	heartbeat func(messages.Heartbeat)
	opt       AuthorizerOptions
	log       hclog.Logger

	skills  *lru.Cache[string, skillEntry] // nil when the capacity is 0
	tenants sync.Map                       // tenant → *tenantEntry
	mcp     *mcpFacts
	// skillGen advances with every skill drop: a fill that read the store
	// before a drop is not cached (it could put back what was dropped).
	skillGen atomic.Uint64
	// seeding: a restore of the run taint floors runs (runcontext.go).
	seeding atomic.Bool
	// shadowCounts counts shadow policy outcomes (shadow.go).
	shadowCounts ShadowCounts
}

type skillEntry struct {
	skill persistence.Skill
	found bool
}

// tenantEntry caches a tenant's policy version and risk settings.
type tenantEntry struct {
	mu          sync.Mutex
	policyVer   int64
	policyAt    time.Time
	risk        persistence.RiskSettings
	riskAt      time.Time
	riskLoaded  bool
	policyReady bool
}

// policyCheckEvery bounds how stale a node's view of a tenant's policy
// version may be when an invalidation message from another node is lost.
const policyCheckEvery = time.Second

func newFactSource(store persistence.Store, shared sharedstate.State, engine *policy.Engine, heartbeat func(messages.Heartbeat),
	o AuthorizerOptions, log hclog.Logger) (*factSource, error) {
	f := &factSource{store: store, shared: shared, engine: engine, heartbeat: heartbeat, opt: o, log: log}
	if o.SkillCacheCapacity > 0 {
		c, err := lru.New[string, skillEntry](o.SkillCacheCapacity)
		if err != nil {
			return nil, fmt.Errorf("actors: skill cache: %w", err)
		}
		f.skills = c
	}
	var err error
	if f.mcp, err = newMCPFacts(store, o.MCPServerCacheCapacity, o.MCPToolCacheCapacity); err != nil {
		return nil, err
	}
	return f, nil
}

// drop applies an invalidation to the caches.
func (f *factSource) drop(inv messages.Invalidation) {
	switch inv.Kind {
	case messages.CacheSkill:
		f.skillGen.Add(1)
		if f.skills != nil {
			f.skills.Remove(inv.TenantID + "\x00" + inv.Key)
		}
	case messages.CachePolicy, messages.CacheRisk:
		f.tenants.Delete(inv.TenantID)
	case messages.CacheBasePolicy:
		if err := f.engine.ReloadBase(); err != nil {
			f.log.Error("base policy reload from another node failed; keeping the current set", "error", err)
		}
	case messages.CacheAll:
		f.skillGen.Add(1)
		if f.skills != nil {
			f.skills.Purge()
		}
		f.tenants.Range(func(k, _ any) bool { f.tenants.Delete(k); return true })
	}
}

// limits takes the agent's rate token and counts its quota (rule 3's
// facts); the quota is counted only when a token was given.
func (f *factSource) limits(ctx context.Context, tenantID, agentID string) (authz.Limits, error) {
	lim := authz.Limits{Quota: f.opt.QuotaLimit}
	var err error
	lim.Token, lim.TokenAfter, err = f.shared.TakeToken(ctx, "rl:"+tenantID+":"+agentID, f.opt.RateCapacity, f.opt.RateRefill, 1)
	if err != nil || !lim.Token || f.opt.QuotaLimit <= 0 {
		return lim, err
	}
	lim.QuotaUsed, lim.QuotaAfter, err = f.shared.Incr(ctx, "quota:"+tenantID+":"+agentID, f.opt.QuotaWindow)
	return lim, err
}

func (f *factSource) touch(h messages.Heartbeat) { f.heartbeat(h) }

func (f *factSource) logger() hclog.Logger { return f.log }

func (f *factSource) claimNonce(ctx context.Context, tenantID, agentID, nonce string) (bool, error) {
	return f.shared.SetNX(ctx, nonceKey(tenantID, agentID, nonce), "1", f.opt.ReplayWindow)
}

func (f *factSource) mcpInput(ctx context.Context, tenantID, serverKey, toolKey string) *policy.MCPInput {
	return f.mcp.input(ctx, tenantID, serverKey, toolKey)
}

func (f *factSource) evaluatePolicy(ctx context.Context, tenantID string, in policy.Input) (policy.Result, error) {
	return f.engine.Evaluate(ctx, tenantID, in)
}

func (f *factSource) approvalTTL() (time.Duration, bool) {
	if f.opt.Approvals == nil {
		return 0, false
	}
	return f.opt.Approvals.TTL(), true
}

func (f *factSource) checkApproval(ctx context.Context, tenantID, id, agentID, hash string) (string, error) {
	ap, err := f.store.GetApproval(ctx, tenantID, id)
	if errors.Is(err, persistence.ErrNotFound) {
		ap, err = persistence.Approval{}, nil
	}
	return classifyApproval(ap, agentID, hash, f.opt.Approvals.Now(), false), err
}

func (f *factSource) reserveApproval(ctx context.Context, tenantID, id, agentID, hash string) (string, error) {
	reason, _, err := f.opt.Approvals.Reserve(ctx, tenantID, id, agentID, hash)
	return reason, err
}

// bindings are the agent's tool permission bindings (rule 6's facts).
func (f *factSource) bindings(ctx context.Context, tenantID, agentID string) ([]string, error) {
	perms, err := f.store.ListPermissions(ctx, tenantID, agentID)
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(perms))
	for i, p := range perms {
		keys[i] = p.ToolKey
	}
	return keys, nil
}

func (f *factSource) runFields(tenantID string) runstate.Fields {
	if f.opt.Runs == nil {
		return runstate.Fields{}
	}
	return f.engine.RunFields(tenantID)
}

// recentDenials is the agent's count of denies in its escalation window
// (the risk score's input; 0 when unknown).
func (f *factSource) recentDenials(ctx context.Context, tenantID, agentID string) int {
	v, ok, err := f.shared.Get(ctx, denyCountKey(tenantID, agentID))
	if err != nil || !ok {
		return 0
	}
	n, _ := strconv.Atoi(v)
	return n
}

// skill reads the registry through the bounded cache.
func (f *factSource) skill(ctx context.Context, tenantID, key string) skillEntry {
	ck := tenantID + "\x00" + key
	if f.skills != nil {
		if e, ok := f.skills.Get(ck); ok {
			return e
		}
	}
	gen := f.skillGen.Load()
	sk, err := f.store.GetSkill(ctx, tenantID, key)
	e := skillEntry{skill: sk, found: err == nil}
	if err != nil && !errors.Is(err, persistence.ErrNotFound) {
		return e // not cached: a transient failure must not stick
	}
	if f.skills != nil && f.skillGen.Load() == gen {
		f.skills.Add(ck, e)
	}
	return e
}

func (f *factSource) tenant(tenantID string) *tenantEntry {
	e, _ := f.tenants.LoadOrStore(tenantID, &tenantEntry{})
	return e.(*tenantEntry) //nolint:errcheck // only *tenantEntry is stored
}

// riskSettings returns the tenant's risk settings, cached for
// SVC_RISK_WEIGHTS_CACHE_TTL_SECS (a PUT invalidates at once).
func (f *factSource) riskSettings(ctx context.Context, tenantID string) persistence.RiskSettings {
	e := f.tenant(tenantID)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.riskLoaded && time.Since(e.riskAt) < f.opt.RiskWeightsTTL {
		return e.risk
	}
	rs, err := f.store.GetRiskSettings(ctx, tenantID)
	if err != nil {
		if e.riskLoaded {
			return e.risk
		}
		return persistence.RiskSettings{DenialThreshold: 5, WindowMinutes: 60}
	}
	e.risk, e.riskAt, e.riskLoaded = rs, time.Now(), true
	return rs
}

// ensurePolicies makes sure the engine holds the tenant's current policy
// version. Policy writes prepare the new version themselves (PreparePolicies)
// and other nodes learn of it by invalidation; this check, at most once a
// second per tenant, is the safety net.
func (f *factSource) ensurePolicies(ctx context.Context, tenantID string) error {
	e := f.tenant(tenantID)
	e.mu.Lock()
	fresh := e.policyReady && time.Since(e.policyAt) < policyCheckEvery
	e.mu.Unlock()
	if fresh {
		return nil
	}
	v, err := f.store.PolicyVersion(ctx, tenantID)
	if err != nil {
		return err
	}
	if !f.engine.HasTenant(tenantID, strconv.FormatInt(v, 10)) {
		if err := f.preparePolicies(ctx, tenantID); err != nil {
			return err
		}
	}
	e.mu.Lock()
	e.policyVer, e.policyAt, e.policyReady = v, time.Now(), true
	e.mu.Unlock()
	return nil
}

// PreparePolicies loads the tenant's enabled policies and prepares their
// query (off the hot path: called by policy writes and invalidations).
func (f *factSource) preparePolicies(ctx context.Context, tenantID string) error {
	v, err := f.store.PolicyVersion(ctx, tenantID)
	if err != nil {
		return err
	}
	ps, err := f.store.ListPolicies(ctx, tenantID)
	if err != nil {
		return err
	}
	mods := make([]policy.Module, 0, len(ps))
	for _, p := range ps {
		if p.Enabled {
			mods = append(mods, policy.Module{Name: p.Name, Rego: p.Rego, Shadow: p.Mode == persistence.PolicyShadow})
		}
	}
	return f.engine.SetTenantPolicies(tenantID, strconv.FormatInt(v, 10), mods)
}
