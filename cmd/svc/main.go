// Command svc is the authorization gateway for AI agents.
//
// # Usage
//
//	svc [serve]               run the gateway (the default)
//	svc migrate               apply database migrations and exit
//	svc tenants create NAME   create a tenant, print its id and admin token once
//	svc verify-receipts [-public-key BASE64] FILE  verify an exported receipt chain offline
//	svc version               print the build version
//
// Configuration comes from the environment (README.md lists every
// variable); an invalid value stops the process with a message naming it.
package main

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/hashicorp/go-hclog"

	"svc/actors"
	"svc/config"
	httpapi "svc/http"
	"svc/messages"
	"svc/persistence"
	"svc/persistence/postgres"
	"svc/persistence/sharedstate"
	"svc/persistence/sqlite"
	"svc/receipt"
	"svc/rules/policy"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// Exit codes.
const (
	exitOK     = 0
	exitError  = 1
	exitConfig = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func usage(w io.Writer) {
	_, _ = fmt.Fprintln(w, "usage: svc [serve] | svc migrate | svc tenants create NAME | svc verify-receipts [-public-key BASE64] FILE | svc version")
}

func run(args []string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 {
		cmd = args[0]
	}
	switch cmd {
	case "version", "--version", "-v":
		_, _ = fmt.Fprintln(stdout, "svc", version)
		return exitOK
	case "help", "--help", "-h":
		usage(stdout)
		return exitOK
	case "verify-receipts":
		return verifyReceipts(args[1:], stdout, stderr)
	case "serve", "migrate", "tenants":
	default:
		_, _ = fmt.Fprintf(stderr, "svc: unknown command %q\n", cmd)
		usage(stderr)
		return exitConfig
	}
	if cmd == "tenants" && (len(args) != 3 || args[1] != "create" || args[2] == "") {
		_, _ = fmt.Fprintln(stderr, "usage: svc tenants create NAME")
		return exitConfig
	}
	cfg, err := config.FromEnvironment()
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "svc: invalid configuration:")
		_, _ = fmt.Fprintln(stderr, err)
		return exitConfig
	}
	log := newLogger(cfg, stderr)
	ctx := context.Background()
	store, err := openStore(ctx, cfg)
	if err != nil {
		log.Error("cannot open the database", "backend", cfg.DBBackend, "error", err)
		return exitError
	}
	if !cfg.Cluster {
		// A lone node makes every agent write through this process, so the
		// token and binding reads of authorize can be cached with
		// synchronous invalidation (persistence.CachedStore).
		store = persistence.NewCachedStore(store, 100_000)
		if cfg.DBBackend == config.BackendPostgres && cmd == "serve" {
			log.Warn("SVC_CLUSTER is false: this node caches agent tokens and seals receipts on arrival (and answers low-risk allows early unless SVC_EARLY_ANSWER=false), as a lone node; "+
				"if another node shares this database, set SVC_CLUSTER=true on every node", "cache_lifetime", persistence.CacheLifetime)
		}
	}
	defer func() { _ = store.Close() }()
	switch cmd {
	case "migrate":
		_, _ = fmt.Fprintf(stdout, "migrations applied (%s)\n", cfg.DBBackend)
		return exitOK
	case "tenants":
		t, tok, err := httpapi.NewTenant(ctx, store, args[2], "cli")
		if errors.Is(err, persistence.ErrConflict) {
			_, _ = fmt.Fprintf(stderr, "svc: a tenant named %q already exists\n", args[2])
			return exitError
		}
		if err != nil {
			log.Error("cannot create the tenant", "error", err)
			return exitError
		}
		_, _ = fmt.Fprintf(stdout, "tenant_id: %s\nname: %s\noperator_token: %s\n(the token is shown once; it has the admin role)\n", t.ID, t.Name, tok)
		return exitOK
	}
	if err := serve(cfg, store, log, stdout); err != nil {
		log.Error("gateway stopped with an error", "error", err)
		return exitError
	}
	return exitOK
}

func newLogger(cfg *config.Config, w io.Writer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "svc", Level: hclog.LevelFromString(cfg.LogLevel), Output: w,
		JSONFormat: cfg.LogFormat == "json", TimeFormat: time.RFC3339Nano})
}

