package httpapi

import (
	"encoding/base64"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"svc/control"
	"svc/messages"
	"svc/persistence"
)

type agentCreate struct {
	Name                string    `json:"name" openapi:"required,pattern=nonblank,maxLength=128"`
	AllowedEnvironments *[]string `json:"allowed_environments" openapi:"items.pattern=nonblank,items.maxLength=128"`
	RiskTier            string    `json:"risk_tier" openapi:"enum=|low|medium|high"`
	// SigningKey is "generate" or the standard base64 of at least 32 bytes.
	SigningKey *string `json:"signing_key" openapi:"pattern=signing_key"`
}

type agentPatch struct {
	Name                *string   `json:"name" openapi:"notnull,pattern=nonblank,maxLength=128"`
	RiskTier            *string   `json:"risk_tier" openapi:"notnull,enum=low|medium|high"`
	AllowedEnvironments *[]string `json:"allowed_environments" openapi:"items.pattern=nonblank,items.maxLength=128"`
	// SigningKey is "generate", base64 of at least 32 bytes, or null to remove.
	SigningKey *string `json:"signing_key" openapi:"pattern=signing_key"`
}

type agentView struct {
	AgentID             string     `json:"agent_id" openapi:"format=uuid"`
	Name                string     `json:"name"`
	Status              string     `json:"status" openapi:"enum=active|quarantined|frozen|revoked|deleted"`
	RiskTier            string     `json:"risk_tier" openapi:"enum=low|medium|high"`
	AllowedEnvironments []string   `json:"allowed_environments" openapi:"nullable,minItems=1"`
	HasSigningKey       bool       `json:"has_signing_key"`
	CreatedAt           time.Time  `json:"created_at"`
	UpdatedAt           time.Time  `json:"updated_at"`
	LastSeenAt          *time.Time `json:"last_seen_at"`
}

type agentCreated struct {
	agentView
	AgentToken string `json:"agent_token"`
	// SigningKey is present only when the server generated it.
	SigningKey string `json:"signing_key,omitempty"`
}

type agentPatched struct {
	agentView
	// SigningKey is present only when the patch generated a new key.
	SigningKey string `json:"signing_key,omitempty"`
}

type tokenRotated struct {
	AgentID    string `json:"agent_id" openapi:"format=uuid"`
	AgentToken string `json:"agent_token"`
}

type leakReported struct {
	AgentID    string `json:"agent_id" openapi:"format=uuid"`
	Rotated    bool   `json:"rotated"`
	AgentToken string `json:"agent_token,omitempty"`
}

type permissionCreate struct {
	ToolKey string `json:"tool_key" openapi:"required,pattern=nonblank,maxLength=128"`
}

type permissionView struct {
	AgentID   string    `json:"agent_id" openapi:"format=uuid"`
	ToolKey   string    `json:"tool_key"`
	CreatedAt time.Time `json:"created_at"`
}

var riskTiers = map[string]bool{"low": true, "medium": true, "high": true}

func viewAgent(a persistence.Agent) agentView {
	v := agentView{AgentID: a.ID, Name: a.Name, Status: a.Status, RiskTier: a.RiskTier,
		HasSigningKey: len(a.SigningKey) > 0, CreatedAt: a.CreatedAt.UTC(), UpdatedAt: a.UpdatedAt.UTC()}
	if len(a.AllowedEnvironments) > 0 {
		// An empty list is unrestricted (SPEC 4.2 rule 5), shown as null
		// like no list (CONTRACT §3).
		v.AllowedEnvironments = a.AllowedEnvironments
	}
	if a.LastSeenAt != nil {
		t := a.LastSeenAt.UTC()
		v.LastSeenAt = &t
	}
	return v
}

// signingKey parses the signing_key field: "generate" asks the control
// plane for a key (shown once, base64, by shownKey), otherwise standard
// base64 of at least 32 bytes.
func signingKey(v string) (key []byte, generate bool, err error) {
	if v == "generate" {
		return nil, true, nil
	}
	key, derr := base64.StdEncoding.DecodeString(v)
	if derr != nil || len(key) < 32 {
		return nil, false, invalidField("signing_key", `must be "generate" or standard base64 of at least 32 bytes`)
	}
	return key, false, nil
}

