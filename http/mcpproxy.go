package httpapi

// The inline MCP proxy's endpoint (CONTRACT §15): authentication, the
// server's resolution, the browser checks, and the Gate through which the
// proxy (package mcpproxy) asks svc about every call it intercepts.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"svc/canonical"
	"svc/mcpproxy"
	"svc/messages"
	"svc/persistence"
	"svc/rules/authz"
	"svc/rules/manifest"
)

const mcpProxyPath = "/mcp/proxy/:server_key"

// The proxy's tools: tools/call is authorized as the registry's tool
// mcp:<server_key> (CONTRACT §15); resources/read and prompts/get as
// these, action read and get, the URI or prompt name as the resource.
const (
	mcpResourcesTool = "mcp-resources:"
	mcpPromptsTool   = "mcp-prompts:"
)

// CodeDenied answers a resources/read or prompts/get that svc did not
// allow (a tools/call's denial is a tool result instead).
const mcpCodeDenied = -32013

// mcpCodeRefused answers a call refused without a decision (throttled, a
// call of this agent in flight, an environment the agent may not use).
const mcpCodeRefused = -32012

func (s *Server) registerMCPProxy() {
	summary := "The inline MCP proxy (CONTRACT §15): a Streamable HTTP MCP endpoint in front of the registered http server server_key, " +
		"for any MCP client (protocol versions " + strings.Join(mcpproxy.SupportedVersions, ", ") + "), authenticated with the agent " +
		"token, which is never forwarded. POST carries one JSON-RPC message (initialize opens a session: the Mcp-Session-Id answered is " +
		"valid on every node and only for this agent and server); GET opens the session's event stream; DELETE ends the session on " +
		"every node. tools/list answers only approved tools of an active server whose definition is the approved one (a drifted tool is " +
		"withheld and a discovery records the drift); tools/call is authorized as POST /v1/authorize with tool mcp:<server_key> and " +
		"answered as a tool result when it is not forwarded (structuredContent {decision, reason, decision_id, receipt_id} or, for " +
		"require_approval, {decision, reason, decision_id, approval_id, approval_expires_at}); the same call again after the approval " +
		"consumes it. resources/read and prompts/get are authorized with tool mcp-resources:<server_key> (action read, resource the " +
		"URI) and mcp-prompts:<server_key> (action get, resource the prompt's name, parameters its arguments); a denial is JSON-RPC " +
		"error -32013 with the decision in data. svc unable to decide (store, shared state or policy unavailable): JSON-RPC error " +
		"-32010 and nothing forwarded; the upstream failing (unreachable, silent past SVC_MCP_PROXY_IDLE_SECS, slower than " +
		"SVC_MCP_PROXY_TIMEOUT_SECS, a message over SVC_MCP_PROXY_MAX_MESSAGE_BYTES, not JSON-RPC): JSON-RPC error -32011. A request " +
		"with an Origin header is refused 403 unless it is same-origin on a loopback host (DNS rebinding). Unknown or other tenants' " +
		"server keys and sessions: 404. An agent token holds at most SVC_RATE_LIMIT_CAPACITY proxy requests open on a node (event " +
		"streams included, authorize calls counted apart): 429 agent_concurrency past it."
	for _, m := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		status := http.StatusOK
		if m == http.MethodDelete {
			status = http.StatusNoContent
		}
		s.register(Route{Method: m, Path: mcpProxyPath, Access: AccessAgent, Tag: "mcp", OwnBody: true, Proxy: s.serveMCPProxy,
			Status: status, Errors: []int{404}, Summary: summary})
	}
}

