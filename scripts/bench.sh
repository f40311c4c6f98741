#!/usr/bin/env bash
# bench.sh: the performance benchmark of svc (make bench).
#
# Builds bin/svc and bin/loadgen, installs OPA (the version go.mod pins, from
# the Go module proxy) into bin/, provisions a throw-away Postgres with
# scripts/testenv.sh, and then, in one run:
#   1. svc on SQLite (a temp file): loadgen phases
#   2. svc on Postgres (a fresh database): the same phases
#   3. OPA's bare server (opa run --server) with the equivalent policy
#      (rules/policy/base + bench/opa, see bench/README.md): the same phases
# Each run is closed-loop at every BENCH_CONCURRENCY, then open-loop at half
# its best throughput (p99 there). A summary compares the three against the
# targets (PASS/MISS is informational). Finally the Go benchmarks of the hot
# path (policy evaluation, canonical hashing, receipts, chain append, writer
# batch, in-process authorize).
#
# Exit status: 0 when everything ran (whatever the verdicts), 1 when
# something failed to build, start or run.
#
# Environment (defaults in brackets):
#   BENCH_DURATION [10s]         measured time per phase
#   BENCH_WARMUP [2s]            warm-up before each phase
#   BENCH_CONCURRENCY [1,8,32,64] closed-loop phases
#   BENCH_AGENTS [50]            agents registered (svc) / named (OPA)
#   BENCH_MIX [read=60,mutate=20,deny=10,redact=10]
#   BENCH_SOC_PAIRS [5]          soc: on/off pairs
#   BENCH_RATIO_ROUNDS [3]       ratio: rounds of back-to-back closed-loop runs
#   BENCH_RATIO_CONCURRENCY [1,8,64] ratio: the closed-loop phases of each run (then
#                                half load); each target's best phase is its
#                                throughput in the round, c=1 its unloaded p50
#   BENCH_RUNS_PAIRS [5]         runs: pairs with and without run policies
#   BENCH_SIM_PAIRS [5]          sim: pairs with and without policy simulations running
#   BENCH_SIM_DB [sqlite]        sim: the backend, sqlite or postgres (a fresh database each run)
#   BENCH_BEFORE_BIN []          before: an svc binary to alternate with bin/svc
#   BENCH_BEFORE_PAIRS [5]       before: before/after pairs
#   BENCH_TARGETS [sqlite,postgres,opa,ratio,soc,runs]  which runs to do (ratio:
#                                the throughput ratios to OPA from back-to-back runs;
#                                soc: the SOC pipeline's overhead on authorize, on
#                                vs SVC_SOC_PIPELINE=false; runs: the cost of run
#                                context, README's five run policies loaded vs none;
#                                sim: the authorize p99 while policy simulations
#                                run vs none; before: BENCH_BEFORE_BIN against bin/svc;
#                                memory: what 100,000 agents cost, active and idle)
#   BENCH_MEMORY_AGENTS [100000] memory: agents registered, each authorizing once
#   BENCH_MEMORY_IDLE_WAIT [135] memory: seconds to wait for the agent actors to stop
#   BENCH_PG_DURABLE [1]         1: Postgres runs with its production durability
#                                (fsync, synchronous_commit, full_page_writes on;
#                                the output says the settings); 0: the test
#                                suite's fast settings (all three off)
#   BENCH_GO [1]                 0 skips the Go benchmarks
#   BENCH_GO_PKGS [./rules/policy/ ./canonical/ ./receipt/ ./actors/ ./mcpregistry/ ./persistence/postgres/]
#   BENCHFLAGS []                extra go test flags, e.g. -benchtime=2s -count=3
#   BENCH_PROFILE [0]            1: take a CPU profile of each server during its
#                                busiest closed-loop phase (into BENCH_OUT)
#   BENCH_OUT [bin/bench]        JSON results, server logs and profiles
#   BENCH_SVC_ENV []             extra environment for svc, e.g. "SVC_DB_POOL_SIZE=20"
#   BENCH_LOADGEN_FLAGS []       extra loadgen flags
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
BIN=$ROOT/bin
GO=${GO:-go}

log() { printf 'bench: %s\n' "$*" >&2; }

