package node

import (
	"context"
	"crypto/ed25519"
	"slices"
	"time"

	"svc/actors"
	"svc/approvalcallback"
	"svc/broadcast"
	"svc/canonical"
	"svc/codehost"
	httpapi "svc/http"
	"svc/leader"
	"svc/maintenance"
	"svc/mcpregistry"
	"svc/messages"
	"svc/outbound"
	"svc/persistence"
	"svc/persistence/sharedstate"
)

// approvalCallbackSweep is how often the leader delivers the approval
// callbacks due that no node is delivering: those of approvals that
// expired undecided, and attempts a stopped node left (an approve, reject
// or edit starts its callback's delivery at once on its node).
const approvalCallbackSweep = 2 * time.Second

// newActors creates the actor system and what the actors share.
func (n *Node) newActors() {
	cfg, log := n.cfg, n.log
	n.system = actors.NewSystem(log.Named("actors"))
	n.onRelease(n.system.Shutdown)
	n.registry = actors.NewRegistry()
	n.registry.Register("audit_writer", false)
	n.leader = &leader.Leadership{}
	n.invalidations = broadcast.NewInvalidations(n.shared, log.Named("invalidate"))
	n.pool = &actors.PoolSample{}
	n.bus = broadcast.NewEventBus(n.system.Root, cfg.EventBufferSize)
	n.notifyStats = &actors.NotifierStats{}
	n.socStats = &actors.SOCStats{}
	n.feed = broadcast.NewFeed(n.shared, log.Named("feed"), !cfg.Cluster)
	feedCtx, stopFeed := context.WithCancel(context.Background())
	n.onRelease(stopFeed)
	feed := n.feed
	n.goroutines.Go(func() { feed.Run(feedCtx) })
	n.exports = &actors.ExporterHandle{}
	n.approvals = actors.NewApprovals(n.system, n.store, n.bus, actors.ApprovalOptions{TTL: cfg.ApprovalTTL}, log.Named("approvals"))
	n.waits = broadcast.NewApprovalWaits(n.shared, log.Named("approvals"))
	waits := n.waits
	n.goroutines.Go(func() { waits.Run(feedCtx) })
	n.callbacks = approvalcallback.New(feedCtx, n.store, outbound.ExportPoster(cfg.AllowPrivateTargets), log.Named("approvals"))
	callbacks := n.callbacks
	n.approvals.OnDecided(func(a persistence.Approval) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		waits.Decided(ctx, a.TenantID, a.ID)
		callbacks.Decided(a)
	})
	n.writerMetrics = httpapi.NewWriterMetrics()
	if cfg.CodehostAppToken != "" {
		host, err := codehost.New(cfg.CodehostAPIURL, cfg.CodehostAppToken, outbound.Client(cfg.AllowPrivateTargets), codehost.Timeout)
		if err != nil {
			log.Error("the security gate is off: SVC_CODEHOST_API_URL is not usable", "error", err)
		} else {
			n.gateHost = host
		}
	}
	n.jobs = &leader.JobStats{Store: n.store, NodeID: cfg.NodeID, Log: log.Named("maintenance")}
	var pub ed25519.PublicKey
	if n.signer != nil {
		pub = n.signer.PublicKey()
	}
	n.maintenance = maintenance.New(n.store, maintenance.Options{PublicKey: pub,
		Retention: time.Duration(cfg.AuditRetentionDays) * 24 * time.Hour, IsLeader: n.leader.IsLeader, Events: n.bus, LogOrigin: cfg.LogOrigin},
		log.Named("maintenance"))
	n.mcp = mcpregistry.New(n.store, n.bus, n.invalidations, mcpFetch(cfg.AllowPrivateTargets, n.version, n.mcpCredentials),
		mcpregistry.NewSlots(cfg.MCPDiscoveryConcurrency), log.Named("mcp"))
}

// webhookDied tells the other nodes that a subscription died here: their
// exporters read the tenant's subscriptions afresh before the next export
// (this node's exporter has its cached copy updated already).
func (n *Node) webhookDied(tenantID, _ string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n.invalidations.Broadcast(ctx, messages.Invalidation{Kind: messages.CacheWebhooks, TenantID: tenantID, Key: "-"})
}

