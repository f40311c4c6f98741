package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Report is the result of one loadgen run (one target), as -json writes it.
type Report struct {
	Label       string      `json:"label"`
	Target      string      `json:"target"`
	URL         string      `json:"url"`
	StartedAt   time.Time   `json:"started_at"`
	Agents      int         `json:"agents"`
	Mix         []mixWeight `json:"mix"`
	Duration    string      `json:"phase_duration"`
	Warmup      string      `json:"warmup"`
	GoMaxProcs  int         `json:"loadgen_gomaxprocs"`
	NumCPU      int         `json:"num_cpu"`
	LoadAvgPre  string      `json:"loadavg_before"`
	LoadAvgPost string      `json:"loadavg_after"`
	Phases      []Phase     `json:"phases"`
	// MaxThroughput is the best closed-loop phase's throughput (req/s).
	MaxThroughput float64 `json:"max_throughput"`
	// UnloadedP50Ms is the p50 of the concurrency-1 closed-loop phase, when
	// there is one.
	UnloadedP50Ms *float64 `json:"unloaded_p50_ms,omitempty"`
	// HalfLoad is the open-loop phase at half MaxThroughput.
	HalfLoad *Phase `json:"half_load,omitempty"`
	// Recorded is svc's GET /v2/tenants/stats after the run.
	Recorded map[string]any `json:"svc_tenant_stats,omitempty"`
	// Preflight lists, per class, a problem with the first answer.
	Preflight []string `json:"preflight_problems,omitempty"`
}

// Phase is one measured phase.
type Phase struct {
	Mode        string         `json:"mode"` // closed or open
	Concurrency int            `json:"concurrency,omitempty"`
	TargetRate  float64        `json:"target_rate,omitempty"`
	Seconds     float64        `json:"seconds"`
	Requests    int            `json:"requests"`
	OK          int            `json:"ok"`
	Errors      int            `json:"errors"`
	ErrorsBy    map[string]int `json:"errors_by,omitempty"`
	Mismatches  int            `json:"mismatches"`
	MismatchBy  map[string]int `json:"mismatches_by_class,omitempty"`
	Mismatch    string         `json:"mismatch_example,omitempty"`
	Throughput  float64        `json:"throughput"`
	MeanMs      float64        `json:"mean_ms"`
	P50Ms       float64        `json:"p50_ms"`
	P90Ms       float64        `json:"p90_ms"`
	P99Ms       float64        `json:"p99_ms"`
	P999Ms      float64        `json:"p999_ms"`
	MaxMs       float64        `json:"max_ms"`
	// ServerCPUPerReqUs is the server process's CPU time per measured
	// request (user + system), with -server-pid; ServerCores the cores it
	// kept busy on average.
	ServerCPUPerReqUs  float64 `json:"server_cpu_per_req_us,omitempty"`
	ServerCores        float64 `json:"server_cores,omitempty"`
	LoadgenCPUPerReqUs float64 `json:"loadgen_cpu_per_req_us,omitempty"`
	// DBCPUPerReqUs and DBCores are the same for the database server's
	// process tree, with -db-pid (Postgres: the postmaster).
	DBCPUPerReqUs float64 `json:"db_cpu_per_req_us,omitempty"`
	DBCores       float64 `json:"db_cores,omitempty"`
	// ByClass splits the latencies by call class (read, mutate, ...): which
	// calls make the tail.
	ByClass map[string]ClassLatency `json:"by_class,omitempty"`
}

// ClassLatency is one class's share of a phase.
type ClassLatency struct {
	Requests int     `json:"requests"`
	P50Ms    float64 `json:"p50_ms"`
	P99Ms    float64 `json:"p99_ms"`
	P999Ms   float64 `json:"p999_ms"`
}

// sample is the outcome of one request.
type sample struct {
	lat      time.Duration
	status   int    // 0 for a transport error
	errKind  string // non-empty for an error
	mismatch bool
	class    int
	body     string // first mismatching body, kept for the report
}

// collector gathers samples; open-loop goroutines share one, closed-loop
// workers each own one.
type collector struct {
	mu       sync.Mutex
	lats     []int64
	byClass  map[int][]int64
	errs     map[string]int
	mism     map[string]int
	example  string
	requests int
}

func newCollector() *collector {
	return &collector{byClass: map[int][]int64{}, errs: map[string]int{}, mism: map[string]int{}}
}

