// Package node assembles one gateway node: configuration, then
// persistence and shared state, then the actors and their supervisor, then
// the HTTP layer (DESIGN §1). New builds a node without listening (its
// Handler serves in-process), Start listens on the configured addresses,
// Shutdown drains and stops it in order (DESIGN §3). cmd/svc's serve is a
// few lines over it.
package node

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/hashicorp/go-hclog"

	"svc/actors"
	"svc/canonical"
	"svc/codehost"
	"svc/config"
	"svc/control"
	httpapi "svc/http"
	"svc/mcpproxy"
	"svc/messages"
	"svc/outbound"
	"svc/persistence"
	"svc/persistence/sharedstate"
	"svc/receipt"
	"svc/rules/policy"
)

// Options are what a node is built from.
type Options struct {
	Config *config.Config
	// Store is the opened database (the caller closes it after Shutdown).
	Store persistence.Store
	Log   hclog.Logger
	// Stdout receives the bootstrap tenant's token, once.
	Stdout  io.Writer
	Version string
}

// Node is one gateway node.
type Node struct {
	cfg     *config.Config
	store   persistence.Store
	log     hclog.Logger
	version string

	api     *httpapi.Server
	sup     *actors.Supervisor
	system  *actor.ActorSystem
	busStop chan struct{}
	busDone chan struct{}

	// The parts the layers share, built in order by build.
	shared sharedstate.State
	engine *policy.Engine
	signer *receipt.Signer
	// mcpSessions and mcpCredentials are the MCP proxy's sealers (keys
	// derived from the installation secret every node shares).
	mcpSessions, mcpCredentials *mcpproxy.Sealer
	registry                    *actors.Registry
	leader                      *actors.Leadership
	jobs                        *actors.JobStats
	maintenance                 *actors.Maintenance
	invalidations               *actors.Invalidations
	waits                       *actors.ApprovalWaits
	callbacks                   *actors.ApprovalCallbacks
	pool                        *actors.PoolSample
	bus                         *actors.EventBus
	notifyStats                 *actors.NotifierStats
	socStats                    *actors.SOCStats
	feed                        *actors.Feed
	exports                     *actors.ExporterHandle
	mcp                         *actors.MCPRegistry
	mcpRediscovery              actors.MCPRediscoveryStats
	gateHost                    actors.GateHost
	gateStats                   actors.GateStats
	approvals                   *actors.Approvals
	authorizer                  *actors.Authorizer
	writerMetrics               *httpapi.WriterMetrics
	earlyPending                *actors.EarlyPending
	earlyLost                   atomic.Uint64 // early answers whose write then failed
	resealed                    atomic.Uint64 // early-sealed receipts resealed after a failed write
	approvalsDeleted            atomic.Uint64
	heartbeatPID                atomic.Pointer[actor.PID]
	notifierPID                 atomic.Pointer[actor.PID]
	exporterPID                 atomic.Pointer[actor.PID]
	socPID                      atomic.Pointer[actor.PID]

	goroutines Goroutines
	mu         sync.Mutex
	releases   []func()

	srv, dsrv *http.Server
	ln, dln   net.Listener
	failed    chan error
}

// onRelease registers f to run when the node is released (reverse order).
func (n *Node) onRelease(f func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.releases = append(n.releases, f)
}

// release runs the registered releases, newest first, once.
func (n *Node) release() {
	n.mu.Lock()
	rs := n.releases
	n.releases = nil
	n.mu.Unlock()
	for _, f := range slices.Backward(rs) {
		f()
	}
}

// Handler is the node's API, to serve in process (tests over httptest).
func (n *Node) Handler() http.Handler { return n.api }

// New builds a node over an opened store: it bootstraps the tenant of
// SVC_BOOTSTRAP_TENANT, connects the shared state, restores the replay
// nonces, starts the actors under their supervisor and builds the HTTP
// layer. It does not listen (Start does). On error what was built is
// released.
func New(ctx context.Context, o Options) (*Node, error) {
	n := &Node{cfg: o.Config, store: o.Store, log: o.Log, version: o.Version, earlyPending: &actors.EarlyPending{}}
	if err := n.build(ctx, o.Stdout); err != nil {
		n.release()
		return nil, err
	}
	return n, nil
}

