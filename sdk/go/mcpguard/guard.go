package mcpguard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"time"
	"weak"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	svcsdk "svc/sdk/go"
)

// MetaRunID is the _meta key of a tools/call whose string value becomes the
// decision's trace.run_id, as with svc's inline proxy.
const MetaRunID = "svc/run_id"

// statusCheck bounds the look at a remembered approval's status in NoWait
// mode: one GET ?wait=0, and at most this long while it is PENDING.
const statusCheck = 250 * time.Millisecond

// Options configure a [Guard].
type Options struct {
	// ServerKey is the MCP server's key in svc: every call is authorized as
	// tool "mcp:<ServerKey>" (required). svc's base policy denies calls of a
	// server that is not registered, or of a tool that is not approved.
	ServerKey string
	// NoWait: on require_approval answer at once with an IsError result
	// naming the approval, instead of waiting for a person to decide. The
	// guard remembers the approval: the same call again (the same
	// arguments) finds it, and is sent once it is approved.
	NoWait bool
	// ApprovalTimeout bounds a wait for an approval (0: the svc client's
	// WithApprovalTimeout, and when that is 0 too, the approval's expiry).
	ApprovalTimeout time.Duration
	// SourceTrust and Environment are sent with every authorize (optional).
	SourceTrust string
	Environment string
	// RunID is trace.run_id when the call's _meta holds no "svc/run_id".
	RunID string
	// RefusalsAsErrors: return svcsdk's error (*svcsdk.Denied,
	// *svcsdk.ApprovalRequired, *svcsdk.ApprovalRejected,
	// *svcsdk.ApprovalExpired), wrapped, from CallTool instead of an IsError
	// result. Nothing is sent either way.
	RefusalsAsErrors bool
	// OnDecision, when set, is called with the decision that settled each
	// call (the allow or redact that let it be sent, or the refusal; after an
	// approval, the decision that presented it). Called before sending.
	OnDecision func(ctx context.Context, params *mcp.CallToolParams, d *svcsdk.Decision)
	// Logger receives the warnings (default slog.Default()).
	Logger *slog.Logger
}

// Guard authorizes tools/call requests through svc. It is safe for
// concurrent use and may guard any number of clients and sessions.
type Guard struct {
	svc  *svcsdk.Client
	opts Options
	tool string
	log  *slog.Logger

	mu       sync.Mutex
	sessions map[weak.Pointer[mcp.ClientSession]]*toolCache
	pending  map[string]*pendingApproval // by the action hash of the call as asked
}

// pendingApproval is a require_approval the guard answered (NoWait) or
// stopped waiting for while it was still PENDING.
type pendingApproval struct {
	decision *svcsdk.Decision
	forget   time.Time
}

// New returns a guard that authorizes through svc (an agent's client).
func New(svc *svcsdk.Client, o Options) (*Guard, error) {
	if svc == nil {
		return nil, errors.New("mcpguard: an svc client is required")
	}
	if strings.TrimSpace(o.ServerKey) == "" {
		return nil, errors.New("mcpguard: Options.ServerKey is required")
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Guard{svc: svc, opts: o, tool: "mcp:" + o.ServerKey, log: log,
		sessions: map[weak.Pointer[mcp.ClientSession]]*toolCache{}, pending: map[string]*pendingApproval{}}, nil
}

// Install adds the guard to a client: [Guard.Middleware] as sending
// middleware and [Guard.ReceivingMiddleware] as receiving middleware. Call
// it before Connect. Every session of the client is guarded from then on.
func (g *Guard) Install(c *mcp.Client) {
	c.AddSendingMiddleware(g.Middleware())
	c.AddReceivingMiddleware(g.ReceivingMiddleware())
}

// Middleware is the sending middleware: it authorizes every tools/call
// before it is sent (see the package documentation), and learns each
// tool's readOnlyHint from the tools/list results that pass through it.
// Other methods pass unchanged. Add it last (after any middleware that
// changes a call's arguments), so that what svc decides is what is sent.
func (g *Guard) Middleware() mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "tools/list":
				cs, _ := req.GetSession().(*mcp.ClientSession)
				if cs == nil {
					return next(ctx, method, req)
				}
				tc := g.cache(cs)
				gen := tc.generation()
				res, err := next(ctx, method, req)
				if lr, ok := res.(*mcp.ListToolsResult); ok && err == nil && lr != nil {
					tc.record(gen, lr.Tools, lr.NextCursor == "")
				}
				return res, err
			case "tools/call":
				return g.handleCall(ctx, method, req, next)
			}
			return next(ctx, method, req)
		}
	}
}

