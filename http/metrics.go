package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"svc/actors"
	"svc/leader"
	"svc/mcpregistry"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics is the server's Prometheus registry (never the global one).
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	shed     prometheus.Counter
	// refused counts requests refused for load or time by reason:
	// overloaded (503), tenant_concurrency (429), body_timeout (408).
	refused    *prometheus.CounterVec
	authLocked prometheus.Counter
}

func newMetrics(s *Server) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "svc_http_requests_total",
		Help: "HTTP requests by route and status."}, []string{"method", "route", "code"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "svc_http_request_duration_seconds",
		Help: "HTTP request latency by route.", Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1, 5}},
		[]string{"method", "route"})
	m.shed = prometheus.NewCounter(prometheus.CounterOpts{Name: "svc_http_requests_shed_total",
		Help: "Requests refused with 503 over SVC_MAX_CONCURRENT_REQUESTS."})
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "svc_http_requests_refused_total",
		Help: "Requests refused for load or time: overloaded (503, no slot free for its work), tenant_concurrency (429, the tenant's share held), agent_concurrency (429, the agent token's authorize calls in flight at its rate burst), body_timeout (408, the body did not arrive in time)."},
		[]string{"reason"})
	for _, r := range []string{"overloaded", "tenant_concurrency", "agent_concurrency", "body_timeout"} {
		m.refused.WithLabelValues(r)
	}
	m.authLocked = prometheus.NewCounter(prometheus.CounterOpts{Name: "svc_auth_locked_total",
		Help: "Failed authorize token attempts answered 429 auth_locked (past SVC_AUTH_FAILURE_LIMIT for their address and tenant)."})
	if w := s.WriterMetrics; w != nil {
		m.reg.MustRegister(w.duration, w.size, w.failed)
	}
	m.reg.MustRegister(m.requests, m.latency, m.shed, m.refused, m.authLocked)
	m.reg.MustRegister(shadowCollector{s})
	for _, cs := range [][]prometheus.Collector{httpCollectors(s), nodeCollectors(s), authorizeCollectors(s), outboundCollectors(s), socCollectors(s), streamCollectors(s), maintenanceCollectors(s)} {
		m.reg.MustRegister(cs...)
	}
	return m
}

// httpCollectors are the metrics of the HTTP front: requests in flight, the slots and saturation, and the Go runtime and process.
func httpCollectors(s *Server) []prometheus.Collector {
	return []prometheus.Collector{
		gauge("svc_http_requests_in_flight", "Requests holding one of the SVC_MAX_CONCURRENT_REQUESTS slots.", func() float64 { return float64(s.adm.inFlight()) }),
		gauge("svc_http_requests_in_flight_max", "SVC_MAX_CONCURRENT_REQUESTS.", func() float64 { return float64(s.cfg.MaxConcurrentRequests) }),
		gauge("svc_http_tenant_in_flight_max", "Slots held by the busiest tenant (its share is SVC_MAX_CONCURRENT_PER_TENANT).", func() float64 { return float64(s.adm.busiestTenant()) }),
		gauge("svc_http_bodies_in_flight", "Request bodies being read.", func() float64 { return float64(s.adm.bodies.Load()) }),
		gauge("svc_approval_waiters", "Requests waiting for an approval on this node (GET /approvals/:id?wait=N; SVC_APPROVAL_MAX_WAITERS).",
			func() float64 { return float64(s.waiters.inFlight()) }),
		gauge("svc_http_saturated", "1 while nine slots in ten are held or a request was refused for load within the last minute.", func() float64 { return boolean(s.adm.saturated()) }),
		// The scheduler's run-queue latency beside the defaults: how long
		// runnable goroutines (the group writer's among them) wait for a CPU.
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsScheduler)), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	}
}

