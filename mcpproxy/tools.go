package mcpproxy

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Tool is one tool of a tools/list answer, as the upstream sent it.
type Tool struct {
	Name        string
	Description string
	InputSchema json.RawMessage
	ReadOnly    bool
	// Raw is the tool's JSON, relayed unchanged when it is listed.
	Raw json.RawMessage
}

// listTools relays tools/list with the answer filtered by the Gate.
func (p *Proxy) listTools(w http.ResponseWriter, r *http.Request, t Target, sess Session, req *jsonrpc.Request, body []byte) {
	ctx, cancel := context.WithTimeout(r.Context(), p.lim.Decide)
	keep, err := t.Gate.Listable(ctx, sess)
	cancel()
	if err != nil {
		p.unavailable(w, req.ID, err)
		return
	}
	drifted := false
	h := &hooks{id: req.ID, rewrite: func(result json.RawMessage) (json.RawMessage, error) {
		out, d, err := filterTools(result, keep)
		drifted = drifted || d
		return out, err
	}}
	p.relay(w, r, t, sess, body, h)
	if drifted {
		t.Gate.Drifted(sess)
	}
}

// filterTools keeps the tools keep allows, each as the upstream sent it.
func filterTools(result json.RawMessage, keep func(Tool) (bool, bool)) (json.RawMessage, bool, error) {
	var res map[string]json.RawMessage
	if err := json.Unmarshal(result, &res); err != nil {
		return nil, false, err
	}
	var tools []json.RawMessage
	if raw, ok := res["tools"]; ok {
		if err := json.Unmarshal(raw, &tools); err != nil {
			return nil, false, err
		}
	}
	kept := make([]json.RawMessage, 0, len(tools))
	drifted := false
	for _, raw := range tools {
		var td struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"inputSchema"`
			Annotations struct {
				ReadOnlyHint *bool `json:"readOnlyHint"`
			} `json:"annotations"`
		}
		if err := json.Unmarshal(raw, &td); err != nil {
			return nil, false, err
		}
		ok, d := keep(Tool{Name: td.Name, Description: td.Description, InputSchema: td.InputSchema,
			ReadOnly: td.Annotations.ReadOnlyHint != nil && *td.Annotations.ReadOnlyHint, Raw: raw})
		drifted = drifted || d
		if ok {
			kept = append(kept, raw)
		}
	}
	enc, err := json.Marshal(kept)
	if err != nil {
		return nil, false, err
	}
	res["tools"] = enc
	out, err := json.Marshal(res)
	return out, drifted, err
}
