package svcsdk

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestRedactAndMask(t *testing.T) {
	f := newFake(t)
	f.script(ok200(map[string]any{"decision": "redact", "redacted_fields": []string{"parameters.card", "parameters.meta.ssn"}}))
	c, _ := newClient(t, f.URL)
	params := map[string]any{"card": "4242", "amount": 5, "meta": map[string]any{"ssn": "1", "k": 2}}
	got, err := c.Run(bg, ToolCall{Tool: "pay", Action: "charge", Parameters: params}, echo, RunOptions{})
	if err != nil || !sameJSON(got, map[string]any{"amount": 5, "meta": map[string]any{"k": 2}}) || params["card"] != "4242" {
		t.Fatal(got, err)
	}
	got, err = c.Run(bg, ToolCall{Tool: "pay", Action: "charge", Parameters: params}, echo, RunOptions{Mask: "[redacted]", UseMask: true})
	if err != nil || as[map[string]any](t, got)["card"] != "[redacted]" {
		t.Fatal(got, err)
	}
}

func TestBadRedactionPathFailsClosed(t *testing.T) {
	f := newFake(t)
	f.script(ok200(map[string]any{"decision": "redact", "redacted_fields": []string{"card"}}))
	c, _ := newClient(t, f.URL)
	ran := false
	_, err := c.Run(bg, ToolCall{Tool: "t", Action: "a", Parameters: map[string]any{"card": 1}},
		func(context.Context, map[string]any) (any, error) { ran = true; return nil, nil }, RunOptions{})
	var e *InvalidRedactionPath
	if !errors.As(err, &e) || e.ErrorCode != "invalid_redaction_path" || ran {
		t.Fatal(err)
	}
}

func TestDenyAndQuarantine(t *testing.T) {
	for _, dec := range []string{"deny", "quarantine", "bogus"} {
		f := newFake(t)
		f.script(ok200(map[string]any{"decision": dec, "reason": "nope", "decision_id": "d"}))
		c, _ := newClient(t, f.URL)
		ran := false
		_, err := c.Run(bg, ToolCall{Tool: "t", Action: "a"}, func(context.Context, map[string]any) (any, error) { ran = true; return nil, nil }, RunOptions{})
		var e *Denied
		want := dec
		if dec == "bogus" {
			want = "deny"
		}
		if !errors.As(err, &e) || e.Decision.Decision != want || ran {
			t.Fatal(dec, err)
		}
		var base *SvcError
		if !errors.As(err, &base) {
			t.Error("Denied is not an SvcError")
		}
	}
}

func TestRequireApprovalNoWait(t *testing.T) {
	f := newFake(t)
	tc := ToolCall{Tool: "t", Action: "a"}
	f.script(ok200(map[string]any{"decision": "require_approval", "approval_id": "ap1", "action_hash": mustHash(t, tc), "approval_expires_at": rfc3339(time.Minute)}))
	c, _ := newClient(t, f.URL)
	_, err := c.Run(bg, tc, echo, RunOptions{NoWait: true})
	var e *ApprovalRequired
	if !errors.As(err, &e) || e.Decision.ApprovalID != "ap1" {
		t.Fatal(err)
	}
}

func TestRequireApprovalWithoutIDIsDeny(t *testing.T) {
	f := newFake(t)
	f.script(ok200(map[string]any{"decision": "require_approval"}))
	c, _ := newClient(t, f.URL)
	_, err := c.Run(bg, ToolCall{Tool: "t", Action: "a"}, echo, RunOptions{})
	var e *Denied
	if !errors.As(err, &e) {
		t.Fatal(err)
	}
}

func TestRequireApprovalWithForeignHashRefused(t *testing.T) {
	f := newFake(t)
	f.script(ok200(map[string]any{"decision": "require_approval", "approval_id": "ap1", "action_hash": strings.Repeat("1", 64)}))
	c, _ := newClient(t, f.URL)
	_, err := c.Run(bg, ToolCall{Tool: "t", Action: "a"}, echo, RunOptions{})
	var e *ActionHashMismatch
	if !errors.As(err, &e) || len(f.reqs("/approvals/")) != 0 {
		t.Fatal(err)
	}
}

