package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/pprof"
	"runtime"
	rtmetrics "runtime/metrics"
	"time"

	"svc/actors"
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
	c, ok := s.Registry.Get(componentAuditWriter)
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

// runtimeBody is /debug/runtime (SPEC 4.10), in Go's terms: tasks are
// goroutines, workers are Ps, polls are scheduler dispatches.
type runtimeBody struct {
	ActiveTasksCount     int     `json:"active_tasks_count"`
	WorkersCount         int     `json:"workers_count"`
	TotalPollCount       uint64  `json:"total_poll_count"`
	GlobalQueueDepth     int     `json:"global_queue_depth"`
	SchedulerUtilization float64 `json:"scheduler_utilization"`
	UptimeSecs           int64   `json:"uptime_secs"`
}

// DebugHandler serves /debug/runtime, pprof and the chaos hook on the
// loopback-only debug listener.
func (s *Server) DebugHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/runtime", func(w http.ResponseWriter, _ *http.Request) {
		samples := []rtmetrics.Sample{{Name: "/sched/latencies:seconds"}, {Name: "/cpu/classes/total:cpu-seconds"},
			{Name: "/cpu/classes/idle:cpu-seconds"}}
		rtmetrics.Read(samples)
		var polls uint64
		if samples[0].Value.Kind() == rtmetrics.KindFloat64Histogram {
			for _, c := range samples[0].Value.Float64Histogram().Counts {
				polls += c
			}
		}
		util := 0.0
		if samples[1].Value.Kind() == rtmetrics.KindFloat64 && samples[2].Value.Kind() == rtmetrics.KindFloat64 {
			if total := samples[1].Value.Float64(); total > 0 {
				util = 1 - samples[2].Value.Float64()/total
			}
		}
		writeJSON(w, http.StatusOK, runtimeBody{ActiveTasksCount: runtime.NumGoroutine(), WorkersCount: runtime.GOMAXPROCS(0),
			TotalPollCount: polls, GlobalQueueDepth: s.Events.Depth(), SchedulerUtilization: util,
			UptimeSecs: int64(time.Since(s.started).Seconds())})
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

// isStorageFailure reports whether err is the database failing (as opposed
// to a not-found or a conflict).
func isStorageFailure(err error) bool {
	ae, internal := toAPIError(err)
	return internal || ae.Reason == "ServiceUnavailable"
}