func openStore(ctx context.Context, cfg *config.Config) (persistence.Store, error) {
	if cfg.DBBackend == config.BackendPostgres {
		return postgres.Open(ctx, postgres.Options{URL: cfg.DatabaseURL, ReplicaURL: cfg.ReadReplicaURL, PoolSize: cfg.DBPoolSize,
			IdleTimeout: cfg.DBIdleTimeout, MaxLifetime: cfg.DBMaxLifetime, AcquireTimeout: cfg.DBAcquireTimeout,
			TestBeforeAcquire: cfg.DBTestBeforeAcquire})
	}
	return sqlite.Open(ctx, sqlite.Options{Path: cfg.SQLitePath, PoolSize: cfg.DBPoolSize, IdleTimeout: cfg.DBIdleTimeout,
		MaxLifetime: cfg.DBMaxLifetime, AcquireTimeout: cfg.DBAcquireTimeout})
}

// bootstrap creates the SVC_BOOTSTRAP_TENANT tenant on a database that does
// not have it yet and prints its admin token, once.
func bootstrap(ctx context.Context, cfg *config.Config, store persistence.Store, log hclog.Logger, stdout io.Writer) error {
	if cfg.BootstrapTenant == "" {
		return nil
	}
	if _, err := store.GetTenantByName(ctx, cfg.BootstrapTenant); err == nil {
		return nil
	} else if !errors.Is(err, persistence.ErrNotFound) {
		return err
	}
	t, tok, err := httpapi.NewTenant(ctx, store, cfg.BootstrapTenant, "bootstrap")
	if errors.Is(err, persistence.ErrConflict) {
		return nil // another node bootstrapped it first
	}
	if err != nil {
		return err
	}
	log.Info("bootstrapped tenant", "tenant_id", t.ID, "name", t.Name)
	base := "http://" + cfg.ListenAddr
	_, _ = fmt.Fprintf(stdout, `
================================================================================
 Bootstrapped tenant %q (id %s).
 Its admin operator token is shown ONCE; store it now:

   %s

 Try it:
   curl -H "Authorization: Bearer %s" %s/v2/agents
   curl -X POST -H "Authorization: Bearer %s" -H "Content-Type: application/json" \
        -d '{"name":"my-agent"}' %s/v2/agents
================================================================================

`, t.Name, t.ID, tok, tok, base, tok, base)
	return nil
}

