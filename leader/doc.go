// Package leader holds what the node knows about its leadership: whether
// it holds the maintenance lease ([Leadership], written by the lease actor
// actors.NewLeaderLease, read by every leader job and the status page) and
// what the leader jobs' runs came to ([JobStats], recorded by each job,
// read by /metrics and the status page). Neither is an actor; both are
// safe for concurrent use.
package leader
