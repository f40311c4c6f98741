package leader

import "sync/atomic"

// LeaseName is the lease row that elects the maintenance leader.
const LeaseName = "maintenance"

// Leadership tells whether this node holds the maintenance lease. Safe for
// concurrent use.
type Leadership struct{ held atomic.Bool }

// IsLeader reports whether this node is the leader now.
func (l *Leadership) IsLeader() bool { return l.held.Load() }

// Set records whether this node holds the lease and returns whether it
// held it before. The lease actor (actors.NewLeaderLease) is its only
// writer.
func (l *Leadership) Set(held bool) (was bool) { return l.held.Swap(held) }