// nodeCollectors are the metrics of the database pool, leadership, supervision and the audit writer.
func nodeCollectors(s *Server) []prometheus.Collector {
	return []prometheus.Collector{
		gauge("db_pool_connections_active", "Database connections in use.", func() float64 { return float64(s.Store.PoolStats().Active) }),
		gauge("db_pool_connections_idle", "Idle database connections.", func() float64 { return float64(s.Store.PoolStats().Idle) }),
		gauge("db_pool_connections_max", "Configured maximum database connections.", func() float64 { return float64(s.Store.PoolStats().Max) }),
		gauge("db_pool_connections_size", "Open database connections.", func() float64 { return float64(s.Store.PoolStats().Size) }),
		counter("db_pool_liveness_checks_total", "Checks SVC_DB_TEST_BEFORE_ACQUIRE ran on database connections before handing them out (SQLite: a trivial statement per read; Postgres: a ping per acquire).",
			func() float64 { return float64(s.Store.PoolStats().LivenessChecks) }),
		labeledCounter("db_replica_fallbacks_total", "Reads meant for the read replica (SVC_DB_READ_REPLICA_URL) that the primary answered: reason unavailable when the replica could not be reached, schema when it lacked a table, column or function the read needs (a migration not yet replayed there).",
			"reason", "unavailable", func() float64 { return float64(s.Store.PoolStats().ReplicaFallbacksUnavailable) }),
		labeledCounter("db_replica_fallbacks_total", "Reads meant for the read replica (SVC_DB_READ_REPLICA_URL) that the primary answered: reason unavailable when the replica could not be reached, schema when it lacked a table, column or function the read needs (a migration not yet replayed there).",
			"reason", "schema", func() float64 { return float64(s.Store.PoolStats().ReplicaFallbacksSchema) }),
		gauge("db_pool_acquire_wait_seconds", "Rolling mean wait of the periodic synthetic acquire.", s.Pool.MeanWaitSeconds),
		counter("db_pool_acquire_samples_total", "Synthetic acquires sampled (one per SVC_POOL_HEALTH_SAMPLE_INTERVAL_SECS).",
			func() float64 { return float64(s.Pool.Samples()) }),
		gauge("svc_leader", "1 when this node holds the maintenance lease.", func() float64 { return boolean(s.Leader.IsLeader()) }),
		gauge("svc_background_tasks_dead", "Supervised background tasks whose restart budget is spent.",
			func() float64 { return float64(len(s.Registry.DeadTasks())) }),
		gauge("svc_audit_writer_unhealthy", "1 while audit writes are failing.", func() float64 { return boolean(!s.auditWriterOK()) }),
	}
}