// ReceivingMiddleware forgets a session's tool annotations when its server
// sends notifications/tools/list_changed; the next call lists them again.
func (g *Guard) ReceivingMiddleware() mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "notifications/tools/list_changed" {
				if cs, _ := req.GetSession().(*mcp.ClientSession); cs != nil {
					g.cache(cs).invalidate()
				}
			}
			return next(ctx, method, req)
		}
	}
}

type bypassKey struct{}

// bypass marks the one request CallTool authorized already.
type bypass struct {
	g *Guard
	p *mcp.CallToolParams
}

// CallTool authorizes params through g and, when svc lets it, calls the
// tool through session: the same semantics as the middleware, for a
// session whose client does not have the guard installed. When it does,
// the call is authorized once, not twice.
func CallTool(ctx context.Context, g *Guard, session *mcp.ClientSession, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	if params == nil {
		params = &mcp.CallToolParams{}
	}
	p, res, err := g.authorize(ctx, session, params)
	if err != nil || res != nil {
		return res, err
	}
	return session.CallTool(context.WithValue(ctx, bypassKey{}, &bypass{g: g, p: p}), p)
}

func (g *Guard) handleCall(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	p, _ := req.GetParams().(*mcp.CallToolParams)
	cs, _ := req.GetSession().(*mcp.ClientSession)
	// The new request carries the permitted arguments, in the type go-sdk used.
	var with func(*mcp.CallToolParams) mcp.Request
	switch req.(type) {
	case *mcp.ClientRequest[mcp.Params]: // what ClientSession.CallTool sends
		with = func(p *mcp.CallToolParams) mcp.Request { return &mcp.ClientRequest[mcp.Params]{Session: cs, Params: p} }
	case *mcp.ClientRequest[*mcp.CallToolParams]:
		with = func(p *mcp.CallToolParams) mcp.Request {
			return &mcp.ClientRequest[*mcp.CallToolParams]{Session: cs, Params: p}
		}
	}
	if p == nil || with == nil {
		return nil, fmt.Errorf("mcpguard: tools/call request %T with params %T not understood; not sent", req, req.GetParams())
	}
	if b, _ := ctx.Value(bypassKey{}).(*bypass); b != nil && b.g == g && b.p == p {
		return next(ctx, method, req)
	}
	out, res, err := g.authorize(ctx, cs, p)
	if err != nil {
		return nil, err
	}
	if res != nil {
		return res, nil
	}
	return next(ctx, method, with(out))
}

// authorize decides one call: the params to send (a copy of p with the
// permitted arguments), or the result that answers it unsent, or an error.
func (g *Guard) authorize(ctx context.Context, cs *mcp.ClientSession, p *mcp.CallToolParams) (*mcp.CallToolParams, *mcp.CallToolResult, error) {
	fail := func(err error) (*mcp.CallToolParams, *mcp.CallToolResult, error) {
		return nil, nil, fmt.Errorf("mcpguard: tools/call %q not sent: %w", p.Name, err)
	}
	args, err := arguments(p.Arguments)
	if err != nil {
		return fail(err)
	}
	call := svcsdk.ToolCall{Tool: g.tool, Action: p.Name, Parameters: args}
	ao := svcsdk.AuthorizeOptions{MutatesState: !g.readOnly(ctx, cs, p.Name), SourceTrust: g.opts.SourceTrust,
		Environment: g.opts.Environment}
	if rid := runID(p.Meta, g.opts.RunID); rid != "" {
		ao.Trace = map[string]any{"run_id": rid}
	}
	ro := svcsdk.RunOptions{AuthorizeOptions: ao, NoWait: g.opts.NoWait, ApprovalTimeout: g.opts.ApprovalTimeout}

	key, _ := svcsdk.ActionHash(call) // "" when it has none: Permit refuses it below
	if pa := g.remembered(key); pa != nil {
		timeout := g.opts.ApprovalTimeout
		if g.opts.NoWait {
			timeout = statusCheck
		}
		a, err := g.svc.WaitForApproval(ctx, pa.decision, timeout)
		var rejected *svcsdk.ApprovalRejected
		var expired *svcsdk.ApprovalExpired
		switch {
		case err == nil: // APPROVED: present it (the approved, maybe edited, call)
			g.forget(key, pa)
			call, ro.ApprovalID = *a.Call, a.ApprovalID
		case errors.As(err, &rejected):
			g.forget(key, pa)
			return g.refused(ctx, p, err, fail)
		case errors.As(err, &expired) && (expired.Approval == nil || expired.Approval.Status == svcsdk.StatusPending):
			return g.refused(ctx, p, err, fail) // still pending: the same answer again
		case errors.As(err, &expired): // EXPIRED: forget it and ask again
			g.forget(key, pa)
		default:
			return fail(err)
		}
	}
	params, d, err := g.svc.Permit(ctx, call, ro)
	if err != nil {
		return g.refused(ctx, p, err, fail)
	}
	if g.opts.OnDecision != nil {
		g.opts.OnDecision(ctx, p, d)
	}
	out := *p
	out.Arguments = params
	return &out, nil, nil
}

