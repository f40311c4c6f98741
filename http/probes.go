package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/pprof"
	rtmetrics "runtime/metrics"
	"time"

	"svc/actors"
	"svc/control"
)

// health bodies.
type healthBody struct {
	Status string `json:"status"`
	DB     string `json:"db"`
}

type readyBody struct {
	Status               string             `json:"status"`
	BackgroundTasks      string             `json:"background_tasks"`
	DeadBackgroundTasks  []string           `json:"dead_background_tasks"`
	AuditWriter          string             `json:"audit_writer"`
	AuditWriterUnhealthy bool               `json:"audit_writer_unhealthy"`
	SharedState          string             `json:"shared_state"`
	SharedStateBackend   string             `json:"shared_state_backend"`
	Leader               bool               `json:"leader"`
	NodeID               string             `json:"node_id"`
	Components           []actors.Component `json:"components"`
	// Load is "saturated" while nine slots in ten are held or a request
	// was refused for load within the last minute, else "ok"; advisory,
	// like audit_writer.
	Load                   string `json:"load"`
	InFlightRequests       int    `json:"in_flight_requests"`
	MaxConcurrentRequests  int    `json:"max_concurrent_requests"`
	BusiestTenantInFlight  int    `json:"busiest_tenant_in_flight"`
	MaxConcurrentPerTenant int    `json:"max_concurrent_per_tenant"`
	BodiesInFlight         int64  `json:"bodies_in_flight"`
}

type simpleStatus struct {
	Status string `json:"status"`
}

type versionBody struct {
	APIVersion string  `json:"api_version"`
	Deprecated bool    `json:"deprecated"`
	Sunset     *string `json:"sunset,omitempty"`
	Build      string  `json:"build"`
}

func (s *Server) auditWriterOK() bool {
	c, ok := s.Registry.Get(control.ComponentAuditWriter)
	return !ok || c.State == actors.StateOK
}

func (s *Server) registerProbes() {
	s.register(Route{Method: "GET", Path: "/health", Unversioned: true, Tag: "operations", Resp: healthBody{},
		Summary: "Database reachability: 503 with db down when the database does not answer.", Errors: []int{503},
		Handle: s.healthProbe})
	s.register(Route{Method: "GET", Path: "/livez", Unversioned: true, Tag: "operations", Resp: simpleStatus{},
		Summary: "Liveness: no I/O, no dependency checks.",
		Handle:  s.livezProbe})
	s.register(Route{Method: "GET", Path: "/readyz", Unversioned: true, Tag: "operations", Resp: readyBody{}, Errors: []int{503},
		Summary: "Readiness: 503 with background_tasks down and the dead tasks listed when a supervised task has spent its restart budget, or when clustered and Valkey is unreachable; audit_writer and load (saturated while nine request slots in ten are held or a request was refused for load in the last minute, with the counts beside it) are advisory.",
		Handle:  s.readyzProbe})
	s.register(Route{Method: "GET", Path: "/startupz", Unversioned: true, Tag: "operations", Resp: simpleStatus{}, Errors: []int{503},
		Summary: "Startup: 200 once migrations ran and the supervision tree started.",
		Handle:  s.startupzProbe})
	s.register(Route{Method: "GET", Path: "/metrics", Unversioned: true, Tag: "operations", RawBody: "text/plain; version=0.0.4",
		Summary: "Prometheus metrics (text format).", Resp: "",
		Handle: s.metricsPage})
	s.register(Route{Method: "GET", Path: "/version", Tag: "operations", Resp: versionBody{},
		Summary: "API version probe.",
		Handle:  s.versionInfo})
}

// healthProbe serves GET /health.
func (s *Server) healthProbe(c *Call) (any, error) {
	ctx, cancel := context.WithTimeout(c.Ctx(), 3*time.Second)
	defer cancel()
	if err := s.Store.Ping(ctx); err != nil {
		return withStatus{http.StatusServiceUnavailable, healthBody{"degraded", "down"}}, nil
	}
	return healthBody{"ok", "up"}, nil
}

// livezProbe serves GET /livez.
func (s *Server) livezProbe(*Call) (any, error) { return simpleStatus{"ok"}, nil }