func (c *collector) add(s sample) {
	c.requests++
	if s.errKind != "" {
		c.errs[s.errKind]++
		return
	}
	c.lats = append(c.lats, int64(s.lat))
	c.byClass[s.class] = append(c.byClass[s.class], int64(s.lat))
	if s.mismatch {
		c.mism[classes[s.class].name]++
		if c.example == "" {
			c.example = s.body
		}
	}
}

func (c *collector) merge(o *collector) {
	c.requests += o.requests
	c.lats = append(c.lats, o.lats...)
	for k, v := range o.byClass {
		c.byClass[k] = append(c.byClass[k], v...)
	}
	for k, v := range o.errs {
		c.errs[k] += v
	}
	for k, v := range o.mism {
		c.mism[k] += v
	}
	if c.example == "" {
		c.example = o.example
	}
}

type runner struct {
	o      options
	client *http.Client
	raw    *rawPool // nil with -client std
	w      *workload
	next   atomic.Int64
	logf   func(string, ...any)
}

func newClient(o options, conns int) *http.Client {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	return &http.Client{Transport: tr, Timeout: o.timeout}
}

func runLoad(ctx context.Context, o options, stdout, stderr io.Writer) (*Report, error) {
	logf := func(format string, a ...any) {
		if !o.quiet {
			_, _ = fmt.Fprintf(stderr, "loadgen[%s]: %s\n", o.label, fmt.Sprintf(format, a...))
		}
	}
	conns := max(slices.Max(o.concurrency)*2, 256)
	if o.rate > 0 || o.halfLoad {
		conns = max(conns, min(o.maxInflight, 4096))
	}
	client := newClient(o, conns)
	w, err := prepare(ctx, o, client, logf)
	if err != nil {
		return nil, err
	}
	r := &runner{o: o, client: client, w: w, logf: logf}
	if o.subscribers > 0 && o.target == "svc" {
		subs, err := startFeedSubscribers(ctx, o.url, w.opToken, o.subscribers)
		if err != nil {
			return nil, fmt.Errorf("feed subscribers: %w", err)
		}
		defer func() {
			subs.stop()
			logf("%d feed subscribers received %d frames; %d were disconnected by the server", o.subscribers, subs.frames.Load(), subs.ended.Load())
		}()
		logf("%d live-feed subscribers attached", o.subscribers)
	}
	if o.simulate && o.target == "svc" {
		sims := startSimulations(ctx, client, o.url, w.opToken)
		defer func() {
			sims.stop()
			logf("%d policy simulations completed over %d decisions in all (%d answered busy, %d failed)", sims.completed.Load(),
				sims.decisions.Load(), sims.busy.Load(), sims.failed.Load())
		}()
		logf("policy simulations running")
	}
	if o.client == "raw" {
		t, err := newRawTarget(w.endpoint, o.timeout)
		if err != nil {
			return nil, err
		}
		for ai := range w.reqs {
			for ci := range w.reqs[ai] {
				for v := range w.reqs[ai][ci] {
					q := &w.reqs[ai][ci][v]
					q.raw = t.serialize(q.token, q.body)
				}
			}
		}
		r.raw = &rawPool{t: t}
		defer r.raw.closeAll()
	}
	rep := &Report{Label: o.label, Target: o.target, URL: o.url, StartedAt: time.Now().UTC(), Agents: o.agents, Mix: o.mix,
		Duration: o.duration.String(), Warmup: o.warmup.String(), GoMaxProcs: runtime.GOMAXPROCS(0), NumCPU: runtime.NumCPU(),
		LoadAvgPre: loadavg()}
	rep.Preflight = r.preflight(ctx)
	for _, p := range rep.Preflight {
		logf("PREFLIGHT: %s", p)
	}
	if o.rate > 0 {
		rep.Phases = append(rep.Phases, r.openPhase(ctx, o.rate, o.profileOut))
	} else {
		busiest := slices.Max(o.concurrency)
		for _, c := range o.concurrency {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			prof := ""
			if c == busiest {
				prof = o.profileOut
			}
			ph := r.closedPhase(ctx, c, prof)
			rep.Phases = append(rep.Phases, ph)
			if ph.Throughput > rep.MaxThroughput {
				rep.MaxThroughput = ph.Throughput
			}
			if c == 1 && rep.UnloadedP50Ms == nil {
				v := ph.P50Ms
				rep.UnloadedP50Ms = &v
			}
		}
		if o.halfLoad && rep.MaxThroughput > 0 && ctx.Err() == nil {
			ph := r.openPhase(ctx, rep.MaxThroughput/2, "")
			rep.Phases = append(rep.Phases, ph)
			rep.HalfLoad = &rep.Phases[len(rep.Phases)-1]
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	rep.LoadAvgPost = loadavg()
	if o.target == "svc" && w.opToken != "" {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		st, err := tenantStats(sctx, client, o.url, w.opToken)
		cancel()
		if err != nil {
			logf("tenant stats: %v", err)
		} else {
			rep.Recorded = st
		}
	}
	return rep, nil
}

// preflight sends each class once and reports answers that are not the
// expected decision (the policy equivalence check of bench/README.md).
func (r *runner) preflight(ctx context.Context) []string {
	var problems []string
	for ci := range classes {
		if !slices.ContainsFunc(r.o.mix, func(m mixWeight) bool { return m.Class == classes[ci].name }) {
			continue
		}
		req := &r.w.reqs[0][ci][0]
		if r.w.runs > 0 {
			// Each class in a run of its own, as in the phases.
			req = r.w.inRun(req, fmt.Sprintf("preflight%07x", ci))
		}
		s := r.do(ctx, req, time.Now())
		switch {
		case s.errKind != "":
			problems = append(problems, fmt.Sprintf("%s: %s %s", classes[ci].name, s.errKind, s.body))
		case s.mismatch:
			problems = append(problems, fmt.Sprintf("%s: expected %s, got %s", classes[ci].name, req.expected, s.body))
		}
	}
	return problems
}

// do sends one request; lat is measured from start (the scheduled start in
// the open loop).
func (r *runner) do(ctx context.Context, req *request, start time.Time) sample {
	if r.raw != nil {
		return r.doRaw(req, start)
	}
	s := sample{class: req.class}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, r.w.endpoint, bytes.NewReader(req.body))
	if err != nil {
		s.errKind = "request: " + err.Error()
		return s
	}
	hreq.Header.Set("Content-Type", "application/json")
	if req.token != "" {
		hreq.Header.Set("Authorization", "Bearer "+req.token)
	}
	resp, err := r.client.Do(hreq)
	if err != nil {
		s.errKind = "transport: " + transportKind(err)
		return s
	}
	var buf bytes.Buffer
	_, err = buf.ReadFrom(resp.Body)
	_ = resp.Body.Close()
	s.lat = time.Since(start)
	s.status = resp.StatusCode
	if err != nil {
		s.errKind = "transport: read body: " + transportKind(err)
		return s
	}
	if resp.StatusCode/100 != 2 {
		s.errKind = "status " + strconv.Itoa(resp.StatusCode)
		s.body = truncate(buf.String(), 300)
		return s
	}
	if r.o.check && !bytes.Contains(buf.Bytes(), req.expected) {
		s.mismatch = true
		s.body = truncate(buf.String(), 300)
	}
	return s
}

func (r *runner) doRaw(req *request, start time.Time) sample {
	s := sample{class: req.class}
	c, err := r.raw.get()
	if err != nil {
		s.errKind = "transport: " + transportKind(err)
		return s
	}
	status, body, keep, err := c.roundTrip(r.raw.t, req.raw)
	s.lat = time.Since(start)
	s.status = status
	switch {
	case err != nil:
		s.errKind = "transport: " + transportKind(err)
	case status/100 != 2:
		s.errKind = "status " + strconv.Itoa(status)
		s.body = truncate(string(body), 300)
	case r.o.check && !bytes.Contains(body, req.expected):
		s.mismatch = true
		s.body = truncate(string(body), 300)
	}
	if err == nil && keep {
		r.raw.put(c)
	} else {
		c.close()
	}
	return s
}

func transportKind(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "EOF"
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return "no local port"
	}
	return truncate(err.Error(), 80)
}

