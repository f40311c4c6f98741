package actors

import (
	"context"
	"encoding/json"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/hashicorp/go-hclog"

	"svc/messages"
	"svc/persistence/sharedstate"
	"svc/rules/gate"
)

// GateHost is the code host as the Security Gate calls it
// (codehost.Client): each call has its own timeout.
type GateHost interface {
	HeadSHA(ctx context.Context, pr gate.PR) (string, error)
	CreateCheckRun(ctx context.Context, pr gate.PR, sha string, o gate.Output) (int64, error)
	UpdateCheckRun(ctx context.Context, pr gate.PR, id int64, o gate.Output) error
	Comment(ctx context.Context, pr gate.PR, body string) error
}

// GateStats are the Security Gate's counters (/metrics).
type GateStats struct {
	// Decisions counts the decisions the gate took up; Dropped those it
	// had no room for; Failures the code-host calls that failed.
	Decisions, Dropped, Failures atomic.Uint64
}

// Shared-state lifetimes of the gate's records.
const (
	gateTTL     = 30 * 24 * time.Hour // tally, annotations, comment count, check run id
	gateLockTTL = time.Minute         // one flush: at most three calls of codehost.Timeout
	gateSHATTL  = time.Minute         // the head commit is read again after this
	gateWorkers = 16                  // pull requests worked on at once by one node
	gatePulls   = 200                 // pull requests listed per tenant
)

// securityGate is the pull-request Security Gate (SPEC 4.9 rules 1 to 6):
// it takes the decisions of the code-host tool on a pull request
// (<owner>/<repo>#<number>) from the event bus, so it is never on the
// authorize path (and a dry run, which emits no event, touches nothing).
// The tally, the annotations (at most 20), the comment count (at most 5
// per pull request) and the check run's id live in the shared state: in
// process on a lone node, in Valkey when clustered, so nodes keep one
// tally, update one check run and post at most 5 comments between them.
// One node at a time writes a pull request's check run (a lock in the
// shared state); a change that arrives meanwhile marks it dirty, and the
// writer writes again until it is clean. Code-host failures are logged,
// counted and dropped.
type securityGate struct {
	host    GateHost
	shared  sharedstate.State
	toolKey string
	node    string
	stats   *GateStats
	log     hclog.Logger
	work    chan struct{}
}

// NewSecurityGate returns the producer of the gate's actor: decisions of
// toolKey (SVC_CODEHOST_TOOL_KEY) go to host.
func NewSecurityGate(host GateHost, shared sharedstate.State, toolKey, node string, stats *GateStats, log hclog.Logger) actor.Producer {
	work := make(chan struct{}, gateWorkers)
	return func() actor.Actor {
		return &securityGate{host: host, shared: shared, toolKey: toolKey, node: node, stats: stats, log: log, work: work}
	}
}

// Receive implements actor.Actor.
func (g *securityGate) Receive(ctx actor.Context) {
	ev, ok := ctx.Message().(*messages.AseEvent)
	if !ok || ev.Kind != messages.KindAuthorizeDecision || ev.Tool != g.toolKey || ev.Resource == nil {
		return
	}
	pr, ok := gate.ParseResource(*ev.Resource)
	if !ok {
		return
	}
	d := gate.Decision{Decision: ev.Decision, Reason: ev.Reason, Action: ev.Action, AgentID: ev.AgentID, RiskScore: ev.RiskScore,
		MatchedPolicies: ev.MatchedPolicies}
	if ev.Evidence != nil && ev.Evidence.DecisionID != nil {
		d.ID = *ev.Evidence.DecisionID
	}
	select {
	case g.work <- struct{}{}:
		g.stats.Decisions.Add(1)
		go func() {
			defer func() { <-g.work }()
			g.take(ev.TenantID, pr, d)
		}()
	default:
		g.stats.Dropped.Add(1)
		g.log.Warn("security gate busy: decision dropped", "pull_request", pr.String(), "decision_id", d.ID)
	}
}