// refused turns Permit's (or a wait's) error into the answer: a refusal
// result (or error, RefusalsAsErrors), or the fail-closed error.
func (g *Guard) refused(ctx context.Context, p *mcp.CallToolParams, err error,
	fail func(error) (*mcp.CallToolParams, *mcp.CallToolResult, error)) (*mcp.CallToolParams, *mcp.CallToolResult, error) {
	var (
		denied   *svcsdk.Denied
		required *svcsdk.ApprovalRequired
		rejected *svcsdk.ApprovalRejected
		expired  *svcsdk.ApprovalExpired
		d        *svcsdk.Decision
		res      *mcp.CallToolResult
		pending  bool // an approval still pending after a wait or a look
	)
	switch {
	case errors.As(err, &denied) && denied.Decision != nil:
		d = denied.Decision
		res = deniedResult(d)
	case errors.As(err, &required) && required.Decision != nil:
		d = required.Decision
		g.remember(d)
		res = approvalResult(d, svcsdk.StatusPending, nil)
	case errors.As(err, &rejected) && rejected.Decision != nil:
		d = rejected.Decision
		res = approvalResult(d, svcsdk.StatusRejected, rejected.Approval)
	case errors.As(err, &expired) && expired.Decision != nil:
		d = expired.Decision
		status := svcsdk.StatusPending // the wait's deadline passed first
		if expired.Approval != nil && expired.Approval.Status != "" {
			status = expired.Approval.Status
		}
		if pending = status == svcsdk.StatusPending; pending {
			g.remember(d)
		}
		res = approvalResult(d, status, expired.Approval)
	default:
		return fail(err)
	}
	if g.opts.OnDecision != nil {
		g.opts.OnDecision(ctx, p, d)
	}
	if g.opts.RefusalsAsErrors {
		if pending {
			// still pending: what a NoWait caller is told at first
			err = &svcsdk.ApprovalRequired{SvcError: svcsdk.SvcError{ErrorCode: d.Reason,
				Message: fmt.Sprintf("svc: approval required (approval_id %s, still pending)", d.ApprovalID)}, Decision: d}
		}
		return fail(err)
	}
	return nil, res, nil
}

// ---------------------------------------------------------------------------
// Results

func text(s string) []mcp.Content { return []mcp.Content{&mcp.TextContent{Text: s}} }

// deniedResult is the proxy's answer to deny and quarantine (CONTRACT §15).
func deniedResult(d *svcsdk.Decision) *mcp.CallToolResult {
	verb := "denied"
	if d.Decision == svcsdk.DecisionQuarantine {
		verb = "quarantined"
	}
	return &mcp.CallToolResult{IsError: true,
		Content: text(fmt.Sprintf("svc %s this call: %s (decision %s). It was not sent.", verb, d.Reason, d.DecisionID)),
		StructuredContent: map[string]any{"decision": d.Decision, "reason": d.Reason, "decision_id": d.DecisionID,
			"receipt_id": d.ReceiptID}}
}

// approvalResult is the proxy's answer to require_approval, with the
// approval's status (PENDING, REJECTED, EXPIRED) added.
func approvalResult(d *svcsdk.Decision, status string, a *svcsdk.Approval) *mcp.CallToolResult {
	sc := map[string]any{"decision": svcsdk.DecisionRequireApproval, "reason": d.Reason, "decision_id": d.DecisionID,
		"approval_id": d.ApprovalID, "approval_expires_at": d.ApprovalExpiresAt, "approval_status": status}
	var msg string
	switch status {
	case svcsdk.StatusRejected:
		msg = fmt.Sprintf("svc required a person's approval for this call (%s), and approval %s was rejected", d.Reason, d.ApprovalID)
		if a != nil && a.Reason != nil && *a.Reason != "" {
			msg += ": " + *a.Reason
			sc["approval_reason"] = *a.Reason
		}
		msg += ". It was not sent."
	case svcsdk.StatusExpired:
		msg = fmt.Sprintf("svc required a person's approval for this call (%s), and approval %s expired undecided. "+
			"It was not sent; making the call again asks again.", d.Reason, d.ApprovalID)
	default:
		msg = fmt.Sprintf("svc requires a person's approval for this call: %s. Approval %s is pending; once it is approved, "+
			"make the same call again (the same arguments) and it runs.", d.Reason, d.ApprovalID)
	}
	return &mcp.CallToolResult{IsError: true, Content: text(msg), StructuredContent: sc}
}