type mergeArgs struct {
	Repo   string `json:"repo"`
	PR     int    `json:"pr"`
	Method string `json:"method,omitempty"`
	Token  string `json:"token,omitempty"`
}

func TestGuardWithAStruct(t *testing.T) {
	f := newFake(t)
	f.script(ok200(map[string]any{"decision": "allow"}))
	c, _ := newClient(t, f.URL)
	merge := Guard(c, GuardSpec[mergeArgs]{Tool: "codehost", Action: "merge",
		Resource:   func(a mergeArgs) *string { return Str(a.Repo + "#" + itoa(a.PR)) },
		RunOptions: RunOptions{AuthorizeOptions: AuthorizeOptions{MutatesState: true}}},
		func(ctx context.Context, a mergeArgs) (string, error) {
			if DecisionFrom(ctx) == nil {
				t.Error("no decision in the context")
			}
			return a.Repo + "/" + itoa(a.PR) + "/" + a.Method + "/" + a.Token, nil
		})
	got, err := merge(bg, mergeArgs{Repo: "acme/api", PR: 42, Method: "squash"})
	if err != nil || got != "acme/api/42/squash/" {
		t.Fatal(got, err)
	}
	b := f.reqs("/authorize")[0].JSON()
	if !sameJSON(b["tool_call"], map[string]any{"tool": "codehost", "action": "merge", "resource": "acme/api#42",
		"parameters": map[string]any{"repo": "acme/api", "pr": 42, "method": "squash"}}) || b["mutates_state"] != true {
		t.Errorf("%v", b)
	}
	// A redacted field arrives as its zero value.
	f.script(ok200(map[string]any{"decision": "redact", "redacted_fields": []string{"parameters.token"}}))
	got, err = merge(bg, mergeArgs{Repo: "acme/api", PR: 7, Method: "rebase", Token: "secret"})
	if err != nil || got != "acme/api/7/rebase/" {
		t.Fatal(got, err)
	}
}

func itoa(i int) string { b, _ := Canonicalize(i); return string(b) }

// ---------------------------------------------------------------------------
// Approvals

var approvalTC = ToolCall{Tool: "Pay", Action: "charge", Resource: Str("cus_1"), Parameters: map[string]any{"amount": 100}}

func approvalBody(t *testing.T, status string, params map[string]any, hash string, over map[string]any) map[string]any {
	if params == nil {
		params = map[string]any{"amount": 100}
	}
	if hash == "" {
		tc := approvalTC
		tc.Parameters = params
		hash = mustHash(t, tc)
	}
	a := map[string]any{"approval_id": "ap1", "decision_id": "d1", "agent_id": "ag", "status": status, "action_hash": hash,
		"expires_at": rfc3339(time.Minute),
		"tool_call":  map[string]any{"tool": "pay", "action": "charge", "resource": "cus_1", "parameters": params}}
	for k, v := range over {
		a[k] = v
	}
	return a
}

func firstDecision(t *testing.T) map[string]any {
	return map[string]any{"decision": "require_approval", "approval_id": "ap1", "decision_id": "d1",
		"action_hash": mustHash(t, approvalTC), "approval_expires_at": rfc3339(time.Minute)}
}

// serve answers GET approvals from approvals in turn and authorize from
// decisions in turn (the last of each repeats).
func serve(f *fake, approvals []reply, decisions []map[string]any) {
	ai, di := 0, 0
	f.handle(func(r fakeReq) reply {
		f.mu.Lock()
		defer f.mu.Unlock()
		if strings.Contains(r.Path, "/approvals/") {
			a := approvals[min(ai, len(approvals)-1)]
			ai++
			return a
		}
		d := decisions[min(di, len(decisions)-1)]
		di++
		return ok200(d)
	})
}