func serve(cfg *config.Config, store persistence.Store, log hclog.Logger, stdout io.Writer) error {
	ctx := context.Background()
	setGCPercent(cfg, log)
	if err := bootstrap(ctx, cfg, store, log, stdout); err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	shared, err := openSharedState(ctx, cfg)
	if err != nil {
		return fmt.Errorf("shared state: %w", err)
	}
	defer func() { _ = shared.Close() }()
	// The replay nonces of the last window, back from the database: a lone
	// node's in-process state starts empty, and Valkey may have been wiped.
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	if n, err := actors.RestoreNonces(rctx, store, shared, cfg.ReplayWindow); err != nil {
		log.Warn("replay nonces not restored; nonces used before this start may be accepted again within their window", "error", err)
	} else if n > 0 {
		log.Info("replay nonces restored", "nonces", n, "window", cfg.ReplayWindow)
	}
	cancel()
	// A lone node (SVC_CLUSTER=false) seals receipts on arrival and answers
	// low-risk read-only allows before their commit (SPEC 4.2 rule 10);
	// these count what that costs when a write then fails.
	var earlyLost, resealed atomic.Uint64
	earlyPending := &actors.EarlyPending{}
	onReseal := func(n int) { resealed.Add(uint64(max(n, 0))) }
	engine, err := policy.NewEngine(policy.Options{PolicyPath: cfg.PolicyFile})
	if err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	var signer *receipt.Signer
	if len(cfg.ReceiptSeed) > 0 {
		if signer, err = receipt.NewSigner(cfg.ReceiptSeed); err != nil {
			return fmt.Errorf("SVC_RECEIPT_SIGNING_KEY: %w", err)
		}
	}
	system := actors.NewSystem(log.Named("actors"))
	registry := actors.NewRegistry()
	registry.Register("audit_writer", false)
	writerHealth := func(err error) {
		if err != nil {
			registry.Set("audit_writer", actors.StateDegraded, err.Error())
			return
		}
		registry.Set("audit_writer", actors.StateOK, "")
	}
	leader := &actors.Leadership{}
	invalidations := actors.NewInvalidations(shared, log.Named("invalidate"))
	pool := &actors.PoolSample{}
	bus := actors.NewEventBus(system.Root, cfg.EventBufferSize)
	var approvalsDeleted atomic.Uint64
	notifyStats := &actors.NotifierStats{}
	socStats := &actors.SOCStats{}
	feed := actors.NewFeed(shared, log.Named("feed"))
	feedCtx, stopFeed := context.WithCancel(context.Background())
	defer stopFeed()
	go feed.Run(feedCtx)
	var notifierPID, socPIDRef atomic.Pointer[actor.PID]
	exports := &actors.ExporterHandle{}
	var exporterPID atomic.Pointer[actor.PID]
	approvals := actors.NewApprovals(system, store, bus, actors.ApprovalOptions{TTL: cfg.ApprovalTTL}, log.Named("approvals"))

	// A decision answered but not recorded (SPEC 4.2 rule 10's best
	// effort) is a hole in the tenant's audit: counted, logged where it
	// happens, and a HIGH alert for the tenant (rate-limited by the
	// pipeline).
	recordLost := func(w *persistence.DecisionWrite, err error) {
		if pid := socPIDRef.Load(); pid != nil {
			system.Root.Send(pid, &messages.RecordLost{TenantID: w.Decision.TenantID, AgentID: w.Decision.AgentID,
				DecisionID: w.Decision.ID, Error: err.Error(), At: time.Now()})
		}
	}
	writerMetrics := httpapi.NewWriterMetrics()
	// HIGH alerts and incidents go to the chat notifier (SPEC 6.4) and to
	// the webhook exporter (SPEC 6.5), each its own copy.
	socOptions := actors.SOCOptions{Feed: feed, Notify: func(n messages.Notification) {
		if pid := notifierPID.Load(); pid != nil {
			system.Root.Send(pid, &n)
		}
		if pid := exporterPID.Load(); pid != nil {
			note := n
			system.Root.Send(pid, &note)
		}
	}}
	if cfg.Cluster {
		// Clustered, the correlation windows and behavioural baselines are
		// the installation's, kept in the shared state.
		socOptions.Shared = actors.NewSharedDetection(shared, socStats, log.Named("soc"))
	}
	children := []actors.ChildSpec{
		{Name: "heartbeat_flusher", Producer: actors.NewHeartbeatBuffer(store, cfg.HeartbeatFlushInterval, log.Named("heartbeat")),
			MaxRestarts: 5, Within: time.Minute, Backoff: 100 * time.Millisecond},
		{Name: "leader_lease", Producer: actors.NewLeaderLease(store, cfg.NodeID, cfg.LeaderElectionInterval, cfg.LeaderLease, leader, log.Named("leader")),
			MaxRestarts: 5, Within: time.Minute, Backoff: time.Second},
		{Name: "group_writer", Producer: actors.NewGroupWriter(store, actors.NewSealer(signer, onReseal), writerHealth,
			actors.WriterOptions{AuditBatchSize: cfg.AuditBatchSize, AuditBatchFlush: cfg.AuditBatchFlush,
				EarlySeal: !cfg.Cluster, EarlyLost: func(w *persistence.DecisionWrite, err error) {
					earlyLost.Add(1)
					recordLost(w, err)
				}, Pending: earlyPending,
				Observe: writerMetrics.Observe, EarlyCommitWait: cfg.EarlyCommitWait}, log.Named("writer")),
			MaxRestarts: 10, Within: time.Minute},
		{Name: "pool_sampler", Producer: actors.NewPoolSampler(store, cfg.PoolHealthSampleInterval, pool, log.Named("pool")),
			MaxRestarts: 5, Within: time.Minute, Backoff: time.Second},
		{Name: "chat_notifier", Producer: actors.NewNotifier(actors.NotifierOptions{Post: webhookPost(cfg.WebhookURL, cfg.AllowPrivateTargets), Secret: cfg.WebhookSecret,
			FailureThreshold: cfg.WebhookFailureThreshold, Cooldown: cfg.WebhookCooldown}, notifyStats, log.Named("notify")),
			MaxRestarts: 10, Within: time.Minute, Backoff: 100 * time.Millisecond},
		{Name: "webhook_exporter", Producer: actors.NewExporter(store, exports, actors.ExporterOptions{
			Post: httpapi.WebhookExportPoster(cfg.AllowPrivateTargets), Version: version}, log.Named("export")),
			MaxRestarts: 10, Within: time.Minute, Backoff: 100 * time.Millisecond},
		{Name: "soc_pipeline", Producer: actors.NewSOCPipeline(store, socStats, socOptions, log.Named("soc")),
			MaxRestarts: 10, Within: time.Minute, Backoff: 100 * time.Millisecond},
		{Name: "approval_cleanup", Producer: actors.NewApprovalCleaner(store, cfg.ApprovalCleanupInterval,
			time.Duration(cfg.ApprovalRetentionDays)*24*time.Hour, leader.IsLeader, &approvalsDeleted, log.Named("approvals")),
			MaxRestarts: 5, Within: time.Hour, Backoff: 5 * time.Second, MaxBackoff: 5 * time.Minute},
	}
	if !cfg.SOCPipeline {
		children = slices.DeleteFunc(children, func(c actors.ChildSpec) bool { return c.Name == "soc_pipeline" })
	}
	sup, err := actors.StartSupervisor(system, registry, log.Named("supervisor"), children)
	if err != nil {
		return err
	}
	heartbeatPID, _ := sup.Child("heartbeat_flusher")
	writerPID, _ := sup.Child("group_writer")
	if pid, ok := sup.Child("chat_notifier"); ok {
		notifierPID.Store(pid)
		bus.Subscribe(pid) // deny and require_approval decisions (SPEC 6.4)
	}
	if pid, ok := sup.Child("webhook_exporter"); ok {
		exporterPID.Store(pid)
		bus.Subscribe(pid) // deny and require_approval decisions (SPEC 6.5)
	}
	socPID, socOn := sup.Child("soc_pipeline") // SVC_SOC_PIPELINE
	if socOn {
		bus.Subscribe(socPID)
		socPIDRef.Store(socPID)
	}
	heartbeat := func(h messages.Heartbeat) { system.Root.Send(heartbeatPID, &h) }
	authorizer, err := actors.NewAuthorizer(system, store, shared, engine, writerPID, bus, heartbeat, actors.AuthorizerOptions{
		RateCapacity: cfg.RateLimitCapacity, RateRefill: cfg.RateLimitRefillRate, QuotaLimit: cfg.QuotaLimit, QuotaWindow: cfg.QuotaWindow,
		ReplayWindow: cfg.ReplayWindow, SkillCacheCapacity: cfg.SkillCacheCapacity, RiskWeightsTTL: cfg.RiskWeightsCacheTTL,
		CommitTimeout: cfg.RequestTimeout, EarlyAnswer: !cfg.Cluster && cfg.EarlyAnswer, Lost: &earlyLost, Pending: earlyPending, OnLost: recordLost,
		Approvals: approvals, Invalidations: invalidations, RefusalStatus: httpapi.RefusalStatus}, log.Named("authorize"))
	if err != nil {
		return err
	}
	// Rule changes, this node's and other nodes', reach the SOC pipeline;
	// webhook subscription changes reach the exporter's cache.
	if socOn {
		invalidations.Subscribe(actors.SOCRulesDrop(system, socPID), messages.CacheSOCRules)
	}
	invalidations.Subscribe(exports.Drop, messages.CacheWebhooks)
	invCtx, stopInvalidations := context.WithCancel(context.Background())
	defer stopInvalidations()
	go invalidations.Run(invCtx)
	busStop, busDone := make(chan struct{}), make(chan struct{})
	go func() { defer close(busDone); bus.Run(busStop) }()

	api := httpapi.New(httpapi.Deps{Config: cfg, Store: store, Shared: shared, Registry: registry, Leader: leader, Pool: pool, Events: bus,
		Supervisor: sup, Authorizer: authorizer, Approvals: approvals, SOC: actors.NewSOC(socStats, invalidations), Invalidations: invalidations, SOCStats: socStats, Feed: feed, Notifier: notifyStats, Exporter: exports, ApprovalsDeleted: &approvalsDeleted, Policy: engine, Resealed: &resealed, WriterMetrics: writerMetrics, ReceiptSigner: signer,
		Log: log, Version: version, NodeID: cfg.NodeID, Heartbeat: heartbeat})

	ln, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.ListenAddr, err)
	}
	dln, err := net.Listen("tcp", cfg.DebugAddr)
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("listen %s: %w", cfg.DebugAddr, err)
	}
	srv := &http.Server{Handler: api, ReadHeaderTimeout: cfg.HeaderReadTimeout, IdleTimeout: 120 * time.Second,
		ErrorLog: log.Named("http").StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})}
	dsrv := &http.Server{Handler: api.DebugHandler(), ReadHeaderTimeout: 10 * time.Second}
	serveErr := make(chan error, 2)
	go func() { serveErr <- serveListener(srv, ln, cfg) }()
	go func() { serveErr <- dsrv.Serve(dln) }()
	api.MarkStarted()
	log.Info("gateway started", "addr", ln.Addr().String(), "debug_addr", dln.Addr().String(), "backend", store.Backend(),
		"version", version, "node", cfg.NodeID)

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	var runErr error
	select {
	case sig := <-sigs:
		log.Info("shutting down", "signal", sig.String())
	case err := <-serveErr:
		if !errors.Is(err, http.ErrServerClosed) {
			runErr = err
			log.Error("listener failed; shutting down", "error", err)
		}
	}
	// Stop accepting and drain in-flight requests, then stop producers and
	// flush what the actors buffer, then close the store (DESIGN §3).
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("in-flight requests did not finish in time", "error", err)
	}
	_ = dsrv.Close()
	// The requests are done: hand the queued SOC events to the pipeline
	// (and the notifier and exporter) before they stop, so that every
	// event is evaluated and its alerts written by their final flush.
	close(busStop)
	<-busDone
	if err := sup.Stop(5 * time.Second); err != nil {
		log.Warn("background tasks did not stop cleanly", "error", err)
	}
	system.Shutdown()
	log.Info("gateway stopped")
	return runErr
}

