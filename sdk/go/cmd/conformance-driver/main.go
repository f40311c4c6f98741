// Command conformance-driver is the Go SDK's conformance driver (CONTRACT
// §14 and the live operations of sdk/README.md): it reads one JSON object a
// line on standard input and writes one JSON object a line on standard
// output (ASCII JSON, flushed), in order, and exits 0 at the end of its
// input. A line it cannot handle is answered {"error": "<code>"}; it never
// stops early.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	svcsdk "svc/sdk/go"
)

func main() {
	if err := serve(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "conformance-driver:", err)
		os.Exit(1)
	}
}

// serve answers every line of in on out, flushing each answer.
func serve(in io.Reader, out io.Writer) error {
	r := bufio.NewReaderSize(in, 1<<16)
	w := bufio.NewWriter(out)
	s := &session{}
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			if _, werr := w.Write(encode(s.handleLine(line))); werr != nil {
				return werr
			}
			if werr := w.Flush(); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// encode writes an answer as one line of ASCII JSON.
func encode(answer map[string]any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(answer); err != nil {
		return []byte(`{"error":"internal_error"}` + "\n")
	}
	return asciiJSON(b.Bytes())
}

// asciiJSON escapes every non-ASCII character of JSON text (which can only
// occur inside strings) as \uXXXX, surrogate pairs above U+FFFF.
func asciiJSON(in []byte) []byte {
	out := make([]byte, 0, len(in))
	for i := 0; i < len(in); {
		c := in[i]
		if c < utf8.RuneSelf {
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(in[i:])
		i += n
		if r >= 0x10000 {
			r1, r2 := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
		} else {
			out = fmt.Appendf(out, `\u%04x`, r)
		}
	}
	return out
}

type fail string

func failure(code string) map[string]any { return map[string]any{"error": code} }

func need(req map[string]any, name string) any {
	v, ok := req[name]
	if !ok {
		panic(fail("missing_field"))
	}
	return v
}

func (s *session) handleLine(line []byte) map[string]any {
	text := strings.Trim(string(line), "\r\n")
	if !utf8.ValidString(text) || strings.TrimSpace(text) == "" {
		return failure("invalid_json")
	}
	v, err := svcsdk.ParseJSON([]byte(text))
	if err != nil {
		if strings.Contains(err.Error(), "duplicate") {
			return failure("duplicate_key")
		}
		return failure("invalid_json")
	}
	return s.handle(v)
}

func (s *session) handle(v any) (answer map[string]any) {
	req, ok := v.(map[string]any)
	if !ok {
		return failure("invalid_input")
	}
	defer func() {
		if r := recover(); r != nil {
			if f, ok := r.(fail); ok {
				answer = failure(string(f))
				return
			}
			answer = failure("internal_error")
		}
	}()
	op, _ := req["op"].(string)
	if live[op] {
		return s.live(op, req)
	}
	fn := pure[op]
	if fn == nil {
		return failure("unknown_op")
	}
	return fn(req)
}

var pure = map[string]func(map[string]any) map[string]any{
	"canonicalize": func(req map[string]any) map[string]any {
		b, err := svcsdk.Canonicalize(need(req, "value"))
		if err != nil {
			panic(fail("invalid_value"))
		}
		return map[string]any{"canonical": string(b)}
	},
	"action_hash": func(req map[string]any) map[string]any {
		m, ok := need(req, "tool_call").(map[string]any)
		if !ok {
			panic(fail("invalid_input"))
		}
		tc, ok := toolCall(m)
		if !ok {
			panic(fail("invalid_value"))
		}
		h, err := svcsdk.ActionHash(tc)
		if err != nil {
			panic(fail("invalid_value"))
		}
		return map[string]any{"action_hash": h}
	},
	"sign": func(req map[string]any) map[string]any {
		body, ok1 := need(req, "body").(string)
		key, ok2 := need(req, "signing_key").(string)
		if !ok1 || !ok2 {
			panic(fail("invalid_input"))
		}
		if !utf8.ValidString(body) {
			panic(fail("invalid_value"))
		}
		h, err := svcsdk.Sign([]byte(body), key)
		if err != nil {
			panic(fail("invalid_key"))
		}
		return map[string]any{"header": h}
	},
	"redact": func(req map[string]any) map[string]any {
		pv, fv := need(req, "parameters"), need(req, "redacted_fields")
		params, ok := pv.(map[string]any)
		if pv != nil && !ok {
			panic(fail("invalid_input"))
		}
		var fields []string
		if fv != nil {
			arr, ok := fv.([]any)
			if !ok {
				panic(fail("invalid_redaction_path"))
			}
			for _, f := range arr {
				s, ok := f.(string)
				if !ok {
					panic(fail("invalid_redaction_path"))
				}
				fields = append(fields, s)
			}
		}
		out, err := svcsdk.Redact(params, fields)
		var ip *svcsdk.InvalidRedactionPath
		if errors.As(err, &ip) {
			panic(fail("invalid_redaction_path"))
		}
		if err != nil {
			panic(fail("invalid_value"))
		}
		return map[string]any{"parameters": out}
	},
	"verify_receipt": func(req map[string]any) map[string]any {
		r, ok1 := need(req, "receipt").(map[string]any)
		key, ok2 := need(req, "public_key").(string)
		if !ok1 || !ok2 {
			panic(fail("invalid_input"))
		}
		res := svcsdk.VerifyReceipt(r, key)
		return map[string]any{"hash_valid": res.HashValid, "signature_valid": res.SignatureValid}
	},
	"verify_inclusion": func(req map[string]any) map[string]any {
		r, ok1 := need(req, "receipt").(map[string]any)
		proof, ok2 := need(req, "proof").(map[string]any)
		checkpoint, ok3 := need(req, "checkpoint").(string)
		key, ok4 := need(req, "public_key").(string)
		if !ok1 || !ok2 || !ok3 || !ok4 {
			panic(fail("invalid_input"))
		}
		res := svcsdk.VerifyInclusion(r, proof, checkpoint, key)
		return map[string]any{"checkpoint_valid": res.CheckpointValid, "proof_valid": res.ProofValid}
	},
	"retry": func(req map[string]any) map[string]any {
		st := need(req, "status")
		if h, ok := req["headers"]; ok && h != nil {
			if _, ok := h.(map[string]any); !ok {
				panic(fail("invalid_input"))
			}
		}
		if st == nil {
			return map[string]any{"retry": true} // no answer: a network error
		}
		n, ok := intValue(st)
		if !ok {
			panic(fail("invalid_input"))
		}
		return map[string]any{"retry": svcsdk.ShouldRetry(n)}
	},
	"outcome": func(req map[string]any) map[string]any {
		return map[string]any{"outcome": svcsdk.Outcome(need(req, "response"))}
	},
}

// intValue reads a JSON integer (not a float form, not a bool).
func intValue(v any) (int, bool) {
	n, ok := v.(json.Number)
	if !ok || strings.ContainsAny(string(n), ".eE") {
		return 0, false
	}
	i, err := n.Int64()
	if err != nil {
		return 1 << 30, true // out of int range: some status nobody retries
	}
	return int(i), true
}

// toolCall reads a tool_call object: tool and action strings, resource a
// string or null, parameters an object or null.
func toolCall(m map[string]any) (svcsdk.ToolCall, bool) {
	tool, ok1 := m["tool"].(string)
	action, ok2 := m["action"].(string)
	tc := svcsdk.ToolCall{Tool: tool, Action: action}
	if !ok1 || !ok2 {
		return tc, false
	}
	switch r := m["resource"].(type) {
	case nil:
	case string:
		tc.Resource = &r
	default:
		return tc, false
	}
	switch p := m["parameters"].(type) {
	case nil:
	case map[string]any:
		tc.Parameters = p
	default:
		return tc, false
	}
	return tc, true
}

// ---------------------------------------------------------------------------
// Live operations

var live = map[string]bool{"client": true, "authorize": true, "run": true, "guard": true, "wait_for_approval": true,
	"get_receipt": true, "get_receipt_public_key": true, "verify_decision_receipt": true, "verify_receipt_inclusion": true, "stats": true}

type session struct {
	client  *svcsdk.Client
	capture capture
}

// capture is a slog handler keeping the records at WARN and above.
type capture struct {
	mu      sync.Mutex
	records []map[string]any
}

type captureHandler struct{ c *capture }

func (h captureHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h captureHandler) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h captureHandler) WithGroup(string) slog.Handler                { return h }
func (h captureHandler) Handle(_ context.Context, r slog.Record) error {
	msg := r.Message
	kind := "other"
	switch {
	case strings.Contains(msg, "FAIL-OPEN"):
		kind = "fail_open"
	case strings.Contains(msg, "deprecated"):
		kind = "deprecation"
	case strings.Contains(msg, "action_hash") && (strings.Contains(msg, "mismatch") || strings.Contains(msg, "differs")):
		kind = "hash_mismatch"
	}
	h.c.mu.Lock()
	h.c.records = append(h.c.records, map[string]any{"kind": kind, "message": msg})
	h.c.mu.Unlock()
	return nil
}

func (s *session) live(op string, req map[string]any) map[string]any {
	if op != "client" && s.client == nil {
		return failure("no_client")
	}
	s.capture.mu.Lock()
	s.capture.records = []map[string]any{}
	s.capture.mu.Unlock()
	var answer map[string]any
	var err error
	switch op {
	case "client":
		answer, err = s.opClient(req)
	case "authorize":
		answer, err = s.opAuthorize(req)
	case "run", "guard":
		answer, err = s.opRun(op, req)
	case "wait_for_approval":
		answer, err = s.opWait(req)
	case "get_receipt":
		id, ok := req["receipt_id"].(string)
		if !ok {
			panic(fail("invalid_input"))
		}
		var r map[string]any
		if r, err = s.client.GetReceipt(context.Background(), id); err == nil {
			answer = map[string]any{"receipt": r}
		}
	case "get_receipt_public_key":
		var r map[string]any
		if r, err = s.client.GetReceiptPublicKey(context.Background()); err == nil {
			answer = map[string]any{"public_key": r}
		}
	case "verify_receipt_inclusion":
		id, ok := req["receipt_id"].(string)
		if !ok {
			panic(fail("invalid_input"))
		}
		var r svcsdk.InclusionResult
		if r, err = s.client.VerifyInclusion(context.Background(), id); err == nil {
			answer = map[string]any{"inclusion": map[string]any{"checkpoint_valid": r.CheckpointValid, "proof_valid": r.ProofValid,
				"origin": r.Origin, "tree_size": r.TreeSize}}
		}
	case "verify_decision_receipt":
		d := decisionFromJSON(req["decision"])
		var tc *svcsdk.ToolCall
		if m, ok := req["tool_call"].(map[string]any); ok {
			t, ok := toolCall(m)
			if !ok {
				panic(fail("invalid_input"))
			}
			tc = &t
		}
		var r map[string]any
		if r, err = s.client.VerifyReceipt(context.Background(), d, tc); err == nil {
			answer = map[string]any{"receipt": r}
		}
	case "stats":
		answer = map[string]any{"fail_open_count": s.client.FailOpenCount()}
	}
	if err != nil {
		e, ok := errorJSON(err)
		if !ok {
			return failure("internal_error")
		}
		answer = map[string]any{"raised": e}
		if op == "run" || op == "guard" {
			answer["ran"] = false
		}
	}
	s.capture.mu.Lock()
	answer["warnings"] = s.capture.records
	s.capture.mu.Unlock()
	return answer
}

func seconds(req map[string]any, name string) (time.Duration, bool) {
	v, ok := req[name]
	if !ok || v == nil {
		return 0, false
	}
	n, ok := v.(json.Number)
	if !ok {
		panic(fail("invalid_input"))
	}
	f, err := n.Float64()
	if err != nil {
		panic(fail("invalid_input"))
	}
	return time.Duration(f * float64(time.Second)), true
}

func optString(req map[string]any, name string) string {
	v, ok := req[name]
	if !ok || v == nil {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		panic(fail("invalid_input"))
	}
	return s
}

func (s *session) opClient(req map[string]any) (map[string]any, error) {
	url, ok1 := req["base_url"].(string)
	token, ok2 := req["agent_token"].(string)
	if !ok1 || !ok2 {
		panic(fail("invalid_input"))
	}
	opts := []svcsdk.Option{
		svcsdk.WithLogger(slog.New(captureHandler{&s.capture})),
		svcsdk.WithSigningKey(optString(req, "signing_key")),
		svcsdk.WithReceiptPublicKey(optString(req, "receipt_public_key")),
		svcsdk.WithAPIVersion(optString(req, "api_version")),
	}
	if d, ok := seconds(req, "timeout"); ok {
		opts = append(opts, svcsdk.WithTimeout(d))
	}
	if d, ok := seconds(req, "approval_timeout"); ok {
		opts = append(opts, svcsdk.WithApprovalTimeout(d))
	}
	if v, ok := req["retries"]; ok && v != nil {
		n, ok := intValue(v)
		if !ok {
			panic(fail("invalid_input"))
		}
		opts = append(opts, svcsdk.WithRetries(n))
	}
	if v, ok := req["fail_open_tools"]; ok && v != nil {
		arr, ok := v.([]any)
		if !ok {
			panic(fail("invalid_input"))
		}
		var tools []svcsdk.FailOpenTool
		for _, t := range arr {
			switch x := t.(type) {
			case string:
				tools = append(tools, svcsdk.FailOpenTool{Tool: x})
			case []any:
				if len(x) != 2 {
					panic(fail("invalid_input"))
				}
				tool, ok1 := x[0].(string)
				action, ok2 := x[1].(string)
				if !ok1 || !ok2 {
					panic(fail("invalid_input"))
				}
				tools = append(tools, svcsdk.FailOpenTool{Tool: tool, Action: action})
			default:
				panic(fail("invalid_input"))
			}
		}
		opts = append(opts, svcsdk.WithFailOpenTools(tools...))
	}
	if s.client != nil {
		s.client.Close()
		s.client = nil
	}
	c, err := svcsdk.New(url, token, opts...)
	if err != nil {
		panic(fail("invalid_input"))
	}
	s.client = c
	return map[string]any{"ok": true}, nil
}

// authorizeOptions reads the authorize options named in allowed.
func authorizeOptions(req map[string]any, allowed ...string) svcsdk.AuthorizeOptions {
	var o svcsdk.AuthorizeOptions
	for _, name := range allowed {
		v, ok := req[name]
		if !ok || v == nil {
			continue
		}
		switch name {
		case "mutates_state":
			o.MutatesState = v == true
		case "dry_run":
			o.DryRun = v == true
		case "source_trust":
			o.SourceTrust = optString(req, name)
		case "environment":
			o.Environment = optString(req, name)
		case "request_id":
			o.RequestID = optString(req, name)
		case "approval_id":
			o.ApprovalID = optString(req, name)
		case "trace":
			m, ok := v.(map[string]any)
			if !ok {
				panic(fail("invalid_input"))
			}
			o.Trace = m
		case "webhook":
			m, ok := v.(map[string]any)
			if !ok {
				panic(fail("invalid_input"))
			}
			u, _ := m["url"].(string)
			sec, _ := m["secret"].(string)
			o.Webhook = &svcsdk.Webhook{URL: u, Secret: sec}
		}
	}
	return o
}

var allAuthorizeOptions = []string{"mutates_state", "source_trust", "trace", "environment", "request_id", "approval_id", "dry_run", "webhook"}

// callOf reads the tool_call of a live op. A call of the wrong shape is the
// SDK's to refuse (InvalidRequest), as the Python client does.
func callOf(req map[string]any) (svcsdk.ToolCall, error) {
	v, present := req["tool_call"]
	if !present || v == nil {
		panic(fail("missing_field"))
	}
	m, ok := v.(map[string]any)
	if !ok {
		panic(fail("invalid_input"))
	}
	tc, ok := toolCall(m)
	if !ok {
		return tc, &svcsdk.InvalidRequest{SvcError: svcsdk.SvcError{ErrorCode: "invalid_tool_call",
			Message: "tool_call must have string tool and action, a string or null resource, an object or null parameters"}}
	}
	return tc, nil
}

func (s *session) opAuthorize(req map[string]any) (map[string]any, error) {
	tc, err := callOf(req)
	if err != nil {
		return nil, err
	}
	d, err := s.client.Authorize(context.Background(), tc, authorizeOptions(req, allAuthorizeOptions...))
	if err != nil {
		return nil, err
	}
	return map[string]any{"decision": decisionJSON(d)}, nil
}

func (s *session) opRun(op string, req map[string]any) (map[string]any, error) {
	var o svcsdk.RunOptions
	if w, ok := req["wait"]; ok && w == false {
		o.NoWait = true
	}
	if d, ok := seconds(req, "approval_timeout"); ok {
		o.ApprovalTimeout = d
	}
	if m, ok := req["mask"]; ok {
		o.Mask, o.UseMask = m, true
	}
	var ran *svcsdk.Decision
	var params map[string]any
	echo := func(ctx context.Context, p map[string]any) (map[string]any, error) {
		ran, params = svcsdk.DecisionFrom(ctx), p
		return p, nil
	}
	var err error
	if op == "run" {
		tc, cerr := callOf(req)
		if cerr != nil {
			return nil, cerr
		}
		o.AuthorizeOptions = authorizeOptions(req, allAuthorizeOptions...)
		if o.DryRun {
			panic(fail("invalid_input"))
		}
		_, err = svcsdk.Run(context.Background(), s.client, tc, echo, o)
	} else {
		tool, ok1 := req["tool"].(string)
		action, ok2 := req["action"].(string)
		args, ok3 := req["arguments"].(map[string]any)
		if req["arguments"] == nil {
			args, ok3 = map[string]any{}, true
		}
		if !ok1 || !ok2 || !ok3 {
			panic(fail("invalid_input"))
		}
		var res *string
		switch r := req["resource"].(type) {
		case nil:
		case string:
			res = &r
		default:
			panic(fail("invalid_input"))
		}
		o.AuthorizeOptions = authorizeOptions(req, "mutates_state", "source_trust", "trace", "environment", "request_id", "webhook")
		spec := svcsdk.GuardSpec[map[string]any]{Tool: tool, Action: action,
			Resource: func(map[string]any) *string { return res }, RunOptions: o}
		_, err = svcsdk.Guard(s.client, spec, echo)(context.Background(), args)
	}
	if err != nil {
		return nil, err
	}
	if params == nil {
		params = map[string]any{}
	}
	return map[string]any{"ran": true, "parameters": params, "decision": decisionJSON(ran)}, nil
}

func (s *session) opWait(req map[string]any) (map[string]any, error) {
	timeout, _ := seconds(req, "timeout")
	ctx := context.Background()
	if after, ok := seconds(req, "cancel_after"); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		t := time.AfterFunc(after, cancel)
		defer t.Stop()
		defer cancel()
	}
	var a *svcsdk.Approval
	var err error
	if v, ok := req["decision"]; ok && v != nil {
		a, err = s.client.WaitForApproval(ctx, decisionFromJSON(v), timeout)
	} else {
		id, _ := req["approval_id"].(string)
		a, err = s.client.WaitForApprovalID(ctx, id, timeout)
	}
	if err != nil {
		return nil, err
	}
	return map[string]any{"approval": approvalJSON(a)}, nil
}