// serveMCPProxy serves one request of the proxy for the authenticated
// agent.
func (s *Server) serveMCPProxy(w http.ResponseWriter, c *Call) {
	r := c.R
	if e := checkOrigin(r); e != nil {
		writeEnvelope(w, c.Version, e)
		return
	}
	if s.MCPProxy == nil {
		writeEnvelope(w, c.Version, unavailable("mcp_proxy_unavailable", "the MCP proxy is not running on this node"))
		return
	}
	ctx := r.Context()
	agent := *c.Principal.agent // the record the token was looked up as
	if e := c.admitProxyAgent(agent.ID); e != nil {
		writeEnvelope(w, c.Version, e)
		return
	}
	// The authorize path's cached server: the call's decision reads the
	// same entry.
	srv, found, err := s.Authorizer.MCPServer(ctx, agent.TenantID, c.Param("server_key"))
	if err == nil && (!found || srv.Transport != persistence.MCPTransportHTTP) {
		err = persistence.ErrNotFound // a stdio server has nothing to proxy to
	}
	if err != nil {
		e, _ := toAPIError(orNotFound(err, "mcp server"))
		writeEnvelope(w, c.Version, e)
		return
	}
	var header map[string]string
	if len(srv.UpstreamAuth) > 0 {
		if header, err = s.MCPCredentials.OpenCredentials(srv.TenantID, srv.Key, srv.UpstreamAuth); err != nil {
			s.log.Error("mcp proxy: upstream credentials unreadable", "server_key", srv.Key, "error", err)
			writeEnvelope(w, c.Version, unavailable("mcp_credentials_unavailable", "the server's upstream credentials cannot be read"))
			return
		}
	}
	if r.Method == http.MethodGet {
		// A session's event stream ends when the node shuts down (the
		// client opens it again on another node); POSTs finish within
		// the shutdown's bound.
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(s.streamsEnd, cancel)()
		r = r.WithContext(ctx)
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	s.MCPProxy.Serve(w, r, mcpproxy.Target{TenantID: agent.TenantID, AgentID: agent.ID, ServerKey: srv.Key, URL: srv.URL,
		Header: header, Gate: &mcpGate{s: s, srv: srv, agent: agent, console: scheme + "://" + r.Host + "/dashboard/"}})
}

// checkOrigin refuses a request a browser sent from another site: MCP
// clients that are not browsers send no Origin; a browser's Origin is
// accepted only same-origin on a loopback host, where DNS rebinding is
// what the check stops (a page of evil.example resolving to 127.0.0.1).
func checkOrigin(r *http.Request) *Error {
	o := r.Header.Get("Origin")
	if o == "" {
		return nil
	}
	u, err := url.Parse(o)
	if err == nil && strings.EqualFold(u.Host, r.Host) && loopbackHost(u.Hostname()) {
		return nil
	}
	return forbidden("requests from a browser origin (%s) are not accepted by the MCP proxy", o)
}

func loopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// mcpGate is svc's side of one proxied request: the server as read for
// it and the agent that asks.
type mcpGate struct {
	s     *Server
	srv   persistence.MCPServer
	agent persistence.Agent
	// console is the operator console's URL as this request reached svc.
	console string
}

// Listable lists the approved tools of an active server whose definition
// hash is still the approved one.
func (g *mcpGate) Listable(ctx context.Context, _ mcpproxy.Session) (func(mcpproxy.Tool) (bool, bool), error) {
	if g.srv.Status != persistence.MCPServerActive {
		return func(mcpproxy.Tool) (bool, bool) { return false, false }, nil
	}
	tools, err := g.s.Store.ListMCPTools(ctx, g.srv.TenantID, g.srv.Key)
	if err != nil {
		return nil, err
	}
	known := make(map[string]persistence.MCPTool, len(tools))
	for _, t := range tools {
		known[t.Key] = t
	}
	return func(t mcpproxy.Tool) (bool, bool) {
		norm, err := manifest.Normalize([]manifest.Tool{{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}})
		if err != nil {
			return false, false // a tool svc would refuse to register is never listed
		}
		stored, ok := known[norm[0].Key()]
		switch {
		case !ok:
			return false, true // new upstream: the discovery records it
		case stored.Hash != norm[0].Hash():
			return false, true // changed upstream since it was discovered
		}
		return stored.Status == manifest.StatusApproved, false
	}, nil
}

// Decide authorizes an intercepted call through the authorize road.
func (g *mcpGate) Decide(ctx context.Context, sess mcpproxy.Session, c mcpproxy.Call) (mcpproxy.Verdict, error) {
	req := messages.AuthorizeRequest{SourceTrust: g.srv.TrustLevel, MutatesState: true}
	switch c.Method {
	case "tools/call":
		req.ToolCall = messages.ToolCall{Tool: "mcp:" + g.srv.Key, Action: c.Name, Parameters: c.Arguments}
		readOnly, err := g.s.Authorizer.MCPToolReadOnly(ctx, g.srv.TenantID, g.srv.Key, canonical.NormalizeIdentifier(c.Name))
		if err != nil {
			return mcpproxy.Verdict{}, err
		}
		req.MutatesState = !readOnly
	case "resources/read":
		if g.srv.Status != persistence.MCPServerActive {
			return refusedVerdict(mcpCodeDenied, "the mcp server is quarantined", nil), nil
		}
		uri := c.Name
		req.ToolCall = messages.ToolCall{Tool: mcpResourcesTool + g.srv.Key, Action: "read", Resource: &uri}
		req.MutatesState = false
	case "prompts/get":
		if g.srv.Status != persistence.MCPServerActive {
			return refusedVerdict(mcpCodeDenied, "the mcp server is quarantined", nil), nil
		}
		name := c.Name
		req.ToolCall = messages.ToolCall{Tool: mcpPromptsTool + g.srv.Key, Action: "get", Resource: &name, Parameters: c.Arguments}
		req.MutatesState = false
	}
	runID := c.RunID
	if runID == "" {
		runID = sess.ID
	}
	req.Trace = &messages.Trace{RunID: &runID}
	// The identical retry of a call a person approved presents that
	// approval (found by this agent and the call's action hash); the
	// decision's transaction consumes it, once across nodes.
	hash, err := canonical.ActionHash(canonical.ToolCall{Tool: req.ToolCall.Tool, Action: req.ToolCall.Action,
		Resource: req.ToolCall.Resource, Parameters: req.ToolCall.Parameters})
	if err == nil {
		ap, err := g.s.Store.UsableApproval(ctx, g.agent.TenantID, g.agent.ID, hash, time.Now())
		switch {
		case err == nil:
			req.ApprovalID = &ap.ID
		case !errors.Is(err, persistence.ErrNotFound):
			return mcpproxy.Verdict{}, err
		}
	}
	out := g.s.Authorizer.Authorize(ctx, &messages.Authorize{TenantID: g.agent.TenantID, AgentID: g.agent.ID, AgentName: g.agent.Name,
		AgentStatus: g.agent.Status, RiskTier: g.agent.RiskTier, AllowedEnvironments: g.agent.AllowedEnvironments, Request: req,
		ReceivedAt: nowUTC()})
	if f := out.Failure; f != nil {
		switch f.Refusal {
		case messages.RefusalStoreUnavailable, messages.RefusalUnavailable:
			return mcpproxy.Verdict{}, fmt.Errorf("authorize refused: %s: %s", f.Code, f.Message)
		}
		data := map[string]any{"error": f.Code}
		if f.RetryAfter > 0 {
			data["retry_after"] = f.RetryAfter
		}
		return refusedVerdict(mcpCodeRefused, f.Message, data), nil
	}
	if out.FailClosed || out.Response == nil {
		return mcpproxy.Verdict{}, errors.New("authorize failed closed: the decision could not be recorded")
	}
	return g.verdict(c, out.Response)
}

// verdict turns a decision into what the proxy does (CONTRACT §15).
func (g *mcpGate) verdict(c mcpproxy.Call, d *messages.AuthorizeResponse) (mcpproxy.Verdict, error) {
	switch d.Decision {
	case authz.DecisionAllow, "redact":
		args := c.Arguments
		if len(d.RedactedFields) > 0 {
			var err error
			if args, err = canonical.Redact(c.Arguments, d.RedactedFields); err != nil {
				return refusedVerdict(mcpCodeDenied, "the decision's redacted_fields cannot be applied; nothing was forwarded", nil), nil
			}
		}
		return mcpproxy.Verdict{Forward: true, Arguments: args, Inspect: g.srv.InspectionEnabled && c.Method == "tools/call"}, nil
	}
	sc := map[string]any{"decision": d.Decision, "reason": d.Reason, "decision_id": d.DecisionID}
	text := fmt.Sprintf("svc %s this call: %s (decision %s)", pastTense(d.Decision), d.Reason, d.DecisionID)
	if d.Decision == "require_approval" {
		sc["approval_id"] = d.ApprovalID
		sc["approval_expires_at"] = d.ApprovalExpiresAt
		text = fmt.Sprintf("svc requires a person's approval for this call: %s. Approval %s is pending; once it is approved, "+
			"make the same call again (the same arguments) and it runs.", d.Reason, d.ApprovalID)
	} else {
		sc["receipt_id"] = d.ReceiptID
	}
	if c.Method != "tools/call" {
		return refusedVerdict(mcpCodeDenied, text, sc), nil
	}
	res, err := json.Marshal(map[string]any{"content": []map[string]any{{"type": "text", "text": text}}, "structuredContent": sc,
		"isError": true})
	v := mcpproxy.Verdict{Result: res}
	if d.Decision == "require_approval" && d.ApprovalID != "" {
		v.Pending = &mcpproxy.Pending{ApprovalID: d.ApprovalID, URL: g.console + "#/approvals?approval_id=" + d.ApprovalID,
			Message: fmt.Sprintf("svc needs a person to approve %s on %s (%s). Open the console to decide; the call runs once it is approved.",
				c.Name, g.srv.Key, d.Reason),
			Wait: g.waitApproval(d.ApprovalID)}
	}
	return v, err
}

// waitApproval returns the wait of an offered approval: true once it is
// APPROVED, false once it is REJECTED or EXPIRED, when ctx ends or the
// node shuts down. The decision wakes it from any node (the waits hub of
// GET /approvals/:id?wait=N); it reads again every 5 s regardless.
func (g *mcpGate) waitApproval(id string) func(context.Context) bool {
	tenant := g.agent.TenantID
	return func(ctx context.Context) bool {
		for {
			var wake, missed, closing <-chan struct{}
			done := func() {}
			if w := g.s.Waits; w != nil {
				wake, missed, done = w.Wait(tenant, id)
				closing = w.Closing()
			}
			if _, declined, err := g.s.Shared.Get(ctx, declinedKey(tenant, id)); err == nil && declined {
				done()
				return false
			}
			ap, err := g.s.Store.GetApproval(ctx, tenant, id)
			if err == nil {
				switch ap.EffectiveStatus(time.Now()) {
				case persistence.ApprovalApproved:
					done()
					return ap.ConsumedAt == nil
				case persistence.ApprovalRejected, persistence.ApprovalExpired:
					done()
					return false
				}
			}
			select {
			case <-wake:
			case <-missed:
			case <-time.After(5 * time.Second):
			case <-closing:
				done()
				return false
			case <-ctx.Done():
				done()
				return false
			}
			done()
		}
	}
}

func pastTense(decision string) string {
	if decision == "quarantine" {
		return "quarantined"
	}
	return "denied"
}

func refusedVerdict(code int64, msg string, data any) mcpproxy.Verdict {
	e := &jsonrpc.Error{Code: code, Message: msg}
	if data != nil {
		e.Data, _ = json.Marshal(data)
	}
	return mcpproxy.Verdict{Error: e}
}

// Answered inspects a forwarded call's answer (SPEC 4.8's inspection, the
// alerts of POST /inspect).
func (g *mcpGate) Answered(ctx context.Context, _ mcpproxy.Session, _ mcpproxy.Call, result json.RawMessage) {
	if _, _, err := g.s.inspectResponse(ctx, g.srv, g.agent.ID, result); err != nil {
		g.s.log.Warn("mcp proxy: inspection alerts not recorded", "server_key", g.srv.Key, "error", err)
	}
}

// Drifted discovers the server again, which records the drift, puts
// changed tools back to pending and raises mcp_manifest_drift. Requests
// for one server coalesce on a node: at most one discovery per
// driftInterval, and a request during the interval is served by one
// discovery at its end, so a later change is never dropped. No operator
// asks for it: like the leader's re-discovery it is the registry's
// (mcpregistry.Registry.Rediscover), audited as system:mcp_proxy, and not a
// control-plane change.
func (g *mcpGate) Drifted(mcpproxy.Session) {
	if g.s.MCP == nil {
		return
	}
	tenant, key := g.srv.TenantID, g.srv.Key
	g.s.mcpDrift.request(tenant+"/"+key, time.Now(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := g.s.MCP.Rediscover(ctx, tenant, key, "system:mcp_proxy"); err != nil {
			g.s.log.Warn("mcp proxy: discovery after drift failed", "server_key", key, "error", err)
		}
	})
}

// driftGate paces the discoveries drift starts, per server on a node.
type driftGate struct {
	mu    sync.Mutex
	state map[string]*driftState
}

type driftState struct {
	last      time.Time // when the last discovery started
	scheduled bool      // a discovery is coming
}

const driftInterval = 10 * time.Second

// request runs run for key now, or once driftInterval after the last run
// when that is later; a request while one is scheduled joins it.
func (d *driftGate) request(key string, now time.Time, run func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.state == nil {
		d.state = map[string]*driftState{}
	}
	for k, st := range d.state {
		if !st.scheduled && now.Sub(st.last) >= driftInterval {
			delete(d.state, k)
		}
	}
	st := d.state[key]
	if st == nil {
		st = &driftState{}
		d.state[key] = st
	}
	if st.scheduled {
		return
	}
	st.scheduled = true
	time.AfterFunc(max(0, st.last.Add(driftInterval).Sub(now)), func() {
		d.mu.Lock()
		st.scheduled, st.last = false, time.Now()
		d.mu.Unlock()
		run()
	})
}

// declinedKey marks an offered approval whose offer the client's user
// declined.
func declinedKey(tenantID, approvalID string) string {
	return "mcpoffer:declined:" + tenantID + ":" + approvalID
}

// Declined ends the waits of an offered approval on every node: the mark
// in shared state, then the approval waits hub's wake-up (the approval is
// read again by its other waiters, unchanged).
func (g *mcpGate) Declined(ctx context.Context, _ mcpproxy.Session, approvalID string) {
	tenant := g.agent.TenantID
	if ap, err := g.s.Store.GetApproval(ctx, tenant, approvalID); err != nil || ap.AgentID != g.agent.ID {
		return // not this agent's approval: nothing to end
	}
	if err := g.s.Shared.Set(ctx, declinedKey(tenant, approvalID), "1", time.Hour); err != nil {
		g.s.log.Warn("mcp proxy: declined offer not recorded; its wait ends at its bound", "approval_id", approvalID, "error", err)
		return
	}
	if g.s.Waits != nil {
		g.s.Waits.Decided(ctx, tenant, approvalID)
	}
}

// mcpRevocations keeps ended sessions in shared state, so DELETE ends a
// session on every node.
type mcpRevocations struct{ s *Server }

func (m mcpRevocations) key(sess mcpproxy.Session) string { return "mcpsess:ended:" + sess.ID }

func (m mcpRevocations) Revoke(ctx context.Context, sess mcpproxy.Session, until time.Time) error {
	ttl := time.Until(until)
	if ttl <= 0 {
		return nil
	}
	return m.s.Shared.Set(ctx, m.key(sess), "1", ttl)
}

func (m mcpRevocations) Revoked(ctx context.Context, sess mcpproxy.Session) (bool, error) {
	_, ok, err := m.s.Shared.Get(ctx, m.key(sess))
	return ok, err
}
