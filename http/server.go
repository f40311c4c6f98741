package httpapi

import (
	"context"
	"crypto/ed25519"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/julienschmidt/httprouter"
	"github.com/r3labs/sse/v2"

	"svc/actors"
	"svc/approvalcallback"
	"svc/broadcast"
	"svc/config"
	"svc/control"
	"svc/leader"
	"svc/maintenance"
	"svc/mcpproxy"
	"svc/mcpregistry"
	"svc/messages"
	"svc/outbound"
	"svc/persistence/sharedstate"
	"svc/receipt"
	"svc/rules/policy"
)

// Deps are the server's collaborators, built by node/.
type Deps struct {
	Config *config.Config
	// Store is read only (Reads): every change goes through Control.
	Store      Reads
	Shared     sharedstate.State
	Registry   *actors.Registry
	Leader     *leader.Leadership
	Pool       *actors.PoolSample
	Events     *broadcast.EventBus
	Supervisor *actors.Supervisor
	Authorizer *actors.Authorizer
	// Waits wakes the requests waiting for an approval (?wait=N) when it
	// is decided on any node; nil answers every wait at once.
	Waits *broadcast.ApprovalWaits
	// Callbacks delivers the approval callbacks agents register (nil: no
	// counts on /metrics).
	Callbacks *approvalcallback.Callbacks
	// Invalidations drops cached records on every node after a change;
	// nil (in tests) caches none.
	Invalidations *broadcast.Invalidations
	// SOC is the security pipeline's front; SOCStats its counters.
	SOC      *actors.SOC
	SOCStats *actors.SOCStats
	// Feed is the live SOC feed behind GET /v1/ws/events.
	Feed *broadcast.Feed
	// Notifier counts the outbound chat notifications; ApprovalsDeleted
	// the approval cleanup job's deletions.
	Notifier         *actors.NotifierStats
	ApprovalsDeleted *atomic.Uint64
	Policy           *policy.Engine
	// MCP is the MCP registry: the proxy asks it for a re-discovery when
	// an upstream says its tools changed (an operator's discovery goes
	// through Control).
	MCP *mcpregistry.Registry
	// Control carries out every change (the control plane); required.
	Control *control.Plane
	// MCPRediscovery counts the leader's re-discovery passes.
	MCPRediscovery *mcpregistry.RediscoveryStats
	// Gate counts the Security Gate's decisions, drops and code-host
	// failures.
	Gate *actors.GateStats
	// Jobs records the leader jobs' runs on this node; Maintenance runs
	// the maintenance passes (its chain-integrity figures are metrics).
	Jobs        *leader.JobStats
	Maintenance *maintenance.Maintenance
	// Exporter is the webhook exporter's counters and subscription cache
	// (invalidated after every subscription change); nil without one.
	Exporter *actors.ExporterHandle
	// MCPSessions seals the MCP proxy's session ids and MCPCredentials
	// the servers' upstream credentials (keys derived from the
	// installation secret); without MCPSessions the proxy answers 503.
	MCPSessions    *mcpproxy.Sealer
	MCPCredentials *mcpproxy.Sealer
	// MCPProxyLimits bound the proxy's relays.
	MCPProxyLimits mcpproxy.Limits
	// ReceiptSigner is the receipts' key (nil when unsigned): its public
	// half verifies receipts and is served; it signs receipt exports'
	// headers.
	ReceiptSigner *receipt.Signer
	// WriterMetrics, when set, are the group writer's commit histograms.
	WriterMetrics *WriterMetrics
	// Resealed counts early-sealed receipts resealed after a failed write.
	Resealed *atomic.Uint64
	// Heartbeat hands a heartbeat to the buffering actor (never blocks).
	Heartbeat func(messages.Heartbeat)
	Log       hclog.Logger
	Version   string
	NodeID    string
}