// build assembles the node: state, then actors, then HTTP.
func (n *Node) build(ctx context.Context, stdout io.Writer) error {
	setGCPercent(n.cfg, n.log)
	if err := bootstrap(ctx, n.cfg, n.store, n.log, stdout); err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	if err := n.openState(ctx); err != nil {
		return err
	}
	n.newActors()
	if err := n.startSupervisor(); err != nil {
		return err
	}
	if err := n.startAuthorizer(); err != nil {
		return err
	}
	n.subscribe()
	plane := control.New(control.Deps{Config: n.cfg, Store: n.store, Registry: n.registry, MCP: n.mcp, Invalidations: n.invalidations,
		Policies: n.authorizer, Engine: n.engine, Exporter: n.exports, MCPCredentials: n.mcpCredentials}).WithLogger(n.log)
	n.api = httpapi.New(httpapi.Deps{Control: plane, Config: n.cfg, Store: n.store, Shared: n.shared, Registry: n.registry, Leader: n.leader,
		Pool: n.pool, Events: n.bus, Supervisor: n.sup, Authorizer: n.authorizer, Approvals: n.approvals, Waits: n.waits, Callbacks: n.callbacks,
		SOC: actors.NewSOC(n.socStats, n.invalidations), Invalidations: n.invalidations, SOCStats: n.socStats, Feed: n.feed,
		Notifier: n.notifyStats, Exporter: n.exports, ApprovalsDeleted: &n.approvalsDeleted, Policy: n.engine, Resealed: &n.resealed,
		WriterMetrics: n.writerMetrics, ReceiptSigner: n.signer, MCPSessions: n.mcpSessions, MCPCredentials: n.mcpCredentials,
		MCPProxyLimits: mcpproxy.Limits{MaxMessage: n.cfg.MCPProxyMaxMessage, CallTimeout: n.cfg.MCPProxyTimeout, Idle: n.cfg.MCPProxyIdle,
			Decide: n.cfg.RequestTimeout}, MCP: n.mcp, MCPRediscovery: &n.mcpRediscovery, Gate: &n.gateStats, Jobs: n.jobs, Maintenance: n.maintenance, Log: n.log, Version: n.version, NodeID: n.cfg.NodeID, Heartbeat: n.heartbeat})
	return nil
}

// openState connects the shared state, restores the replay nonces of the
// last window (a lone node's in-process state starts empty, and Valkey may
// have been wiped), and loads the base policies and the receipt key.
func (n *Node) openState(ctx context.Context) error {
	cfg, log := n.cfg, n.log
	shared, err := openSharedState(ctx, cfg)
	if err != nil {
		return fmt.Errorf("shared state: %w", err)
	}
	n.shared = shared
	n.onRelease(func() { _ = shared.Close() })
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	if k, err := actors.RestoreNonces(rctx, n.store, shared, cfg.ReplayWindow); err != nil {
		log.Warn("replay nonces not restored; nonces used before this start may be accepted again within their window", "error", err)
	} else if k > 0 {
		log.Info("replay nonces restored", "nonces", k, "window", cfg.ReplayWindow)
	}
	cancel()
	if n.engine, err = policy.NewEngine(policy.Options{PolicyPath: cfg.PolicyFile}); err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	if len(cfg.ReceiptSeed) > 0 {
		if n.signer, err = receipt.NewSigner(cfg.ReceiptSeed); err != nil {
			return fmt.Errorf("SVC_RECEIPT_SIGNING_KEY: %w", err)
		}
	}
	if n.mcpSessions, n.mcpCredentials, err = mcpSealers(ctx, n.store); err != nil {
		return fmt.Errorf("mcp proxy keys: %w", err)
	}
	return nil
}

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
	n.leader = &actors.Leadership{}
	n.invalidations = actors.NewInvalidations(n.shared, log.Named("invalidate"))
	n.pool = &actors.PoolSample{}
	n.bus = actors.NewEventBus(n.system.Root, cfg.EventBufferSize)
	n.notifyStats = &actors.NotifierStats{}
	n.socStats = &actors.SOCStats{}
	n.feed = actors.NewFeed(n.shared, log.Named("feed"), !cfg.Cluster)
	feedCtx, stopFeed := context.WithCancel(context.Background())
	n.onRelease(stopFeed)
	feed := n.feed
	n.goroutines.Go(func() { feed.Run(feedCtx) })
	n.exports = &actors.ExporterHandle{}
	n.approvals = actors.NewApprovals(n.system, n.store, n.bus, actors.ApprovalOptions{TTL: cfg.ApprovalTTL}, log.Named("approvals"))
	n.waits = actors.NewApprovalWaits(n.shared, log.Named("approvals"))
	waits := n.waits
	n.goroutines.Go(func() { waits.Run(feedCtx) })
	n.callbacks = actors.NewApprovalCallbacks(feedCtx, n.store, outbound.ExportPoster(cfg.AllowPrivateTargets), log.Named("approvals"))
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
	n.jobs = &actors.JobStats{Store: n.store, NodeID: cfg.NodeID, Log: log.Named("maintenance")}
	var pub ed25519.PublicKey
	if n.signer != nil {
		pub = n.signer.PublicKey()
	}
	n.maintenance = actors.NewMaintenance(n.store, actors.MaintenanceOptions{PublicKey: pub,
		Retention: time.Duration(cfg.AuditRetentionDays) * 24 * time.Hour, IsLeader: n.leader.IsLeader, Events: n.bus},
		log.Named("maintenance"))
	n.mcp = actors.NewMCPRegistry(n.store, n.bus, n.invalidations, mcpFetch(cfg.AllowPrivateTargets, n.version, n.mcpCredentials),
		actors.NewMCPSlots(cfg.MCPDiscoveryConcurrency), log.Named("mcp"))
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
		{Name: actors.JobApprovalCallbacks, Producer: actors.NewApprovalCallbackSweep(n.callbacks, approvalCallbackSweep, n.leader.IsLeader),
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
	a, err := actors.NewAuthorizer(n.system, n.store, n.shared, n.engine, writerPID, n.bus, n.heartbeat, actors.AuthorizerOptions{
		RateCapacity: cfg.RateLimitCapacity, RateRefill: cfg.RateLimitRefillRate, QuotaLimit: cfg.QuotaLimit, QuotaWindow: cfg.QuotaWindow,
		ReplayWindow: cfg.ReplayWindow, SkillCacheCapacity: cfg.SkillCacheCapacity,
		MCPServerCacheCapacity: cfg.MCPServerCacheCapacity, MCPToolCacheCapacity: cfg.MCPToolCacheCapacity, RiskWeightsTTL: cfg.RiskWeightsCacheTTL,
		CommitTimeout: cfg.RequestTimeout, EarlyAnswer: !cfg.Cluster && cfg.EarlyAnswer, Lost: &n.earlyLost, Pending: n.earlyPending,
		OnLost: n.recordLost, Approvals: n.approvals, Invalidations: n.invalidations, RefusalStatus: httpapi.RefusalStatus}, n.log.Named("authorize"))
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

// Start listens on SVC_LISTEN_ADDR and SVC_DEBUG_ADDR and serves; Failed
// reports a listener that stops serving.
func (n *Node) Start() error {
	cfg, log := n.cfg, n.log
	ln, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.ListenAddr, err)
	}
	dln, err := net.Listen("tcp", cfg.DebugAddr)
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("listen %s: %w", cfg.DebugAddr, err)
	}
	n.ln, n.dln = ln, dln
	n.srv = &http.Server{Handler: n.api, ReadHeaderTimeout: cfg.HeaderReadTimeout, IdleTimeout: 120 * time.Second,
		ErrorLog: log.Named("http").StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})}
	n.dsrv = &http.Server{Handler: n.api.DebugHandler(), ReadHeaderTimeout: 10 * time.Second}
	n.failed = make(chan error, 2)
	n.srv.RegisterOnShutdown(n.api.CloseStreams)
	n.srv.RegisterOnShutdown(n.waits.Close) // waiting requests answer now, not at the end of their waits
	srv, dsrv := n.srv, n.dsrv
	n.goroutines.Go(func() { n.failed <- serveListener(srv, ln, cfg) })
	n.goroutines.Go(func() { n.failed <- dsrv.Serve(dln) })
	n.api.MarkStarted()
	log.Info("gateway started", "addr", ln.Addr().String(), "debug_addr", dln.Addr().String(), "backend", n.store.Backend(),
		"version", n.version, "node", cfg.NodeID)
	return nil
}