// verifyReceipts is `svc verify-receipts [-public-key BASE64] FILE`: it verifies an export of
// GET /v1/receipts/export offline (no server, no database) and exits 0 when
// every receipt, link, count and the head hash check out, 1 otherwise.
func verifyReceipts(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("verify-receipts", flag.ContinueOnError)
	fs.SetOutput(stderr)
	pinned := fs.String("public-key", "", "base64 Ed25519 public key the receipts must be signed with (GET /v2/receipts/public-key); "+
		"without it the export is checked against the key its own header names")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		_, _ = fmt.Fprintln(stderr, "usage: svc verify-receipts [-public-key BASE64] FILE")
		return exitConfig
	}
	var want ed25519.PublicKey
	if *pinned != "" {
		raw, err := base64.StdEncoding.DecodeString(*pinned)
		if err != nil || len(raw) != ed25519.PublicKeySize {
			_, _ = fmt.Fprintln(stderr, "svc: -public-key must be the base64 of a 32-byte Ed25519 public key")
			return exitConfig
		}
		want = raw
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "svc: %v\n", err)
		return exitError
	}
	defer func() { _ = f.Close() }()
	rep, err := receipt.VerifyExport(f)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "svc: %v\n", err)
		return exitError
	}
	keyID := rep.KeyID
	if keyID == "" {
		keyID = "(unsigned)"
	}
	_, _ = fmt.Fprintf(stdout, "tenant_id: %s\nreceipts: %d\nchecked: %d\nhead_hash: %s\nkey_id: %s\n", rep.TenantID, rep.Count, rep.Checked, rep.HeadHash, keyID)
	for _, e := range rep.Errors {
		_, _ = fmt.Fprintf(stdout, "error: index %d receipt %s: %s\n", e.Index, e.ReceiptID, e.Error)
	}
	valid := rep.Valid
	if want != nil && !want.Equal(rep.PublicKey) {
		_, _ = fmt.Fprintf(stdout, "error: the export is signed with key_id %s, not with the -public-key given (key_id %s)\n", keyID, receipt.KeyID(want))
		valid = false
	}
	if !valid {
		_, _ = fmt.Fprintln(stdout, "INVALID")
		return exitError
	}
	_, _ = fmt.Fprintln(stdout, "VALID")
	return exitOK
}

