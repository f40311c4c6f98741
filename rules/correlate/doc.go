// Package correlate finds incident patterns in the stream of one tenant's
// and one agent's authorize decisions (SPEC 6.3, 2.4; CONTRACT §7). It is the
// pure behaviour of the correlator actor (DESIGN §1: one actor per tenant and
// agent): a [Windows] value holds the sliding windows of exactly one tenant
// and agent, so tenant and agent never appear in its keys. It does no I/O and
// reads no clock: every time comes in as a parameter. A Windows is not safe
// for concurrent use; its actor owns it. The zero Windows is ready to use.
//
// # Patterns
//
//	kind               severity  pattern
//	deny_storm         HIGH      5 deny decisions within 60 seconds
//	runaway            HIGH      10 actions, any decision, within 30 seconds
//	repeated_approval  MEDIUM    3 require_approval decisions for the same
//	                             tool and action within 10 minutes
//	trust_escalation   HIGH      a deny follows a require_approval within
//	                             30 seconds
//
// Only observations of kind authorize_decision count; every other kind is
// ignored entirely (it changes no state, not even the clock of the windows).
// Decisions are compared exactly as SPEC spells them ("deny",
// "require_approval"). Only "deny" is a deny: a "quarantine" decision counts
// toward neither deny_storm nor trust_escalation (SPEC says "deny
// decisions"), but, like every other decision including an empty or unknown
// one, it is an action for runaway. Tool and action are compared exactly (the
// authorize path has normalized them, SPEC 4.2 rule 7).
//
// # Sliding windows
//
// A window of length W is inclusive of its start and exclusive of its end:
// a window starting at t0 covers [t0, t0+W). Observations belong to one
// occurrence of a pattern only when the newest of them is less than W after
// the oldest (newest - oldest < W). So 5 denies at t0 and t0+60s-1ms make a
// deny_storm, while 5 denies spanning exactly 60 seconds do not; a deny
// exactly 30 seconds after a require_approval is not a trust_escalation.
//
// The windows slide with the newest observation time seen so far (latest):
// after each observation the deny_storm, runaway and trust_escalation
// windows, and the tool and action window the observation touches, keep only
// entries with At > latest - W; older entries can never again be in a window
// with a new observation (other tool and action windows are pruned when next
// touched or when the key cap needs room).
//
// # Out-of-order observations
//
// Observations may arrive slightly out of order (several goroutines feed the
// actor). An observation whose At is earlier than the newest seen is inserted
// in time order, never treated as "now", and never makes a window panic. It
// counts for a pattern only while it is still inside that pattern's window
// anchored at latest (At > latest - W); an observation too late for a window
// is dropped from that window only, so a deny 40 seconds late still counts
// toward deny_storm (60 s) but not toward runaway or trust_escalation (30 s).
// Observations with the same At keep their arrival order, which decides
// "follows" for trust_escalation: a require_approval and a deny at the same
// instant escalate when the require_approval arrived first. "Follows" is
// always about time order, not arrival: a require_approval that arrives late
// but is timed before a deny already held still produces a trust_escalation,
// and a require_approval timed after a deny never does.
//
// # Firing and clearing
//
// A pattern is checked each time an observation enters its window. Since a
// window only holds entries with At > latest - W, any entries it holds are
// less than W apart. A count pattern (deny_storm, runaway,
// repeated_approval) therefore fires as soon as its window holds threshold
// entries; those entries are the incident, and the window is cleared.
// repeated_approval keeps one window per tool and action and clears only
// that one. trust_escalation pairs a new deny with the nearest
// require_approval before it, and a new (late) require_approval with the
// nearest deny after it; its window is then cleared up to the deny: the
// pair and every older entry are dropped, while entries timed after the deny
// (only possible with out-of-order arrival) stay.
//
// Each observation therefore takes part in at most one incident of each
// kind, and a burst of 10 denies gives exactly 2 deny_storm incidents, not
// 6. Each pattern fires at most once per observation, but one observation
// can complete several patterns (a deny can complete a deny_storm, a runaway
// and a trust_escalation).
//
// # Incidents
//
// [Windows.Observe] returns the incidents an observation completes, in the
// order deny_storm, runaway, repeated_approval, trust_escalation, or nil.
// SourceEventIDs are the event ids of the observations that make up the
// pattern, in time order: exactly 5 denies for deny_storm, exactly 10
// actions for runaway, exactly 3 require_approvals for repeated_approval, and
// the require_approval then the deny for trust_escalation. At is the time of
// the newest of them. The summary names the counts and the window (and the
// tool and action for repeated_approval), never a parameter or a secret.
//
// # Memory bounds
//
// Windows keep only what can still matter. Because a count window fires as
// soon as threshold entries fall within W, and it holds only entries within
// W of latest, between calls it never holds more than threshold-1 entries:
// at most 4 for deny_storm, 9 for runaway and 2 per tool and action for
// repeated_approval. The number of tool and action keys is capped at
// [MaxApprovalKeys]: a window emptied by firing is removed, and when a new
// key would exceed the cap, keys whose entries have all left the window are
// removed first, then the least recently observed key. The trust_escalation
// window holds require_approvals (for a later deny) and denies (for a late
// require_approval), at most [MaxTrustEntries] of them, oldest dropped first.
//
// # Idle
//
// [Windows.Idle](now) reports whether no window holds an entry that could
// still be part of a pattern at now, that is no entry with At > now - W for
// its window. The actor can then stop itself without losing a pattern: a new
// actor starts from empty windows. Idle changes nothing.
package correlate
