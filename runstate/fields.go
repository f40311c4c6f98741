package runstate

// Fields says which members of input.run and input.agent_history a
// tenant's policies read: one bit per member of each document ([RunMember],
// [AgentMember]). Only those are built, kept and hashed, so a policy that
// reads two members pays for two. The zero Fields reads nothing.
type Fields struct {
	Run, Agent uint32
	// Tools narrows input.run.tools (nil: all of it).
	Tools *ToolSel
	// Trust narrows input.run.trust to the members it has bits of
	// ([TrustMember]); 0 is all of them.
	Trust uint8
	// CallTool and CallAction are the call's own (tool, action), which a
	// ToolSel's KeyCall selects (set per call, with [Fields.ForCall]).
	CallTool, CallAction string
}

// RunOnly is f without input.agent_history.
func (f Fields) RunOnly() Fields {
	f.Agent = 0
	return f
}

// AgentOnly is f without input.run.
func (f Fields) AgentOnly() Fields {
	f.Run = 0
	return f
}

// ForCall is f for a call of (tool, action).
func (f Fields) ForCall(tool, action string) Fields {
	f.CallTool, f.CallAction = tool, action
	return f
}

// The members of input.run and input.agent_history, in bit order.
var (
	runMembers = [...]string{"id", "known", "complete", "truncated", "seq", "totals", "decisions", "trust", "labels",
		"tools", "distinct_tools", "window", "sums", "recent", "parent_id", "owner_agent_id", "agents", "age_s", "idle_s",
		"last_allowed"}
	agentMembers = [...]string{"complete", "consecutive_denies", "window", "trust", "since_last_deny_s"}
)

// AllFields reads every member of both documents.
var AllFields = Fields{Run: 1<<len(runMembers) - 1, Agent: 1<<len(agentMembers) - 1, Trust: AllTrust}

// RunMember is the bit of an input.run member, 0 for a name that is none.
func RunMember(name string) uint32 { return memberBit(runMembers[:], name) }

// AgentMember is the bit of an input.agent_history member, 0 for a name
// that is none.
func AgentMember(name string) uint32 { return memberBit(agentMembers[:], name) }

func memberBit(names []string, name string) uint32 {
	for i, n := range names {
		if n == name {
			return 1 << i
		}
	}
	return 0
}

// Any reports whether f reads anything.
func (f Fields) Any() bool { return f.Run|f.Agent != 0 }

// The bits of input.run's members, in the order of runMembers.
const (
	runID uint32 = 1 << iota
	runKnown
	runComplete
	runTruncated
	runSeq
	runTotals
	runDecisions
	runTrust
	runLabels
	runTools
	runDistinctTools
	runWindow
	runSums
	runRecent
	runParentID
	runOwner
	runAgents
	runAge
	runIdle
	runLastAllowed
)

// The members of input.run.trust, in bit order (which is RFC 8785 order).
var trustMembers = [...]string{"first_untrusted_seq", "inherited", "malicious_seen", "min", "min_rank",
	"since_untrusted_s", "sources", "untrusted_seen"}

// TrustMember is the bit of an input.run.trust member, 0 for a name that is
// none.
func TrustMember(name string) uint8 {
	for i, n := range trustMembers {
		if n == name {
			return 1 << i
		}
	}
	return 0
}

// AllTrust is every member of input.run.trust.
const AllTrust = 1<<len(trustMembers) - 1