// writerHealth reports the group writer's state on /readyz.
func (n *Node) writerHealth(err error) {
	if err != nil {
		n.registry.Set("audit_writer", actors.StateDegraded, err.Error())
		return
	}
	n.registry.Set("audit_writer", actors.StateOK, "")
}

// recordLost reports a decision answered but not recorded (SPEC 4.2 rule
// 10's best effort): a hole in the tenant's audit, counted and logged where
// it happens and raised as a HIGH alert for the tenant (rate-limited by the
// pipeline).
func (n *Node) recordLost(w *persistence.DecisionWrite, err error) {
	if pid := n.socPID.Load(); pid != nil {
		n.system.Root.Send(pid, &messages.RecordLost{TenantID: w.Decision.TenantID, AgentID: w.Decision.AgentID,
			DecisionID: w.Decision.ID, Error: err.Error(), At: time.Now()})
	}
}

// logRefused reports a witness's refusal of a tenant's checkpoint to the
// security pipeline (a HIGH alert).
func (n *Node) logRefused(m *messages.LogRefused) {
	if pid := n.socPID.Load(); pid != nil {
		n.system.Root.Send(pid, m)
	}
}

// notify hands a HIGH alert or incident to the chat notifier (SPEC 6.4) and
// to the webhook exporter (SPEC 6.5), each its own copy.
func (n *Node) notify(note messages.Notification) {
	if pid := n.notifierPID.Load(); pid != nil {
		c := note
		n.system.Root.Send(pid, &c)
	}
	if pid := n.exporterPID.Load(); pid != nil {
		c := note
		n.system.Root.Send(pid, &c)
	}
}

// heartbeat hands a heartbeat to the buffering actor (never blocks).
func (n *Node) heartbeat(h messages.Heartbeat) {
	if pid := n.heartbeatPID.Load(); pid != nil {
		n.system.Root.Send(pid, &h)
	}
}

