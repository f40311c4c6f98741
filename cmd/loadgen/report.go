package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

func phaseName(ph Phase) string {
	if ph.Mode == "open" {
		return fmt.Sprintf("open @%.0f/s", ph.TargetRate)
	}
	return fmt.Sprintf("closed c=%d", ph.Concurrency)
}

func phaseLine(ph Phase) string {
	return fmt.Sprintf("%s: %d req, %d errors, %d mismatches, %.0f req/s, p50 %.3f ms, p99 %.3f ms, p99.9 %.3f ms",
		phaseName(ph), ph.Requests, ph.Errors, ph.Mismatches, ph.Throughput, ph.P50Ms, ph.P99Ms, ph.P999Ms)
}

// printReport prints one run's phases as a table.
func printReport(w io.Writer, rep *Report) {
	_, _ = fmt.Fprintf(w, "\n== %s (%s, %s): %d agents, mix %s, %s per phase after %s warm-up; load average %s -> %s\n",
		rep.Label, rep.Target, rep.URL, rep.Agents, mixString(rep.Mix), rep.Duration, rep.Warmup, rep.LoadAvgPre, rep.LoadAvgPost)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	_, _ = fmt.Fprintln(tw, "phase\tconc\trequests\terrors\tmismatch\treq/s\tmean ms\tp50 ms\tp90 ms\tp99 ms\tp99.9 ms\tmax ms\tsrv cores\tsrv CPU µs/req\tdb cores\tdb CPU µs/req\tlg CPU µs/req\t")
	for _, ph := range rep.Phases {
		conc := strconv.Itoa(ph.Concurrency)
		if ph.Mode == "open" {
			conc = "-"
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.0f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%s\t%s\t%s\t%s\t%.0f\t\n",
			phaseName(ph), conc, ph.Requests, ph.Errors, ph.Mismatches, ph.Throughput, ph.MeanMs, ph.P50Ms, ph.P90Ms, ph.P99Ms,
			ph.P999Ms, ph.MaxMs, optional(ph.ServerCores, "%.2f"), optional(ph.ServerCPUPerReqUs, "%.0f"),
			optional(ph.DBCores, "%.2f"), optional(ph.DBCPUPerReqUs, "%.0f"), ph.LoadgenCPUPerReqUs)
	}
	_ = tw.Flush()
	for _, ph := range rep.Phases {
		if len(ph.ByClass) > 0 {
			_, _ = fmt.Fprintf(w, "  %s by class:", phaseName(ph))
			for _, k := range slices.Sorted(maps.Keys(ph.ByClass)) {
				c := ph.ByClass[k]
				_, _ = fmt.Fprintf(w, " %s %d req p50 %.3f p99 %.3f p99.9 %.3f ms;", k, c.Requests, c.P50Ms, c.P99Ms, c.P999Ms)
			}
			_, _ = fmt.Fprintln(w)
		}
		for _, k := range sortedKeys(ph.ErrorsBy) {
			_, _ = fmt.Fprintf(w, "  %s: errors %q: %d\n", phaseName(ph), k, ph.ErrorsBy[k])
		}
		for _, k := range sortedKeys(ph.MismatchBy) {
			_, _ = fmt.Fprintf(w, "  %s: wrong decision for class %s: %d (e.g. %s)\n", phaseName(ph), k, ph.MismatchBy[k], ph.Mismatch)
		}
	}
	for _, p := range rep.Preflight {
		_, _ = fmt.Fprintf(w, "  preflight: %s\n", p)
	}
	_, _ = fmt.Fprintf(w, "max throughput %.0f req/s", rep.MaxThroughput)
	if rep.UnloadedP50Ms != nil {
		_, _ = fmt.Fprintf(w, ", unloaded p50 %.3f ms", *rep.UnloadedP50Ms)
	}
	if h := rep.HalfLoad; h != nil {
		_, _ = fmt.Fprintf(w, ", at half load (%.0f req/s): p99 %.3f ms, p99.9 %.3f ms", h.TargetRate, h.P99Ms, h.P999Ms)
	}
	_, _ = fmt.Fprintln(w)
	if st := rep.Recorded; st != nil {
		_, _ = fmt.Fprintf(w, "svc recorded %v decisions (allow %v, deny %v, redact %v, require_approval %v, quarantine %v), warm-up and preflight included\n",
			st["total_decisions"], st["decisions_allow"], st["decisions_deny"], st["decisions_redact"], st["decisions_require_approval"],
			st["decisions_quarantine"])
	}
}

