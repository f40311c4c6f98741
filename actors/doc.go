// Package actors holds svc's behaviour over time: protoactor-go actors, one
// per thing, the fronts that ask them, and the mechanics that run them.
// Services that are not actors live in packages named for what they do
// (issue 39): the MCP registry in mcpregistry, the event bus, cache
// invalidations, live feed and approval waits in broadcast, the approval
// callbacks in approvalcallback, the maintenance passes in maintenance,
// leadership and the leader jobs' run records in leader.
//
// # Actors
//
// Each kind has its file and its exported producer; the actor types
// themselves are unexported.
//
//   - agent.go: one actor per tenant/agent (limits, nonces, tier, denial
//     window, status), asked by the [Authorizer].
//   - approvals.go: one actor per approval in use (the single-use state
//     machine), behind the [Approvals] front.
//   - writer.go: the group writer, which commits decisions, their audit
//     rows and receipts ([NewGroupWriter]).
//   - soc.go, correlator.go: the SOC pipeline and its per tenant/agent
//     correlators ([NewSOCPipeline]).
//   - notifier.go, exporter.go, gate.go: chat notifications, webhook
//     exports ([ExporterHandle] is the part other layers hold) and the
//     code-host security gate.
//   - heartbeat.go, poolsampler.go, leader.go: the heartbeat buffer, the
//     pool sampler and the maintenance lease.
//   - periodic.go: leader jobs, the periodic actors that run a pass on the
//     leader only (maintenance.go, approvals.go's cleaner,
//     approvalcallbacks.go's sweep, mcprediscovery.go); the passes
//     themselves are the services' (maintenance, approvalcallback,
//     mcpregistry).
//
// # The authorize road
//
// [Authorizer] is the front of the authorize road: it runs on the HTTP
// goroutine and asks the agent actors and the group writer (facts.go,
// mcpfacts.go, idempotency.go, aftercommit.go). It stays here because it
// spawns and addresses those actors through their unexported types and
// messages (incarnation.go's actor table, the writer's barrier).
//
// # Supervision
//
// [StartSupervisor] spawns every [ChildSpec] under one root actor whose
// strategy gives each child its own restart budget (MaxRestarts within
// Within) and, for flaky I/O, an exponential backoff between restarts. A
// child whose budget is spent is stopped and marked dead in the [Registry],
// which /readyz aggregates.
//
// # Mechanics
//
// dispatch.go (the reusing dispatcher), reply.go (reply channels and
// await), incarnation.go (on-demand actors that stop when idle) and
// logging.go (protoactor's slog output bridged into hclog).
//
// # Health
//
// The [Registry] holds one [Component] per supervised task and per
// dependency (the audit writer), in the states starting, ok, degraded and
// dead.
//
// # Counters
//
// [SOCStats], [NotifierStats], [GateStats] and [PoolSample] are written
// by their actors (some through unexported methods and fields) and read
// by /metrics.
//
// # Rules
//
// Actors never block their mailbox on I/O: long work runs in a goroutine
// whose result comes back to the actor as a message. Actor messages never
// carry an http.ResponseWriter or a context.
package actors