// children are the supervised background tasks (DESIGN §3).
func (n *Node) children() []actors.ChildSpec {
	cfg, log, store := n.cfg, n.log, n.store
	// A lone node (SVC_CLUSTER=false) seals receipts on arrival and answers
	// low-risk read-only allows before their commit (SPEC 4.2 rule 10);
	// earlyLost and resealed count what that costs when a write then fails.
	onReseal := func(k int) { n.resealed.Add(uint64(max(k, 0))) }
	socOptions := actors.SOCOptions{Feed: n.feed, Notify: n.notify}
	if cfg.Cluster {
		// Clustered, the correlation windows and behavioural baselines are
		// the installation's, kept in the shared state.
		socOptions.Shared = actors.NewSharedDetection(n.shared, n.socStats, log.Named("soc"))
	}
	children := []actors.ChildSpec{
		{Name: "heartbeat_flusher", Producer: actors.NewHeartbeatBuffer(store, cfg.HeartbeatFlushInterval, log.Named("heartbeat")),
			MaxRestarts: 5, Within: time.Minute, Backoff: 100 * time.Millisecond},
		{Name: "leader_lease", Producer: actors.NewLeaderLease(store, cfg.NodeID, cfg.LeaderElectionInterval, cfg.LeaderLease, n.leader, log.Named("leader")),
			MaxRestarts: 5, Within: time.Minute, Backoff: time.Second},
		{Name: "group_writer", Producer: actors.NewGroupWriter(store, actors.NewSealer(n.signer, onReseal), n.writerHealth,
			actors.WriterOptions{AuditBatchSize: cfg.AuditBatchSize, AuditBatchFlush: cfg.AuditBatchFlush,
				EarlySeal: !cfg.Cluster, EarlyLost: func(w *persistence.DecisionWrite, err error) {
					n.earlyLost.Add(1)
					n.recordLost(w, err)
				}, Pending: n.earlyPending,
				Observe: n.writerMetrics.Observe, EarlyCommitWait: cfg.EarlyCommitWait}, log.Named("writer")),
			MaxRestarts: 10, Within: time.Minute},
		{Name: "pool_sampler", Producer: actors.NewPoolSampler(store, cfg.PoolHealthSampleInterval, n.pool, log.Named("pool")),
			MaxRestarts: 5, Within: time.Minute, Backoff: time.Second},
		{Name: "chat_notifier", Producer: actors.NewNotifier(actors.NotifierOptions{Post: webhookPost(cfg.WebhookURL, cfg.AllowPrivateTargets), Secret: cfg.WebhookSecret,
			FailureThreshold: cfg.WebhookFailureThreshold, Cooldown: cfg.WebhookCooldown}, n.notifyStats, log.Named("notify")),
			MaxRestarts: 10, Within: time.Minute, Backoff: 100 * time.Millisecond},
		{Name: "webhook_exporter", Producer: actors.NewExporter(store, n.exports, actors.ExporterOptions{
			Post: outbound.ExportPoster(cfg.AllowPrivateTargets), Version: n.version, Died: n.webhookDied}, log.Named("export")),
			MaxRestarts: 10, Within: time.Minute, Backoff: 100 * time.Millisecond},
		{Name: "soc_pipeline", Producer: actors.NewSOCPipeline(store, n.socStats, socOptions, log.Named("soc")),
			MaxRestarts: 10, Within: time.Minute, Backoff: 100 * time.Millisecond},
		{Name: actors.JobApprovalCleanup, Producer: actors.NewApprovalCleaner(store, cfg.ApprovalCleanupInterval,
			time.Duration(cfg.ApprovalRetentionDays)*24*time.Hour, n.leader.IsLeader, &n.approvalsDeleted, n.jobs, log.Named("approvals")),
			MaxRestarts: 5, Within: time.Hour, Backoff: 5 * time.Second, MaxBackoff: 5 * time.Minute},
		{Name: actors.JobApprovalCallbacks, Producer: actors.NewApprovalCallbackSweep(n.callbacks.Sweep, approvalCallbackSweep, n.leader.IsLeader),
			MaxRestarts: 5, Within: time.Hour, Backoff: 5 * time.Second, MaxBackoff: 5 * time.Minute},
		// The maintenance jobs (issue 28): a failed pass restarts its job
		// with a backoff; five failures within an hour leave it dead on
		// /readyz.
		{Name: actors.JobReceiptIntegrity, Producer: actors.NewReceiptIntegrityJob(n.maintenance, cfg.ReceiptIntegrityInterval, n.jobs,
			log.Named("maintenance")), MaxRestarts: 5, Within: time.Hour, Backoff: 5 * time.Second, MaxBackoff: 5 * time.Minute},
		{Name: actors.JobAuditArchival, Producer: actors.NewAuditArchivalJob(n.maintenance, cfg.AuditArchivalInterval, n.jobs,
			log.Named("maintenance")), MaxRestarts: 5, Within: time.Hour, Backoff: 5 * time.Second, MaxBackoff: 5 * time.Minute},
		{Name: actors.JobVacuum, Producer: actors.NewVacuumJob(n.maintenance, cfg.VacuumInterval, n.jobs,
			log.Named("maintenance")), MaxRestarts: 5, Within: time.Hour, Backoff: 5 * time.Second, MaxBackoff: 5 * time.Minute},
	}
	if n.signer != nil {
		children = append(children, actors.ChildSpec{Name: actors.JobReceiptLog, Producer: actors.NewReceiptLogJob(actors.ReceiptLogOptions{
			Store: store, Signer: n.signer, Origin: cfg.LogOrigin, Every: max(cfg.CheckpointInterval/2, 100*time.Millisecond),
			IsLeader: n.leader.IsLeader, Post: outbound.Exchanger(cfg.AllowPrivateTargets), Refused: n.logRefused, Log: log.Named("receiptlog")}),
			MaxRestarts: 5, Within: time.Hour, Backoff: 5 * time.Second, MaxBackoff: 5 * time.Minute})
	}
	if n.gateHost != nil {
		children = append(children, actors.ChildSpec{Name: "security_gate", Producer: actors.NewSecurityGate(n.gateHost, n.shared,
			canonical.NormalizeIdentifier(cfg.CodehostToolKey), cfg.NodeID, &n.gateStats, log.Named("gate")),
			MaxRestarts: 10, Within: time.Minute, Backoff: 100 * time.Millisecond})
	}
	if cfg.MCPDiscoveryInterval > 0 {
		children = append(children, actors.ChildSpec{Name: "mcp_rediscovery", Producer: actors.NewMCPRediscovery(n.mcp, store,
			cfg.MCPDiscoveryInterval, n.leader.IsLeader, &n.mcpRediscovery, n.jobs, log.Named("mcp")),
			MaxRestarts: 5, Within: time.Hour, Backoff: 5 * time.Second, MaxBackoff: 5 * time.Minute})
	}
	if !cfg.SOCPipeline {
		children = slices.DeleteFunc(children, func(c actors.ChildSpec) bool { return c.Name == "soc_pipeline" })
	}
	return children
}

