package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	lru "github.com/hashicorp/golang-lru/v2"

	"svc/broadcast"
	"svc/messages"
	"svc/persistence"
	"svc/rules/correlate"
	"svc/rules/detect"
)

// SOCOptions configure the pipeline.
type SOCOptions struct {
	// Notify receives HIGH alerts and incidents (the chat notifier); nil
	// drops them.
	Notify func(messages.Notification)
	// CorrelatorIdle stops a tenant/agent correlator after this long
	// without events and with nothing left in its windows.
	CorrelatorIdle time.Duration
	// MaxBaselines bounds the behavioural baselines kept (tenant/agent
	// pairs, least recently used dropped first).
	MaxBaselines int
	// Feed, when set, receives every event, alert and incident for the
	// live streams.
	Feed *broadcast.Feed
	// Shared, when set (a clustered node), keeps the correlation windows
	// and behavioural baselines in the shared state, installation-wide;
	// nil keeps them in this process.
	Shared *SharedDetection
}

// socPipeline is the detection actor (SPEC 6.2): subscribed to the event
// bus, it evaluates each tenant's enabled custom rules with the defaults
// on every event, adds the behavioural-baseline alerts, and feeds each
// authorize decision to its tenant/agent correlator (a child actor, SPEC
// 6.3). Alerts are buffered and written in batches by a goroutine, kept and
// retried while the database fails, and flushed when the actor stops: an
// alert raised is never dropped. Rule loads run off the mailbox; events of
// a tenant whose rules are loading wait in order.
type socPipeline struct {
	store persistence.SOCStore
	stats *SOCStats
	opt   SOCOptions
	log   hclog.Logger

	rules    map[string][]detect.Rule // tenant -> defaults + enabled custom rules
	loading  map[string][]*messages.AseEvent
	ruleGen  map[string]uint64 // bumped by invalidations; a load for an older generation is discarded
	defaults []detect.Rule

	baselines *lru.Cache[string, *detect.Baseline] // in-process path only (Shared nil)
	corr      map[string]*corrEntry
	// corrByID finds a correlator's entry by its process id; corrProps
	// are every correlator's props (built once per incarnation of the
	// pipeline); corrSeq numbers their names.
	corrByID  *sync.Map
	corrProps *actor.Props
	corrSeq   uint64
	// life ends when the pipeline stops or restarts, cutting short a
	// correlator waiting for the shared state.
	life    context.Context
	endLife context.CancelFunc

	alerts        []persistence.Alert
	alertInFlight bool
	// lost is, per tenant, the audit-hole alerting state (recordLost).
	lost map[string]*lostRecords
	// ending is set once the pipeline stops or restarts (end).
	ending      bool
	incidents   []persistence.Incident
	incInFlight bool
	ticker      *ticker
}

type rulesLoaded struct {
	tenantID string
	gen      uint64
	rules    []persistence.CustomRule
	err      error
}

type alertsFlushed struct {
	alerts []persistence.Alert
	err    error
}

type incidentsFlushed struct {
	incidents []persistence.Incident
	err       error
}

// rulesInvalidated tells the pipeline that a tenant's custom rules changed
// (TenantID "" drops every tenant's); node/ forwards the Authorizer's
// invalidations, this node's and other nodes', as this message.
type rulesInvalidated struct{ TenantID string }

// SOCRulesDrop returns the invalidation hub subscriber that tells the
// pipeline at pid about custom rule changes (rulesInvalidated).
func SOCRulesDrop(system *actor.ActorSystem, pid *actor.PID) func(messages.Invalidation) {
	return func(inv messages.Invalidation) {
		tenant := inv.TenantID
		if inv.Kind == messages.CacheAll {
			tenant = ""
		}
		system.Root.Send(pid, rulesInvalidated{TenantID: tenant})
	}
}

// flushEvery is how often buffered alerts and incidents are written (one
// transaction each). On SQLite every transaction takes the one writer from
// the decisions' group commit, so fewer, larger ones leave authorize more
// of it; alerts reach the live feed at once either way.
const flushEvery = 500 * time.Millisecond