// authorizeCollectors are the metrics of the authorize path and its event bus.
func authorizeCollectors(s *Server) []prometheus.Collector {
	return []prometheus.Collector{
		gauge("svc_events_queue_depth", "SOC events queued for the pipeline.", func() float64 { return float64(s.Events.Depth()) }),
		counter("svc_events_published_total", "SOC events queued for the pipeline.", func() float64 { return float64(s.Events.Published()) }),
		counter("svc_events_dropped_total", "SOC events dropped because the queue was full.", func() float64 { return float64(s.Events.Dropped()) }),
		counter("svc_authorize_decisions_total", "Decisions handed to the group writer.", func() float64 {
			if s.Authorizer == nil {
				return 0
			}
			d, _, _ := s.Authorizer.Stats()
			return float64(d)
		}),
		counter("svc_authorize_best_effort_write_failures_total", "Low-risk allows answered although their decision could not be recorded.", func() float64 {
			if s.Authorizer == nil {
				return 0
			}
			_, f, _ := s.Authorizer.Stats()
			return float64(f)
		}),
		counter("svc_authorize_early_answers_total", "Decisions answered before their commit: low-risk read-only allows on a lone node with SVC_EARLY_ANSWER (SPEC 4.2 rule 10).",
			func() float64 {
				if s.Authorizer == nil {
					return 0
				}
				return float64(s.Authorizer.EarlyAnswers())
			}),
		counter("svc_receipts_resealed_total", "Early-sealed receipts resealed because a write before them failed (their early answer's receipt_hash is not the stored one).",
			func() float64 {
				if s.Resealed == nil {
					return 0
				}
				return float64(s.Resealed.Load())
			}),
		gauge("svc_agent_actors", "Live agent actors on this node (an agent's actor stops after two minutes without a call).", func() float64 {
			if s.Authorizer == nil {
				return 0
			}
			return float64(s.Authorizer.LiveAgents())
		}),
		labeledCounter("svc_approval_callbacks_total", "Approval callbacks (the webhook an agent registered with its call) that this node delivered, or that failed their last attempt.",
			"outcome", "delivered", func() float64 {
				if s.Callbacks == nil {
					return 0
				}
				d, _ := s.Callbacks.Stats()
				return float64(d)
			}),
		labeledCounter("svc_approval_callbacks_total", "Approval callbacks (the webhook an agent registered with its call) that this node delivered, or that failed their last attempt.",
			"outcome", "failed", func() float64 {
				if s.Callbacks == nil {
					return 0
				}
				_, f := s.Callbacks.Stats()
				return float64(f)
			}),
		counter("svc_approval_waits_woken_total", "Approvals whose waiters on this node were woken by a decision, made here or on another node.", func() float64 {
			if s.Waits == nil {
				return 0
			}
			return float64(s.Waits.Woken())
		}),
		counter("svc_approvals_deleted_total", "Stale approvals deleted by the cleanup job.", func() float64 {
			if s.ApprovalsDeleted == nil {
				return 0
			}
			return float64(s.ApprovalsDeleted.Load())
		}),
		counter("svc_authorize_refusals_total", "Calls refused before a decision (403 before policy, 429).", func() float64 {
			if s.Authorizer == nil {
				return 0
			}
			_, _, r := s.Authorizer.Stats()
			return float64(r)
		}),
	}
}

// outboundCollectors are the metrics of the chat notifier and the webhook exporter.
func outboundCollectors(s *Server) []prometheus.Collector {
	return []prometheus.Collector{
		counter("svc_notifications_sent_total", "Outbound chat notifications delivered (2xx).", notifier(s, func(n *actors.NotifierStats) uint64 { return n.Sent.Load() })),
		counter("svc_notifications_failed_total", "Outbound chat notifications that failed or timed out.", notifier(s, func(n *actors.NotifierStats) uint64 { return n.Failed.Load() })),
		counter("svc_notifications_rejected_total", "Outbound chat notifications dropped while the circuit breaker was open.",
			notifier(s, func(n *actors.NotifierStats) uint64 { return n.Rejected.Load() })),
		counter("svc_notifications_dropped_total", "Outbound chat notifications dropped because too many deliveries were in flight.",
			notifier(s, func(n *actors.NotifierStats) uint64 { return n.Dropped.Load() })),
		gauge("svc_notifier_breaker_open", "1 while the outbound chat notifier's circuit breaker is open or half-open.", func() float64 {
			return boolean(s.Notifier != nil && s.Notifier.State() != "closed")
		}),
		counter("svc_webhook_deliveries_sent_total", "Webhook export deliveries answered 2xx (within their attempts).",
			exporter(s, func(h *actors.ExporterHandle) uint64 { return h.Sent.Load() })),
		counter("svc_webhook_deliveries_failed_total", "Webhook export deliveries that failed on every attempt.",
			exporter(s, func(h *actors.ExporterHandle) uint64 { return h.Failed.Load() })),
		counter("svc_webhook_deliveries_dropped_total", "Webhook export deliveries not attempted (too many in flight, or subscriptions unreadable).",
			exporter(s, func(h *actors.ExporterHandle) uint64 { return h.Dropped.Load() })),
		counter("svc_gate_decisions_total", "Decisions of the code-host tool on a pull request taken up by the Security Gate.",
			gateStat(s, func(g *actors.GateStats) uint64 { return g.Decisions.Load() })),
		counter("svc_gate_dropped_total", "Decisions the Security Gate had no room for (16 pull requests in work on this node).",
			gateStat(s, func(g *actors.GateStats) uint64 { return g.Dropped.Load() })),
		counter("svc_gate_failures_total", "Security Gate steps that failed (a code-host call that failed or timed out, or the shared state), each logged and dropped.",
			gateStat(s, func(g *actors.GateStats) uint64 { return g.Failures.Load() })),
		counter("svc_mcp_rediscovery_passes_total", "Passes of the leader's MCP re-discovery job on this node.",
			mcpStat(s, func(m *mcpregistry.RediscoveryStats) uint64 { return m.Passes.Load() })),
		counter("svc_mcp_rediscovery_failures_total", "MCP servers whose scheduled re-discovery failed on this node.",
			mcpStat(s, func(m *mcpregistry.RediscoveryStats) uint64 { return m.Failed.Load() })),
	}
}