func truncate(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// closedPhase runs conc workers, each sending its next request as soon as
// the previous answer arrives.
func (r *runner) closedPhase(ctx context.Context, conc int, profileOut string) Phase {
	r.logf("closed loop, concurrency %d: %s warm-up + %s", conc, r.o.warmup, r.o.duration)
	begin := time.Now()
	measureFrom := begin.Add(r.o.warmup)
	end := measureFrom.Add(r.o.duration)
	cols := make([]*collector, conc)
	var wg sync.WaitGroup
	for i := range conc {
		cols[i] = newCollector()
		wg.Add(1)
		go func(c *collector) {
			defer wg.Done()
			for ctx.Err() == nil {
				t0 := time.Now()
				if !t0.Before(end) {
					return
				}
				s := r.do(ctx, r.w.pick(r.next.Add(1)-1), t0)
				if !t0.Before(measureFrom) {
					c.add(s)
				}
			}
		}(cols[i])
	}
	cpu := r.measureCPU(measureFrom, profileOut)
	wg.Wait()
	all := newCollector()
	for _, c := range cols {
		all.merge(c)
	}
	ph := finish(all, r.o.duration)
	ph.Mode, ph.Concurrency = "closed", conc
	cpu.apply(&ph)
	r.logf("  %s", phaseLine(ph))
	return ph
}

// openPhase sends requests at a fixed rate whatever the answers do.
func (r *runner) openPhase(ctx context.Context, rate float64, profileOut string) Phase {
	r.logf("open loop at %.0f req/s: %s warm-up + %s", rate, r.o.warmup, r.o.duration)
	begin := time.Now()
	measureFrom := begin.Add(r.o.warmup)
	total := r.o.warmup + r.o.duration
	interval := time.Duration(float64(time.Second) / rate)
	col := newCollector()
	sem := make(chan struct{}, r.o.maxInflight)
	var wg sync.WaitGroup
	cpu := make(chan cpuDelta, 1)
	go func() { cpu <- r.measureCPU(measureFrom, profileOut) }()
	for i := 0; ctx.Err() == nil; i++ {
		at := begin.Add(time.Duration(i) * interval)
		if at.Sub(begin) >= total {
			break
		}
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
		measured := !at.Before(measureFrom)
		req := r.w.pick(r.next.Add(1) - 1)
		select {
		case sem <- struct{}{}:
		default:
			if measured {
				col.mu.Lock()
				col.add(sample{errKind: "loadgen: in-flight cap reached"})
				col.mu.Unlock()
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := r.do(ctx, req, at)
			<-sem
			if measured {
				col.mu.Lock()
				col.add(s)
				col.mu.Unlock()
			}
		}()
	}
	wg.Wait()
	ph := finish(col, r.o.duration)
	ph.Mode, ph.TargetRate = "open", rate
	d := <-cpu
	d.apply(&ph)
	r.logf("  %s", phaseLine(ph))
	return ph
}

func finish(c *collector, window time.Duration) Phase {
	slices.Sort(c.lats)
	ph := Phase{Seconds: window.Seconds(), Requests: c.requests, OK: len(c.lats), ErrorsBy: c.errs, MismatchBy: c.mism, Mismatch: c.example}
	for _, v := range c.errs {
		ph.Errors += v
	}
	for _, v := range c.mism {
		ph.Mismatches += v
	}
	ph.Throughput = float64(len(c.lats)) / window.Seconds()
	if n := len(c.lats); n > 0 {
		var sum int64
		for _, v := range c.lats {
			sum += v
		}
		ph.MeanMs = ms(sum / int64(n))
		ph.P50Ms, ph.P90Ms, ph.P99Ms, ph.P999Ms = ms(pct(c.lats, 0.50)), ms(pct(c.lats, 0.90)), ms(pct(c.lats, 0.99)), ms(pct(c.lats, 0.999))
		ph.MaxMs = ms(c.lats[n-1])
	}
	for k, lats := range c.byClass {
		if ph.ByClass == nil {
			ph.ByClass = map[string]ClassLatency{}
		}
		slices.Sort(lats)
		ph.ByClass[classes[k].name] = ClassLatency{Requests: len(lats), P50Ms: ms(pct(lats, 0.50)),
			P99Ms: ms(pct(lats, 0.99)), P999Ms: ms(pct(lats, 0.999))}
	}
	return ph
}

// pct is the nearest-rank percentile of sorted values.
func pct(sorted []int64, q float64) int64 {
	n := len(sorted)
	i := int(float64(n)*q+0.999999) - 1
	return sorted[min(max(i, 0), n-1)]
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

// ---- CPU accounting and profiling ----

type cpuDelta struct {
	server time.Duration
	db     time.Duration
	self   time.Duration
	wall   time.Duration
	ok     bool
	dbOK   bool
}

// measureCPU waits until from, then samples the server's and its own CPU
// time over the phase's measured window (and takes the CPU profile, when
// asked). It returns when the window has passed.
func (r *runner) measureCPU(from time.Time, profileOut string) cpuDelta {
	time.Sleep(time.Until(from))
	var profDone chan struct{}
	if profileOut != "" && r.o.profileURL != "" {
		profDone = make(chan struct{})
		secs := max(int(r.o.duration.Seconds())-1, 1)
		go func() {
			defer close(profDone)
			if err := fetchProfile(r.o.profileURL, secs, profileOut); err != nil {
				r.logf("profile: %v", err)
			} else {
				r.logf("CPU profile (%ds) written to %s", secs, profileOut)
			}
		}()
	}
	s0, ok0 := procCPU(r.o.serverPID)
	d0, dok0 := treeCPU(r.o.dbPID)
	m0 := selfCPU()
	t0 := time.Now()
	time.Sleep(r.o.duration)
	s1, ok1 := procCPU(r.o.serverPID)
	d1, dok1 := treeCPU(r.o.dbPID)
	m1 := selfCPU()
	if profDone != nil {
		<-profDone
	}
	return cpuDelta{server: s1 - s0, db: d1 - d0, self: m1 - m0, wall: time.Since(t0), ok: ok0 && ok1, dbOK: dok0 && dok1}
}

func (d cpuDelta) apply(ph *Phase) {
	if ph.OK == 0 {
		return
	}
	if d.ok {
		ph.ServerCPUPerReqUs = float64(d.server.Microseconds()) / float64(ph.OK)
		ph.ServerCores = d.server.Seconds() / d.wall.Seconds()
	}
	if d.dbOK {
		ph.DBCPUPerReqUs = float64(d.db.Microseconds()) / float64(ph.OK)
		ph.DBCores = d.db.Seconds() / d.wall.Seconds()
	}
	ph.LoadgenCPUPerReqUs = float64(d.self.Microseconds()) / float64(ph.OK)
}

// procCPU reads utime + stime of a process from /proc.
func procCPU(pid int) (time.Duration, bool) {
	st, ok := procStat(pid)
	if !ok {
		return 0, false
	}
	return st.own, true
}

type pstat struct {
	ppid     int
	own      time.Duration // utime + stime
	children time.Duration // cutime + cstime: children that exited and were reaped
}

// procStat parses /proc/PID/stat. Times are in clock ticks of 10 ms (the
// Linux USER_HZ).
func procStat(pid int) (pstat, bool) {
	if pid <= 0 {
		return pstat{}, false
	}
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return pstat{}, false
	}
	// The command name (field 2) may hold spaces: fields count from the ")".
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return pstat{}, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return pstat{}, false
	}
	var v [5]int64
	for k, idx := range []int{1, 11, 12, 13, 14} { // ppid, utime, stime, cutime, cstime
		n, err := strconv.ParseInt(f[idx], 10, 64)
		if err != nil {
			return pstat{}, false
		}
		v[k] = n
	}
	tick := 10 * time.Millisecond
	return pstat{ppid: int(v[0]), own: time.Duration(v[1]+v[2]) * tick, children: time.Duration(v[3]+v[4]) * tick}, true
}

// treeCPU is the CPU time of a process, its live descendants, and the
// children it has reaped (a Postgres backend that exits is reaped by the
// postmaster, so its time stays counted).
func treeCPU(root int) (time.Duration, bool) {
	top, ok := procStat(root)
	if !ok {
		return 0, false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	parent := map[int]int{}
	own := map[int]time.Duration{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := procStat(pid); ok {
			parent[pid], own[pid] = st.ppid, st.own
		}
	}
	total := top.own + top.children
	for pid := range parent {
		for p := parent[pid]; p > 1; p = parent[p] {
			if p == root {
				total += own[pid]
				break
			}
		}
	}
	return total, true
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func loadavg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func fetchProfile(url string, secs int, out string) error {
	c := &http.Client{Timeout: time.Duration(secs+30) * time.Second}
	resp, err := c.Get(url + "?seconds=" + strconv.Itoa(secs))
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