// Server is the API handler.
type Server struct {
	Deps
	cfg    *config.Config
	log    hclog.Logger
	routes []Route
	static map[string]http.Handler
	router *httprouter.Router
	// methods are the HTTP methods of the routes, for 405's Allow.
	methods []string
	adm     *admission
	// waiters counts the requests waiting for an approval
	// (SVC_APPROVAL_MAX_WAITERS, per tenant an even split near the bound).
	waiters *admission
	// streamShare counts each tenant's open streams (its tenant map only:
	// the node's total is streams.open).
	streamShare *admission
	metrics     *metrics
	started     time.Time
	// receiptKey and keyID are ReceiptSigner's public key and key_id (nil
	// and "" when unsigned).
	receiptKey ed25519.PublicKey
	keyID      string
	ready      atomic.Bool
	sse        *sse.Server
	streams    streamStats
	// streamsEnd ends every open stream when the node shuts down
	// (CloseStreams): http.Server.Shutdown neither waits for a hijacked
	// WebSocket nor ends a server-sent event stream, which would hold it
	// until its timeout.
	streamsEnd  context.Context
	closeStream context.CancelFunc
	// MCPProxy relays the MCP proxy's sessions (nil without MCPSessions);
	// mcpDrift paces the discoveries a drifted listing starts.
	MCPProxy *mcpproxy.Proxy
	mcpDrift driftGate
}

// New builds the server and registers every route.
func New(d Deps) *Server {
	s := &Server{Deps: d, cfg: d.Config, log: d.Log.Named("http"), started: time.Now(), sse: newSSEServer(),
		adm:         newAdmission(d.Config.MaxConcurrentRequests, d.Config.MaxConcurrentPerTenant),
		streamShare: newAdmission(0, d.Config.MaxConcurrentPerTenant),
		waiters:     newAdmission(d.Config.ApprovalMaxWaiters, d.Config.ApprovalMaxWaiters)}
	s.streamsEnd, s.closeStream = context.WithCancel(context.Background())
	if d.ReceiptSigner != nil {
		s.receiptKey, s.keyID = d.ReceiptSigner.PublicKey(), d.ReceiptSigner.KeyID()
	}
	if d.MCPSessions != nil {
		s.MCPProxy = mcpproxy.New(outbound.Client(d.Config.AllowPrivateTargets), d.MCPSessions, mcpRevocations{s}, d.MCPProxyLimits, s.log.Named("mcp_proxy"))
	}
	s.metrics = newMetrics(s)
	s.registerProbes()
	s.registerTenants()
	s.registerAgents()
	s.registerAudit()
	s.registerStatus()
	s.registerAuthorize()
	s.registerPolicies()
	s.registerSimulation()
	s.registerSkills()
	s.registerMCP()
	s.registerMCPProxy()
	s.registerCodehost()
	s.registerRisk()
	s.registerDecisions()
	s.registerGraph()
	s.registerEvidence()
	s.registerScoreboard()
	s.registerReceipts()
	s.registerReceiptLog()
	s.registerWitnesses()
	s.registerApprovals()
	s.registerSOC()
	s.registerSOCRules()
	s.registerWebhooks()
	s.registerStreams()
	s.registerOpenAPI()
	s.registerDocs()
	s.registerWhoami()
	s.registerDashboard()
	s.buildMux()
	return s
}

// MarkStarted flips /startupz to 200 once start-up has completed.
func (s *Server) MarkStarted() { s.ready.Store(true) }

// CloseStreams ends every open stream, now and from now on: a WebSocket
// with close status 1001 (going away), a watch stream as if its client had
// left. The node calls it as its shutdown starts (http.Server's
// RegisterOnShutdown), so clients reconnect to another node at once.
func (s *Server) CloseStreams() { s.closeStream() }

// nowUTC is the current time at the storage's microsecond precision, so a
// create response shows what later reads return.
func nowUTC() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// viewAll maps stored rows to their response views (never nil, so an empty
// list encodes as []).
func viewAll[T, V any](rows []T, view func(T) V) []V {
	out := make([]V, len(rows))
	for i, r := range rows {
		out[i] = view(r)
	}
	return out
}