// shownKey is the signing key the plane generated, base64 (shown once), or
// "" when it generated none.
func shownKey(a persistence.Agent, generated bool) string {
	if !generated {
		return ""
	}
	return base64.StdEncoding.EncodeToString(a.SigningKey)
}

func validEnvironments(envs []string) error {
	for i, e := range envs {
		if strings.TrimSpace(e) == "" || utf8.RuneCountInString(e) > 128 {
			return invalidField(fmt.Sprintf("allowed_environments[%d]", i), "must be a non-empty string of at most 128 characters")
		}
	}
	return nil
}

func agentNotFound(err error) error { return orNotFound(err, "agent") }

func (s *Server) registerAgents() {
	s.register(Route{Method: "POST", Path: "/agents", Access: AccessAdmin, Tag: "agents", Status: 201,
		Summary: "Register an agent; agent_token (and a generated signing_key) are returned once.",
		Body:    &agentCreate{}, Resp: agentCreated{}, Errors: []int{409},
		Handle: s.createAgent})
	s.register(Route{Method: "GET", Path: "/agents", Access: AccessViewer, Tag: "agents", Resp: []agentView{}, Paginated: true,
		Query:   []QueryParam{{Name: "status", Type: "string", Description: "exact status; without it deleted agents are hidden"}},
		Summary: "List agents, newest first.",
		Handle:  s.listAgents})
	s.register(Route{Method: "GET", Path: "/agents/:agent_id", Access: AccessViewer, Tag: "agents", Resp: agentView{}, Errors: []int{404},
		Summary: "One agent (never its token hash or signing key).",
		Handle:  s.getAgent})
	s.register(Route{Method: "PATCH", Path: "/agents/:agent_id", Access: AccessAdmin, Tag: "agents", Body: &agentPatch{}, Resp: agentPatched{},
		Errors:  []int{404, 409},
		Summary: "Change name, risk_tier, allowed_environments (null: unrestricted) or signing_key (null: remove).",
		Handle:  s.updateAgent})
	s.register(Route{Method: "DELETE", Path: "/agents/:agent_id", Access: AccessAdmin, Tag: "agents", Status: 204, Errors: []int{404},
		Summary: "Soft-delete an agent (admin_action audit event, action agent_deleted); its token stops working.",
		Handle:  s.deleteAgent})
	for _, tr := range control.Transitions() {
		s.register(Route{Method: "POST", Path: "/agents/:agent_id/" + tr.Op, Access: AccessAdmin, Tag: "agents", Resp: agentView{},
			Errors:  []int{404, 409},
			Summary: fmt.Sprintf("Move the agent from %s to %s (409 otherwise).", strings.Join(tr.From, " or "), tr.To),
			Handle:  s.transitionAgent(tr)})
	}
	s.register(Route{Method: "POST", Path: "/agents/:agent_id/rotate-token", Access: AccessAdmin, Tag: "agents", Resp: tokenRotated{},
		Errors:  []int{404},
		Summary: "Issue a new agent token (returned once); the old one fails at once (agent_token_rotated audit event).",
		Handle:  s.rotateAgentToken})
	s.register(Route{Method: "POST", Path: "/agents/:agent_id/report-leaked-token", Access: AccessAdmin, Tag: "agents", Resp: leakReported{},
		Errors:  []int{404},
		Summary: "Report a leaked agent token: rotates it when the tenant's auto_rotate_token_on_leak_enabled is on, else records agent_token_leak_detected_no_rotation; emits agent_token_leak_detected either way.",
		Handle:  s.reportLeakedToken})
	s.register(Route{Method: "GET", Path: "/agents/:agent_id/permissions", Access: AccessViewer, Tag: "agents", Resp: []permissionView{},
		Errors: []int{404}, Summary: "The agent's tool permission bindings (none: any tool).",
		Handle: s.listPermissions})
	s.register(Route{Method: "POST", Path: "/agents/:agent_id/permissions", Access: AccessAdmin, Tag: "agents", Status: 201,
		Body: &permissionCreate{}, Resp: permissionView{}, Errors: []int{404, 409},
		Summary: "Bind a tool to the agent (409 AlreadyExists when bound).",
		Handle:  s.bindPermission})
	s.register(Route{Method: "DELETE", Path: "/agents/:agent_id/permissions/:tool_key", Access: AccessAdmin, Tag: "agents", Status: 204,
		Errors:  []int{404},
		Summary: "Unbind a tool (admin_action audit event, action agent_tool_permission_revoked); 404 when not bound.",
		Handle:  s.unbindPermission})
	s.register(Route{Method: "POST", Path: "/agents/heartbeat", Access: AccessAgent, Tag: "agents", Status: 204,
		Summary: "Agent heartbeat: last_seen_at is buffered and flushed every SVC_HEARTBEAT_FLUSH_INTERVAL_SECS.",
		Handle:  s.agentHeartbeat})
}

