// Package maintenance holds the passes of the leader's maintenance jobs
// (SPEC part 3, background leadership; SPEC part 8's intervals; issue 28):
// receipt integrity (each tenant's chain verified forward from the last
// verified point, plus a rolling re-verification of older links), audit
// archival and vacuum.
//
// # Passes, not actors
//
// [Maintenance] runs one pass per call on the caller's goroutine, taking
// its time from an injected clock (Options.Now), so that tests advance
// time instead of sleeping. The jobs that call them every interval on the
// leader are actors (actors.NewReceiptIntegrityJob, NewAuditArchivalJob,
// NewVacuumJob): their schedule, restart budget and run records are the
// actors' mechanics, the work is here. A pass whose node loses the lease
// between batches stops with leader.ErrNotLeading.
package maintenance