func optional(v float64, format string) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf(format, v)
}

func mixString(mix []mixWeight) string {
	parts := make([]string, len(mix))
	for i, m := range mix {
		parts[i] = fmt.Sprintf("%s=%d", m.Class, m.Weight)
	}
	return strings.Join(parts, ",")
}

// closedAt is r's closed-loop phase at concurrency c, nil when it has none.
func closedAt(r *Report, c int) *Phase {
	for i := range r.Phases {
		if ph := &r.Phases[i]; ph.Mode == "closed" && ph.Concurrency == c {
			return ph
		}
	}
	return nil
}

// printSummary compares the runs of files with the baseline's, from the
// same run of make bench: the throughput ratio at each one's best
// concurrency and at equalConc, the unloaded p50 and the p99 at half of
// each one's own maximum throughput as ratios to the baseline's (at most
// latencyRatio), errors, and a PASS or MISS per target. It returns 1 when
// a file cannot be read (a run failed), 0 otherwise, whatever the
// verdicts.
func printSummary(w, stderr io.Writer, files []string, baseline, targets string, equalConc int, latencyRatio float64) int {
	minRatio := map[string]float64{}
	var order []string
	for _, t := range strings.Split(targets, ",") {
		name, v, ok := strings.Cut(strings.TrimSpace(t), "=")
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			_, _ = fmt.Fprintf(stderr, "loadgen: -targets: %q\n", t)
			return 2
		}
		minRatio[name] = f
		order = append(order, name)
	}
	rc := 0
	var reps []*Report
	for _, f := range files {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		raw, err := os.ReadFile(f)
		var rep Report
		if err == nil {
			err = json.Unmarshal(raw, &rep)
		}
		if err != nil {
			_, _ = fmt.Fprintf(stderr, "loadgen: summary: %s: %v\n", f, err)
			rc = 1
			continue
		}
		reps = append(reps, &rep)
	}
	var base *Report
	for _, r := range reps {
		if r.Label == baseline {
			base = r
		}
	}
	_, _ = fmt.Fprintf(w, "\n== summary: %d CPUs; figures from one run each, on whatever else the machine was doing (see load averages)\n", numCPU(reps))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	_, _ = fmt.Fprintf(tw, "target\tmax req/s\tvs %s\tunloaded p50 ms\thalf-load req/s\tp99@half ms\tp99.9@half ms\terrors\tmismatches\tsrv CPU µs/req\tdb CPU µs/req\tload avg\t\n", baseline)
	for _, r := range reps {
		ratio := "-"
		if base != nil && base.MaxThroughput > 0 {
			ratio = fmt.Sprintf("%.2fx", r.MaxThroughput/base.MaxThroughput)
		}
		p50, hr, p99, p999 := "-", "-", "-", "-"
		if r.UnloadedP50Ms != nil {
			p50 = fmt.Sprintf("%.3f", *r.UnloadedP50Ms)
		}
		if h := r.HalfLoad; h != nil {
			hr, p99, p999 = fmt.Sprintf("%.0f", h.TargetRate), fmt.Sprintf("%.3f", h.P99Ms), fmt.Sprintf("%.3f", h.P999Ms)
		}
		errs, mism := 0, 0
		cpu, db := 0.0, 0.0
		for _, ph := range r.Phases {
			errs += ph.Errors
			mism += ph.Mismatches
			if ph.Mode == "closed" && ph.Throughput == r.MaxThroughput {
				cpu, db = ph.ServerCPUPerReqUs, ph.DBCPUPerReqUs
			}
		}
		_, _ = fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t\n", r.Label, r.MaxThroughput, ratio, p50, hr, p99, p999,
			errs, mism, optional(cpu, "%.0f"), optional(db, "%.0f"), r.LoadAvgPre)
	}
	_ = tw.Flush()
	if base == nil {
		_, _ = fmt.Fprintf(w, "no %s run: no throughput ratio\n", baseline)
	}
	_, _ = fmt.Fprintf(w, "\ntargets (informational), against %s in this run: throughput ratio at each one's best concurrency and at c=%d; "+
		"unloaded p50, and p99 at half of each one's own maximum throughput, at most %.2fx %s's\n", baseline, equalConc, latencyRatio, baseline)
	for _, name := range order {
		var r *Report
		for _, x := range reps {
			if x.Label == name {
				r = x
			}
		}
		if r == nil {
			_, _ = fmt.Fprintf(w, "  %-9s NO RESULT (the run failed)\n", name)
			continue
		}
		var checks []string
		pass := true
		verdict := func(ok bool) string {
			if ok {
				return "PASS"
			}
			pass = false
			return "MISS"
		}
		if base == nil || base.MaxThroughput <= 0 {
			checks = append(checks, "no baseline "+verdict(false))
			_, _ = fmt.Fprintf(w, "  %-9s MISS: %s\n", name, strings.Join(checks, "; "))
			continue
		}
		ratio := r.MaxThroughput / base.MaxThroughput
		checks = append(checks, fmt.Sprintf("throughput at best concurrency %.2fx %s (>= %.2fx) %s", ratio, baseline, minRatio[name],
			verdict(ratio >= minRatio[name])))
		if ph, bp := closedAt(r, equalConc), closedAt(base, equalConc); ph != nil && bp != nil && bp.Throughput > 0 {
			eq := ph.Throughput / bp.Throughput
			checks = append(checks, fmt.Sprintf("at c=%d %.2fx (>= %.2fx) %s", equalConc, eq, minRatio[name], verdict(eq >= minRatio[name])))
		} else {
			checks = append(checks, fmt.Sprintf("at c=%d: not measured %s", equalConc, verdict(false)))
		}
		if r.UnloadedP50Ms != nil && base.UnloadedP50Ms != nil && *base.UnloadedP50Ms > 0 {
			q := *r.UnloadedP50Ms / *base.UnloadedP50Ms
			checks = append(checks, fmt.Sprintf("unloaded p50 %.3f ms, %.2fx (<= %.2fx) %s", *r.UnloadedP50Ms, q, latencyRatio, verdict(q <= latencyRatio)))
		} else {
			checks = append(checks, "unloaded p50: no concurrency-1 phase "+verdict(false))
		}
		if h, bh := r.HalfLoad, base.HalfLoad; h != nil && bh != nil && bh.P99Ms > 0 {
			q := h.P99Ms / bh.P99Ms
			checks = append(checks, fmt.Sprintf("p99 at half max %.3f ms, %.2fx (<= %.2fx) %s", h.P99Ms, q, latencyRatio, verdict(q <= latencyRatio)))
		} else {
			checks = append(checks, "p99 at half max: not measured "+verdict(false))
		}
		errs := 0
		for _, ph := range r.Phases {
			errs += ph.Errors + ph.Mismatches
		}
		if errs > 0 {
			checks = append(checks, fmt.Sprintf("%d errors or wrong decisions %s", errs, verdict(false)))
		}
		overall := "PASS"
		if !pass {
			overall = "MISS"
		}
		_, _ = fmt.Fprintf(w, "  %-9s %s: %s\n", name, overall, strings.Join(checks, "; "))
	}
	return rc
}

func numCPU(reps []*Report) int {
	for _, r := range reps {
		if r.NumCPU > 0 {
			return r.NumCPU
		}
	}
	return 0
}
