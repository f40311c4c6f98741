// Package mcpproxy is the inline MCP proxy (CONTRACT §15): a Streamable
// HTTP endpoint that relays an MCP client's session to a registered
// upstream server, message by message, and intercepts what svc governs:
// tools/list is filtered, tools/call, resources/read and prompts/get are
// decided by a Gate before anything is forwarded, and a forwarded call's
// answer is handed back to the Gate for inspection.
//
// It is a hand-written JSON-RPC relay, not the MCP SDK's server: a session
// must work on every node with no shared session store (the SDK's server
// keeps sessions in one process's memory), server-to-client requests and
// notifications must pass through as they are sent, and the upstream must
// be spoken to in the protocol version it negotiates. The SDK's jsonrpc
// package is the codec. Everything a session needs is sealed into the
// Mcp-Session-Id svc issues (session.go).
//
// Bounds: a request body, and every message the upstream sends, at most
// Limits.MaxMessage bytes; a relayed POST answer at most Limits.CallTimeout
// in all and Limits.Idle of silence; a standalone GET stream is kept
// alive with comments and bounded only by the client. A fault of one
// upstream ends its own request with an error and touches nothing else.
package mcpproxy

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Header names of the Streamable HTTP transport.
const (
	SessionHeader  = "Mcp-Session-Id"
	VersionHeader  = "Mcp-Protocol-Version"
	lastEventIDHdr = "Last-Event-ID"
)

// JSON-RPC error codes the proxy answers with besides the standard ones.
const (
	// CodeUnavailable: svc cannot decide the call now (its store, shared
	// state or policy is unavailable): nothing was forwarded.
	CodeUnavailable = -32010
	// CodeUpstream: the upstream failed (unreachable, too slow, too
	// large, malformed) before it answered the request.
	CodeUpstream = -32011
	// CodeUnsupportedVersion is the sessionless protocol's answer to a
	// version the server does not serve (server/discover).
	CodeUnsupportedVersion = -32022
)

// Limits bound what one request may make the proxy do.
type Limits struct {
	// MaxMessage caps a request body and every message (one SSE event or
	// one JSON body) the upstream sends.
	MaxMessage int
	// CallTimeout bounds a POST's relay in all; Idle bounds its silence
	// (progress and any other event reset it).
	CallTimeout time.Duration
	Idle        time.Duration
	// SessionTTL is how long a sealed session id is honoured.
	SessionTTL time.Duration
	// KeepAlive is the interval of SSE comments on a quiet stream.
	KeepAlive time.Duration
	// Decide bounds what svc does before it forwards anything (the
	// session check, the Gate): a proxied request has no request timeout
	// of its own, and a dependency that hangs must not hold it.
	Decide time.Duration
}

// DefaultLimits: 8 MiB, 300 s in all, 60 s of silence, a week, 15 s, 30 s.
var DefaultLimits = Limits{MaxMessage: 8 << 20, CallTimeout: 300 * time.Second, Idle: 60 * time.Second,
	SessionTTL: 7 * 24 * time.Hour, KeepAlive: 15 * time.Second, Decide: 30 * time.Second}

// Revocations records sessions ended with DELETE, on every node.
type Revocations interface {
	Revoke(ctx context.Context, s Session, until time.Time) error
	Revoked(ctx context.Context, s Session) (bool, error)
}

// Target is the upstream one request goes to, resolved by the caller
// after it authenticated the agent.
type Target struct {
	TenantID  string
	AgentID   string
	ServerKey string
	URL       string
	// Header holds the upstream's credentials, from the server record.
	Header map[string]string
	Gate   Gate
}

// Proxy serves the proxy endpoint of every server.
type Proxy struct {
	client   *http.Client
	sessions *Sealer
	revoked  Revocations
	lim      Limits
	log      hclog.Logger
	now      func() time.Time
}

// New returns a proxy that reaches upstreams with client (whose dialer
// enforces the outbound address rules) and seals sessions with sessions.
func New(client *http.Client, sessions *Sealer, revoked Revocations, lim Limits, log hclog.Logger) *Proxy {
	if lim.MaxMessage <= 0 {
		lim.MaxMessage = DefaultLimits.MaxMessage
	}
	if lim.CallTimeout <= 0 {
		lim.CallTimeout = DefaultLimits.CallTimeout
	}
	if lim.Idle <= 0 {
		lim.Idle = DefaultLimits.Idle
	}
	if lim.SessionTTL <= 0 {
		lim.SessionTTL = DefaultLimits.SessionTTL
	}
	if lim.KeepAlive <= 0 {
		lim.KeepAlive = DefaultLimits.KeepAlive
	}
	if lim.Decide <= 0 {
		lim.Decide = DefaultLimits.Decide
	}
	return &Proxy{client: client, sessions: sessions, revoked: revoked, lim: lim, log: log, now: time.Now}
}