// NewSOCPipeline returns the producer of the pipeline actor.
func NewSOCPipeline(store persistence.SOCStore, stats *SOCStats, o SOCOptions, log hclog.Logger) actor.Producer {
	if o.CorrelatorIdle <= 0 {
		o.CorrelatorIdle = 2 * time.Minute
	}
	if o.MaxBaselines <= 0 {
		o.MaxBaselines = 100_000
	}
	return func() actor.Actor {
		return &socPipeline{store: store, stats: stats, opt: o, log: log}
	}
}

// Receive implements actor.Actor.
func (p *socPipeline) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		p.rules, p.loading, p.ruleGen = map[string][]detect.Rule{}, map[string][]*messages.AseEvent{}, map[string]uint64{}
		p.defaults = detect.Evaluated()
		p.baselines, _ = lru.New[string, *detect.Baseline](p.opt.MaxBaselines)
		p.corr, p.corrByID, p.corrProps = map[string]*corrEntry{}, &sync.Map{}, nil
		p.lost = map[string]*lostRecords{}
		p.life, p.endLife = context.WithCancel(context.Background())
		p.stats.Correlators.Store(0) // a restart stopped the previous ones with their parent
		p.ticker = startTicker(ctx, flushEvery)
	case *messages.AseEvent:
		p.stats.Events.Add(1)
		if p.opt.Feed != nil {
			p.opt.Feed.Publish(messages.FeedItem{TenantID: m.TenantID, Type: messages.FeedEvent, Data: m})
		}
		p.event(ctx, m)
	case rulesLoaded:
		p.loaded(ctx, m)
	case rulesInvalidated:
		if m.TenantID == "" {
			for t := range p.rules {
				p.ruleGen[t]++
			}
			p.rules = map[string][]detect.Rule{}
			return
		}
		p.ruleGen[m.TenantID]++
		delete(p.rules, m.TenantID)
	case correlated:
		p.opened(m)
	case correlatorIdle:
		if e := p.corr[m.key]; e != nil && e.pid.Equal(m.pid) && e.sent == m.seen {
			delete(p.corr, m.key)
			p.corrByID.Delete(m.pid.Id)
			ctx.Stop(m.pid)
			p.stats.Correlators.Add(-1)
		}
	case *messages.RecordLost:
		p.recordLost(m)
	case *messages.LogRefused:
		p.logRefused(m)
	case tick:
		p.alertLost(time.Now(), false)
		p.flushAlerts(ctx)
		p.flushIncidents(ctx)
	case alertsFlushed:
		p.alertInFlight = false
		if len(m.alerts) > 0 {
			p.log.Warn("alerts not written; keeping them for the next try", "alerts", len(m.alerts), "error", m.err)
			p.alerts = append(m.alerts, p.alerts...)
		}
	case incidentsFlushed:
		p.incInFlight = false
		if len(m.incidents) > 0 {
			p.log.Warn("incidents not written; keeping them for the next try", "incidents", len(m.incidents), "error", m.err)
			p.incidents = append(m.incidents, p.incidents...)
		}
	case *actor.Stopping:
		p.end()
	case *actor.Restarting:
		// The next incarnation starts empty: write what this one raised.
		p.end()
	}
}

// end runs when the pipeline stops or restarts. Its correlators are being
// stopped with it, so from now on it spawns none: a child spawned by a
// stopping actor is never stopped, and the stop would wait for it for
// ever (a rules load answered after the stop began did exactly that). The
// events still waiting for their tenant's rules are evaluated now, with
// the rules loaded here, and what was raised is written.
func (p *socPipeline) end() {
	p.ending = true
	if p.endLife != nil {
		p.endLife()
	}
	if p.ticker != nil {
		p.ticker.Stop()
	}
	for tenant, queued := range p.loading {
		delete(p.loading, tenant)
		rules := p.defaults
		c, cancel := ioContext(5 * time.Second)
		rs, err := p.store.ListRules(c, tenant)
		cancel()
		if err == nil {
			rules = p.ruleSet(rs)
		} else {
			p.log.Warn("custom rules not loaded at stop; evaluating the defaults only", "tenant_id", tenant, "error", err)
		}
		for _, ev := range queued {
			p.detect(nil, ev, rules)
		}
	}
	p.drain()
}

