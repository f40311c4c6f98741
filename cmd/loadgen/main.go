// Command loadgen drives svc's POST /v2/authorize, or OPA's bare server with
// the equivalent policy (bench/opa), with a realistic mix of tool calls and
// reports throughput and latency percentiles per phase. scripts/bench.sh
// (make bench) runs it against svc on SQLite, svc on Postgres and OPA, then
// prints the comparison with -summary.
//
// # Usage
//
//	loadgen -target svc -url http://127.0.0.1:8080 -admin-token $SVC_ADMIN_TOKEN [flags]
//	loadgen -target opa -url http://127.0.0.1:8181 [flags]
//	loadgen -summary sqlite.json,postgres.json,opa.json [-baseline opa]
//
// Against svc it first creates a tenant (POST /v2/tenants with the
// super-admin token, or reuses the tenant of -operator-token), raises the
// tenant's tier-escalation threshold (so that the deny share of the mix does
// not turn every agent high-tier halfway through), registers the skill
// "crm", installs the tenant policy of -tenant-policy as "bench_redact", and
// registers -agents agents. Requests go round-robin over the agents.
//
// Against OPA it posts {"input": <the document svc's engine evaluates for the
// same call>} to /v1/data/svc/decision.
//
// Each value of -concurrency is one closed-loop phase (that many workers,
// each sending its next request when the previous answer arrives) of
// -warmup plus -duration; only requests started after the warm-up count.
// With -half-load an open-loop phase follows at half of the best closed-loop
// throughput (a fixed arrival rate: latency is measured from each request's
// scheduled start, so a slow server cannot slow the arrivals down and hide
// its queueing). With -rate > 0 every phase is open-loop at that rate
// instead. Every answer's decision is checked against the decision the mix
// expects (-check); a wrong one is counted as a mismatch.
//
// The rate limiter of svc caps a load test unless its capacity is raised
// (SPEC part 8): start svc with SVC_RATE_LIMIT_CAPACITY and
// SVC_RATE_LIMIT_REFILL_RATE at 1000000000.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type options struct {
	target        string
	url           string
	label         string
	adminToken    string
	operatorToken string
	agents        int
	concurrency   []int
	duration      time.Duration
	warmup        time.Duration
	rate          float64
	halfLoad      bool
	maxInflight   int
	mix           []mixWeight
	tenantPolicy  string
	timeout       time.Duration
	check         bool
	jsonOut       string
	serverPID     int
	dbPID         int
	profileURL    string
	profileOut    string
	quiet         bool
	client        string
	selfProfile   string
	subscribers   int
	// runs > 0 puts each call in a run (trace.run_id) that lasts that many
	// of its agent's rounds per class; runPolicies is a directory of .rego
	// files installed as tenant policies (svc).
	runs        int
	runPolicies string
	// simulate keeps policy simulations running on the server (svc).
	simulate bool
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	var conc, mix, summary, baseline, targets string
	var equalConc int
	var latencyRatio float64
	fs.StringVar(&o.target, "target", "", "svc or opa")
	fs.StringVar(&o.url, "url", "", "base URL of the server, e.g. http://127.0.0.1:8080")
	fs.StringVar(&o.label, "label", "", "name of this run in reports (default: the target)")
	fs.StringVar(&o.adminToken, "admin-token", os.Getenv("SVC_ADMIN_TOKEN"), "svc super-admin token, to create the benchmark tenant (default $SVC_ADMIN_TOKEN)")
	fs.StringVar(&o.operatorToken, "operator-token", "", "svc admin operator token of an existing tenant (instead of -admin-token)")
	fs.IntVar(&o.agents, "agents", 50, "agents to register (svc) or to name in the input (opa)")
	fs.StringVar(&conc, "concurrency", "1,8,32,64", "comma list: one closed-loop phase per value")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "measured time per phase")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured warm-up before each phase")
	fs.Float64Var(&o.rate, "rate", 0, "0: closed loop at full speed; > 0: every phase open-loop at this many requests per second")
	fs.BoolVar(&o.halfLoad, "half-load", true, "after the closed-loop phases, an open-loop phase at half the best throughput")
	fs.IntVar(&o.maxInflight, "max-inflight", 4096, "open loop: requests in flight at most; an arrival beyond it counts as an error")
	fs.StringVar(&mix, "mix", defaultMix, "request mix: class=weight,... of "+strings.Join(classNames(), ", "))
	fs.StringVar(&o.tenantPolicy, "tenant-policy", "bench/opa/bench_redact.rego", "svc: the tenant policy installed as bench_redact (the same file OPA serves)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "per-request timeout")
	fs.BoolVar(&o.check, "check", true, "check every answer's decision against the expected one")
	fs.StringVar(&o.jsonOut, "json", "", "write the results as JSON to this file")
	fs.IntVar(&o.serverPID, "server-pid", 0, "pid of the server process: report its CPU time per request (Linux /proc)")
	fs.IntVar(&o.dbPID, "db-pid", 0, "pid of the database server (Postgres: the postmaster): report the CPU time of its process tree per request")
	fs.StringVar(&o.profileURL, "profile-url", "", "pprof CPU profile URL of the server (e.g. http://127.0.0.1:9090/debug/pprof/profile), taken during the busiest closed-loop phase")
	fs.StringVar(&o.profileOut, "profile-out", "", "file for the profile of -profile-url")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress lines")
	fs.StringVar(&o.selfProfile, "cpuprofile", "", "write the load generator's own CPU profile to this file")
	fs.StringVar(&o.client, "client", "raw", "raw: a minimal HTTP/1.1 keep-alive client that costs the shared CPU little; std: net/http")
	fs.IntVar(&o.runs, "runs", 0, "svc: > 0 names a run in every call (trace.run_id), each run lasting that many of its agent's rounds per class, so a run holds at most that many calls of one tool")
	fs.BoolVar(&o.simulate, "simulate", false, "svc: keep policy simulations (POST /v2/policies/simulate over every decision so far) running during the run, one at a time")
	fs.StringVar(&o.runPolicies, "run-policies", "", "svc: a directory of .rego files installed as tenant policies (e.g. bench/runs, README's run-aware examples)")
	fs.IntVar(&o.subscribers, "ws-subscribers", 0, "svc: live-feed WebSocket subscribers (GET /v2/ws/events) kept reading during the run")
	fs.StringVar(&summary, "summary", "", "summary mode: comma list of JSON result files to compare")
	fs.StringVar(&baseline, "baseline", "opa", "summary: label of the baseline run")
	fs.StringVar(&targets, "targets", "sqlite=1.0,postgres=0.8", "summary: label=minimum throughput ratio to the baseline")
	fs.IntVar(&equalConc, "equal-concurrency", 64, "summary: the closed-loop concurrency at which throughputs are also compared")
	fs.Float64Var(&latencyRatio, "latency-ratio", 1.5, "summary: the most unloaded p50 and p99 at half load may be, as a ratio to the baseline's")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if summary != "" {
		return printSummary(stdout, stderr, strings.Split(summary, ","), baseline, targets, equalConc, latencyRatio)
	}
	var err error
	if o.concurrency, err = parseInts(conc); err != nil {
		_, _ = fmt.Fprintf(stderr, "loadgen: -concurrency: %v\n", err)
		return 2
	}
	if o.mix, err = parseMix(mix); err != nil {
		_, _ = fmt.Fprintf(stderr, "loadgen: -mix: %v\n", err)
		return 2
	}
	switch {
	case o.client != "raw" && o.client != "std":
		_, _ = fmt.Fprintln(stderr, "loadgen: -client must be raw or std")
		return 2
	case o.target != "svc" && o.target != "opa":
		_, _ = fmt.Fprintln(stderr, "loadgen: -target must be svc or opa")
		return 2
	case o.url == "":
		_, _ = fmt.Fprintln(stderr, "loadgen: -url is required")
		return 2
	case o.agents < 1 || o.duration <= 0 || o.warmup < 0 || o.rate < 0 || o.maxInflight < 1:
		_, _ = fmt.Fprintln(stderr, "loadgen: -agents, -duration and -max-inflight must be positive; -warmup and -rate not negative")
		return 2
	case o.target == "svc" && o.adminToken == "" && o.operatorToken == "":
		_, _ = fmt.Fprintln(stderr, "loadgen: -target svc needs -admin-token (or $SVC_ADMIN_TOKEN) or -operator-token")
		return 2
	}
	if o.label == "" {
		o.label = o.target
	}
	o.url = strings.TrimRight(o.url, "/")

	if o.selfProfile != "" {
		f, err := os.Create(o.selfProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			_, _ = fmt.Fprintf(stderr, "loadgen: -cpuprofile: %v\n", err)
			return 2
		}
		defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := runLoad(ctx, o, stdout, stderr)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "loadgen: %v\n", err)
		return 1
	}
	printReport(stdout, rep)
	if o.jsonOut != "" {
		raw, err := json.MarshalIndent(rep, "", "  ")
		if err == nil {
			err = os.WriteFile(o.jsonOut, append(raw, '\n'), 0o600)
		}
		if err != nil {
			_, _ = fmt.Fprintf(stderr, "loadgen: -json: %v\n", err)
			return 1
		}
	}
	return 0
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("no value")
	}
	return out, nil
}
