// Package broadcast holds the gateway's fan-out hubs: one publisher's news
// handed to every subscriber that wants it, never blocking the publisher.
// None of them is an actor: they run on their callers' goroutines and on
// the one pump or subscription loop each starts with Run.
//
// # Within the node
//
// [EventBus] queues SOC events (SPEC 6.1) from the authorize road, the
// approvals, the maintenance jobs and the MCP registry, and forwards each
// to the subscribed actors (the SOC pipeline, the exporters); a full queue
// drops and counts.
//
// # To every node
//
// Three hubs travel on the shared state's publish/subscribe, each on its
// channel ([InvalidationChannel], [FeedChannel], [ApprovalWaitChannel]),
// and share one subscription loop that subscribes again when the
// subscription breaks and says when messages may have been missed:
//
//   - [Invalidations]: a change drops a cached entry on this node and on
//     every other; caches subscribe to their kinds.
//   - [Feed]: the live SOC feed (SPEC 6.6); a subscriber that falls behind
//     is cut off.
//   - [ApprovalWaits]: the node that decides an approval wakes the
//     requests waiting for it on every node (GET /approvals/:id?wait=N).
package broadcast