// gateKey prefixes a tenant's pull request's records.
func gateKey(tenantID string, pr gate.PR) string { return "gate:" + tenantID + ":" + pr.String() }

// take counts a decision, keeps its annotation, posts its comment and
// writes the check run.
func (g *securityGate) take(tenantID string, pr gate.PR, d gate.Decision) {
	ctx, cancel := ioContext(2 * time.Minute)
	defer cancel()
	key := gateKey(tenantID, pr)
	if _, _, err := g.shared.Incr(ctx, key+":"+gate.Bucket(d.Decision), gateTTL); err != nil {
		g.failed("count the decision", pr, err)
		return
	}
	if a, ok := gate.Annotate(d); ok {
		n, _, err := g.shared.Incr(ctx, key+":annotations", gateTTL)
		if err == nil && n <= gate.MaxAnnotations {
			raw, _ := json.Marshal(a)
			err = g.shared.Set(ctx, key+":annotation:"+strconv.FormatInt(n, 10), string(raw), gateTTL)
		}
		if err != nil {
			g.failed("keep the annotation", pr, err)
		}
	}
	if d.Decision == "deny" {
		n, _, err := g.shared.Incr(ctx, key+":comments", gateTTL)
		switch {
		case err != nil:
			g.failed("count the comment", pr, err)
		case n <= gate.MaxComments:
			if err := g.host.Comment(ctx, pr, gate.Comment(d)); err != nil {
				g.failed("comment", pr, err)
			}
		}
	}
	if err := g.shared.Set(ctx, key+":dirty", "1", gateTTL); err != nil {
		g.failed("mark the check run", pr, err)
		return
	}
	if _, err := g.shared.MarkSeen(ctx, "gate:"+tenantID+":pulls", pr.String(), time.Now(), gatePulls, gateTTL); err != nil {
		g.failed("list the pull request", pr, err)
	}
	g.flush(ctx, tenantID, pr)
}

// flush writes the check run while it is dirty, holding the pull
// request's lock; another node's change arriving meanwhile either finds
// the lock free or is seen dirty after it is released.
func (g *securityGate) flush(ctx context.Context, tenantID string, pr gate.PR) {
	key := gateKey(tenantID, pr)
	for range 5 {
		got, err := g.shared.SetNX(ctx, key+":lock", g.node, gateLockTTL)
		if err != nil || !got {
			return // the holder writes it
		}
		g.write(ctx, tenantID, pr)
		_ = g.shared.Del(ctx, key+":lock")
		if v, ok, err := g.shared.Get(ctx, key+":dirty"); err != nil || !ok || v != "1" {
			return
		}
	}
}

// write writes the check run until no change arrived while it did.
func (g *securityGate) write(ctx context.Context, tenantID string, pr gate.PR) {
	key := gateKey(tenantID, pr)
	for range 10 {
		if err := g.shared.Set(ctx, key+":dirty", "0", gateTTL); err != nil {
			g.failed("clear the mark", pr, err)
			return
		}
		out, err := g.output(ctx, key)
		if err != nil {
			g.failed("read the tally", pr, err)
			return
		}
		sha, err := g.head(ctx, key, pr)
		if err != nil {
			g.failed("read the head commit", pr, err)
			return
		}
		runKey := key + ":run:" + sha
		id, ok, err := g.shared.Get(ctx, runKey)
		if err != nil {
			g.failed("read the check run id", pr, err)
			return
		}
		if ok {
			n, _ := strconv.ParseInt(id, 10, 64)
			err = g.host.UpdateCheckRun(ctx, pr, n, out)
		} else {
			var n int64
			if n, err = g.host.CreateCheckRun(ctx, pr, sha, out); err == nil {
				id = strconv.FormatInt(n, 10)
				err = g.shared.Set(ctx, runKey, id, gateTTL)
			}
		}
		if err != nil {
			g.failed("write the check run", pr, err)
			return
		}
		if err := g.shared.Set(ctx, key+":shown", shown(sha, id, out), gateTTL); err != nil {
			g.failed("keep what the check run shows", pr, err)
		}
		if v, ok, err := g.shared.Get(ctx, key+":dirty"); err != nil || !ok || v != "1" {
			return
		}
	}
}

