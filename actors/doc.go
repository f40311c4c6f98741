// Package actors holds svc's behaviour over time: protoactor-go actors, one
// per thing, supervised by a root supervisor built from a declarative table
// of children.
//
// # Supervision
//
// [StartSupervisor] spawns every [ChildSpec] under one root actor whose
// strategy gives each child its own restart budget (MaxRestarts within
// Within) and, for flaky I/O, an exponential backoff between restarts. A
// child whose budget is spent is stopped and marked dead in the [Registry],
// which /readyz aggregates.
//
// # Health
//
// The [Registry] holds one [Component] per supervised task and per
// dependency (the audit writer), in the states starting, ok, degraded and
// dead.
//
// # Rules
//
// Actors never block their mailbox on I/O: long work runs in a goroutine
// whose result comes back to the actor as a message. Actor messages never
// carry an http.ResponseWriter or a context.
package actors
