package httpapi

// The MCP registry (SPEC 4.8, CONTRACT §8): /mcp/servers, their tools,
// discovery, pins, drift history and response inspection.

import (
	"context"
	"encoding/json"
	"regexp"
	"time"

	"svc/canonical"
	"svc/control"
	"svc/persistence"
	"svc/rules/inspect"
	"svc/rules/manifest"
)

var serverKeyRE = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

type mcpServerCreate struct {
	ServerKey         *string `json:"server_key" openapi:"required"`
	Transport         *string `json:"transport" openapi:"required,enum=http|stdio"`
	URL               *string `json:"url" openapi:"maxLength=2048"`
	TrustLevel        *string `json:"trust_level"`
	InspectionEnabled *bool   `json:"inspection_enabled"`
	// UpstreamHeaders are the headers the MCP proxy presents to the
	// server (its credentials): stored encrypted, never returned.
	UpstreamHeaders *map[string]string `json:"upstream_headers"`
}

type mcpServerPatch struct {
	URL               *string `json:"url" openapi:"notnull,maxLength=2048"`
	TrustLevel        *string `json:"trust_level" openapi:"notnull"`
	InspectionEnabled *bool   `json:"inspection_enabled" openapi:"notnull"`
	// UpstreamHeaders replaces the proxy's upstream headers ({} removes
	// them).
	UpstreamHeaders *map[string]string `json:"upstream_headers" openapi:"notnull"`
}

type mcpServerView struct {
	ServerKey         string  `json:"server_key"`
	Transport         string  `json:"transport" openapi:"enum=http|stdio"`
	URL               *string `json:"url"`
	TrustLevel        string  `json:"trust_level"`
	InspectionEnabled bool    `json:"inspection_enabled"`
	Status            string  `json:"status" openapi:"enum=active|quarantined"`
	// PinnedHash is the manifest hash drift is measured against;
	// ManifestHash what the last discovery found; Drifted: they differ.
	PinnedHash         *string    `json:"pinned_hash"`
	ManifestHash       *string    `json:"manifest_hash"`
	Drifted            bool       `json:"drifted"`
	LastDiscoveryAt    *time.Time `json:"last_discovery_at"`
	LastDiscoveryError *string    `json:"last_discovery_error"`
	// UpstreamHeadersSet: the proxy presents stored upstream headers (their
	// values are never returned). ProxyPath is the server's inline MCP
	// proxy endpoint (http servers; null for stdio).
	UpstreamHeadersSet bool      `json:"upstream_headers_set"`
	ProxyPath          *string   `json:"proxy_path"`
	CreatedAt          time.Time `json:"created_at"`
	UpdatedAt          time.Time `json:"updated_at"`
}

type mcpFindingView struct {
	Tool     string `json:"tool"`
	Category string `json:"category"`
	Count    int    `json:"count"`
}

type mcpToolView struct {
	ServerKey   string           `json:"server_key"`
	ToolKey     string           `json:"tool_key"`
	Name        string           `json:"name"`
	Status      string           `json:"status" openapi:"enum=pending|approved|disabled"`
	Description string           `json:"description"`
	InputSchema json.RawMessage  `json:"input_schema"`
	Findings    []mcpFindingView `json:"findings"`
	CreatedAt   time.Time        `json:"created_at"`
	UpdatedAt   time.Time        `json:"updated_at"`
}

type mcpHistoryView struct {
	ID           string           `json:"id"`
	DiscoveredAt time.Time        `json:"discovered_at"`
	ManifestHash string           `json:"manifest_hash"`
	PinnedHash   string           `json:"pinned_hash"`
	Added        []string         `json:"added"`
	Removed      []string         `json:"removed"`
	Changed      []string         `json:"changed"`
	RiskScore    int              `json:"risk_score"`
	Findings     []mcpFindingView `json:"findings"`
	EventID      string           `json:"event_id"`
}