func gateStat(s *Server, f func(*actors.GateStats) uint64) func() float64 {
	return func() float64 {
		if s.Gate == nil {
			return 0
		}
		return float64(f(s.Gate))
	}
}

func mcpStat(s *Server, f func(*mcpregistry.RediscoveryStats) uint64) func() float64 {
	return func() float64 {
		if s.MCPRediscovery == nil {
			return 0
		}
		return float64(f(s.MCPRediscovery))
	}
}

// socCollectors are the metrics of the security pipeline.
func socCollectors(s *Server) []prometheus.Collector {
	return []prometheus.Collector{
		gauge("svc_soc_mttd_seconds", "Rolling cumulative mean time from a SOC event to the alert it raised.", soc(s, (*actors.SOCStats).MTTD)),
		gauge("svc_soc_mttr_seconds", "Rolling cumulative mean time from an incident's opening to its closing.", soc(s, (*actors.SOCStats).MTTR)),
		counter("svc_soc_events_processed_total", "SOC events evaluated by the detection pipeline.",
			soc(s, func(st *actors.SOCStats) float64 { return float64(st.Events.Load()) })),
		counter("svc_soc_alerts_total", "Alerts raised.", soc(s, func(st *actors.SOCStats) float64 { return float64(st.Alerts.Load()) })),
		counter("svc_soc_incidents_total", "Incidents opened.", soc(s, func(st *actors.SOCStats) float64 { return float64(st.Incidents.Load()) })),
		counter("svc_soc_shared_conflicts_total", "Clustered: compare-and-swaps of an agent's shared detection state that found it changed since this node last read it (another node's event for the agent came in between; each costs one more round trip).",
			soc(s, func(st *actors.SOCStats) float64 { return float64(st.SharedConflicts.Load()) })),
		counter("svc_soc_shared_observations_total", "Clustered: authorize events this node folded into the installation's shared correlation windows and baselines.",
			soc(s, func(st *actors.SOCStats) float64 { return float64(st.SharedObserved.Load()) })),
		counter("svc_soc_shared_dropped_total", "Clustered: authorize events left out of the shared correlation windows and baselines because the shared state stayed unavailable (retried for 30 s) or the pipeline was stopping.",
			soc(s, func(st *actors.SOCStats) float64 { return float64(st.SharedDropped.Load()) })),
		gauge("svc_soc_correlators", "Live incident correlators on this node (one per tenant and agent with events still in a window).",
			soc(s, func(st *actors.SOCStats) float64 { return float64(st.Correlators.Load()) })),
		counter("svc_soc_durations_skipped_total", "Durations left out of the MTTD and MTTR means (negative or unparseable).",
			soc(s, func(st *actors.SOCStats) float64 { return float64(st.Skipped()) })),
	}
}

