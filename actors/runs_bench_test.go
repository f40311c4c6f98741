package actors_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"svc/messages"
	"svc/rules/policy"
)

// BenchmarkAuthorizeRuns is what run-aware policies cost on the authorize
// path of a lone node (agent actor, run state, policy, group commit on
// SQLite), in process: 16 agents' calls from 16 callers, each call in a
// run of four, with README's five run policies loaded ("on") or no tenant
// policy ("off"). The HTTP figure is make bench's runs target.
func BenchmarkAuthorizeRuns(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := map[bool]string{false: "off", true: "on"}[on]
		b.Run(name, func(b *testing.B) {
			var mods []policy.Module
			if on {
				mods = readRunPolicies(b)
			}
			f := newBenchFixture(b, 16)
			auth := newBenchAuthorizer(b, f, mods)
			ctx := context.Background()
			var next atomic.Uint64
			call := func() {
				n := next.Add(1)
				ag := f.agents[n%uint64(len(f.agents))]
				run := fmt.Sprint("run-", n/uint64(4*len(f.agents)), "-", n%uint64(len(f.agents)))
				req := messages.AuthorizeRequest{SourceTrust: "trusted_internal_unsigned", Trace: &messages.Trace{RunID: &run},
					ToolCall: messages.ToolCall{Tool: "crm", Action: "get_contact", Parameters: map[string]any{"contact_id": "c-1"}}}
				out := auth.Authorize(ctx, &messages.Authorize{TenantID: f.tenantID, AgentID: ag.ID, AgentName: ag.Name,
					AgentStatus: ag.Status, RiskTier: ag.RiskTier, Request: req, ReceivedAt: time.Now().UTC()})
				if out.Failure != nil || out.Response == nil || out.Response.Decision != "allow" {
					b.Errorf("authorize: %+v %+v", out.Failure, out.Response)
				}
			}
			for range f.agents { // spawn the agent actors, warm the caches
				call()
			}
			b.ReportAllocs()
			b.ResetTimer()
			b.SetParallelism(8) // 16 callers on 2 cores
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					call()
				}
			})
		})
	}
}

// readRunPolicies are README's five run policies (bench/runs).
func readRunPolicies(b *testing.B) []policy.Module {
	b.Helper()
	files, err := filepath.Glob(filepath.Join("..", "bench", "runs", "*.rego"))
	if err != nil || len(files) != 5 {
		b.Fatalf("bench/runs: %v %v", files, err)
	}
	var mods []policy.Module
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			b.Fatal(err)
		}
		mods = append(mods, policy.Module{Name: strings.TrimSuffix(filepath.Base(file), ".rego"), Rego: string(src)})
	}
	return mods
}