// event evaluates one event, or queues it while its tenant's rules load.
func (p *socPipeline) event(ctx actor.Context, ev *messages.AseEvent) {
	if q, ok := p.loading[ev.TenantID]; ok {
		p.loading[ev.TenantID] = append(q, ev)
		return
	}
	rules, ok := p.rules[ev.TenantID]
	if !ok && p.ending {
		rules, ok = p.defaults, true // no load answers a stopping pipeline
	}
	if !ok {
		p.loading[ev.TenantID] = []*messages.AseEvent{ev}
		gen := p.ruleGen[ev.TenantID]
		self, root, tenant := ctx.Self(), ctx.ActorSystem().Root, ev.TenantID
		go func() {
			c, cancel := ioContext(10 * time.Second)
			defer cancel()
			rs, err := p.store.ListRules(c, tenant)
			root.Send(self, rulesLoaded{tenantID: tenant, gen: gen, rules: rs, err: err})
		}()
		return
	}
	p.detect(ctx, ev, rules)
}

func (p *socPipeline) loaded(ctx actor.Context, m rulesLoaded) {
	queued := p.loading[m.tenantID]
	delete(p.loading, m.tenantID)
	rules := p.defaults
	if m.err != nil {
		// Fail open for detection only: the defaults still run, and the
		// next event tries the custom rules again.
		p.log.Warn("custom rules not loaded; evaluating the defaults only", "tenant_id", m.tenantID, "error", m.err)
	} else {
		rules = p.ruleSet(m.rules)
		if m.gen == p.ruleGen[m.tenantID] {
			p.rules[m.tenantID] = rules
		}
	}
	for _, ev := range queued {
		p.detect(ctx, ev, rules)
	}
}

// ruleSet is a tenant's rules: the defaults, then its enabled custom rules.
func (p *socPipeline) ruleSet(rs []persistence.CustomRule) []detect.Rule {
	return append(append([]detect.Rule{}, p.defaults...), customRules(rs, p.log)...)
}

// customRules turns the stored rules into detect rules (enabled ones).
func customRules(rs []persistence.CustomRule, log hclog.Logger) []detect.Rule {
	var out []detect.Rule
	for _, r := range rs {
		if !r.Enabled {
			continue
		}
		rule, err := CustomRule(r)
		if err != nil {
			log.Warn("stored custom rule does not parse; skipped", "tenant_id", r.TenantID, "rule_key", r.Key, "error", err)
			continue
		}
		out = append(out, rule)
	}
	return out
}

// CustomRule is the detection rule of a stored custom rule.
func CustomRule(r persistence.CustomRule) (detect.Rule, error) {
	cond, err := detect.ParseConditionJSON(r.Condition)
	if err != nil {
		return detect.Rule{}, err
	}
	return detect.NewCustomRule(r.Key, r.AlertName, r.Severity, r.Enabled, cond)
}

// detectEvent converts a SOC event into the detection input.
func detectEvent(ev *messages.AseEvent) detect.Event {
	out := detect.Event{EventID: ev.EventID, TenantID: ev.TenantID, Kind: ev.Kind, Decision: ev.Decision, Tool: ev.Tool,
		Action: ev.Action, Resource: ev.Resource, RiskScore: ev.RiskScore, AgentID: ev.AgentID, MatchedPolicies: ev.MatchedPolicies,
		RedactedFields: ev.RedactedFields, OccurredAt: ev.OccurredAt}
	if ev.MutatesState != nil {
		out.MutatesState = *ev.MutatesState
	}
	if ev.Evidence != nil {
		if ev.Evidence.SourceTrust != nil {
			out.SourceTrust = *ev.Evidence.SourceTrust
		}
		if ev.Evidence.DecisionID != nil {
			out.DecisionID = *ev.Evidence.DecisionID
		}
	}
	return out
}