if [[ ${1:-} != "--inner" ]]; then
	# ------------------------------------------------------------ build (outer)
	mkdir -p "$BIN"
	version=$(git describe --always --dirty 2>/dev/null || echo dev)
	log "go build bin/svc ($version) and bin/loadgen"
	"$GO" build -ldflags "-X main.version=$version" -o "$BIN/svc" ./cmd/svc
	"$GO" build -o "$BIN/loadgen" ./cmd/loadgen
	opa_version=$(awk '$1 == "github.com/open-policy-agent/opa" { print $2 }' go.mod)
	if [[ -z $opa_version ]]; then
		log "go.mod does not name github.com/open-policy-agent/opa"
		exit 1
	fi
	have=""
	if [[ -x $BIN/opa ]]; then
		have=v$("$BIN/opa" version 2>/dev/null | sed -n 's/^Version: *//p' | head -n 1)
	fi
	if [[ $have != "$opa_version" ]]; then
		log "installing opa $opa_version into bin/ (go install from the module proxy; once)"
		GOBIN=$BIN "$GO" install "github.com/open-policy-agent/opa@$opa_version"
	else
		log "bin/opa is $have"
	fi
	# Postgres for run 2, with its production durability (fsync, synchronous
	# commit and full-page writes on) unless BENCH_PG_DURABLE=0; the inner
	# run does the rest.
	SVC_TESTENV_PG_DURABLE=${BENCH_PG_DURABLE:-1} exec bash scripts/testenv.sh -- bash scripts/bench.sh --inner
fi

# ---------------------------------------------------------------- inner run

DURATION=${BENCH_DURATION:-10s}
WARMUP=${BENCH_WARMUP:-2s}
CONCURRENCY=${BENCH_CONCURRENCY:-1,8,32,64}
AGENTS=${BENCH_AGENTS:-50}
MIX=${BENCH_MIX:-read=60,mutate=20,deny=10,redact=10}
TARGETS=${BENCH_TARGETS:-sqlite,postgres,opa,ratio,soc,runs}
OUT=${BENCH_OUT:-$BIN/bench}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/svc-bench.XXXXXXXX")

failures=()
SERVER_PID=""

