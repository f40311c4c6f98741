package mcpproxy

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Gate decides what svc governs in one session. Its errors are answered
// as CodeUnavailable JSON-RPC errors with nothing forwarded.
type Gate interface {
	// Listable returns whether each tool of a tools/list answer may be
	// listed; drifted reports a tool withheld because its definition
	// differs from the approved one.
	Listable(ctx context.Context, s Session) (func(Tool) (ok, drifted bool), error)
	// Decide authorizes an intercepted call.
	Decide(ctx context.Context, s Session, c Call) (Verdict, error)
	// Answered hears the upstream's answer to a forwarded call whose
	// verdict asked for inspection.
	Answered(ctx context.Context, s Session, c Call, result json.RawMessage)
	// Declined hears that the client's user declined or cancelled an
	// approval offered as an elicitation: its wait ends, on any node.
	Declined(ctx context.Context, s Session, approvalID string)
	// Drifted hears that the upstream's tools changed or differ from the
	// approved ones (a withheld tool, notifications/tools/list_changed).
	Drifted(s Session)
}

// Call is an intercepted request: a tools/call (Method "tools/call", Name
// the tool, Arguments its arguments), a resources/read (Name the URI) or
// a prompts/get (Name the prompt, Arguments its arguments).
type Call struct {
	Method    string
	Name      string
	Arguments map[string]any
	// RunID is _meta["svc/run_id"] when the client sent one.
	RunID string
}

// Verdict is a Gate's answer to a Call.
type Verdict struct {
	// Forward: send the call upstream, with Arguments (the redacted ones
	// when the decision redacted some).
	Forward   bool
	Arguments map[string]any
	// Result answers a tools/call that is not forwarded (a tool result the
	// model reads); Error answers any other call that is not forwarded.
	Result json.RawMessage
	Error  *jsonrpc.Error
	// Inspect: hand the upstream's answer to Gate.Answered.
	Inspect bool
	// Pending, with Result, is the approval a require_approval decision
	// created, which the proxy may offer the client's user (approval.go).
	Pending *Pending
}

// decide asks the Gate about an intercepted call, answers it when it is
// not forwarded, and relays it (its arguments redacted when they were)
// when it is.
func (p *Proxy) decide(w http.ResponseWriter, r *http.Request, t Target, sess Session, req *jsonrpc.Request, body []byte) {
	var params map[string]json.RawMessage
	if err := json.Unmarshal(req.Params, &params); err != nil || params == nil {
		writeError(w, http.StatusOK, req.ID, jsonrpc.CodeInvalidParams, "params must be an object", nil)
		return
	}
	c := Call{Method: req.Method}
	nameField, argsField := "name", argumentsField(req.Method)
	if req.Method == "resources/read" {
		nameField = "uri"
	}
	if err := json.Unmarshal(params[nameField], &c.Name); err != nil || c.Name == "" {
		writeError(w, http.StatusOK, req.ID, jsonrpc.CodeInvalidParams, "params."+nameField+" must be a non-empty string", nil)
		return
	}
	if argsField != "" {
		if raw, ok := params[argsField]; ok && string(raw) != "null" {
			if err := json.Unmarshal(raw, &c.Arguments); err != nil {
				writeError(w, http.StatusOK, req.ID, jsonrpc.CodeInvalidParams, "params."+argsField+" must be an object", nil)
				return
			}
		}
	}
	if raw, ok := params["_meta"]; ok {
		var meta map[string]json.RawMessage
		if json.Unmarshal(raw, &meta) == nil {
			_ = json.Unmarshal(meta["svc/run_id"], &c.RunID)
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), p.lim.Decide)
	v, err := t.Gate.Decide(ctx, sess, c)
	cancel()
	if err != nil {
		p.unavailable(w, req.ID, err)
		return
	}
	if !v.Forward && v.Pending != nil && sess.ElicitURL && c.Method == "tools/call" {
		p.offerApproval(w, r, t, sess, req, body, c, v)
		return
	}
	if !v.Forward {
		if v.Error != nil {
			writeMessage(w, http.StatusOK, &jsonrpc.Response{ID: req.ID, Error: v.Error})
			return
		}
		writeMessage(w, http.StatusOK, &jsonrpc.Response{ID: req.ID, Result: v.Result})
		return
	}
	p.forwardDecided(w, r, t, sess, req, body, c, v, false)
}

// forwardDecided forwards a call its verdict allows, with its arguments
// redacted when they were, and relays the answer (on a stream svc opened
// already when opened).
func (p *Proxy) forwardDecided(w http.ResponseWriter, r *http.Request, t Target, sess Session, req *jsonrpc.Request, body []byte, c Call,
	v Verdict, opened bool) {
	if argsField := argumentsField(c.Method); argsField != "" && v.Arguments != nil {
		// The redacted arguments replace the client's; every other field
		// of the request is relayed as sent.
		var params map[string]json.RawMessage
		enc, err := json.Marshal(v.Arguments)
		if err == nil {
			err = json.Unmarshal(req.Params, &params)
		}
		if err == nil {
			params[argsField] = enc
			fwd := *req
			if fwd.Params, err = json.Marshal(params); err == nil {
				body, err = jsonrpc.EncodeMessage(&fwd)
			}
		}
		if err != nil && opened {
			p.log.Warn("mcp proxy: call not forwarded", "error", err)
			e, _ := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: CodeUnavailable, Message: "svc: nothing was forwarded"}})
			writeSSE(w, e)
			return
		}
		if err != nil {
			p.unavailable(w, req.ID, err)
			return
		}
	}
	h := &hooks{id: req.ID, opened: opened}
	if v.Inspect {
		h.answered = func(result json.RawMessage) {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), p.lim.Decide)
			defer cancel()
			t.Gate.Answered(ctx, sess, c, result)
		}
	}
	p.relay(w, r, t, sess, body, h)
}

// argumentsField is the params member of a method's arguments ("" for
// resources/read, which has none).
func argumentsField(method string) string {
	if method == "resources/read" {
		return ""
	}
	return "arguments"
}