// createAgent serves POST /agents.
func (s *Server) createAgent(c *Call) (any, error) {
	b := bodyOf[agentCreate](c)
	if err := validName("name", b.Name, 128); err != nil {
		return nil, err
	}
	if b.RiskTier == "" {
		b.RiskTier = "low"
	}
	if !riskTiers[b.RiskTier] {
		return nil, invalidField("risk_tier", "must be low, medium or high")
	}
	n := control.NewAgent{Name: b.Name, RiskTier: b.RiskTier}
	if b.AllowedEnvironments != nil {
		if err := validEnvironments(*b.AllowedEnvironments); err != nil {
			return nil, err
		}
		n.AllowedEnvironments = append([]string{}, *b.AllowedEnvironments...)
	}
	if b.SigningKey != nil {
		key, generate, err := signingKey(*b.SigningKey)
		if err != nil {
			return nil, err
		}
		n.SigningKey, n.GenerateSigningKey = key, generate
	}
	a, tok, err := s.Control.CreateAgent(c.Ctx(), operator(c.Principal), n)
	if err != nil {
		return nil, err
	}
	return agentCreated{agentView: viewAgent(a), AgentToken: tok, SigningKey: shownKey(a, n.GenerateSigningKey)}, nil
}

// listAgents serves GET /agents.
func (s *Server) listAgents(c *Call) (any, error) {
	pg, err := c.page()
	if err != nil {
		return nil, err
	}
	rows, err := s.Store.ListAgents(c.Ctx(), c.Principal.TenantID, persistence.AgentFilter{Status: c.R.URL.Query().Get("status")}, pg)
	if err != nil {
		return nil, err
	}
	rows = paginate(c, pg, rows, func(a persistence.Agent) int64 { return a.Seq })
	return viewAll(rows, viewAgent), nil
}

// getAgent serves GET /agents/:agent_id.
func (s *Server) getAgent(c *Call) (any, error) {
	a, err := s.Store.GetAgent(c.Ctx(), c.Principal.TenantID, c.Param("agent_id"))
	if err != nil {
		return nil, agentNotFound(err)
	}
	return viewAgent(a), nil
}

// updateAgent serves PATCH /agents/:agent_id.
func (s *Server) updateAgent(c *Call) (any, error) {
	b := bodyOf[agentPatch](c)
	for _, f := range []string{"name", "risk_tier"} {
		if c.HasField(f) && ((f == "name" && b.Name == nil) || (f == "risk_tier" && b.RiskTier == nil)) {
			return nil, invalidField(f, "may not be null")
		}
	}
	var ch control.AgentChange
	if b.Name != nil {
		if err := validName("name", *b.Name, 128); err != nil {
			return nil, err
		}
		ch.Name = b.Name
	}
	if b.RiskTier != nil {
		if !riskTiers[*b.RiskTier] {
			return nil, invalidField("risk_tier", "must be low, medium or high")
		}
		ch.RiskTier = b.RiskTier
	}
	if c.HasField("allowed_environments") {
		var envs []string
		if b.AllowedEnvironments != nil {
			if err := validEnvironments(*b.AllowedEnvironments); err != nil {
				return nil, err
			}
			envs = append([]string{}, *b.AllowedEnvironments...)
		}
		ch.AllowedEnvironments = &envs
	}
	if c.HasField("signing_key") {
		var key []byte
		if b.SigningKey != nil {
			k, generate, err := signingKey(*b.SigningKey)
			if err != nil {
				return nil, err
			}
			key, ch.GenerateSigningKey = k, generate
		}
		if !ch.GenerateSigningKey {
			ch.SigningKey = &key
		}
	}
	a, err := s.Control.UpdateAgent(c.Ctx(), operator(c.Principal), c.Param("agent_id"), ch)
	if err != nil {
		return nil, err
	}
	return agentPatched{agentView: viewAgent(a), SigningKey: shownKey(a, ch.GenerateSigningKey)}, nil
}

