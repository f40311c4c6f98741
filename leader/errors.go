package leader

import "errors"

// ErrNotLeading ends a leader job's pass whose node stopped leading
// between batches: the pass starts nothing more, and the job records it as
// stopped, not failed.
var ErrNotLeading = errors.New("leader: stopped: this node no longer leads")