# The Postgres settings every Postgres figure depends on, said in the output.
PG_SETTINGS=""
if [[ -n ${SVC_TEST_POSTGRES_URL:-} ]]; then
	PG_SETTINGS=$(psql "$SVC_TEST_POSTGRES_URL" -Atc "select string_agg(name || '=' || setting || coalesce(unit, ''), ', ' order by name)
		from pg_settings where name in ('fsync', 'synchronous_commit', 'full_page_writes', 'wal_level', 'shared_buffers', 'max_wal_size')" 2>/dev/null) || true
	log "postgres settings (${SVC_TEST_PG_DURABILITY:-fast}): $PG_SETTINGS"
	printf '%s (%s)\n' "$PG_SETTINGS" "${SVC_TEST_PG_DURABILITY:-fast}" >"$OUT/postgres-settings.txt"
fi

stop_server() {
	if [[ -n $SERVER_PID ]]; then
		kill -TERM "$SERVER_PID" 2>/dev/null || true
		local i
		for i in $(seq 1 200); do
			kill -0 "$SERVER_PID" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$SERVER_PID" 2>/dev/null || true
		wait "$SERVER_PID" 2>/dev/null || true
		SERVER_PID=""
	fi
}
cleanup() {
	local rc=$?
	stop_server
	rm -rf "$WORK"
	return "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() {
	python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()' 2>/dev/null && return 0
	local p i
	for i in $(seq 1 200); do
		p=$((20000 + RANDOM % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

# wait_http URL SECONDS: until URL answers 200 (and the server still runs).
wait_http() {
	local url=$1 secs=$2 i
	for i in $(seq 1 $((secs * 10))); do
		if curl -fsS -o /dev/null --max-time 2 "$url" 2>/dev/null; then
			return 0
		fi
		kill -0 "$SERVER_PID" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

# loadgen LABEL TARGET URL [extra flags...]: the phases against one server.
run_loadgen() {
	local label=$1 target=$2 url=$3
	shift 3
	local -a extra=()
	if [[ ${BENCH_PROFILE:-0} == 1 && -n ${PROFILE_URL:-} ]]; then
		extra+=(-profile-url "$PROFILE_URL" -profile-out "$OUT/$label.cpu.pprof")
	fi
	# shellcheck disable=SC2086 # BENCH_LOADGEN_FLAGS is a list of flags
	"$BIN/loadgen" -target "$target" -label "$label" -url "$url" -agents "$AGENTS" -concurrency "$CONCURRENCY" \
		-duration "$DURATION" -warmup "$WARMUP" -mix "$MIX" -tenant-policy bench/opa/bench_redact.rego \
		-server-pid "$SERVER_PID" -json "$OUT/$label.json" "${extra[@]}" "$@" ${BENCH_LOADGEN_FLAGS:-}
}

# run_svc LABEL DATABASE_URL [extra loadgen flags...]
run_svc() {
	local label=$1 db=$2 port dport admin key
	shift 2
	port=$(free_port) && dport=$(free_port) || {
		log "$label: no free port"
		return 1
	}
	admin=bench-admin-$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
	key=$(head -c 32 /dev/urandom | base64)
	log "$label: starting svc on 127.0.0.1:$port ($db)"
	# shellcheck disable=SC2086 # BENCH_SVC_ENV is a list of NAME=VALUE words
	env DATABASE_URL="$db" SVC_LISTEN_ADDR="127.0.0.1:$port" SVC_DEBUG_ADDR="127.0.0.1:$dport" \
		SVC_ADMIN_TOKEN="$admin" SVC_RATE_LIMIT_CAPACITY=1000000000 SVC_RATE_LIMIT_REFILL_RATE=1000000000 \
		SVC_LOG_LEVEL=error SVC_RECEIPT_SIGNING_KEY="$key" ${BENCH_SVC_ENV:-} \
		"${SVC_BIN:-$BIN/svc}" serve >"$OUT/$label.svc.log" 2>&1 &
	SERVER_PID=$!
	if ! wait_http "http://127.0.0.1:$port/readyz" 60; then
		log "$label: svc did not become ready; its log:"
		tail -n 30 "$OUT/$label.svc.log" >&2 || true
		stop_server
		return 1
	fi
	local rc=0
	if [[ -n ${SVC_BEFORE_LOAD:-} ]]; then
		"$SVC_BEFORE_LOAD" "$label" "$port" "$dport" || rc=1
	fi
	PROFILE_URL="http://127.0.0.1:$dport/debug/pprof/profile" \
		run_loadgen "$label" svc "http://127.0.0.1:$port" -admin-token "$admin" "$@" || rc=$?
	# A target's own look at the server before it stops (run_memory).
	if [[ $rc == 0 && -n ${SVC_AFTER_LOAD:-} ]]; then
		"$SVC_AFTER_LOAD" "$label" "$port" "$dport" || rc=1
	fi
	# The server's own view (the writer's commit histograms among it).
	curl -fsS --max-time 5 -o "$OUT/$label.metrics" "http://127.0.0.1:$port/metrics" 2>/dev/null || true
	stop_server
	if [[ -s $OUT/$label.svc.log ]]; then
		log "$label: svc log (errors only; full log in $OUT/$label.svc.log):"
		tail -n 10 "$OUT/$label.svc.log" >&2
	fi
	return "$rc"
}

run_sqlite() {
	run_svc sqlite "sqlite://$WORK/bench.db"
}

# run_postgres [LABEL [extra loadgen flags...]]
run_postgres() {
	local label=${1:-postgres}
	shift || true
	if [[ -z ${SVC_TEST_POSTGRES_URL:-} ]]; then
		log "postgres: testenv did not provision Postgres (SVC_TEST_POSTGRES_URL unset)"
		return 1
	fi
	local db=svc_bench_$$_$RANDOM
	if ! psql "$SVC_TEST_POSTGRES_URL" -v ON_ERROR_STOP=1 -qc "CREATE DATABASE $db" >/dev/null; then
		log "postgres: CREATE DATABASE $db failed"
		return 1
	fi
	# postgres://user@host:port/svc_test?sslmode=disable -> .../$db?...
	local url
	url=$(sed -E "s#^(postgres(ql)?://[^/]+)/[^?]*#\\1/$db#" <<<"$SVC_TEST_POSTGRES_URL")
	# The postmaster's process tree: its CPU per request is reported too.
	local -a dbpid=()
	if [[ -n ${SVC_TEST_PG_DATA:-} && -r $SVC_TEST_PG_DATA/postmaster.pid ]]; then
		dbpid=(-db-pid "$(head -n 1 "$SVC_TEST_PG_DATA/postmaster.pid")")
	fi
	run_svc "$label" "$url" "${dbpid[@]}" "$@"
}

# run_soc: authorize at full speed (closed loop, concurrency 32) with the SOC
# pipeline on and three live-feed subscribers attached, against the same
# run with the pipeline off (SVC_SOC_PIPELINE=false), in BENCH_SOC_PAIRS [5]
# alternating pairs: identical runs on this machine differ by more than the
# 5% target, so the median ratio is reported beside every pair.
run_soc() {
	local pair rc=0 saved=${BENCH_SVC_ENV:-}
	for pair in $(seq 1 "${BENCH_SOC_PAIRS:-5}"); do
		BENCH_SVC_ENV="$saved" run_svc "soc-on-$pair" "sqlite://$WORK/soc-on-$pair.db" -concurrency 32 -half-load=false -ws-subscribers 3 || rc=1
		BENCH_SVC_ENV="$saved SVC_SOC_PIPELINE=false" run_svc "soc-off-$pair" "sqlite://$WORK/soc-off-$pair.db" -concurrency 32 -half-load=false || rc=1
	done
	BENCH_SVC_ENV=$saved
	[[ $rc == 0 ]] || return 1
	python3 - "$OUT" "${BENCH_SOC_PAIRS:-5}" <<'PY' | tee "$OUT/soc.txt"
import json, sys
out = sys.argv[1]
def phase(label):
    with open(f"{out}/{label}.json") as f:
        r = json.load(f)
    return r["phases"][0]
print("\n== SOC pipeline overhead on authorize (sqlite, closed loop c=32; on: pipeline + 3 feed subscribers)")
print(f"{'pair':>4} {'on req/s':>9} {'off req/s':>9} {'on p99 ms':>10} {'off p99 ms':>11} {'p99 on/off':>11}")
import statistics
ratios, runs = [], {"on": [], "off": []}
for pair in range(1, int(sys.argv[2]) + 1):
    on, off = phase(f"soc-on-{pair}"), phase(f"soc-off-{pair}")
    runs["on"].append(on)
    runs["off"].append(off)
    ratio = on["p99_ms"] / off["p99_ms"] if off["p99_ms"] else float("nan")
    ratios.append(ratio)
    print(f"{pair:>4} {on['throughput']:>9.0f} {off['throughput']:>9.0f} {on['p99_ms']:>10.3f} {off['p99_ms']:>11.3f} {ratio:>11.3f}")
med = lambda side, key: statistics.median(p.get(key) or 0 for p in runs[side])
print(f"medians: p99 {med('on', 'p99_ms'):.3f} / {med('off', 'p99_ms'):.3f} ms, "
      f"throughput {med('on', 'throughput'):.0f} / {med('off', 'throughput'):.0f} req/s, "
      f"server CPU {med('on', 'server_cpu_per_req_us'):.0f} / {med('off', 'server_cpu_per_req_us'):.0f} µs per request (on / off)")
print(f"target: p99 on/off <= 1.05; median of the pairs {statistics.median(ratios):.3f}, mean {statistics.mean(ratios):.3f}")
PY
}

# pairs_report TITLE OUT PAIRS A B TARGET: the throughput of each pair of
# runs labelled A-N and B-N (closed loop, one phase), the ratio A/B per pair,
# and the median ratio against TARGET (A/B at least TARGET).
pairs_report() {
	python3 - "$@" <<'PY'
import json, statistics, sys
title, out, pairs, a, b, target = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], float(sys.argv[6])
def phase(label):
    with open(f"{out}/{label}.json") as f:
        return json.load(f)["phases"][0]
print(f"\n== {title}")
print(f"{'pair':>4} {a + ' req/s':>16} {b + ' req/s':>16} {a + '/' + b:>12} {a + ' p50 ms':>12} {b + ' p50 ms':>12} {a + ' µs cpu':>12} {b + ' µs cpu':>12}")
ratios = []
for pair in range(1, pairs + 1):
    x, y = phase(f"{a}-{pair}"), phase(f"{b}-{pair}")
    ratios.append(x["throughput"] / y["throughput"])
    print(f"{pair:>4} {x['throughput']:>16.0f} {y['throughput']:>16.0f} {ratios[-1]:>12.3f} {x['p50_ms']:>12.3f} {y['p50_ms']:>12.3f} "
          f"{x.get('server_cpu_per_req_us') or 0:>12.0f} {y.get('server_cpu_per_req_us') or 0:>12.0f}")
med = statistics.median(ratios)
print(f"median {a}/{b} throughput ratio {med:.3f} (range {min(ratios):.3f}-{max(ratios):.3f}; target >= {target:.2f}) {'PASS' if med >= target else 'MISS'}")
PY
}

# run_runs: the cost of run context (CONTRACT §16) on SQLite, closed loop
# c=32: every call names a run (-runs 4: a run holds 4 calls of one class
# of one agent, so README's loop breaker never changes a decision and the mix's
# decisions stay checked), with README's five run policies (bench/runs)
# loaded against none, in BENCH_RUNS_PAIRS [5] alternating pairs. The
# target: at most 10% fewer decisions per second with them loaded.
run_runs() {
	local pair rc=0 pairs=${BENCH_RUNS_PAIRS:-5}
	for pair in $(seq 1 "$pairs"); do
		run_svc "runs-on-$pair" "sqlite://$WORK/runs-on-$pair.db" -concurrency 32 -half-load=false -runs 4 -run-policies bench/runs || rc=1
		run_svc "runs-off-$pair" "sqlite://$WORK/runs-off-$pair.db" -concurrency 32 -half-load=false -runs 4 || rc=1
	done
	[[ $rc == 0 ]] || return 1
	pairs_report "run context: README's five run policies loaded (on) vs none (off); sqlite, closed loop c=32, every call in a run" \
		"$OUT" "$pairs" runs-on runs-off 0.90 | tee "$OUT/runs.txt"
}

# run_sim: the authorize path while policy simulations run (CONTRACT §18:
# a simulation yields to live traffic), on BENCH_SIM_DB [sqlite] (or
# postgres), closed loop c=32: loadgen -simulate keeps one simulation over
# every decision so far running on the node, against the same run without,
# in BENCH_SIM_PAIRS [5] alternating pairs. Reported: p99 and throughput of
# each, and the median p99 ratio.
run_sim() {
	local pair rc=0 pairs=${BENCH_SIM_PAIRS:-5} db=${BENCH_SIM_DB:-sqlite}
	sim_run() { # LABEL [loadgen flags...]
		local label=$1
		shift
		case $db in
		sqlite) run_svc "$label" "sqlite://$WORK/$label.db" "$@" ;;
		postgres) run_postgres "$label" "$@" ;;
		*)
			log "sim: BENCH_SIM_DB=$db: sqlite or postgres"
			return 1
			;;
		esac
	}
	for pair in $(seq 1 "$pairs"); do
		sim_run "sim-on-$pair" -concurrency 32 -half-load=false -simulate || rc=1
		sim_run "sim-off-$pair" -concurrency 32 -half-load=false || rc=1
	done
	[[ $rc == 0 ]] || return 1
	python3 - "$OUT" "$pairs" "$db" <<'PY' | tee "$OUT/sim.txt"
import json, statistics, sys
out, pairs, db = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def phase(label):
    with open(f"{out}/{label}.json") as f:
        return json.load(f)["phases"][0]
print(f"\n== authorize while policy simulations run (on) vs none (off); {db}, closed loop c=32")
print(f"{'pair':>4} {'on req/s':>9} {'off req/s':>9} {'on p99 ms':>10} {'off p99 ms':>11} {'p99 on/off':>11} {'req/s on/off':>13}")
p99s, tputs = [], []
for pair in range(1, pairs + 1):
    on, off = phase(f"sim-on-{pair}"), phase(f"sim-off-{pair}")
    p99s.append(on["p99_ms"] / off["p99_ms"] if off["p99_ms"] else float("nan"))
    tputs.append(on["throughput"] / off["throughput"])
    print(f"{pair:>4} {on['throughput']:>9.0f} {off['throughput']:>9.0f} {on['p99_ms']:>10.3f} {off['p99_ms']:>11.3f} {p99s[-1]:>11.3f} {tputs[-1]:>13.3f}")
print(f"median p99 on/off {statistics.median(p99s):.3f}, median throughput on/off {statistics.median(tputs):.3f}")
PY
}

# run_memory: what agents cost in memory (issue 43): svc on SQLite with
# BENCH_MEMORY_AGENTS [100000] agents registered, each of which authorizes
# once (read-only calls, closed loop c=8, the agents taking turns), then the
# process's RSS and Go heap right after, the live heap after a forced
# collection, and the same once every agent actor has stopped (two minutes
# without a call, BENCH_MEMORY_IDLE_WAIT [135] s): the cost of an idle agent
# against a node that never saw one.
run_memory() {
	local n=${BENCH_MEMORY_AGENTS:-100000}
	# Calls enough for every agent once at this machine's pace, with room.
	local secs=$((n / 1500 + 10))
	SVC_BEFORE_LOAD=memory_fresh SVC_AFTER_LOAD=memory_probe run_svc memory "sqlite://$WORK/memory.db" -agents "$n" -concurrency 8 -duration "${secs}s" \
		-warmup 0s -half-load=false -mix read=100 || return 1
	python3 - "$OUT" "$n" <<'PY' | tee "$OUT/memory.txt"
import json, sys
out, n = sys.argv[1], int(sys.argv[2])
m = json.load(open(f"{out}/memory.probe.json"))
r = json.load(open(f"{out}/memory.json"))
calls = r["phases"][0]["requests"]
mib = lambda b: b / 1048576
print(f"\n== memory: {n} agents registered, {calls} read-only calls (every agent at least once: {calls >= n}); sqlite")
for k, label in (("fresh", "a fresh node (no agent)"), ("after", "right after the calls"), ("after_gc", "after a forced collection"),
                 ("idle_gc", f"{m['idle_wait']} s later without calls, collected")):
    s = m[k]
    print(f"  {label:<48} RSS {mib(s['rss']):7.1f} MiB  heap in use {mib(s['heap_inuse']):7.1f} MiB  live {mib(s['heap_alloc']):7.1f} MiB  agent actors {s['actors']}")
print(f"  peak RSS during the run {mib(m['peak_rss']):.1f} MiB (target <= 512 MiB: {'PASS' if m['peak_rss'] <= 512 * 1048576 else 'MISS'})")
print(f"  live heap per active agent {(m['after_gc']['heap_alloc'] - m['fresh']['heap_alloc']) / n:.0f} bytes; per idle agent "
      f"{(m['idle_gc']['heap_alloc'] - m['fresh']['heap_alloc']) / n:.0f} bytes")
PY
}

# memory_fresh and memory_probe LABEL PORT DEBUG_PORT: run_memory's
# measurements of the server (SERVER_PID) before the load and after it,
# into $OUT/memory.fresh.json and $OUT/memory.probe.json.
memory_fresh() { memory_snap fresh "$2" "$3"; }
memory_probe() { memory_snap probe "$2" "$3"; }
memory_snap() {
	local mode=$1 port=$2 dport=$3
	python3 - "$mode" "$SERVER_PID" "$port" "$dport" "${BENCH_MEMORY_IDLE_WAIT:-135}" "$OUT/memory.probe.json" "$OUT/memory.fresh.json" <<'PY'
import json, re, sys, time, urllib.request
mode, pid, port, dport, wait, dst, fresh = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6], sys.argv[7]
def status(key):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(rf"^{key}:\s+(\d+) kB", f.read(), re.M).group(1)) * 1024
def metric(text, name):
    m = re.search(rf"^{name} (\S+)$", text, re.M)
    return int(float(m.group(1))) if m else -1