// startSupervisor starts the background tasks and subscribes the notifier,
// the exporter and the SOC pipeline to the event bus.
func (n *Node) startSupervisor() error {
	sup, err := actors.StartSupervisor(n.system, n.registry, n.log.Named("supervisor"), n.children())
	if err != nil {
		return err
	}
	n.sup = sup
	if pid, ok := sup.Child("heartbeat_flusher"); ok {
		n.heartbeatPID.Store(pid)
	}
	if pid, ok := sup.Child("chat_notifier"); ok {
		n.notifierPID.Store(pid)
		n.bus.Subscribe(pid) // deny and require_approval decisions (SPEC 6.4)
	}
	if pid, ok := sup.Child("webhook_exporter"); ok {
		n.exporterPID.Store(pid)
		n.bus.Subscribe(pid) // deny and require_approval decisions (SPEC 6.5)
	}
	if pid, ok := sup.Child("security_gate"); ok { // SVC_CODEHOST_APP_TOKEN
		n.bus.Subscribe(pid) // the code-host tool's decisions (SPEC 4.9)
	}
	if pid, ok := sup.Child("soc_pipeline"); ok { // SVC_SOC_PIPELINE
		n.bus.Subscribe(pid)
		n.socPID.Store(pid)
	}
	return nil
}

// startAuthorizer builds the authorize path over the group writer.
func (n *Node) startAuthorizer() error {
	cfg := n.cfg
	writerPID, _ := n.sup.Child("group_writer")
	runs, err := sharedstate.RunsOf(n.shared, sharedstate.RunLimits{})
	if err != nil {
		return err
	}
	a, err := actors.NewAuthorizer(n.system, n.store, n.shared, n.engine, writerPID, n.bus, n.heartbeat, actors.AuthorizerOptions{
		RateCapacity: cfg.RateLimitCapacity, RateRefill: cfg.RateLimitRefillRate, QuotaLimit: cfg.QuotaLimit, QuotaWindow: cfg.QuotaWindow,
		ReplayWindow: cfg.ReplayWindow, SkillCacheCapacity: cfg.SkillCacheCapacity,
		MCPServerCacheCapacity: cfg.MCPServerCacheCapacity, MCPToolCacheCapacity: cfg.MCPToolCacheCapacity, RiskWeightsTTL: cfg.RiskWeightsCacheTTL,
		CommitTimeout: cfg.RequestTimeout, EarlyAnswer: !cfg.Cluster && cfg.EarlyAnswer, Lost: &n.earlyLost, Pending: n.earlyPending,
		OnLost: n.recordLost, Approvals: n.approvals, Invalidations: n.invalidations, RefusalStatus: httpapi.RefusalStatus,
		Runs: runs}, n.log.Named("authorize"))
	n.authorizer = a
	return err
}

// subscribe wires the caches to the invalidation hub (rule changes reach
// the SOC pipeline, subscription changes the exporter's cache), and starts
// applying other nodes' invalidations and delivering the event bus.
func (n *Node) subscribe() {
	if pid := n.socPID.Load(); pid != nil {
		n.invalidations.Subscribe(actors.SOCRulesDrop(n.system, pid), messages.CacheSOCRules)
	}
	n.invalidations.Subscribe(n.exports.Drop, messages.CacheWebhooks)
	invCtx, stopInvalidations := context.WithCancel(context.Background())
	n.onRelease(stopInvalidations)
	inv := n.invalidations
	n.goroutines.Go(func() { inv.Run(invCtx) })
	n.busStop, n.busDone = make(chan struct{}), make(chan struct{})
	bus, stop, done := n.bus, n.busStop, n.busDone
	n.goroutines.Go(func() { defer close(done); bus.Run(stop) })
}