// Serve answers one request of the endpoint for t.
func (p *Proxy) Serve(w http.ResponseWriter, r *http.Request, t Target) {
	var sess Session
	hasSession := false
	if id := r.Header.Get(SessionHeader); id != "" {
		s, err := p.sessions.Open(id, p.now())
		// Another agent's, tenant's or server's session is as unknown as
		// a forged one (CONTRACT §15).
		if err != nil || s.TenantID != t.TenantID || s.AgentID != t.AgentID || s.ServerKey != t.ServerKey {
			httpError(w, http.StatusNotFound, "session not found: start a new one with initialize")
			return
		}
		if p.revoked != nil {
			ctx, cancel := context.WithTimeout(r.Context(), p.lim.Decide)
			gone, err := p.revoked.Revoked(ctx, s)
			cancel()
			if err != nil {
				httpError(w, http.StatusServiceUnavailable, "svc cannot check the session now; retry")
				return
			}
			if gone {
				httpError(w, http.StatusNotFound, "session ended: start a new one with initialize")
				return
			}
		}
		sess, hasSession = s, true
	}
	switch r.Method {
	case http.MethodPost:
		p.post(w, r, t, sess, hasSession)
	case http.MethodGet:
		if !hasSession {
			httpError(w, http.StatusBadRequest, "Mcp-Session-Id is required: initialize first")
			return
		}
		if !accepts(r, "text/event-stream") {
			httpError(w, http.StatusNotAcceptable, "GET opens an event stream: Accept must include text/event-stream")
			return
		}
		p.relay(w, r, t, sess, nil, nil)
	case http.MethodDelete:
		if !hasSession {
			httpError(w, http.StatusBadRequest, "Mcp-Session-Id is required")
			return
		}
		p.end(w, r, t, sess)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		httpError(w, http.StatusMethodNotAllowed, "the MCP endpoint takes GET, POST and DELETE")
	}
}