def snap(gc):
    if gc:
        urllib.request.urlopen(f"http://127.0.0.1:{dport}/debug/pprof/heap?gc=1", timeout=60).read()
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    return {"rss": status("VmRSS"), "heap_inuse": metric(text, "go_memstats_heap_inuse_bytes"),
            "heap_alloc": metric(text, "go_memstats_heap_alloc_bytes"), "actors": metric(text, "svc_agent_actors")}
if mode == "fresh":
    json.dump(snap(True), open(fresh, "w"))
    sys.exit(0)
out = {"idle_wait": wait, "after": snap(False), "peak_rss": status("VmHWM")}
out["after_gc"] = snap(True)
time.sleep(wait)
out["idle_gc"] = snap(True)
out["fresh"] = json.load(open(fresh))
json.dump(out, open(dst, "w"))
PY
}

# run_before: BENCH_BEFORE_BIN (an svc binary built from an earlier commit)
# against bin/svc on SQLite, closed loop c=32, the default workload, in
# BENCH_BEFORE_PAIRS [5] alternating pairs: a change's cost measured on the
# same machine minutes apart, as the issues ask.
run_before() {
	if [[ -z ${BENCH_BEFORE_BIN:-} || ! -x ${BENCH_BEFORE_BIN:-} ]]; then
		log "before: set BENCH_BEFORE_BIN to an svc binary (for example one built with git worktree from an earlier commit)"
		return 1
	fi
	local pair rc=0 pairs=${BENCH_BEFORE_PAIRS:-5}
	for pair in $(seq 1 "$pairs"); do
		SVC_BIN=$BENCH_BEFORE_BIN run_svc "before-$pair" "sqlite://$WORK/before-$pair.db" -concurrency 32 -half-load=false || rc=1
		run_svc "after-$pair" "sqlite://$WORK/after-$pair.db" -concurrency 32 -half-load=false || rc=1
	done
	[[ $rc == 0 ]] || return 1
	pairs_report "bin/svc (after) against $BENCH_BEFORE_BIN (before); sqlite, closed loop c=32" \
		"$OUT" "$pairs" after before 0.95 | tee "$OUT/before.txt"
}