func amount(_ context.Context, p map[string]any) (any, error) { return p["amount"], nil }

func TestApprovedThenPresented(t *testing.T) {
	f := newFake(t)
	serve(f, []reply{ok200(approvalBody(t, "PENDING", nil, "", nil)), ok200(approvalBody(t, "APPROVED", nil, "", nil))},
		[]map[string]any{firstDecision(t), {"decision": "allow", "reason": "approved", "decision_id": "d2"}})
	c, _ := newClient(t, f.URL)
	got, err := c.Run(bg, approvalTC, amount, RunOptions{})
	if err != nil || !sameJSON(got, 100) {
		t.Fatal(got, err)
	}
	for _, r := range f.reqs("/approvals/") {
		if !regexp.MustCompile(`^/v2/approvals/ap1\?wait=\d+$`).MatchString(r.Path) {
			t.Error(r.Path)
		}
	}
	if len(f.reqs("consume")) != 0 {
		t.Error("consume used")
	}
	rs := f.reqs("/authorize")
	if len(rs) != 2 {
		t.Fatal(len(rs))
	}
	first, second := rs[0].JSON(), rs[1].JSON()
	if _, ok := first["approval_id"]; ok || second["approval_id"] != "ap1" || first["request_id"] == second["request_id"] {
		t.Error(first, second)
	}
	if !sameJSON(second["tool_call"], first["tool_call"]) {
		t.Error("the presented call differs")
	}
}