type mcpManifestTool struct {
	Name        string          `json:"name" openapi:"required"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

type mcpDiscoverReq struct {
	Tools *[]mcpManifestTool `json:"tools"`
}

type mcpDiscoveryView struct {
	Server mcpServerView `json:"server"`
	// First: this discovery pinned the manifest (every tool pending).
	First     bool             `json:"first"`
	Tools     int              `json:"tools"`
	Added     []string         `json:"added"`
	Removed   []string         `json:"removed"`
	Changed   []string         `json:"changed"`
	RiskScore int              `json:"risk_score"`
	Findings  []mcpFindingView `json:"findings"`
	// HistoryID and EventID name the drift's history entry and its
	// mcp_manifest_drift event; null without drift.
	HistoryID *string `json:"history_id"`
	EventID   *string `json:"event_id"`
}

type inspectFinding struct {
	Category string `json:"category" openapi:"enum=ssn|credit_card|api_key|prompt_injection"`
	Count    int    `json:"count"`
}

type inspectView struct {
	Inspected bool             `json:"inspected"`
	Findings  []inspectFinding `json:"findings"`
	// AlertIDs are the alerts raised, one per flagged category.
	AlertIDs []string `json:"alert_ids"`
}

func viewMCPServer(s persistence.MCPServer) mcpServerView {
	v := mcpServerView{ServerKey: s.Key, Transport: s.Transport, URL: nullable(s.URL), TrustLevel: s.TrustLevel,
		InspectionEnabled: s.InspectionEnabled, Status: s.Status, PinnedHash: nullable(s.PinnedHash), ManifestHash: nullable(s.ManifestHash),
		Drifted: s.ManifestHash != s.PinnedHash, LastDiscoveryAt: utcPtr(s.LastDiscoveryAt), LastDiscoveryError: nullable(s.LastDiscoveryError),
		UpstreamHeadersSet: len(s.UpstreamAuth) > 0, CreatedAt: s.CreatedAt.UTC(), UpdatedAt: s.UpdatedAt.UTC()}
	if s.Transport == persistence.MCPTransportHTTP {
		path := "/v2/mcp/proxy/" + s.Key
		v.ProxyPath = &path
	}
	return v
}

func viewFindings(fs []persistence.MCPFinding) []mcpFindingView {
	return viewAll(fs, func(f persistence.MCPFinding) mcpFindingView { return mcpFindingView(f) })
}

func viewMCPTool(t persistence.MCPTool) mcpToolView {
	return mcpToolView{ServerKey: t.ServerKey, ToolKey: t.Key, Name: t.Name, Status: t.Status, Description: t.Description,
		InputSchema: t.InputSchema, Findings: viewFindings(t.Findings), CreatedAt: t.CreatedAt.UTC(), UpdatedAt: t.UpdatedAt.UTC()}
}

func viewMCPEntry(e persistence.MCPManifestEntry) mcpHistoryView {
	return mcpHistoryView{ID: e.ID, DiscoveredAt: e.DiscoveredAt.UTC(), ManifestHash: e.ManifestHash, PinnedHash: e.PinnedHash,
		Added: nonNilStrings(e.Added), Removed: nonNilStrings(e.Removed), Changed: nonNilStrings(e.Changed), RiskScore: e.RiskScore,
		Findings: viewFindings(e.Findings), EventID: e.EventID}
}

const mcpPath = "/mcp/servers/:server_key"

func (s *Server) registerMCP() {
	s.register(Route{Method: "POST", Path: "/mcp/servers", Access: AccessAdmin, Tag: "mcp", Status: 201, Body: &mcpServerCreate{},
		Resp: mcpServerView{}, Errors: []int{409},
		Summary: "Register an MCP server (CONTRACT §8): server_key ([a-z0-9_-]{1,64}; taken: 409 AlreadyExists), transport http or " +
			"stdio, url (http only: an absolute http or https URL; an address outbound requests may not reach, link-local or metadata " +
			"always and loopback or private unless SVC_ALLOW_PRIVATE_TARGETS=true, is 400 forbidden_target), trust_level (a trust " +
			"level; default " + control.DefaultMCPTrust + "), inspection_enabled (default false). Status active; no tools until discovered. " +
			"A tenant registers at most SVC_MCP_MAX_SERVERS_PER_TENANT servers (default 50), counted on every node alike: one more " +
			"is 409 Conflict mcp_server_limit with details.limit (delete one to register another).",
		Handle: s.createMCPServer})
	s.register(Route{Method: "GET", Path: "/mcp/servers", Access: AccessViewer, Tag: "mcp", Resp: []mcpServerView{},
		Summary: "The tenant's MCP servers, by key.", Handle: s.listMCPServers})
	s.register(Route{Method: "GET", Path: mcpPath, Access: AccessViewer, Tag: "mcp", Resp: mcpServerView{}, Errors: []int{404},
		Summary: "One MCP server.", Handle: s.getMCPServer})
	s.register(Route{Method: "PATCH", Path: mcpPath, Access: AccessAdmin, Tag: "mcp", Body: &mcpServerPatch{}, Resp: mcpServerView{},
		Errors: []int{404}, Summary: "Change inspection_enabled, trust_level or url (http servers; checked as at registration); null is 400. " +
			"Authorize sees the change on every node at once.",
		Handle: s.patchMCPServer})
	s.register(Route{Method: "DELETE", Path: mcpPath, Access: AccessAdmin, Tag: "mcp", Status: 204, Errors: []int{404},
		Summary: "Remove an MCP server with its tools and drift history; its tools are denied as unknown at once.",
		Handle:  s.deleteMCPServer})
	s.register(Route{Method: "POST", Path: mcpPath + "/quarantine", Access: AccessAdmin, Tag: "mcp", Resp: mcpServerView{}, Errors: []int{404, 409},
		Summary: "Quarantine the server: every call of its tools is denied (mcp_unknown_tool) until restore. 409 when already quarantined.",
		Handle:  s.quarantineMCPServer})
	s.register(Route{Method: "POST", Path: mcpPath + "/restore", Access: AccessAdmin, Tag: "mcp", Resp: mcpServerView{}, Errors: []int{404, 409},
		Summary: "Restore a quarantined server to active. 409 when it is active.",
		Handle:  s.restoreMCPServer})
	s.register(Route{Method: "POST", Path: mcpPath + "/discover", Access: AccessAdmin, Tag: "mcp", Body: &mcpDiscoverReq{}, OptionalBody: true,
		Resp: mcpDiscoveryView{}, Errors: []int{404, 422, 503, 504},
		Summary: "Discover the server's tools. http: the gateway speaks MCP to url (initialize, then tools/list through every page, over " +
			"streamable HTTP; no body) within 10 s and 8 MiB, at most 1000 tools: 504 Timeout mcp_timeout when it does not answer in " +
			"time, 422 Invalid mcp_discovery_failed when it does not answer as an MCP server, answers too much or lists an invalid " +
			"manifest (a tool name with a control character such as U+0000, a format character or text that is not UTF-8, or a " +
			"description with U+0000, is refused on every backend alike, the tool named), forbidden_target when its address may " +
			"not be reached (recorded as last_discovery_error). A node runs SVC_MCP_DISCOVERY_CONCURRENCY discoveries over MCP at " +
			"once (default 4), its leader's re-discovery included, handed out fairly across tenants; a call that finds none free " +
			"within 10 s is 503 ServiceUnavailable mcp_discovery_busy with Retry-After, and nothing is recorded. stdio: the body " +
			`{"tools":[{"name","description","inputSchema"}]} is the manifest (400 invalid_manifest when it is refused); the gateway ` +
			"never starts a process. Tools are normalized (names unique once lower-cased; schemas JSON objects) and hashed svc-jcs-1 " +
			"sorted by name. The first discovery pins that hash, every tool pending. A later one whose hash differs from the pin and " +
			"that changed the tools records a manifest-history entry (added, removed, changed, risk_score, findings), puts added and " +
			"changed tools to pending, removes the removed ones and emits mcp_manifest_drift: risk 75 to 100 when an approved tool " +
			"changed or an added or changed tool carries a poisoning finding (injection phrase, hidden characters, instructions to " +
			"the model, a new URL in a changed description), 40 to 74 when tools were otherwise added or changed, 10 to 39 when they " +
			"were only removed. Findings name a category and a count, never the text. A leader job re-discovers every http server " +
			"every SVC_MCP_DISCOVERY_INTERVAL_SECS, several at once and fairly across tenants (a tenant whose servers hang holds at " +
			"most half the node's discovery slots while another tenant's servers wait).",
		Handle: s.discoverMCPServer})
	s.register(Route{Method: "POST", Path: mcpPath + "/pin", Access: AccessAdmin, Tag: "mcp", Resp: mcpServerView{}, Errors: []int{404, 409},
		Summary: "Pin the manifest the last discovery found: drift is measured against it from now on. 409 before the first discovery.",
		Handle:  s.pinMCPServer})
	s.register(Route{Method: "GET", Path: mcpPath + "/tools", Access: AccessViewer, Tag: "mcp", Resp: []mcpToolView{}, Errors: []int{404},
		Summary: "The server's tools as the last discovery found them: tool_key (the name normalized as an authorize action is), name, " +
			"status (pending, approved, disabled), description, input_schema and the poisoning scan's findings.",
		Handle: s.listMCPTools})
	s.register(Route{Method: "POST", Path: mcpPath + "/tools/:tool_key/approve", Access: AccessAdmin, Tag: "mcp", Resp: mcpToolView{},
		Errors: []int{404, 409}, Summary: "Approve a pending or disabled tool: authorize may allow it. 409 when already approved.",
		Handle: s.approveMCPTool})
	s.register(Route{Method: "POST", Path: mcpPath + "/tools/:tool_key/disable", Access: AccessAdmin, Tag: "mcp", Resp: mcpToolView{},
		Errors: []int{404, 409}, Summary: "Disable a pending or approved tool: authorize denies it. 409 when already disabled.",
		Handle: s.disableMCPTool})
	s.register(Route{Method: "GET", Path: mcpPath + "/manifest-history", Access: AccessViewer, Tag: "mcp", Resp: []mcpHistoryView{},
		Paginated: true, Errors: []int{404}, Summary: "The server's drift history, newest first.",
		Handle: s.listMCPHistory})
	s.register(Route{Method: "POST", Path: mcpPath + "/inspect", Access: AccessAdmin, Tag: "mcp", OwnBody: true, Resp: inspectView{},
		Errors: []int{404},
		Summary: "Inspect a tool's raw response (any content type, up to SVC_MAX_BODY_BYTES; SPEC 4.8). With inspection_enabled false: " +
			"inspected false, no scan. Otherwise findings for SSN shapes, Luhn-valid card numbers, known API-key prefixes and " +
			"injection phrases, each a category and a count, never the matched text; each flagged category raises one alert: " +
			inspect.RuleSensitiveData + " (MEDIUM) for ssn, credit_card and api_key, " + inspect.RuleInjection + " (HIGH) for prompt_injection, " +
			"visible by polling GET /alerts only: never on the live feed, a watch stream, a notification or the webhook export.",
		Handle: s.inspectMCP})
}

// mcpServer reads the path's server (404 when unknown or another tenant's).
func (s *Server) mcpServer(c *Call) (persistence.MCPServer, error) {
	srv, err := s.Store.GetMCPServer(c.Ctx(), c.Principal.TenantID, c.Param("server_key"))
	return srv, orNotFound(err, "mcp server")
}

// createMCPServer serves POST /mcp/servers.
func (s *Server) createMCPServer(c *Call) (any, error) {
	b := bodyOf[mcpServerCreate](c)
	if b.ServerKey == nil || !serverKeyRE.MatchString(*b.ServerKey) {
		return nil, invalidField("server_key", "must match [a-z0-9_-]{1,64}")
	}
	if b.Transport == nil || (*b.Transport != persistence.MCPTransportHTTP && *b.Transport != persistence.MCPTransportStdio) {
		return nil, invalidField("transport", "must be http or stdio")
	}
	return mcpServerOrErr(s.Control.RegisterMCPServer(c.Ctx(), operator(c.Principal), control.MCPRegistration{Key: *b.ServerKey,
		Transport: *b.Transport, URL: b.URL, TrustLevel: b.TrustLevel, InspectionEnabled: b.InspectionEnabled != nil && *b.InspectionEnabled,
		UpstreamHeaders: b.UpstreamHeaders}))
}

// listMCPServers serves GET /mcp/servers.
func (s *Server) listMCPServers(c *Call) (any, error) {
	list, err := s.Store.ListMCPServers(c.Ctx(), c.Principal.TenantID)
	if err != nil {
		return nil, err
	}
	return viewAll(list, viewMCPServer), nil
}

// getMCPServer serves GET /mcp/servers/:server_key.
func (s *Server) getMCPServer(c *Call) (any, error) {
	srv, err := s.mcpServer(c)
	if err != nil {
		return nil, err
	}
	return viewMCPServer(srv), nil
}

// patchMCPServer serves PATCH /mcp/servers/:server_key.
func (s *Server) patchMCPServer(c *Call) (any, error) {
	b := bodyOf[mcpServerPatch](c)
	for _, f := range []struct {
		name string
		null bool
	}{{"url", b.URL == nil}, {"trust_level", b.TrustLevel == nil}, {"inspection_enabled", b.InspectionEnabled == nil},
		{"upstream_headers", b.UpstreamHeaders == nil}} {
		if f.null && c.HasField(f.name) {
			return nil, invalidField(f.name, "may not be null")
		}
	}
	srv, err := s.mcpServer(c)
	if err != nil {
		return nil, err
	}
	return mcpServerOrErr(s.Control.ChangeMCPServer(c.Ctx(), operator(c.Principal), srv, control.MCPServerChange{URL: b.URL,
		TrustLevel: b.TrustLevel, InspectionEnabled: b.InspectionEnabled, UpstreamHeaders: b.UpstreamHeaders}))
}

func mcpServerOrErr(srv persistence.MCPServer, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return viewMCPServer(srv), nil
}

// quarantineMCPServer serves POST /mcp/servers/:server_key/quarantine.
func (s *Server) quarantineMCPServer(c *Call) (any, error) {
	return mcpServerOrErr(s.Control.QuarantineMCPServer(c.Ctx(), operator(c.Principal), c.Param("server_key")))
}

// restoreMCPServer serves POST /mcp/servers/:server_key/restore.
func (s *Server) restoreMCPServer(c *Call) (any, error) {
	return mcpServerOrErr(s.Control.RestoreMCPServer(c.Ctx(), operator(c.Principal), c.Param("server_key")))
}

// pinMCPServer serves POST /mcp/servers/:server_key/pin.
func (s *Server) pinMCPServer(c *Call) (any, error) {
	return mcpServerOrErr(s.Control.PinMCPServer(c.Ctx(), operator(c.Principal), c.Param("server_key")))
}

// deleteMCPServer serves DELETE /mcp/servers/:server_key.
func (s *Server) deleteMCPServer(c *Call) (any, error) {
	return nil, s.Control.DeleteMCPServer(c.Ctx(), operator(c.Principal), c.Param("server_key"))
}

// discoverMCPServer serves POST /mcp/servers/:server_key/discover: the
// body's manifest, if any, handed to the control plane, which refuses
// what the server's transport does not take and maps discovery failures
// to refusals (control.Plane.DiscoverMCPServer).
func (s *Server) discoverMCPServer(c *Call) (any, error) {
	var tools []manifest.Tool
	if b := bodyOf[mcpDiscoverReq](c); b.Tools != nil {
		tools = make([]manifest.Tool, len(*b.Tools))
		for i, t := range *b.Tools {
			tools[i] = manifest.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}
		}
	}
	d, err := s.Control.DiscoverMCPServer(c.Ctx(), operator(c.Principal), c.Param("server_key"), tools)
	if err != nil {
		return nil, err
	}
	out := mcpDiscoveryView{Server: viewMCPServer(d.Server), First: d.First, Tools: d.Tools, Added: nonNilStrings(d.Drift.Added),
		Removed: nonNilStrings(d.Drift.Removed), Changed: nonNilStrings(d.Drift.Changed), RiskScore: d.Drift.Risk,
		Findings: viewAll(d.Drift.Found, func(f manifest.Finding) mcpFindingView { return mcpFindingView(f) })}
	if d.Entry != nil {
		out.HistoryID, out.EventID = &d.Entry.ID, &d.Entry.EventID
	}
	return out, nil
}

// listMCPTools serves GET /mcp/servers/:server_key/tools.
func (s *Server) listMCPTools(c *Call) (any, error) {
	srv, err := s.mcpServer(c)
	if err != nil {
		return nil, err
	}
	tools, err := s.Store.ListMCPTools(c.Ctx(), srv.TenantID, srv.Key)
	if err != nil {
		return nil, err
	}
	return viewAll(tools, viewMCPTool), nil
}

// approveMCPTool serves POST /mcp/servers/:server_key/tools/:tool_key/approve.
func (s *Server) approveMCPTool(c *Call) (any, error) {
	return mcpToolOrErr(s.Control.ApproveMCPTool(c.Ctx(), operator(c.Principal), c.Param("server_key"),
		canonical.NormalizeIdentifier(c.Param("tool_key"))))
}

// disableMCPTool serves POST /mcp/servers/:server_key/tools/:tool_key/disable.
func (s *Server) disableMCPTool(c *Call) (any, error) {
	return mcpToolOrErr(s.Control.DisableMCPTool(c.Ctx(), operator(c.Principal), c.Param("server_key"),
		canonical.NormalizeIdentifier(c.Param("tool_key"))))
}

func mcpToolOrErr(t persistence.MCPTool, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return viewMCPTool(t), nil
}

// listMCPHistory serves GET /mcp/servers/:server_key/manifest-history.
func (s *Server) listMCPHistory(c *Call) (any, error) {
	pg, err := c.page()
	if err != nil {
		return nil, err
	}
	srv, err := s.mcpServer(c)
	if err != nil {
		return nil, err
	}
	rows, err := s.Store.ListMCPHistory(c.Ctx(), srv.TenantID, srv.Key, pg)
	if err != nil {
		return nil, err
	}
	rows = paginate(c, pg, rows, func(e persistence.MCPManifestEntry) int64 { return e.Seq })
	return viewAll(rows, viewMCPEntry), nil
}

// inspectMCP serves POST /mcp/servers/:server_key/inspect.
func (s *Server) inspectMCP(c *Call) (any, error) {
	srv, err := s.mcpServer(c)
	if err != nil {
		return nil, err
	}
	raw, e := s.readCapped(c)
	if e != nil {
		return nil, e
	}
	out := inspectView{Findings: []inspectFinding{}, AlertIDs: []string{}}
	if !srv.InspectionEnabled {
		return out, nil
	}
	out.Inspected = true
	out.Findings, out.AlertIDs, err = s.inspectResponse(c.Ctx(), srv, "unknown", raw)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// inspectResponse scans a tool's response of srv and raises one alert per
// flagged category (control.Plane.InspectResponse; SPEC 4.8): the inspect
// endpoint's and the MCP proxy's.
func (s *Server) inspectResponse(ctx context.Context, srv persistence.MCPServer, agentID string, raw []byte) ([]inspectFinding, []string, error) {
	found, ids, err := s.Control.InspectResponse(ctx, srv, agentID, raw)
	if err != nil {
		return nil, nil, err
	}
	findings := make([]inspectFinding, len(found))
	for i, f := range found {
		findings[i] = inspectFinding{Category: f.Category, Count: f.Count}
	}
	return findings, ids, nil
}