// streamCollectors are the metrics of the live feed and the watch streams.
func streamCollectors(s *Server) []prometheus.Collector {
	return []prometheus.Collector{
		gauge("svc_streams_open", "Open watch (SSE) and WebSocket streams.", func() float64 { return float64(s.streams.open.Load()) }),
		counter("svc_stream_subscribers_cut_total", "Live-feed and watch subscribers disconnected for falling behind.", func() float64 {
			n := s.streams.sseCut.Load() + s.streams.wsCut.Load()
			if s.Feed != nil {
				_, _, cut, _ := s.Feed.Stats()
				n += cut
			}
			return float64(n)
		}),
		counter("svc_feed_items_published_total", "Items queued for the live feed (a lone node queues only the items of tenants with a subscriber).", func() float64 {
			if s.Feed == nil {
				return 0
			}
			p, _, _, _ := s.Feed.Stats()
			return float64(p)
		}),
		counter("svc_feed_items_failed_total", "Live-feed items not published (queue full or shared state unavailable).", func() float64 {
			if s.Feed == nil {
				return 0
			}
			_, _, _, f := s.Feed.Stats()
			return float64(f)
		}),
	}
}

func gauge(name, help string, f func() float64) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
}

func counter(name, help string, f func() float64) prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f)
}

// labeledCounter is one series of a counter whose series differ by one
// constant label.
func labeledCounter(name, help, label, value string, f func() float64) prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: prometheus.Labels{label: value}}, f)
}

func boolean(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (m *metrics) observe(rt Route, status int, d time.Duration) {
	m.requests.WithLabelValues(rt.Method, rt.Path, strconv.Itoa(status)).Inc()
	m.latency.WithLabelValues(rt.Method, rt.Path).Observe(d.Seconds())
}

func (m *metrics) handler() http.Handler {
	// The router writes the body itself, so promhttp must not negotiate its
	// own gzip encoding (the header it would set is not the one sent).
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{DisableCompression: true})
}

// notifier reads one of the notifier's counters (0 without a notifier).
func notifier(s *Server, get func(*actors.NotifierStats) uint64) func() float64 {
	return func() float64 {
		if s.Notifier == nil {
			return 0
		}
		return float64(get(s.Notifier))
	}
}

// exporter reads one of the webhook exporter's counters (0 without one).
func exporter(s *Server, get func(*actors.ExporterHandle) uint64) func() float64 {
	return func() float64 {
		if s.Exporter == nil {
			return 0
		}
		return float64(get(s.Exporter))
	}
}

// soc reads one of the SOC pipeline's figures (0 without a pipeline).
func soc(s *Server, get func(*actors.SOCStats) float64) func() float64 {
	return func() float64 {
		if s.SOCStats == nil {
			return 0
		}
		return get(s.SOCStats)
	}
}

// WriterMetrics describes the group writer's commits: their duration
// (retries included) and how many decisions each carried. node/ hands
// Observe to the writer and the value to Deps.
type WriterMetrics struct {
	duration prometheus.Histogram
	size     prometheus.Histogram
	failed   prometheus.Counter
}

// NewWriterMetrics returns the writer's histograms, registered by New.
func NewWriterMetrics() *WriterMetrics {
	return &WriterMetrics{
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "svc_writer_commit_duration_seconds",
			Help:    "Group commits of decisions, audit events and receipts: time from the batch's start to its end, retries included.",
			Buckets: []float64{.0002, .0005, .001, .002, .005, .01, .02, .05, .1, .25, 1, 2.5}}),
		size: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "svc_writer_commit_decisions",
			Help:    "Decisions per group commit.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{Name: "svc_writer_commits_failed_total",
			Help: "Group commits in which at least one decision could not be written."}),
	}
}

// Observe records one group commit (actors.WriterOptions.Observe).
func (w *WriterMetrics) Observe(decisions int, took time.Duration, failed bool) {
	w.duration.Observe(took.Seconds())
	w.size.Observe(float64(decisions))
	if failed {
		w.failed.Inc()
	}
}