// shown records what the check run was last written with.
func shown(sha, id string, out gate.Output) string {
	raw, _ := json.Marshal(GateShown{HeadSHA: sha, CheckRunID: id, Conclusion: out.Tally.Conclusion(), Tally: out.Tally})
	return string(raw)
}

// GateShown is what a pull request's check run was last written with.
type GateShown struct {
	HeadSHA    string     `json:"head_sha"`
	CheckRunID string     `json:"check_run_id"`
	Conclusion string     `json:"conclusion"`
	Tally      gate.Tally `json:"tally"`
}

// GatePull is a pull request a tenant's agents touched: its tally now and
// what its check run shows (nil before the first write succeeded).
type GatePull struct {
	PR       gate.PR
	Tally    gate.Tally
	Comments int64
	Shown    *GateShown
}

// GatePulls lists the pull requests the tenant's agents touched, the most
// recent first (at most 200), from the shared state the gate keeps.
func GatePulls(ctx context.Context, shared sharedstate.State, tenantID string) ([]GatePull, error) {
	names, err := shared.Seen(ctx, "gate:"+tenantID+":pulls")
	if err != nil {
		return nil, err
	}
	out := make([]GatePull, 0, len(names))
	for _, name := range names {
		pr, ok := gate.ParseResource(name)
		if !ok {
			continue
		}
		key := gateKey(tenantID, pr)
		p := GatePull{PR: pr}
		for _, c := range []struct {
			suffix string
			n      *int64
		}{{gate.Allowed, &p.Tally.Allowed}, {gate.Pending, &p.Tally.Pending}, {gate.Denied, &p.Tally.Denied}, {"comments", &p.Comments}} {
			if *c.n, _, err = shared.Count(ctx, key+":"+c.suffix); err != nil {
				return nil, err
			}
		}
		p.Comments = min(p.Comments, gate.MaxComments)
		raw, ok, err := shared.Get(ctx, key+":shown")
		if err != nil {
			return nil, err
		}
		if ok {
			var s GateShown
			if json.Unmarshal([]byte(raw), &s) == nil {
				p.Shown = &s
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// output reads the tally and the annotations.
func (g *securityGate) output(ctx context.Context, key string) (gate.Output, error) {
	var out gate.Output
	for _, b := range []struct {
		bucket string
		n      *int64
	}{{gate.Allowed, &out.Tally.Allowed}, {gate.Pending, &out.Tally.Pending}, {gate.Denied, &out.Tally.Denied}} {
		n, _, err := g.shared.Count(ctx, key+":"+b.bucket)
		if err != nil {
			return out, err
		}
		*b.n = n
	}
	n, _, err := g.shared.Count(ctx, key+":annotations")
	if err != nil {
		return out, err
	}
	for i := int64(1); i <= min(n, gate.MaxAnnotations); i++ {
		raw, ok, err := g.shared.Get(ctx, key+":annotation:"+strconv.FormatInt(i, 10))
		if err != nil {
			return out, err
		}
		var a gate.Annotation
		if ok && json.Unmarshal([]byte(raw), &a) == nil {
			out.Annotations = append(out.Annotations, a)
		}
	}
	return out, nil
}

// head is the pull request's head commit, read from the code host at most
// once a minute.
func (g *securityGate) head(ctx context.Context, key string, pr gate.PR) (string, error) {
	if sha, ok, err := g.shared.Get(ctx, key+":sha"); err != nil || ok {
		return sha, err
	}
	sha, err := g.host.HeadSHA(ctx, pr)
	if err != nil {
		return "", err
	}
	return sha, g.shared.Set(ctx, key+":sha", sha, gateSHATTL)
}

func (g *securityGate) failed(what string, pr gate.PR, err error) {
	g.stats.Failures.Add(1)
	g.log.Warn("security gate: "+what+" failed; dropped", "pull_request", pr.String(), "error", err)
}