// ---------------------------------------------------------------------------
// Arguments and trace

// arguments converts a call's arguments to JSON values (an object).
func arguments(a any) (map[string]any, error) {
	var b []byte
	switch v := a.(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		return v, nil // svcsdk converts and checks the values itself
	case json.RawMessage:
		b = v
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			return nil, fmt.Errorf("the arguments have no JSON form: %w", err)
		}
	}
	parsed, err := svcsdk.ParseJSON(b)
	if err != nil {
		return nil, fmt.Errorf("the arguments are not valid JSON: %w", err)
	}
	switch m := parsed.(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		return m, nil
	}
	return nil, errors.New("the arguments must be a JSON object")
}

func runID(meta mcp.Meta, fallback string) string {
	if s, ok := meta[MetaRunID].(string); ok && s != "" {
		return s
	}
	return fallback
}

// ---------------------------------------------------------------------------
// Remembered approvals

func (g *Guard) remember(d *svcsdk.Decision) {
	if d == nil || d.ApprovalID == "" || d.ToolCall == nil {
		return
	}
	key, err := svcsdk.ActionHash(*d.ToolCall)
	if err != nil {
		return
	}
	forget := time.Now().Add(time.Hour)
	if t := d.ExpiresAt(); !t.IsZero() {
		forget = t.Add(time.Minute)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	for k, pa := range g.pending {
		if now.After(pa.forget) {
			delete(g.pending, k)
		}
	}
	g.pending[key] = &pendingApproval{decision: d, forget: forget}
}

func (g *Guard) remembered(key string) *pendingApproval {
	if key == "" {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	pa := g.pending[key]
	if pa != nil && time.Now().After(pa.forget) {
		delete(g.pending, key)
		return nil
	}
	return pa
}

func (g *Guard) forget(key string, pa *pendingApproval) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pending[key] == pa {
		delete(g.pending, key)
	}
}

// ---------------------------------------------------------------------------
// Tool annotations, per session

type toolCache struct {
	mu       sync.Mutex
	readOnly map[string]bool
	complete bool // a whole listing was seen since the last list_changed
	gen      int  // bumped by list_changed
}

func (t *toolCache) generation() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.gen
}

func (t *toolCache) record(gen int, tools []*mcp.Tool, last bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if gen != t.gen {
		return // listed before the list changed
	}
	for _, tool := range tools {
		if tool != nil {
			t.readOnly[tool.Name] = tool.Annotations != nil && tool.Annotations.ReadOnlyHint
		}
	}
	if last {
		t.complete = true
	}
}

func (t *toolCache) lookup(name string) (readOnly, known, complete bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	readOnly, known = t.readOnly[name]
	return readOnly, known, t.complete
}

func (t *toolCache) invalidate() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.gen++
	t.readOnly = map[string]bool{}
	t.complete = false
}

func (g *Guard) cache(cs *mcp.ClientSession) *toolCache {
	k := weak.Make(cs)
	g.mu.Lock()
	defer g.mu.Unlock()
	if tc := g.sessions[k]; tc != nil {
		return tc
	}
	tc := &toolCache{readOnly: map[string]bool{}}
	g.sessions[k] = tc
	runtime.AddCleanup(cs, func(k weak.Pointer[mcp.ClientSession]) {
		g.mu.Lock()
		defer g.mu.Unlock()
		delete(g.sessions, k)
	}, k)
	return tc
}

// readOnly tells whether the session's server annotates the tool
// readOnlyHint: from the listings seen, else from a listing made now. An
// unknown tool, or one whose listing fails, is mutating.
func (g *Guard) readOnly(ctx context.Context, cs *mcp.ClientSession, name string) bool {
	if cs == nil {
		return false
	}
	tc := g.cache(cs)
	ro, known, complete := tc.lookup(name)
	if known || complete {
		return ro
	}
	gen := tc.generation()
	var tools []*mcp.Tool
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			g.log.Warn(fmt.Sprintf("mcpguard: listing the tools of the session failed; %q is treated as mutating: %v", name, err))
			return false
		}
		tools = append(tools, tool)
	}
	tc.record(gen, tools, true)
	ro, _, _ = tc.lookup(name)
	return ro
}