# run_opa [LABEL [extra loadgen flags...]]
run_opa() {
	local label=${1:-opa} port
	shift || true
	port=$(free_port) || {
		log "$label: no free port"
		return 1
	}
	log "$label: starting $("$BIN/opa" version | sed -n 's/^Version: *//p') on 127.0.0.1:$port (rules/policy/base + bench/opa)"
	"$BIN/opa" run --server --log-level error --addr "127.0.0.1:$port" rules/policy/base/ bench/opa/ >"$OUT/$label.server.log" 2>&1 &
	SERVER_PID=$!
	if ! wait_http "http://127.0.0.1:$port/health" 60; then
		log "$label: the server did not become healthy; its log:"
		tail -n 30 "$OUT/$label.server.log" >&2 || true
		stop_server
		return 1
	fi
	local rc=0
	PROFILE_URL="http://127.0.0.1:$port/debug/pprof/profile" run_loadgen "$label" opa "http://127.0.0.1:$port" "$@" || rc=$?
	stop_server
	return "$rc"
}

# run_ratio: svc's figures as ratios to OPA's from BENCH_RATIO_ROUNDS [3]
# rounds of runs back to back (svc on SQLite, OPA, svc on Postgres when it
# is provisioned), each closed loop at BENCH_RATIO_CONCURRENCY [1,8,64] and
# then open loop at half its own maximum: per round, the throughput ratio at
# each target's best phase (OPA peaks at lower concurrency than svc, whose
# group commits fill with more callers) and at equal concurrency (64), the
# unloaded p50 ratio (c=1) and the ratio of the p99s at half of each one's
# maximum. This machine's speed drifts by tens of percent over the minutes
# that the full runs above take, so their single ratio can be off either
# way; the median of back-to-back rounds is the figure to quote (issue 43).
run_ratio() {
	local round rc=0 pg=0 ratio_conc=${BENCH_RATIO_CONCURRENCY:-1,8,64}
	[[ -n ${SVC_TEST_POSTGRES_URL:-} ]] && pg=1
	for round in $(seq 1 "${BENCH_RATIO_ROUNDS:-3}"); do
		run_svc "ratio-sqlite-$round" "sqlite://$WORK/ratio-$round.db" -concurrency "$ratio_conc" || rc=1
		run_opa "ratio-opa-$round" -concurrency "$ratio_conc" || rc=1
		if [[ $pg == 1 ]]; then
			run_postgres "ratio-postgres-$round" -concurrency "$ratio_conc" || rc=1
		fi
	done
	[[ $rc == 0 ]] || return 1
	python3 - "$OUT" "${BENCH_RATIO_ROUNDS:-3}" "$pg" "$ratio_conc" <<'PY' | tee "$OUT/ratio.txt"
import json, math, statistics, sys
out, rounds, pg, conc = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
def load(label):
    with open(f"{out}/{label}.json") as f:
        return json.load(f)
def figures(label):
    """best (req/s, c), req/s at c=64, unloaded p50 ms, p99 ms at half load."""
    r = load(label)
    closed = [p for p in r["phases"] if p.get("mode") == "closed"]
    top = max(closed, key=lambda p: p["throughput"])
    at64 = next((p["throughput"] for p in closed if p.get("concurrency") == 64), math.nan)
    p50 = r.get("unloaded_p50_ms") or math.nan
    p99 = (r.get("half_load") or {}).get("p99_ms") or math.nan
    return (top["throughput"], top["concurrency"]), at64, p50, p99
names = ["sqlite", "postgres"] if pg else ["sqlite"]
# (name, label, index into figures, higher is better, target)
metrics = [("throughput, best concurrency", 0, True, {"sqlite": 1.0, "postgres": 0.8}),
           ("throughput at c=64", 1, True, {"sqlite": 1.0, "postgres": 0.8}),
           ("unloaded p50 (c=1)", 2, False, {"sqlite": 1.5, "postgres": 1.5}),
           ("p99 at half of each one's maximum", 3, False, {"sqlite": 1.5, "postgres": 1.5})]
print(f"\n== svc / OPA in back-to-back rounds (closed loop at c={conc}, then open loop at half of each one's maximum)")
print(f"{'round':>5} {'target':<9} {'best req/s':>16} {'OPA best':>16} {'c=64 ratio':>10} {'best ratio':>10} {'p50 ms':>8} {'OPA p50':>8} {'p50 ratio':>9} {'p99 ms':>8} {'OPA p99':>8} {'p99 ratio':>9}")
ratios = {(n, m[0]): [] for n in names for m in metrics}
for r in range(1, rounds + 1):
    o = figures(f"ratio-opa-{r}")
    for n in names:
        s = figures(f"ratio-{n}-{r}")
        vals = [s[0][0] / o[0][0], s[1] / o[1], s[2] / o[2], s[3] / o[3]]
        for m, v in zip(metrics, vals):
            if not math.isnan(v):
                ratios[(n, m[0])].append(v)
        print(f"{r:>5} {n:<9} {s[0][0]:>9.0f} (c={s[0][1]:<2}) {o[0][0]:>9.0f} (c={o[0][1]:<2}) {vals[1]:>10.3f} {vals[0]:>10.3f} "
              f"{s[2]:>8.3f} {o[2]:>8.3f} {vals[2]:>9.3f} {s[3]:>8.3f} {o[3]:>8.3f} {vals[3]:>9.3f}")
for n in names:
    for label, _, higher, target in metrics:
        got = ratios[(n, label)]
        if not got:
            print(f"  {n:<9} {label}: not measured MISS")
            continue
        med = statistics.median(got)
        ok = med >= target[n] if higher else med <= target[n]
        sign = ">=" if higher else "<="
        print(f"  {n:<9} {label}: median ratio {med:.3f} (range {min(got):.3f}-{max(got):.3f}; target {sign} {target[n]:.2f}x) {'PASS' if ok else 'MISS'}")
PY
}