// Addr is the API's listening address (after Start).
func (n *Node) Addr() net.Addr { return n.ln.Addr() }

// Failed delivers the error of a listener that stopped serving (after
// Start; nil channel before).
func (n *Node) Failed() <-chan error { return n.failed }

// Shutdown stops accepting and drains in-flight requests (within ctx),
// then hands the queued SOC events to the pipeline, stops the background
// tasks (flushing what the actors buffer), the actors and the shared
// state, and waits for the node's goroutines. The store stays open for its
// owner to close (DESIGN §3).
func (n *Node) Shutdown(ctx context.Context) error {
	log := n.log
	if n.srv != nil {
		if err := n.srv.Shutdown(ctx); err != nil {
			log.Warn("in-flight requests did not finish in time", "error", err)
		}
		_ = n.dsrv.Close()
	}
	// The requests are done: hand the queued SOC events to the pipeline
	// (and the notifier and exporter) before they stop, so that every
	// event is evaluated and its alerts written by their final flush.
	close(n.busStop)
	<-n.busDone
	var err error
	if serr := n.sup.Stop(5 * time.Second); serr != nil {
		log.Warn("background tasks did not stop cleanly", "error", serr)
		err = serr
	}
	n.release()
	n.goroutines.Close()
	// Every goroutine ends now: the listeners' servers are closed, the
	// bus stopped, the feed's and the invalidations' contexts cancelled.
	n.goroutines.Wait()
	log.Info("gateway stopped")
	return err
}

// mcpSealers derives the MCP proxy's keys from the installation secret
// "mcp_proxy": 32 random bytes the first node stores and every node
// sharing the database reads, so a session sealed on one node opens on
// any other, and after a restart.
func mcpSealers(ctx context.Context, store persistence.Store) (sessions, credentials *mcpproxy.Sealer, err error) {
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	secret, err := store.InstallationSecret(ctx, "mcp_proxy", fresh)
	if err != nil {
		return nil, nil, err
	}
	sk, err := mcpproxy.DeriveKey(secret, "mcp proxy sessions")
	if err != nil {
		return nil, nil, err
	}
	ck, err := mcpproxy.DeriveKey(secret, "mcp upstream credentials")
	if err != nil {
		return nil, nil, err
	}
	if sessions, err = mcpproxy.NewSealer(sk); err != nil {
		return nil, nil, err
	}
	credentials, err = mcpproxy.NewSealer(ck)
	return sessions, credentials, err
}
