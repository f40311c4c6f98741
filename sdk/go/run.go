package svcsdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// ---------------------------------------------------------------------------
// Receipts

// GetReceipt reads GET /v2/receipts/:receipt_id (an agent reads the receipts
// of its own decisions).
func (c *Client) GetReceipt(ctx context.Context, receiptID string) (map[string]any, error) {
	return c.getObject(ctx, "/receipts/"+url.PathEscape(receiptID), fmt.Sprintf("svc: receipt %s: ", receiptID))
}

// GetReceiptPublicKey reads GET /v2/receipts/public-key (key_id and
// public_key). Pin the key you got out of band rather than trusting this
// answer alone.
func (c *Client) GetReceiptPublicKey(ctx context.Context) (map[string]any, error) {
	return c.getObject(ctx, "/receipts/public-key", "svc: receipt key: ")
}

func (c *Client) getObject(ctx context.Context, path, prefix string) (map[string]any, error) {
	resp, err := c.call(ctx, http.MethodGet, path, time.Now().Add(c.timeout), nil, false)
	if err != nil {
		return nil, err
	}
	m, ok := resp.JSON().(map[string]any)
	if resp.status != 200 || !ok {
		return nil, fromResponse(resp.status, resp.JSON(), resp.header, prefix)
	}
	return m, nil
}

// VerifyReceipt fetches the receipt of d and checks it: hash and signature
// with the pinned key (WithReceiptPublicKey), the ids and the decision, and
// its action_hash against the local svc-jcs-1 of call (d.ToolCall when call
// is nil). It returns the receipt, also stored in d.Receipt, or
// *ReceiptInvalid.
func (c *Client) VerifyReceipt(ctx context.Context, d *Decision, call *ToolCall) (map[string]any, error) {
	if c.receiptKey == "" {
		return nil, &SvcError{ErrorCode: "no_receipt_key", Message: "svc: no receipt public key is set (WithReceiptPublicKey)"}
	}
	if d.ReceiptID == "" {
		return nil, &ReceiptInvalid{SvcError: SvcError{ErrorCode: "receipt_missing",
			Message: fmt.Sprintf("svc: decision %s carries no receipt", d.DecisionID)}}
	}
	r, err := c.GetReceipt(ctx, d.ReceiptID)
	if err != nil {
		var se *SvcError
		if errors.As(err, &se) && se.Status == 404 {
			return nil, &ReceiptInvalid{SvcError: SvcError{ErrorCode: "receipt_not_found", Status: 404, Err: err,
				Message: fmt.Sprintf("svc: receipt %s not found", d.ReceiptID)}}
		}
		return nil, err
	}
	res := VerifyReceipt(r, c.receiptKey)
	var problems []string
	if !res.HashValid {
		problems = append(problems, fmt.Sprintf("hash invalid (%s)", res.Error))
	}
	if !res.SignatureValid {
		problems = append(problems, fmt.Sprintf("signature invalid (%s)", res.Error))
	}
	for _, f := range [][2]string{{"receipt_id", d.ReceiptID}, {"receipt_hash", d.ReceiptHash},
		{"decision_id", d.DecisionID}, {"decision", d.Decision}} {
		if f[1] != "" && str(r[f[0]]) != f[1] {
			problems = append(problems, fmt.Sprintf("%s %s is not the decision's %q", f[0], describe(r[f[0]]), f[1]))
		}
	}
	if call == nil {
		call = d.ToolCall
	}
	local := ""
	certain := true
	if call != nil {
		if h, err := ActionHash(*call); err == nil {
			local = h
		}
		certain = call.certain()
	}
	want := d.ActionHash
	if local != "" && certain {
		want = local
	}
	got, isStr := r["action_hash"].(string)
	if (want == "" && r["action_hash"] != nil) || (want != "" && (!isStr || got != want)) {
		problems = append(problems, fmt.Sprintf("action_hash %s is not the call's %q", describe(r["action_hash"]), want))
	} else if local != "" && got != local {
		c.warn("svc: receipt %s: action_hash differs from the local %s (uncertain Unicode; server's trusted)", d.ReceiptID, local)
	}
	if len(problems) > 0 {
		return nil, &ReceiptInvalid{SvcError: SvcError{ErrorCode: "receipt_invalid",
			Message: fmt.Sprintf("svc: receipt %s: %s", d.ReceiptID, strings.Join(problems, "; "))}, Result: &res, Receipt: r}
	}
	d.Receipt = r
	return r, nil
}

// ---------------------------------------------------------------------------
// Run and Guard

// RunOptions are Run's options: the authorize options, and how to handle an
// approval and a redaction.
type RunOptions struct {
	AuthorizeOptions
	// NoWait: on require_approval return *ApprovalRequired instead of waiting.
	NoWait bool
	// ApprovalTimeout bounds the wait (0: the client's WithApprovalTimeout).
	ApprovalTimeout time.Duration
	// Mask, when UseMask is set, replaces redacted values instead of
	// removing them.
	Mask    any
	UseMask bool
}

type decisionKey struct{}

// DecisionFrom returns the Decision that let the tool run, inside a tool
// function called by Run or a guarded function.
func DecisionFrom(ctx context.Context) *Decision {
	d, _ := ctx.Value(decisionKey{}).(*Decision)
	return d
}

// Run authorizes call and runs fn with the parameters only on the allow (or
// redact, with the redaction applied) that svc returns, and returns fn's
// result. On require_approval it waits for the approval (unless NoWait:
// *ApprovalRequired), then presents the (possibly edited) call again with
// the approval_id, and runs only on the allow that this returns. deny and
// quarantine: *Denied. With a pinned receipt key, the receipt of a mutating
// call is fetched and verified before fn runs (*ReceiptInvalid). The ctx fn
// receives carries the Decision ([DecisionFrom]). An error of fn is returned
// as is.
func (c *Client) Run(ctx context.Context, call ToolCall, fn func(ctx context.Context, params map[string]any) (any, error), o RunOptions) (any, error) {
	return Run(ctx, c, call, fn, o)
}

