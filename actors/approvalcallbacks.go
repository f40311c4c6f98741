package actors

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// JobApprovalCallbacks is the leader's sweep of approval callbacks due and
// not yet delivered (expired approvals, attempts left by a node that
// stopped).
const JobApprovalCallbacks = "approval_callbacks"

// NewApprovalCallbackSweep returns the producer of the leader's job that
// delivers the callbacks due every interval: sweep is the node's
// approvalcallback.Callbacks.Sweep (those of approvals that expired
// undecided, and those a node left with attempts to go), which returns how
// many deliveries it started.
func NewApprovalCallbackSweep(sweep func(context.Context) (int, error), every time.Duration, isLeader func() bool) actor.Producer {
	return newLeaderJob(jobSpec{name: JobApprovalCallbacks, every: every, isLeader: isLeader,
		run: func() (string, error) {
			ctx, cancel := ioContext(30 * time.Second)
			defer cancel()
			n, err := sweep(ctx)
			return fmt.Sprintf("%d approval callbacks due", n), err
		}})
}