// raise records one alert of ev and hands it to the live feed and, when
// HIGH, to the notifier.
func (p *socPipeline) raise(ev *messages.AseEvent, de detect.Event, key, name, severity, source, summary string) {
	now := time.Now().UTC()
	a := persistence.Alert{ID: persistence.NewRecordID(), TenantID: ev.TenantID, RuleKey: key, AlertName: name, Severity: severity,
		Source: source, AgentID: ev.AgentID, DecisionID: de.DecisionID, SourceEventID: ev.EventID, Summary: summary, CreatedAt: now}
	p.alerts = append(p.alerts, a)
	p.stats.Alerts.Add(1)
	if p.opt.Feed != nil {
		p.opt.Feed.Publish(messages.FeedItem{TenantID: a.TenantID, Type: messages.FeedAlert, Data: a.Record()})
	}
	p.stats.observe(&p.stats.mttd, now.Sub(ev.OccurredAt))
	if severity == detect.SeverityHigh && p.opt.Notify != nil {
		p.opt.Notify(messages.Notification{Kind: name, Severity: messages.NotifySeverityHigh, TenantID: ev.TenantID,
			AgentID: ev.AgentID, At: now, Summary: summary, Detail: fmt.Sprintf("alert %s; rule %s; event %s", a.ID, key, ev.EventID),
			RecordType: messages.FeedAlert, RecordID: a.ID, RuleKey: key})
	}
}

// raiseAnomaly records a behavioural baseline alert.
func (p *socPipeline) raiseAnomaly(ev *messages.AseEvent, de detect.Event, an detect.Anomaly) {
	p.raise(ev, de, an.Name, an.Name, an.Severity, detect.SourceDefault, fmt.Sprintf("%s: %s.%s by agent %s", an.Name, ev.Tool, ev.Action, ev.AgentID))
}

func (p *socPipeline) detect(ctx actor.Context, ev *messages.AseEvent, rules []detect.Rule) {
	de := detectEvent(ev)
	for _, r := range detect.Evaluate(rules, de) {
		p.raise(ev, de, r.Key, r.AlertName, r.Severity, r.Source, fmt.Sprintf("%s: %s %s.%s by agent %s", r.AlertName, ev.Decision, ev.Tool, ev.Action, ev.AgentID))
	}
	if ev.Kind == messages.KindAuthorizeDecision && ev.AgentID != "" && ev.AgentID != messages.UnknownAgent {
		if p.opt.Shared == nil {
			key := ev.TenantID + "/" + ev.AgentID
			b, ok := p.baselines.Get(key)
			if !ok {
				b = detect.NewBaseline()
				p.baselines.Add(key, b)
			}
			for _, an := range b.Observe(de, ev.OccurredAt) {
				p.raiseAnomaly(ev, de, an)
			}
		}
		// A stopping pipeline spawns no correlator (end). With shared
		// detection the event's baseline is then not observed either: it
		// is counted as dropped.
		if !p.ending {
			e := p.correlator(ctx, ev.TenantID, ev.AgentID)
			e.sent++
			ctx.Send(e.pid, observed{ev: ev, de: de, obs: correlate.Observation{EventID: ev.EventID, Kind: ev.Kind,
				Decision: ev.Decision, Tool: ev.Tool, Action: ev.Action, At: ev.OccurredAt}})
		} else if p.opt.Shared != nil {
			p.stats.SharedDropped.Add(1)
		}
	}
	if len(p.alerts) >= 1000 && !p.ending {
		p.flushAlerts(ctx)
	}
}