// maintenanceCollectors are the metrics of the leader's maintenance jobs
// (runs on this node) and of the receipt integrity job's findings.
func maintenanceCollectors(s *Server) []prometheus.Collector {
	return []prometheus.Collector{
		jobsCollector{s.Jobs},
		gauge("svc_receipt_chains_broken", "Tenants whose receipt chain the last integrity pass on this node found broken (0 before a pass).",
			func() float64 {
				if s.Maintenance == nil {
					return 0
				}
				n, _ := s.Maintenance.BrokenChains()
				return float64(n)
			}),
		counter("svc_receipt_integrity_verified_total", "Receipts verified by the integrity job on this node (new links and re-verified older ones).",
			func() float64 {
				if s.Maintenance == nil {
					return 0
				}
				return float64(s.Maintenance.VerifiedReceipts())
			}),
	}
}

var (
	jobRunsDesc = prometheus.NewDesc("svc_maintenance_job_runs_total", "Runs of a leader job on this node by outcome (ok, failed).",
		[]string{"job", "outcome"}, nil)
	jobLastRunDesc = prometheus.NewDesc("svc_maintenance_job_last_run_timestamp_seconds",
		"Start of a leader job's last run on this node (Unix seconds; 0 before the first).", []string{"job"}, nil)
	jobLastDurationDesc = prometheus.NewDesc("svc_maintenance_job_last_duration_seconds",
		"Duration of a leader job's last run on this node.", []string{"job"}, nil)
	jobLastOKDesc = prometheus.NewDesc("svc_maintenance_job_last_success",
		"1 when a leader job's last run on this node succeeded, 0 when it failed or has not run here.", []string{"job"}, nil)
)

// jobsCollector reports every leader job's runs from its JobStats.
type jobsCollector struct{ jobs *leader.JobStats }

func (c jobsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{jobRunsDesc, jobLastRunDesc, jobLastDurationDesc, jobLastOKDesc} {
		ch <- d
	}
}

func (c jobsCollector) Collect(ch chan<- prometheus.Metric) {
	for _, j := range c.jobs.Snapshot() {
		var last float64
		if !j.LastStart.IsZero() {
			last = float64(j.LastStart.UnixNano()) / 1e9
		}
		ch <- prometheus.MustNewConstMetric(jobRunsDesc, prometheus.CounterValue, float64(j.Runs-j.Failures), j.Name, "ok")
		ch <- prometheus.MustNewConstMetric(jobRunsDesc, prometheus.CounterValue, float64(j.Failures), j.Name, "failed")
		ch <- prometheus.MustNewConstMetric(jobLastRunDesc, prometheus.GaugeValue, last, j.Name)
		ch <- prometheus.MustNewConstMetric(jobLastDurationDesc, prometheus.GaugeValue, j.LastDuration.Seconds(), j.Name)
		ch <- prometheus.MustNewConstMetric(jobLastOKDesc, prometheus.GaugeValue, boolean(j.LastOutcome == "ok"), j.Name)
	}
}

// shadowCollector exports the node's shadow policy outcomes (CONTRACT §18):
// svc_policy_shadow_outcomes_total by policy and decision, and the shadow
// evaluations that failed.
type shadowCollector struct{ s *Server }

var (
	shadowOutcomesDesc = prometheus.NewDesc("svc_policy_shadow_outcomes_total",
		"What shadow policies would have added on live calls, by policy and decision (none of it decided).", []string{"policy", "decision"}, nil)
	shadowFailedDesc = prometheus.NewDesc("svc_policy_shadow_failures_total",
		"Live calls on which the tenant's shadow policies failed to evaluate (the decision stood).", nil, nil)
)

func (c shadowCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- shadowOutcomesDesc
	ch <- shadowFailedDesc
}

func (c shadowCollector) Collect(ch chan<- prometheus.Metric) {
	if c.s.Authorizer == nil {
		ch <- prometheus.MustNewConstMetric(shadowFailedDesc, prometheus.CounterValue, 0)
		return
	}
	counts := c.s.Authorizer.ShadowCounts()
	counts.Each(func(policy, decision string, n uint64) {
		ch <- prometheus.MustNewConstMetric(shadowOutcomesDesc, prometheus.CounterValue, float64(n), policy, decision)
	})
	ch <- prometheus.MustNewConstMetric(shadowFailedDesc, prometheus.CounterValue, float64(counts.Failed()))
}
