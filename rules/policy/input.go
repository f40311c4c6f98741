package policy

import (
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"

	"svc/runstate"
)

// Input is the document a policy sees as `input` (CONTRACT §6). The JSON
// names are the names in Rego; testdata/policy/input_example.json is a
// complete example.
type Input struct {
	// TenantID is the calling agent's tenant.
	TenantID string `json:"tenant_id"`
	// Agent is the calling agent as the server knows it.
	Agent AgentInput `json:"agent"`
	// ToolCall is the call, normalized by SPEC 4.2 rule 7.
	ToolCall ToolCall `json:"tool_call"`
	// MutatesState is the request's own claim. The base policies also treat
	// a call as mutating when Skill.MutatesState is true.
	MutatesState bool `json:"mutates_state"`
	// TrustLevel is the effective trust of this hop (SPEC 4.2 rule 8).
	TrustLevel string `json:"trust_level"`
	// RootTrustLevel is the chain's root trust (the effective, tightened
	// value the response returns); empty when the caller has none.
	RootTrustLevel string `json:"root_trust_level"`
	// Environment is the call's environment, empty when not given.
	Environment string `json:"environment"`
	// Skill is the registry metadata of (tool, action), nil when the action
	// is not registered.
	Skill *SkillInput `json:"skill"`
	// MCP describes the MCP server and tool for tools "mcp:<server_key>",
	// nil otherwise.
	MCP *MCPInput `json:"mcp"`
	// Run and AgentHistory are the run context (CONTRACT §16), the state
	// before this call; nil (absent from the input) when no loaded policy
	// refers to them.
	Run          runstate.Obj `json:"run,omitempty" openapi:"object"`
	AgentHistory runstate.Obj `json:"agent_history,omitempty" openapi:"object"`
	// RunKey is the canonical bytes of Run and AgentHistory
	// ([runstate.Context.Canonical]) when the caller has them: inputs with
	// the same bytes share the documents' terms (docterms.go). Empty: the
	// terms are built for this input alone.
	RunKey []byte `json:"-"`
}

// AgentInput is the calling agent. RiskTier comes from the server (low,
// medium, high); a client-supplied tier is never used.
type AgentInput struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	RiskTier string `json:"risk_tier"`
	Status   string `json:"status"`
}

// ToolCall is the normalized call. Resource is nil when the request has none.
// Parameters holds JSON values as encoding/json decodes them (map[string]any,
// []any, string, float64 or json.Number, bool, nil).
type ToolCall struct {
	Tool       string         `json:"tool"`
	Action     string         `json:"action"`
	Resource   *string        `json:"resource"`
	Parameters map[string]any `json:"parameters"`
}

// SkillInput is the skill registry's metadata for the call's (tool, action).
// Risk is low, medium, high or critical.
type SkillInput struct {
	Key              string `json:"key"`
	Description      string `json:"description"`
	Action           string `json:"action"`
	Risk             string `json:"risk"`
	MutatesState     bool   `json:"mutates_state"`
	ApprovalRequired bool   `json:"approval_required"`
	// OutputTrust is the trust level of what the action's calls bring into
	// their run ("" for none); Labels classify the action for run policies.
	OutputTrust string   `json:"output_trust"`
	Labels      []string `json:"labels"`
}

// MCPInput describes an MCP call. ServerStatus is "" for an unknown server
// (else active or quarantined); ToolStatus is "" for an unknown tool (else
// pending, approved or disabled); TrustLevel is the server's trust level.
type MCPInput struct {
	ServerKey    string `json:"server_key"`
	ServerStatus string `json:"server_status"`
	ToolStatus   string `json:"tool_status"`
	TrustLevel   string `json:"trust_level"`
}

// inputKeys holds the object keys of the input document as terms, built once
// per Engine so that building an input value does not allocate them again.
// They are never modified after newInputKeys.
type inputKeys struct {
	tenantID, agent, toolCall, mutatesState, trustLevel, rootTrustLevel,
	environment, skill, mcp, run, agentHistory *ast.Term
	id, name, riskTier, status               *ast.Term
	tool, action, resource, parameters       *ast.Term
	key, description, risk, approvalRequired *ast.Term
	outputTrust, labels                      *ast.Term
	serverKey, serverStatus, toolStatus      *ast.Term
}

