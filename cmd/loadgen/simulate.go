package main

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// simulator keeps policy simulations running on the server during the
// run (-simulate): one at a time, each over every decision of the tenant
// so far, with a candidate that denies one tool; the authorize phases
// measure the live path while they run (CONTRACT §18: it yields to live
// traffic).
type simulator struct {
	cancel    context.CancelFunc
	done      sync.WaitGroup
	completed atomic.Int64
	decisions atomic.Int64
	busy      atomic.Int64
	failed    atomic.Int64
}

const simulateCandidate = "package svc.policies.bench_sim\n\nresults contains {\"decision\": \"deny\", \"reason\": \"bench_sim\"} " +
	"if input.tool_call.tool == \"payments\"\n"

func startSimulations(ctx context.Context, client *http.Client, base, op string) *simulator {
	ctx, cancel := context.WithCancel(ctx)
	s := &simulator{cancel: cancel}
	s.done.Go(func() {
		body := map[string]any{"policies": []any{map[string]any{"name": "bench_sim", "rego": simulateCandidate}}, "limit": 1_000_000}
		for ctx.Err() == nil {
			var out struct {
				Evaluated int64 `json:"evaluated"`
			}
			err := call(ctx, client, "POST", base+"/v2/policies/simulate", op, body, 200, &out)
			var se *statusError
			switch {
			case err == nil:
				s.completed.Add(1)
				s.decisions.Add(out.Evaluated)
			case errors.As(err, &se) && se.status == http.StatusServiceUnavailable:
				s.busy.Add(1)
				sleepCtx(ctx, 100*time.Millisecond)
			case ctx.Err() == nil:
				s.failed.Add(1)
				sleepCtx(ctx, 100*time.Millisecond)
			}
		}
	})
	return s
}

func (s *simulator) stop() {
	s.cancel()
	s.done.Wait()
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
