// Package approvalcallback delivers the callbacks agents register with a
// call that needs approval (SPEC 4.2 webhook, CONTRACT §14): a signed POST
// of the approval's outcome to the agent's URL, at once when the approval
// is decided on this node, and from the leader's sweep for approvals that
// expired undecided or attempts a stopped node left.
//
// It is no actor: [Callbacks] runs each delivery on a goroutine of its own
// (bounded per node) and claims every attempt in the database first, so
// that each callback is tried at most persistence.MaxCallbackAttempts
// times across the installation. The sweep's schedule is a leader job in
// actors/ (actors.NewApprovalCallbackSweep) that calls [Callbacks.Sweep].
package approvalcallback