func newInputKeys() *inputKeys {
	s := ast.StringTerm
	return &inputKeys{
		tenantID: s("tenant_id"), agent: s("agent"), toolCall: s("tool_call"),
		mutatesState: s("mutates_state"), trustLevel: s("trust_level"),
		rootTrustLevel: s("root_trust_level"), environment: s("environment"),
		skill: s("skill"), mcp: s("mcp"), run: s("run"), agentHistory: s("agent_history"),
		id: s("id"), name: s("name"), riskTier: s("risk_tier"), status: s("status"),
		tool: s("tool"), action: s("action"), resource: s("resource"), parameters: s("parameters"),
		key: s("key"), description: s("description"), risk: s("risk"),
		approvalRequired: s("approval_required"), outputTrust: s("output_trust"), labels: s("labels"),
		serverKey: s("server_key"), serverStatus: s("server_status"), toolStatus: s("tool_status"),
	}
}

// value builds the input document as an ast.Value, field by field, without
// the JSON round trip that rego.EvalInput does.
// docs (nil: none) memoizes the run documents by in.RunKey.
func (k *inputKeys) value(in *Input, docs *docTerms) (ast.Value, error) {
	params := ast.InternedNullTerm
	if in.ToolCall.Parameters != nil {
		v, err := ast.InterfaceToValue(in.ToolCall.Parameters)
		if err != nil {
			return nil, fmt.Errorf("%w: tool_call.parameters: %w", ErrEval, err)
		}
		params = ast.NewTerm(v)
	}
	resource := ast.InternedNullTerm
	if in.ToolCall.Resource != nil {
		resource = str(*in.ToolCall.Resource)
	}
	skill := ast.InternedNullTerm
	if s := in.Skill; s != nil {
		skill = ast.ObjectTerm(
			[2]*ast.Term{k.key, str(s.Key)},
			[2]*ast.Term{k.description, str(s.Description)},
			[2]*ast.Term{k.action, str(s.Action)},
			[2]*ast.Term{k.risk, str(s.Risk)},
			[2]*ast.Term{k.mutatesState, ast.InternedTerm(s.MutatesState)},
			[2]*ast.Term{k.approvalRequired, ast.InternedTerm(s.ApprovalRequired)},
			[2]*ast.Term{k.outputTrust, str(s.OutputTrust)},
			[2]*ast.Term{k.labels, labelsTerm(s.Labels)},
		)
	}
	mcp := ast.InternedNullTerm
	if m := in.MCP; m != nil {
		mcp = ast.ObjectTerm(
			[2]*ast.Term{k.serverKey, str(m.ServerKey)},
			[2]*ast.Term{k.serverStatus, str(m.ServerStatus)},
			[2]*ast.Term{k.toolStatus, str(m.ToolStatus)},
			[2]*ast.Term{k.trustLevel, str(m.TrustLevel)},
		)
	}
	members := [][2]*ast.Term{
		{k.tenantID, str(in.TenantID)},
		{k.agent, ast.ObjectTerm(
			[2]*ast.Term{k.id, str(in.Agent.ID)},
			[2]*ast.Term{k.name, str(in.Agent.Name)},
			[2]*ast.Term{k.riskTier, str(in.Agent.RiskTier)},
			[2]*ast.Term{k.status, str(in.Agent.Status)},
		)},
		{k.toolCall, ast.ObjectTerm(
			[2]*ast.Term{k.tool, str(in.ToolCall.Tool)},
			[2]*ast.Term{k.action, str(in.ToolCall.Action)},
			[2]*ast.Term{k.resource, resource},
			[2]*ast.Term{k.parameters, params},
		)},
		{k.mutatesState, ast.InternedTerm(in.MutatesState)},
		{k.trustLevel, str(in.TrustLevel)},
		{k.rootTrustLevel, str(in.RootTrustLevel)},
		{k.environment, str(in.Environment)},
		{k.skill, skill},
		{k.mcp, mcp},
	}
	if in.Run != nil || in.AgentHistory != nil {
		build := func() docTerm {
			var t docTerm
			if in.Run != nil {
				t.run = docValue(in.Run)
			}
			if in.AgentHistory != nil {
				t.agentHistory = docValue(in.AgentHistory)
			}
			return t
		}
		var t docTerm
		if len(in.RunKey) > 0 && docs != nil {
			t = docs.get(in.RunKey, build)
		} else {
			t = build()
		}
		if t.run != nil {
			members = append(members, [2]*ast.Term{k.run, t.run})
		}
		if t.agentHistory != nil {
			members = append(members, [2]*ast.Term{k.agentHistory, t.agentHistory})
		}
	}
	return ast.NewObject(members...), nil
}

// labelsTerm is a skill's labels as an array (empty when it has none).
func labelsTerm(labels []string) *ast.Term {
	ts := make([]*ast.Term, len(labels))
	for i, l := range labels {
		ts[i] = str(l)
	}
	return ast.ArrayTerm(ts...)
}

// str returns a string term, shared for the strings OPA interns.
func str(s string) *ast.Term {
	return ast.InternedTerm(s)
}