rm -f "$OUT"/{sqlite,postgres,opa}.json "$OUT"/ratio-*.json "$OUT"/ratio.txt
start=$SECONDS
log "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); phases: $CONCURRENCY x ($WARMUP + $DURATION), then half load"
files=()
IFS=, read -r -a targets <<<"$TARGETS"
for t in "${targets[@]}"; do
	case $t in
	sqlite | postgres | opa | ratio | soc | runs | sim | before | memory) ;;
	*)
		log "unknown target $t in BENCH_TARGETS"
		failures+=("$t")
		continue
		;;
	esac
	if "run_$t"; then
		[[ $t == soc || $t == ratio || $t == runs || $t == sim || $t == before || $t == memory ]] || files+=("$OUT/$t.json")
	else
		log "$t: FAILED"
		failures+=("$t")
	fi
done

targets_flag=""
for t in sqlite postgres; do
	case ",$TARGETS," in *",$t,"*)
		[[ $t == sqlite ]] && targets_flag+="sqlite=1.0,"
		[[ $t == postgres ]] && targets_flag+="postgres=0.8,"
		;;
	esac
done
if [[ ${#files[@]} -gt 0 ]]; then
	summary_files=$(
		IFS=,
		echo "${files[*]}"
	)
	"$BIN/loadgen" -summary "$summary_files" -baseline opa -targets "${targets_flag%,}" | tee "$OUT/summary.txt" || failures+=(summary)
fi
if [[ -s $OUT/ratio.txt ]]; then
	cat "$OUT/ratio.txt" # again, beside the summary: the ratios to quote
fi
for f in runs before memory; do
	[[ ! -s $OUT/$f.txt ]] || cat "$OUT/$f.txt"
done
if [[ -n $PG_SETTINGS ]]; then
	printf '\npostgres ran with %s (%s)\n' "$PG_SETTINGS" "${SVC_TEST_PG_DURABILITY:-fast}"
fi
log "load runs took $((SECONDS - start)) s; results in $OUT"

if [[ ${BENCH_GO:-1} != 0 ]]; then
	# shellcheck disable=SC2206 # a list of packages
	pkgs=(${BENCH_GO_PKGS:-./rules/policy/ ./canonical/ ./receipt/ ./actors/ ./mcpregistry/ ./persistence/postgres/})
	printf '\n== Go benchmarks: go test -run ^$ -bench . -benchmem %s %s\n' "${BENCHFLAGS:-}" "${pkgs[*]}"
	# shellcheck disable=SC2086 # BENCHFLAGS is a list of flags
	if ! "$GO" test -run '^$' -bench . -benchmem ${BENCHFLAGS:-} "${pkgs[@]}" 2>&1 | tee "$OUT/go-bench.txt"; then
		failures+=(go-bench)
	fi
	# The inline MCP proxy's overhead on a tools/call (issue 37: at most
	# 1 ms at p50 on a lone SQLite node): direct and proxied, alternately.
	printf '\n== MCP proxy overhead: go test -run ^$ -bench MCPProxyOverhead -benchtime 2000x ./e2e/\n'
	if ! "$GO" test -run '^$' -bench MCPProxyOverhead -benchtime 2000x ./e2e/ 2>&1 | tee "$OUT/go-bench-mcpproxy.txt"; then
		failures+=(go-bench-mcpproxy)
	fi
fi

if [[ ${#failures[@]} -gt 0 ]]; then
	log "FAILED to run: ${failures[*]}"
	exit 1
fi
log "done in $((SECONDS - start)) s (PASS/MISS above is informational)"