// openSharedState connects to Valkey when SVC_VALKEY_URL is set (the state
// nodes must agree on), or keeps that state in process for a lone node.
func openSharedState(ctx context.Context, cfg *config.Config) (sharedstate.State, error) {
	if cfg.ValkeyURL == "" {
		return sharedstate.NewMemory(), nil
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return sharedstate.NewValkey(cctx, cfg.ValkeyURL)
}

// serveListener serves plain HTTP, or TLS when a certificate is configured.
func serveListener(srv *http.Server, ln net.Listener, cfg *config.Config) error {
	if cfg.TLSCert != "" {
		return serveTLS(srv, ln, cfg)
	}
	return srv.Serve(ln)
}

// webhookPost is the outbound chat notifier's transport; nil (a null sink)
// when SVC_WEBHOOK_URL is unset.
func webhookPost(target string, allowPrivate bool) actors.Post {
	if target == "" {
		return nil
	}
	return httpapi.WebhookPoster(target, allowPrivate)
}

// setGCPercent applies SVC_GC_PERCENT unless the operator set GOGC, which
// the Go runtime has applied already. At the default 400 the collector took
// 4% of a loaded gateway's CPU instead of 17% (Postgres) or 1.5% instead of
// 7% (SQLite), for a resident size of about 155 MB instead of 92 MB under
// load; GOMEMLIMIT, honoured by the runtime, caps the heap if memory is
// scarce.
func setGCPercent(cfg *config.Config, log hclog.Logger) {
	if os.Getenv("GOGC") != "" {
		log.Info("GOGC is set; SVC_GC_PERCENT is not applied", "GOGC", os.Getenv("GOGC"))
		return
	}
	debug.SetGCPercent(cfg.GCPercent)
}