// end serves DELETE: the session is revoked on every node, and the
// upstream's session is ended too when it has one.
func (p *Proxy) end(w http.ResponseWriter, r *http.Request, t Target, sess Session) {
	if p.revoked != nil {
		ctx, cancel := context.WithTimeout(r.Context(), p.lim.Decide)
		err := p.revoked.Revoke(ctx, sess, time.Unix(sess.Expires, 0))
		cancel()
		if err != nil {
			httpError(w, http.StatusServiceUnavailable, "svc cannot end the session now; retry")
			return
		}
	}
	if sess.UpstreamID != "" {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		req, err := p.upstreamRequest(ctx, r, t, sess, http.MethodDelete, nil)
		if err == nil {
			if resp, err := p.client.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
				_ = resp.Body.Close()
			}
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

func (p *Proxy) post(w http.ResponseWriter, r *http.Request, t Target, sess Session, hasSession bool) {
	if !accepts(r, "application/json") || !accepts(r, "text/event-stream") {
		// The transport requires both (2025-03-26 and later); clients of
		// every official SDK send both.
		httpError(w, http.StatusNotAcceptable, "Accept must include application/json and text/event-stream")
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		httpError(w, http.StatusUnsupportedMediaType, "Content-Type must be application/json")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(p.lim.MaxMessage)+1))
	if err != nil {
		httpError(w, http.StatusBadRequest, "the request body could not be read")
		return
	}
	if len(body) > p.lim.MaxMessage {
		writeError(w, http.StatusRequestEntityTooLarge, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "the message is larger than the proxy takes", nil)
		return
	}
	if trimmed := strings.TrimSpace(string(body)); strings.HasPrefix(trimmed, "[") {
		writeError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "JSON-RPC batches are not supported: send one message per request", nil)
		return
	}
	msg, err := jsonrpc.DecodeMessage(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeParseError, "the body is not a JSON-RPC message", nil)
		return
	}
	req, isReq := msg.(*jsonrpc.Request)
	if isReq && req.Method == "initialize" {
		if hasSession {
			writeError(w, http.StatusBadRequest, req.ID, jsonrpc.CodeInvalidRequest, "initialize opens a session: send it without Mcp-Session-Id", nil)
			return
		}
		p.initialize(w, r, t, req, body)
		return
	}
	if !hasSession {
		if isReq && req.Method == "server/discover" {
			// The sessionless protocol (2026-07-28) is not served yet: this
			// answer makes its clients fall back to initialize.
			writeError(w, http.StatusBadRequest, req.ID, CodeUnsupportedVersion, "unsupported protocol version",
				map[string]any{"supported": SupportedVersions})
			return
		}
		writeError(w, http.StatusBadRequest, idOf(req), jsonrpc.CodeInvalidRequest, "Mcp-Session-Id is required: initialize first", nil)
		return
	}
	if resp, ok := msg.(*jsonrpc.Response); ok && isOfferID(resp.ID) {
		// The client's answer to an approval svc offered: svc's own, never
		// the upstream's. Accepted, the wait goes on until the decision;
		// declined or cancelled (or an error), it ends.
		var res struct {
			Action string `json:"action"`
		}
		_ = json.Unmarshal(resp.Result, &res)
		if resp.Error != nil || res.Action != "accept" {
			ctx, cancel := context.WithTimeout(r.Context(), p.lim.Decide)
			t.Gate.Declined(ctx, sess, offerApprovalID(resp.ID))
			cancel()
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if !isReq || !req.IsCall() {
		// Notifications, and the client's answers to the upstream's
		// requests (sampling, elicitation, roots): relayed as they are.
		p.relay(w, r, t, sess, body, nil)
		return
	}
	switch req.Method {
	case "tools/list":
		p.listTools(w, r, t, sess, req, body)
	case "tools/call", "resources/read", "prompts/get":
		p.decide(w, r, t, sess, req, body)
	default:
		p.relay(w, r, t, sess, body, &hooks{id: req.ID})
	}
}

// SupportedVersions are the protocol versions the proxy relays.
var SupportedVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// initialize opens the upstream's session and seals it into the client's.
func (p *Proxy) initialize(w http.ResponseWriter, r *http.Request, t Target, req *jsonrpc.Request, body []byte) {
	var params struct {
		ProtocolVersion string `json:"protocolVersion"`
		Capabilities    struct {
			Elicitation struct {
				URL json.RawMessage `json:"url"`
			} `json:"elicitation"`
		} `json:"capabilities"`
	}
	_ = json.Unmarshal(req.Params, &params)
	sess := Session{ID: uuid.NewString(), TenantID: t.TenantID, AgentID: t.AgentID, ServerKey: t.ServerKey,
		Version: params.ProtocolVersion, ElicitURL: len(params.Capabilities.Elicitation.URL) > 0 && string(params.Capabilities.Elicitation.URL) != "null",
		Expires: p.now().Add(p.lim.SessionTTL).Unix()}
	h := &hooks{id: req.ID, onHeaders: func(resp *http.Response) error {
		if resp.StatusCode != http.StatusOK {
			return nil
		}
		s := sess
		s.UpstreamID = resp.Header.Get(SessionHeader)
		id, err := p.sessions.Seal(s)
		if err != nil {
			return err
		}
		w.Header().Set(SessionHeader, id)
		return nil
	}}
	p.relay(w, r, t, sess, body, h)
}

func (p *Proxy) unavailable(w http.ResponseWriter, id jsonrpc.ID, err error) {
	p.log.Warn("mcp proxy: call not decided; nothing forwarded", "error", err)
	writeError(w, http.StatusOK, id, CodeUnavailable, "svc cannot decide this call now (its store, shared state or policy is unavailable); nothing was forwarded", nil)
}

// idOf is the request's id, or none.
func idOf(req *jsonrpc.Request) jsonrpc.ID {
	if req == nil {
		return jsonrpc.ID{}
	}
	return req.ID
}

func accepts(r *http.Request, mt string) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			m := strings.TrimSpace(strings.SplitN(part, ";", 2)[0])
			if m == mt || m == "*/*" || (strings.HasSuffix(m, "/*") && strings.HasPrefix(mt, strings.TrimSuffix(m, "*"))) {
				return true
			}
		}
	}
	return false
}

// httpError answers a transport error with a JSON-RPC error response
// without an id, as the official SDKs' servers do.
func httpError(w http.ResponseWriter, status int, msg string) {
	code := int64(jsonrpc.CodeInvalidRequest)
	if status >= 500 {
		code = CodeUnavailable
	}
	writeError(w, status, jsonrpc.ID{}, code, msg, nil)
}

func writeError(w http.ResponseWriter, status int, id jsonrpc.ID, code int64, msg string, data any) {
	e := &jsonrpc.Error{Code: code, Message: msg}
	if data != nil {
		e.Data, _ = json.Marshal(data)
	}
	writeMessage(w, status, &jsonrpc.Response{ID: id, Error: e})
}

func writeMessage(w http.ResponseWriter, status int, m *jsonrpc.Response) {
	data, err := jsonrpc.EncodeMessage(m)
	if err != nil {
		httpError(w, http.StatusInternalServerError, "the answer could not be encoded")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

var errTooLarge = errors.New("the upstream sent a message larger than the proxy takes")