// readyzProbe serves GET /readyz.
func (s *Server) readyzProbe(c *Call) (any, error) {
	dead := s.Registry.DeadTasks()
	b := readyBody{Status: "ready", BackgroundTasks: "up", DeadBackgroundTasks: dead, AuditWriter: "ok",
		Leader: s.Leader.IsLeader(), NodeID: s.NodeID, Components: s.Registry.Snapshot(),
		Load: "ok", InFlightRequests: s.adm.inFlight(), MaxConcurrentRequests: s.cfg.MaxConcurrentRequests,
		BusiestTenantInFlight: s.adm.busiestTenant(), MaxConcurrentPerTenant: s.cfg.MaxConcurrentPerTenant,
		BodiesInFlight: s.adm.bodies.Load()}
	if s.adm.saturated() {
		b.Load = "saturated"
	}
	if !s.auditWriterOK() {
		b.AuditWriter, b.AuditWriterUnhealthy = "unhealthy", true
	}
	b.SharedStateBackend, b.SharedState = s.Shared.Backend(), "ok"
	pctx, cancel := context.WithTimeout(c.Ctx(), 2*time.Second)
	defer cancel()
	if err := s.Shared.Ping(pctx); err != nil {
		b.SharedState = "unreachable"
		if s.cfg.Cluster {
			b.Status = "not_ready"
			return withStatus{http.StatusServiceUnavailable, b}, nil
		}
	}
	if len(dead) > 0 {
		b.Status, b.BackgroundTasks = "not_ready", "down"
		return withStatus{http.StatusServiceUnavailable, b}, nil
	}
	return b, nil
}

// startupzProbe serves GET /startupz.
func (s *Server) startupzProbe(*Call) (any, error) {
	if !s.ready.Load() {
		return withStatus{http.StatusServiceUnavailable, simpleStatus{"starting"}}, nil
	}
	return simpleStatus{"started"}, nil
}

// metricsPage serves GET /metrics.
func (s *Server) metricsPage(c *Call) (any, error) {
	rec := &bufferWriter{header: http.Header{}}
	s.metrics.handler().ServeHTTP(rec, c.R)
	return rec.buf, nil
}

// versionInfo serves GET /version.
func (s *Server) versionInfo(c *Call) (any, error) {
	b := versionBody{APIVersion: c.Version, Build: s.Version}
	if c.Version == "v1" {
		sunset := Sunset
		b.Deprecated, b.Sunset = true, &sunset
	}
	return b, nil
}

// bufferWriter captures a handler's output.
type bufferWriter struct {
	header http.Header
	buf    []byte
	status int
}

func (b *bufferWriter) Header() http.Header         { return b.header }
func (b *bufferWriter) Write(p []byte) (int, error) { b.buf = append(b.buf, p...); return len(p), nil }
func (b *bufferWriter) WriteHeader(code int)        { b.status = code }

// runtimeBody is /debug/runtime (SPEC 4.10). SPEC names its fields after
// an async runtime's; here each means its nearest Go equivalent, read from
// the Go runtime's own metrics (runtime/metrics) at the time of the call:
//
//   - active_tasks_count: live goroutines (/sched/goroutines:goroutines).
//   - workers_count: the Ps that run goroutines, GOMAXPROCS
//     (/sched/gomaxprocs:threads).
//   - total_poll_count: how many times a goroutine has been scheduled onto
//     a P since the start (the samples of /sched/latencies:seconds).
//   - global_queue_depth: goroutines ready to run and waiting for a P
//     (/sched/goroutines/runnable:goroutines), the scheduler's backlog.
//   - scheduler_utilization: the share of the Ps' CPU time since the start
//     that was not idle (1 - /cpu/classes/idle / /cpu/classes/total).
//   - uptime_secs: seconds since the server started.
//
// Beside them: the goroutines running and waiting, the runtime's threads,
// the scheduling latency's 99th percentile since the start, the actors
// alive (agent actors, supervised background tasks up) and the depth of
// the queues between them (the SOC event bus).
type runtimeBody struct {
	ActiveTasksCount     int     `json:"active_tasks_count"`
	WorkersCount         int     `json:"workers_count"`
	TotalPollCount       uint64  `json:"total_poll_count"`
	GlobalQueueDepth     int     `json:"global_queue_depth"`
	SchedulerUtilization float64 `json:"scheduler_utilization"`
	UptimeSecs           int64   `json:"uptime_secs"`

	GoroutinesRunning        int     `json:"goroutines_running"`
	GoroutinesWaiting        int     `json:"goroutines_waiting"`
	Threads                  int     `json:"threads"`
	SchedulingLatencyP99Secs float64 `json:"scheduling_latency_p99_secs"`
	AgentActors              int     `json:"agent_actors"`
	BackgroundTasksUp        int     `json:"background_tasks_up"`
	EventBusQueueDepth       int     `json:"event_bus_queue_depth"`
	BackgroundTasksDead      int     `json:"background_tasks_dead"`
	GoroutinesCreated        uint64  `json:"goroutines_created"`
}