// deleteAgent serves DELETE /agents/:agent_id.
func (s *Server) deleteAgent(c *Call) (any, error) {
	return nil, s.Control.DeleteAgent(c.Ctx(), operator(c.Principal), c.Param("agent_id"))
}

// transitionAgent serves POST /agents/:agent_id/<tr.Op>: the agent's
// status moves from one of tr.From to tr.To, or 409.
func (s *Server) transitionAgent(tr control.Transition) func(c *Call) (any, error) {
	return func(c *Call) (any, error) {
		a, err := s.Control.TransitionAgent(c.Ctx(), operator(c.Principal), c.Param("agent_id"), tr)
		if err != nil {
			return nil, err
		}
		return viewAgent(a), nil
	}
}

// rotateAgentToken serves POST /agents/:agent_id/rotate-token.
func (s *Server) rotateAgentToken(c *Call) (any, error) {
	id := c.Param("agent_id")
	tok, err := s.Control.RotateAgentToken(c.Ctx(), operator(c.Principal), id, "operator_rotation")
	if err != nil {
		return nil, err
	}
	return tokenRotated{id, tok}, nil
}

// reportLeakedToken serves POST /agents/:agent_id/report-leaked-token.
func (s *Server) reportLeakedToken(c *Call) (any, error) {
	p := c.Principal
	id := c.Param("agent_id")
	out := leakReported{AgentID: id}
	var err error
	if out.Rotated, out.AgentToken, err = s.Control.ReportLeakedToken(c.Ctx(), operator(p), id); err != nil {
		return nil, err
	}
	s.Events.Publish(messages.AseEvent{EventID: uuid.NewString(), OccurredAt: nowUTC(), TenantID: p.TenantID,
		Kind: messages.KindAgentTokenLeakDetected, AgentID: id, Decision: "deny", Tool: "agent_token", Action: "report_leaked_token",
		RiskScore: 90, Reason: fmt.Sprintf("agent token reported leaked; rotated=%t", out.Rotated), SchemaVersion: messages.SchemaVersion})
	return out, nil
}

// listPermissions serves GET /agents/:agent_id/permissions.
func (s *Server) listPermissions(c *Call) (any, error) {
	p := c.Principal
	id := c.Param("agent_id")
	if _, err := s.Store.GetAgent(c.Ctx(), p.TenantID, id); err != nil {
		return nil, agentNotFound(err)
	}
	ps, err := s.Store.ListPermissions(c.Ctx(), p.TenantID, id)
	if err != nil {
		return nil, err
	}
	out := make([]permissionView, len(ps))
	for i, b := range ps {
		out[i] = permissionView{b.AgentID, b.ToolKey, b.CreatedAt.UTC()}
	}
	return out, nil
}

// bindPermission serves POST /agents/:agent_id/permissions.
func (s *Server) bindPermission(c *Call) (any, error) {
	b := bodyOf[permissionCreate](c)
	if err := validName("tool_key", b.ToolKey, 128); err != nil {
		return nil, err
	}
	perm, err := s.Control.GrantTool(c.Ctx(), operator(c.Principal), c.Param("agent_id"), b.ToolKey)
	if err != nil {
		return nil, err
	}
	return permissionView{perm.AgentID, perm.ToolKey, perm.CreatedAt}, nil
}

// unbindPermission serves DELETE /agents/:agent_id/permissions/:tool_key.
func (s *Server) unbindPermission(c *Call) (any, error) {
	return nil, s.Control.RevokeTool(c.Ctx(), operator(c.Principal), c.Param("agent_id"), c.Param("tool_key"))
}

// agentHeartbeat serves POST /agents/heartbeat.
func (s *Server) agentHeartbeat(c *Call) (any, error) {
	s.Heartbeat(messages.Heartbeat{TenantID: c.Principal.TenantID, AgentID: c.Principal.AgentID, At: nowUTC()})
	return nil, nil
}