// opened records a correlator's incidents and anomalies.
func (p *socPipeline) opened(m correlated) {
	for _, an := range m.anomalies {
		p.raiseAnomaly(m.ev, m.de, an)
	}
	now := time.Now().UTC()
	for _, ci := range m.incidents {
		in := persistence.Incident{ID: uuid.NewString(), TenantID: m.tenantID, Kind: ci.Kind, Severity: ci.Severity,
			Status: persistence.IncidentOpen, AgentID: m.agentID, Summary: ci.Summary, SourceEventIDs: ci.SourceEventIDs, OpenedAt: now}
		p.incidents = append(p.incidents, in)
		p.stats.Incidents.Add(1)
		if p.opt.Feed != nil {
			p.opt.Feed.Publish(messages.FeedItem{TenantID: in.TenantID, Type: messages.FeedIncident, Data: in.Record()})
		}
		if ci.Severity == detect.SeverityHigh && p.opt.Notify != nil {
			p.opt.Notify(messages.Notification{Kind: ci.Kind, Severity: messages.NotifySeverityHigh, TenantID: m.tenantID,
				AgentID: m.agentID, At: now, Summary: ci.Summary, Detail: fmt.Sprintf("incident %s from %d events", in.ID, len(ci.SourceEventIDs)),
				RecordType: messages.FeedIncident, RecordID: in.ID})
		}
	}
}

func (p *socPipeline) flushAlerts(ctx actor.Context) {
	if p.alertInFlight || len(p.alerts) == 0 {
		return
	}
	batch := p.alerts
	p.alerts = nil
	p.alertInFlight = true
	self, root := ctx.Self(), ctx.ActorSystem().Root
	go func() {
		keep, err := p.writeAlerts(batch)
		root.Send(self, alertsFlushed{alerts: keep, err: err})
	}()
}

// writeAlerts writes buffered alerts and returns those to keep for the next
// flush (writeBuffered).
func (p *socPipeline) writeAlerts(alerts []persistence.Alert) ([]persistence.Alert, error) {
	return writeBuffered(alerts, p.store.AppendAlerts,
		func(a persistence.Alert, err error) {
			p.log.Error("alert dropped: it cannot be written", "tenant_id", a.TenantID, "alert_id", a.ID, "error", err)
		})
}

// writeIncidents opens buffered incidents and returns those to keep for the
// next flush (writeBuffered). One whose id exists already was opened by an
// earlier try that committed without our knowing: it counts as written.
func (p *socPipeline) writeIncidents(incidents []persistence.Incident) ([]persistence.Incident, error) {
	return writeBuffered(incidents,
		func(c context.Context, ins []persistence.Incident) error {
			err := p.store.OpenIncidents(c, ins)
			if len(ins) == 1 && errors.Is(err, persistence.ErrConflict) {
				return nil
			}
			return err
		},
		func(in persistence.Incident, err error) {
			p.log.Error("incident dropped: it cannot be written", "tenant_id", in.TenantID, "incident_id", in.ID, "error", err)
		})
}

func (p *socPipeline) flushIncidents(ctx actor.Context) {
	if p.incInFlight || len(p.incidents) == 0 {
		return
	}
	batch := p.incidents
	p.incidents = nil
	p.incInFlight = true
	self, root := ctx.Self(), ctx.ActorSystem().Root
	go func() {
		keep, err := p.writeIncidents(batch)
		root.Send(self, incidentsFlushed{incidents: keep, err: err})
	}()
}

// drain writes what is buffered, synchronously, when the pipeline stops.
func (p *socPipeline) drain() {
	if keep, err := p.writeAlerts(p.alerts); len(keep) > 0 {
		p.log.Error("final alert flush failed", "alerts", len(keep), "error", err)
	}
	if keep, err := p.writeIncidents(p.incidents); len(keep) > 0 {
		p.log.Error("final incident flush failed", "incidents", len(keep), "error", err)
	}
}

// DecisionEvent is the detection input of a recorded decision (backtests):
// what its authorize_decision event carried.
func DecisionEvent(d persistence.Decision) detect.Event {
	return detect.Event{EventID: d.ID, TenantID: d.TenantID, DecisionID: d.ID, Kind: messages.KindAuthorizeDecision,
		Decision: d.Decision, Tool: d.Tool, Action: d.Action, Resource: d.Resource, RiskScore: d.RiskScore, MutatesState: d.MutatesState,
		SourceTrust: d.RootTrustLevel, AgentID: d.AgentID, MatchedPolicies: d.MatchedPolicyIDs, RedactedFields: d.RedactedFields,
		OccurredAt: d.CreatedAt}
}