// Run is [Client.Run] with a typed result.
func Run[T any](ctx context.Context, c *Client, call ToolCall, fn func(ctx context.Context, params map[string]any) (T, error), o RunOptions) (T, error) {
	var zero T
	params, d, err := c.Permit(ctx, call, o)
	if err != nil {
		return zero, err
	}
	return fn(context.WithValue(ctx, decisionKey{}, d), params)
}

// Permit is Run's decision part without running anything: it returns the
// parameters the tool may run with and the decision that lets it run, or the
// error Run would return. Use it when the tool is run by other code.
func (c *Client) Permit(ctx context.Context, call ToolCall, o RunOptions) (map[string]any, *Decision, error) {
	if o.DryRun {
		return nil, nil, newInvalidRequest("dry_run", "run never runs a tool on a dry run")
	}
	d, err := c.Authorize(ctx, call, o.AuthorizeOptions)
	if err != nil {
		return nil, nil, err
	}
	cur := *d.ToolCall
	if d.Decision == DecisionRequireApproval {
		if d.ApprovalID == "" {
			return nil, nil, newDenied("svc: require_approval without an approval_id (treated as deny)", d)
		}
		if d.HashMismatch && d.HashCertain {
			return nil, nil, &ActionHashMismatch{SvcError: SvcError{ErrorCode: "action_hash_mismatch",
				Message: fmt.Sprintf("svc: the approval would bind action_hash %s, not this call's %s", d.ActionHash, d.LocalActionHash)},
				Local: d.LocalActionHash, Remote: d.ActionHash}
		}
		if o.NoWait {
			return nil, nil, newApprovalRequired(fmt.Sprintf("svc: approval required (approval_id %s)", d.ApprovalID), d)
		}
		a, err := c.WaitForApproval(ctx, d, o.ApprovalTimeout)
		if err != nil {
			return nil, nil, err
		}
		if a.Call != nil {
			cur = *a.Call
		}
		if a.Edited {
			c.log.Info(fmt.Sprintf("svc: approval %s edited the parameters; presenting the edited call", a.ApprovalID))
		}
		po := o.AuthorizeOptions
		po.RequestID, po.Webhook, po.ApprovalID = "", nil, a.ApprovalID
		d2, err := c.Authorize(ctx, cur, po)
		if err != nil {
			return nil, nil, err
		}
		if d2.FailOpen { // never run an approval path on a local allow
			return nil, nil, &SvcUnavailable{SvcError{ErrorCode: "svc_unavailable", Message: "svc: unavailable while presenting an approval"}}
		}
		if !d2.Allowed() {
			return nil, nil, newDenied(fmt.Sprintf("svc: presenting approval %s: %s (%s)", a.ApprovalID, d2.Decision, d2.Reason), d2)
		}
		d = d2
		cur = *d2.ToolCall
	}
	if !d.Allowed() {
		return nil, nil, newDenied(fmt.Sprintf("svc: %s (%s)", d.Decision, d.Reason), d)
	}
	params := copyJSON(cur.Parameters)
	if d.Decision == DecisionRedact {
		var err error
		if o.UseMask {
			params, err = RedactMask(params, d.RedactedFields, o.Mask)
		} else {
			params, err = Redact(params, d.RedactedFields)
		}
		if err != nil {
			return nil, nil, err
		}
	}
	if c.receiptKey != "" && d.MutatesState && !d.FailOpen {
		if _, err := c.VerifyReceipt(ctx, d, &cur); err != nil {
			return nil, nil, err
		}
	}
	return params, d, nil
}

// GuardSpec describes a guarded function: the tool and action it is, how
// its resource is derived from its argument, and Run's options.
type GuardSpec[A any] struct {
	Tool, Action string
	// Resource derives the resource from the argument (nil: no resource).
	Resource func(A) *string
	RunOptions
}

// Guard wraps fn so that every call goes through [Client.Run]: the argument
// A (a struct or a map) is encoded to JSON, and that object is the call's
// parameters. fn receives a fresh A decoded from the parameters svc let run,
// so a redacted field arrives as its zero value (or as the mask). It panics
// on nothing; an A that does not encode to a JSON object is *InvalidRequest.
func Guard[A, T any](c *Client, spec GuardSpec[A], fn func(context.Context, A) (T, error)) func(context.Context, A) (T, error) {
	return func(ctx context.Context, arg A) (T, error) {
		var zero T
		pv, err := jsonValue(arg)
		if err != nil {
			return zero, &InvalidRequest{base(canonCode(err), "guard: the argument has no JSON form: %v", err)}
		}
		params, ok := pv.(map[string]any)
		if !ok && pv != nil {
			return zero, newInvalidRequest("invalid_tool_call", "guard: the argument must encode to a JSON object")
		}
		call := ToolCall{Tool: spec.Tool, Action: spec.Action, Parameters: params}
		if spec.Resource != nil {
			call.Resource = spec.Resource(arg)
		}
		return Run(ctx, c, call, func(ctx context.Context, p map[string]any) (T, error) {
			var fresh A
			b, err := marshal(p)
			if err == nil {
				err = json.Unmarshal(b, &fresh)
			}
			if err != nil {
				return zero, &InvalidRequest{base("invalid_value", "guard: the permitted parameters do not decode into %T: %v", fresh, err)}
			}
			return fn(ctx, fresh)
		}, spec.RunOptions)
	}
}
