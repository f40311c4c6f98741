// Package node assembles one gateway node: configuration, then
// persistence and shared state, then the actors and their supervisor, then
// the HTTP layer (DESIGN §1). New builds a node without listening (its
// Handler serves in-process), Start listens on the configured addresses,
// Shutdown drains and stops it in order (DESIGN §3). cmd/svc's serve is a
// few lines over it.
package node

import (
	"context"
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
	"svc/approvalcallback"
	"svc/broadcast"
	"svc/config"
	"svc/control"
	httpapi "svc/http"
	"svc/leader"
	"svc/maintenance"
	"svc/mcpproxy"
	"svc/mcpregistry"
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
	leader                      *leader.Leadership
	jobs                        *leader.JobStats
	maintenance                 *maintenance.Maintenance
	invalidations               *broadcast.Invalidations
	waits                       *broadcast.ApprovalWaits
	callbacks                   *approvalcallback.Callbacks
	pool                        *actors.PoolSample
	bus                         *broadcast.EventBus
	notifyStats                 *actors.NotifierStats
	socStats                    *actors.SOCStats
	feed                        *broadcast.Feed
	exports                     *actors.ExporterHandle
	mcp                         *mcpregistry.Registry
	mcpRediscovery              mcpregistry.RediscoveryStats
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
// nonces and the runs' taint, starts the actors under their supervisor and builds the HTTP
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
	// Before serving: a run tainted before a restart is tainted after it.
	if err := n.authorizer.SeedRuns(ctx); err != nil {
		return fmt.Errorf("restore the runs' taint: %w", err)
	}
	n.subscribe()
	plane := control.New(control.Deps{Config: n.cfg, Store: n.store, Registry: n.registry, MCP: n.mcp, Invalidations: n.invalidations, Approvals: n.approvals,
		Policies: n.authorizer, Engine: n.engine, Exporter: n.exports, MCPCredentials: n.mcpCredentials, Live: n.authorizer}).WithLogger(n.log)
	n.api = httpapi.New(httpapi.Deps{Control: plane, Config: n.cfg, Store: n.store, Shared: n.shared, Registry: n.registry, Leader: n.leader,
		Pool: n.pool, Events: n.bus, Supervisor: n.sup, Authorizer: n.authorizer, Waits: n.waits, Callbacks: n.callbacks,
		SOC: actors.NewSOC(n.socStats), Invalidations: n.invalidations, SOCStats: n.socStats, Feed: n.feed,
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
	n.Attach(&http.Server{ReadHeaderTimeout: cfg.HeaderReadTimeout})
	n.dsrv = &http.Server{Handler: n.api.DebugHandler(), ReadHeaderTimeout: 10 * time.Second}
	n.failed = make(chan error, 2)
	srv, dsrv := n.srv, n.dsrv
	n.goroutines.Go(func() { n.failed <- serveListener(srv, ln, cfg) })
	n.goroutines.Go(func() { n.failed <- dsrv.Serve(dln) })
	log.Info("gateway started", "addr", ln.Addr().String(), "debug_addr", dln.Addr().String(), "backend", n.store.Backend(),
		"version", n.version, "node", cfg.NodeID)
	return nil
}

// Attach makes srv the node's API server, as Start's: the node's handler
// and timeouts, the streams closed and waiting requests answered when srv
// shuts down (Shutdown shuts it down first). Start attaches its own server;
// tests attach an httptest server's (Config) and serve the node in process
// without a configured port. The node is marked started (GET /startupz).
func (n *Node) Attach(srv *http.Server) {
	srv.Handler = n.api
	srv.ReadHeaderTimeout, srv.IdleTimeout = n.cfg.HeaderReadTimeout, 120*time.Second
	srv.ErrorLog = n.log.Named("http").StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})
	srv.RegisterOnShutdown(n.api.CloseStreams)
	srv.RegisterOnShutdown(n.waits.Close) // waiting requests answer now, not at the end of their waits
	n.srv = srv
	n.api.MarkStarted()
}

// DebugHandler is the debug listener's handler (/metrics, /readyz, pprof),
// to serve in process beside Attach.
func (n *Node) DebugHandler() http.Handler { return n.api.DebugHandler() }

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
	}
	if n.dsrv != nil {
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