// ---------------------------------------------------------------------------
// D, A and E

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func list(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

func toolCallJSON(tc *svcsdk.ToolCall) any {
	if tc == nil {
		return nil
	}
	var res any
	if tc.Resource != nil {
		res = *tc.Resource
	}
	p := tc.Parameters
	if p == nil {
		p = map[string]any{}
	}
	return map[string]any{"tool": tc.Tool, "action": tc.Action, "resource": res, "parameters": p}
}

func decisionJSON(d *svcsdk.Decision) any {
	if d == nil {
		return nil
	}
	var status any
	if d.Status != 0 {
		status = d.Status
	}
	return map[string]any{
		"decision": d.Decision, "reason": d.Reason, "decision_id": nullable(d.DecisionID), "action_hash": nullable(d.ActionHash),
		"local_action_hash": nullable(d.LocalActionHash), "hash_certain": d.HashCertain, "hash_mismatch": d.HashMismatch,
		"redacted_fields": list(d.RedactedFields), "approval_id": nullable(d.ApprovalID),
		"approval_expires_at": nullable(d.ApprovalExpiresAt), "receipt_id": nullable(d.ReceiptID),
		"receipt_hash": nullable(d.ReceiptHash), "root_trust_level": nullable(d.RootTrustLevel),
		"matched_policies": list(d.MatchedPolicies), "request_id": nullable(d.RequestID), "status": status,
		"message": nullable(d.Message), "fail_open": d.FailOpen, "dry_run": d.DryRun, "mutates_state": d.MutatesState,
		"tool_call": toolCallJSON(d.ToolCall), "raw": d.Raw,
	}
}

func decisionFromJSON(v any) *svcsdk.Decision {
	m, ok := v.(map[string]any)
	if !ok {
		panic(fail("invalid_input"))
	}
	dec, ok := m["decision"].(string)
	if !ok {
		panic(fail("invalid_input"))
	}
	s := func(k string) string { x, _ := m[k].(string); return x }
	ls := func(k string) []string {
		out := []string{}
		a, _ := m[k].([]any)
		for _, x := range a {
			if t, ok := x.(string); ok {
				out = append(out, t)
			}
		}
		return out
	}
	d := &svcsdk.Decision{
		Decision: dec, Reason: s("reason"), DecisionID: s("decision_id"), ActionHash: s("action_hash"),
		RedactedFields: ls("redacted_fields"), ApprovalID: s("approval_id"), ApprovalExpiresAt: s("approval_expires_at"),
		ReceiptID: s("receipt_id"), ReceiptHash: s("receipt_hash"), RootTrustLevel: s("root_trust_level"),
		MatchedPolicies: ls("matched_policies"), RequestID: s("request_id"), DryRun: m["dry_run"] == true,
		Raw: m["raw"], Message: s("message"), LocalActionHash: s("local_action_hash"),
		HashCertain: m["hash_certain"] != false, HashMismatch: m["hash_mismatch"] == true, FailOpen: m["fail_open"] == true,
		MutatesState: m["mutates_state"] == true,
	}
	if n, ok := intValue(m["status"]); ok {
		d.Status = n
	}
	if tcm, ok := m["tool_call"].(map[string]any); ok {
		if tc, ok := toolCall(tcm); ok {
			d.ToolCall = &tc
		}
	}
	return d
}

func approvalJSON(a *svcsdk.Approval) any {
	if a == nil {
		return nil
	}
	var reason, tc any
	if a.Reason != nil {
		reason = *a.Reason
	}
	if a.ToolCall != nil {
		tc = a.ToolCall
	}
	return map[string]any{"approval_id": a.ApprovalID, "status": a.Status, "decision_id": nullable(a.DecisionID),
		"action_hash": nullable(a.ActionHash), "reason": reason, "expires_at": nullable(a.ExpiresAt), "tool_call": tc,
		"edited": a.Edited, "call": toolCallJSON(a.Call), "raw": a.Raw}
}

// errorJSON is E for an error of the SDK (ok false for any other error).
func errorJSON(err error) (map[string]any, bool) {
	if errors.Is(err, context.Canceled) {
		return map[string]any{"type": "Cancelled", "error_code": "cancelled", "status": nil, "message": "cancelled",
			"headers": map[string]any{}, "decision": nil, "approval": nil}, true
	}
	typ := svcsdk.TypeName(err)
	var base *svcsdk.SvcError
	if typ == "" || !errors.As(err, &base) {
		return nil, false
	}
	var status any
	if base.Status != 0 {
		status = base.Status
	}
	headers := map[string]any{}
	for k, v := range base.Header {
		if len(v) > 0 {
			headers[strings.ToLower(k)] = v[len(v)-1]
		}
	}
	var d *svcsdk.Decision
	var a *svcsdk.Approval
	var (
		denied   *svcsdk.Denied
		required *svcsdk.ApprovalRequired
		rejected *svcsdk.ApprovalRejected
		expired  *svcsdk.ApprovalExpired
	)
	switch {
	case errors.As(err, &denied):
		d = denied.Decision
	case errors.As(err, &required):
		d = required.Decision
	case errors.As(err, &rejected):
		d, a = rejected.Decision, rejected.Approval
	case errors.As(err, &expired):
		d, a = expired.Decision, expired.Approval
	}
	return map[string]any{"type": typ, "error_code": nullable(base.ErrorCode), "status": status, "message": base.Message,
		"headers": headers, "decision": decisionJSON(d), "approval": approvalJSON(a)}, true
}