// readRuntime fills runtimeBody from runtime/metrics.
func (s *Server) readRuntime() runtimeBody {
	names := []string{"/sched/goroutines:goroutines", "/sched/gomaxprocs:threads", "/sched/latencies:seconds",
		"/sched/goroutines/runnable:goroutines", "/cpu/classes/total:cpu-seconds", "/cpu/classes/idle:cpu-seconds",
		"/sched/goroutines/running:goroutines", "/sched/goroutines/waiting:goroutines", "/sched/threads/total:threads",
		"/sched/goroutines-created:goroutines"}
	samples := make([]rtmetrics.Sample, len(names))
	for i, n := range names {
		samples[i].Name = n
	}
	rtmetrics.Read(samples)
	u := func(i int) uint64 {
		if samples[i].Value.Kind() == rtmetrics.KindUint64 {
			return samples[i].Value.Uint64()
		}
		return 0
	}
	f := func(i int) float64 {
		if samples[i].Value.Kind() == rtmetrics.KindFloat64 {
			return samples[i].Value.Float64()
		}
		return 0
	}
	b := runtimeBody{ActiveTasksCount: int(u(0)), WorkersCount: int(u(1)), GlobalQueueDepth: int(u(3)), //nolint:gosec // small counts
		GoroutinesRunning: int(u(6)), GoroutinesWaiting: int(u(7)), Threads: int(u(8)), GoroutinesCreated: u(9), //nolint:gosec // small counts
		UptimeSecs:         int64(time.Since(s.started).Seconds()),
		EventBusQueueDepth: s.Events.Depth()}
	if samples[2].Value.Kind() == rtmetrics.KindFloat64Histogram {
		h := samples[2].Value.Float64Histogram()
		for _, c := range h.Counts {
			b.TotalPollCount += c
		}
		b.SchedulingLatencyP99Secs = histogramQuantile(h, 0.99)
	}
	if total := f(4); total > 0 {
		b.SchedulerUtilization = 1 - f(5)/total
	}
	if s.Authorizer != nil {
		b.AgentActors = s.Authorizer.LiveAgents()
	}
	for _, c := range s.Registry.Snapshot() {
		switch {
		case !c.Task:
		case c.State == actors.StateDead:
			b.BackgroundTasksDead++
		default:
			b.BackgroundTasksUp++
		}
	}
	return b
}

// histogramQuantile is the upper bound of the bucket holding quantile q of
// h (0 when empty; the largest finite bound for the last bucket).
func histogramQuantile(h *rtmetrics.Float64Histogram, q float64) float64 {
	var total uint64
	for _, c := range h.Counts {
		total += c
	}
	if total == 0 {
		return 0
	}
	want, seen := uint64(math.Ceil(q*float64(total))), uint64(0)
	for i, c := range h.Counts {
		seen += c
		if seen >= want {
			hi := h.Buckets[i+1]
			if math.IsInf(hi, 1) {
				return h.Buckets[i]
			}
			return hi
		}
	}
	return h.Buckets[len(h.Buckets)-1]
}

// DebugHandler serves /debug/runtime, pprof and the chaos hook on the
// loopback-only debug listener.
func (s *Server) DebugHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/runtime", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.readRuntime())
	})
	// POST /debug/tasks/{name}/fail injects one failure into a supervised
	// background task (chaos drills; loopback only).
	mux.HandleFunc("POST /debug/tasks/{name}/fail", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		if err := s.Supervisor.InjectFault(name, "injected via /debug/tasks"); err != nil {
			if errors.Is(err, actors.ErrUnknownTask) {
				writeEnvelope(w, "", notFound("background task "+name))
				return
			}
			writeEnvelope(w, "", apiErr("InternalError", "internal", "%v", err))
			return
		}
		writeJSON(w, http.StatusAccepted, map[string]string{"task": name, "status": "fault_injected"})
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	raw, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(raw)
}