func TestEdited(t *testing.T) {
	f := newFake(t)
	edited := map[string]any{"amount": 50}
	serve(f, []reply{ok200(approvalBody(t, "APPROVED", edited, "", nil))},
		[]map[string]any{firstDecision(t), {"decision": "allow", "reason": "approved"}})
	c, _ := newClient(t, f.URL)
	d, err := c.Authorize(bg, approvalTC, AuthorizeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.WaitForApproval(bg, d, 0)
	if err != nil || !a.Edited || !sameJSON(a.Parameters(), edited) || a.Call.Tool != "Pay" {
		t.Fatal(a, err)
	}
	serve(f, []reply{ok200(approvalBody(t, "APPROVED", edited, "", nil))},
		[]map[string]any{firstDecision(t), {"decision": "allow", "reason": "approved"}})
	got, err := c.Run(bg, approvalTC, amount, RunOptions{})
	rs := f.reqs("/authorize")
	if err != nil || !sameJSON(got, 50) || !sameJSON(as[map[string]any](t, rs[len(rs)-1].JSON()["tool_call"])["parameters"], edited) {
		t.Fatal(got, err)
	}
}

func TestEditWithWrongHashRefused(t *testing.T) {
	f := newFake(t)
	serve(f, []reply{ok200(approvalBody(t, "APPROVED", map[string]any{"amount": 50}, mustHash(t, approvalTC), nil))},
		[]map[string]any{firstDecision(t), {"decision": "allow"}})
	c, _ := newClient(t, f.URL)
	ran := false
	_, err := c.Run(bg, approvalTC, func(context.Context, map[string]any) (any, error) { ran = true; return nil, nil }, RunOptions{})
	var e *ActionHashMismatch
	if !errors.As(err, &e) || ran || len(f.reqs("/authorize")) != 1 {
		t.Fatal(err)
	}
}

func TestApprovalForAnotherToolRefused(t *testing.T) {
	f := newFake(t)
	other := approvalBody(t, "APPROVED", nil, "", nil)
	as[map[string]any](t, other["tool_call"])["tool"] = "bank"
	serve(f, []reply{ok200(other)}, []map[string]any{firstDecision(t)})
	c, _ := newClient(t, f.URL)
	_, err := c.Run(bg, approvalTC, amount, RunOptions{})
	var e *ActionHashMismatch
	if !errors.As(err, &e) {
		t.Fatal(err)
	}
}

func TestRejected(t *testing.T) {
	f := newFake(t)
	serve(f, []reply{ok200(approvalBody(t, "REJECTED", nil, "", map[string]any{"reason": "no"}))}, []map[string]any{firstDecision(t)})
	c, _ := newClient(t, f.URL)
	_, err := c.Run(bg, approvalTC, amount, RunOptions{})
	var e *ApprovalRejected
	if !errors.As(err, &e) || e.Approval.Status != "REJECTED" || e.ErrorCode != "approval_rejected" {
		t.Fatal(err)
	}
}

func TestExpiredStatus(t *testing.T) {
	f := newFake(t)
	serve(f, []reply{ok200(approvalBody(t, "EXPIRED", nil, "", nil))}, []map[string]any{firstDecision(t)})
	c, _ := newClient(t, f.URL)
	_, err := c.Run(bg, approvalTC, amount, RunOptions{})
	var e *ApprovalExpired
	if !errors.As(err, &e) || e.ErrorCode != "approval_expired" {
		t.Fatal(err)
	}
}

func TestCallerTimeout(t *testing.T) {
	f := newFake(t)
	serve(f, []reply{{status: 200, body: approvalBody(t, "PENDING", nil, "", nil), delay: 300 * time.Millisecond}}, []map[string]any{firstDecision(t)})
	c, _ := newClient(t, f.URL)
	t0 := time.Now()
	_, err := c.Run(bg, approvalTC, amount, RunOptions{ApprovalTimeout: 1500 * time.Millisecond})
	var e *ApprovalExpired
	if !errors.As(err, &e) || time.Since(t0) > 3500*time.Millisecond {
		t.Fatal(err, time.Since(t0))
	}
}

func TestExpiryBoundsTheWait(t *testing.T) {
	f := newFake(t)
	first := firstDecision(t)
	first["approval_expires_at"] = rfc3339(500 * time.Millisecond)
	serve(f, []reply{{status: 200, body: approvalBody(t, "PENDING", nil, "", map[string]any{"expires_at": first["approval_expires_at"]}),
		delay: 200 * time.Millisecond}}, []map[string]any{first})
	c, _ := newClient(t, f.URL)
	t0 := time.Now()
	_, err := c.Run(bg, approvalTC, amount, RunOptions{})
	var e *ApprovalExpired
	if !errors.As(err, &e) || time.Since(t0) > 4*time.Second {
		t.Fatal(err, time.Since(t0))
	}
}

func TestTransientFailuresRetried(t *testing.T) {
	f := newFake(t)
	serve(f, []reply{{status: 503, body: envelope(503, "ServiceUnavailable", "", "m")}, {status: 502}, ok200(approvalBody(t, "APPROVED", nil, "", nil))},
		[]map[string]any{firstDecision(t), {"decision": "allow"}})
	c, _ := newClient(t, f.URL)
	got, err := c.Run(bg, approvalTC, amount, RunOptions{})
	if err != nil || !sameJSON(got, 100) {
		t.Fatal(got, err)
	}
}

func TestPresentationDenied(t *testing.T) {
	f := newFake(t)
	serve(f, []reply{ok200(approvalBody(t, "APPROVED", nil, "", nil))},
		[]map[string]any{firstDecision(t), {"decision": "deny", "reason": "approval_consumed"}})
	c, _ := newClient(t, f.URL)
	_, err := c.Run(bg, approvalTC, amount, RunOptions{})
	var e *Denied
	if !errors.As(err, &e) || e.Decision.Reason != "approval_consumed" {
		t.Fatal(err)
	}
}

func TestUnknownStatusFailsClosed(t *testing.T) {
	f := newFake(t)
	serve(f, []reply{ok200(approvalBody(t, "MAYBE", nil, "", nil))}, []map[string]any{firstDecision(t)})
	c, _ := newClient(t, f.URL)
	_, err := c.Run(bg, approvalTC, amount, RunOptions{})
	var e *SvcError
	if TypeName(err) != "SvcError" || !errors.As(err, &e) || e.ErrorCode != "unknown_approval_status" {
		t.Fatal(err)
	}
}

func TestByIDAnd404(t *testing.T) {
	f := newFake(t)
	f.script(reply{status: 404, body: envelope(404, "NotFound", "not_found", "m")})
	c, _ := newClient(t, f.URL)
	_, err := c.WaitForApprovalID(bg, "nope", 2*time.Second)
	var e *SvcError
	if !errors.As(err, &e) || e.Status != 404 {
		t.Fatal(err)
	}
	// By id, an approved approval's own call is checked against its hash.
	f.script(ok200(approvalBody(t, "APPROVED", nil, "", nil)))
	a, err := c.WaitForApprovalID(bg, "ap1", 2*time.Second)
	if err != nil || a.Edited || a.Call.Tool != "pay" {
		t.Fatal(a, err)
	}
}

func TestWaitCancelledByContext(t *testing.T) {
	f := newFake(t)
	f.script(reply{status: 200, body: approvalBody(t, "PENDING", nil, "", nil), delay: 5 * time.Second})
	c, _ := newClient(t, f.URL)
	ctx, cancel := context.WithCancel(bg)
	time.AfterFunc(300*time.Millisecond, cancel)
	t0 := time.Now()
	_, err := c.WaitForApprovalID(ctx, "ap1", 0)
	if !errors.Is(err, context.Canceled) || time.Since(t0) > 800*time.Millisecond {
		t.Fatal(err, time.Since(t0))
	}
}

// ---------------------------------------------------------------------------
// Receipts

var receiptTC = ToolCall{Tool: "pay", Action: "charge", Parameters: map[string]any{"amount": 1}}

func serveReceipt(t *testing.T, f *fake, r map[string]any, d map[string]any) {
	if d == nil {
		d = map[string]any{"decision": "allow", "decision_id": r["decision_id"], "receipt_id": r["receipt_id"],
			"receipt_hash": r["receipt_hash"], "action_hash": mustHash(t, receiptTC)}
	}
	f.handle(func(req fakeReq) reply {
		if strings.HasPrefix(req.Path, "/v2/receipts/") {
			return ok200(r)
		}
		return ok200(d)
	})
}

func TestValidReceiptRuns(t *testing.T) {
	f := newFake(t)
	serveReceipt(t, f, makeReceipt(t, mustHash(t, receiptTC), true), nil)
	c, _ := newClient(t, f.URL, WithReceiptPublicKey(receiptPub))
	got, err := c.Run(bg, receiptTC, amount, RunOptions{AuthorizeOptions: AuthorizeOptions{MutatesState: true}})
	if err != nil || !sameJSON(got, 1) || len(f.reqs("/v2/receipts/")) != 1 {
		t.Fatal(got, err)
	}
}

func TestReadOnlyReceiptNotFetched(t *testing.T) {
	f := newFake(t)
	serveReceipt(t, f, makeReceipt(t, strings.Repeat("0", 64), true), nil)
	c, _ := newClient(t, f.URL, WithReceiptPublicKey(receiptPub))
	if _, err := c.Run(bg, receiptTC, amount, RunOptions{}); err != nil || len(f.reqs("/v2/receipts/")) != 0 {
		t.Fatal(err)
	}
}

func TestBadReceiptsRefused(t *testing.T) {
	good := makeReceipt(t, mustHash(t, receiptTC), true)
	tampered := map[string]any{}
	for k, v := range good {
		tampered[k] = v
	}
	tampered["decision"] = "deny"
	for name, r := range map[string]map[string]any{"tampered": tampered, "other call": makeReceipt(t, strings.Repeat("0", 64), true),
		"unsigned": makeReceipt(t, mustHash(t, receiptTC), false)} {
		f := newFake(t)
		var d map[string]any
		if name == "tampered" { // the decision must still name the stored receipt
			d = map[string]any{"decision": "allow", "receipt_id": r["receipt_id"], "decision_id": r["decision_id"]}
		}
		serveReceipt(t, f, r, d)
		c, _ := newClient(t, f.URL, WithReceiptPublicKey(receiptPub))
		ran := false
		_, err := c.Run(bg, receiptTC, func(context.Context, map[string]any) (any, error) { ran = true; return nil, nil },
			RunOptions{AuthorizeOptions: AuthorizeOptions{MutatesState: true}})
		var e *ReceiptInvalid
		if !errors.As(err, &e) || ran {
			t.Fatal(name, err)
		}
	}
}

// TestReceiptContextHash: a receipt with a non-empty context_hash is
// svc-receipt-2 (the hash covers the member), one whose context_hash is
// absent, null or "" is svc-receipt-1, and a context_hash of another type or
// form makes the hash invalid (the vectors of testdata/sdk/receipts.json
// cover the rest).
func TestReceiptContextHash(t *testing.T) {
	v1 := makeReceipt(t, mustHash(t, receiptTC), true)
	ctx := strings.Repeat("c", 64)
	v2 := map[string]any{"context_hash": ctx}
	for k, v := range v1 {
		if k != "receipt_hash" && k != "signature" {
			v2[k] = v
		}
	}
	h1, err1 := ReceiptHash(v1)
	h2, err2 := ReceiptHash(v2)
	if err1 != nil || err2 != nil || h1 == h2 || h1 != v1["receipt_hash"] {
		t.Fatal(h1, err1, h2, err2)
	}
	obj := map[string]any{"context_hash": ctx}
	for _, f := range ReceiptHashedFields {
		obj[f] = v1[f]
	}
	b, err := Canonicalize(obj)
	if sum := sha256.Sum256(b); err != nil || hex.EncodeToString(sum[:]) != h2 {
		t.Fatalf("svc-receipt-2 is not svc-receipt-1's object plus context_hash: %v", err)
	}
	with := func(v any) map[string]any {
		r := map[string]any{"context_hash": v}
		for k, x := range v1 {
			r[k] = x
		}
		return r
	}
	for _, v := range []any{nil, ""} {
		if res := VerifyReceipt(with(v), receiptPub); !res.HashValid || !res.SignatureValid {
			t.Errorf("context_hash %#v: %+v", v, res)
		}
	}
	for _, v := range []any{json.Number("1"), true, map[string]any{}, []any{ctx}, strings.ToUpper(ctx), ctx[:63], ctx + "c", " " + ctx} {
		if _, err := ReceiptHash(with(v)); err == nil {
			t.Errorf("context_hash %#v: no error", v)
		}
		if res := VerifyReceipt(with(v), receiptPub); res.HashValid || res.Error == "" {
			t.Errorf("context_hash %#v: %+v", v, res)
		}
	}
	if ReceiptScheme != "svc-receipt-1" || ReceiptSchemeContext != "svc-receipt-2" {
		t.Error(ReceiptScheme, ReceiptSchemeContext)
	}
}

func TestReceiptNotFound(t *testing.T) {
	f := newFake(t)
	f.handle(func(req fakeReq) reply {
		if strings.HasPrefix(req.Path, "/v2/receipts/") {
			return reply{status: 404, body: envelope(404, "NotFound", "", "m")}
		}
		return ok200(map[string]any{"decision": "allow", "receipt_id": "r1"})
	})
	c, _ := newClient(t, f.URL, WithReceiptPublicKey(receiptPub))
	_, err := c.Run(bg, receiptTC, amount, RunOptions{AuthorizeOptions: AuthorizeOptions{MutatesState: true}})
	var e *ReceiptInvalid
	if !errors.As(err, &e) || e.ErrorCode != "receipt_not_found" || e.Status != 404 {
		t.Fatal(err)
	}
}
