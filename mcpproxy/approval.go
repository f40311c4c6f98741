package mcpproxy

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Pending is an approval a tools/call is waiting for.
type Pending struct {
	ApprovalID string
	// URL is where a person decides it (the console).
	URL     string
	Message string
	// Wait returns once the approval leaves PENDING (true when it was
	// approved), or when ctx ends (false).
	Wait func(ctx context.Context) bool
}

// offerIDPrefix marks the ids of the elicitation requests svc sends: the
// client's answers to them are svc's, not the upstream's.
const offerIDPrefix = "svc-approval:"

func isOfferID(id jsonrpc.ID) bool {
	s, ok := id.Raw().(string)
	return ok && strings.HasPrefix(s, offerIDPrefix)
}

// offerApprovalID is the approval an offer's id names.
func offerApprovalID(id jsonrpc.ID) string {
	s, _ := id.Raw().(string)
	return strings.TrimPrefix(s, offerIDPrefix)
}

// offerApproval serves a tools/call that needs a person's approval, for a
// client that takes URL-mode elicitation: the answer becomes an event
// stream that first asks the client's user to open the approval's page
// (elicitation/create, mode url), then waits for the decision (within
// Limits.CallTimeout). Once approved, the same call is decided again (it
// consumes the approval) and forwarded on the same stream; otherwise, or
// when the wait ends first, the stream ends with the require_approval
// result, as without the offer.
func (p *Proxy) offerApproval(w http.ResponseWriter, r *http.Request, t Target, sess Session, req *jsonrpc.Request, body []byte, c Call, v Verdict) {
	ctx, cancel := context.WithTimeout(r.Context(), p.lim.CallTimeout)
	defer cancel()
	openSSE(w)
	offerID, _ := jsonrpc.MakeID(offerIDPrefix + v.Pending.ApprovalID)
	params, _ := json.Marshal(map[string]any{"mode": "url", "elicitationId": v.Pending.ApprovalID, "url": v.Pending.URL,
		"message": v.Pending.Message})
	if e, err := jsonrpc.EncodeMessage(&jsonrpc.Request{ID: offerID, Method: "elicitation/create", Params: params}); err == nil {
		writeSSE(w, e)
	}
	decided := make(chan bool, 1)
	go func() { decided <- v.Pending.Wait(ctx) }()
	keepAlive := time.NewTicker(p.lim.KeepAlive)
	defer keepAlive.Stop()
	var approved bool
wait:
	for {
		select {
		case approved = <-decided:
			break wait
		case <-keepAlive.C:
			if _, err := io.WriteString(w, ": keepalive\n\n"); err != nil {
				return // the client left
			}
			_ = http.NewResponseController(w).Flush()
		}
	}
	if ctx.Err() == nil {
		done, _ := json.Marshal(map[string]any{"elicitationId": v.Pending.ApprovalID})
		if e, err := jsonrpc.EncodeMessage(&jsonrpc.Request{Method: "notifications/elicitation/complete", Params: done}); err == nil {
			writeSSE(w, e)
		}
	}
	if approved {
		dctx, dcancel := context.WithTimeout(ctx, p.lim.Decide)
		v2, err := t.Gate.Decide(dctx, sess, c)
		dcancel()
		switch {
		case err != nil:
			p.log.Warn("mcp proxy: approved call not decided; nothing forwarded", "error", err)
			e, _ := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: CodeUnavailable,
				Message: "svc cannot decide this call now; nothing was forwarded"}})
			writeSSE(w, e)
			return
		case v2.Forward:
			p.forwardDecided(w, r, t, sess, req, body, c, v2, true)
			return
		}
		v = v2
	}
	resp := &jsonrpc.Response{ID: req.ID, Result: v.Result}
	if v.Error != nil {
		resp = &jsonrpc.Response{ID: req.ID, Error: v.Error}
	}
	if e, err := jsonrpc.EncodeMessage(resp); err == nil {
		writeSSE(w, e)
	}
}
