package mcpguard

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	svcsdk "svc/sdk/go"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// jsonEq compares two values as JSON.
func jsonEq(t *testing.T, got, want any) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	var gv, wv any
	_ = json.Unmarshal(g, &gv)
	_ = json.Unmarshal(w, &wv)
	if !reflect.DeepEqual(gv, wv) {
		t.Fatalf("got %s, want %s", g, w)
	}
}

func mustCall(t *testing.T, s *setup, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := s.session.CallTool(ctxT(t), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("CallTool(%s): %v", name, err)
	}
	return res
}

func TestLiveAllowSendsTheArguments(t *testing.T) {
	s := newSetup(t, Options{}, nil)
	args := map[string]any{"n": 1, "s": "x", "nested": map[string]any{"a": []any{1, 2.5, "three"}}}
	res := mustCall(t, s, "allow_tool", args)
	if res.IsError || resultText(res) != "allow_tool ran" {
		t.Fatalf("result %+v (%q)", res, resultText(res))
	}
	got := s.rec.got("allow_tool")
	if len(got) != 1 {
		t.Fatalf("the server received %d calls, want 1", len(got))
	}
	jsonEq(t, got[0], args)
	d := s.lastDecision(t)
	if d.Decision != "allow" || d.Reason != "live_allow" || d.DecisionID == "" {
		t.Fatalf("decision %s %s %q", d.Decision, d.Reason, d.DecisionID)
	}
	if d.Receipt == nil { // a mutating call with a pinned key: verified before sending
		t.Fatal("the receipt of the mutating call was not verified")
	}
	rec := s.fx.decision(t, d.DecisionID)
	if rec["tool"] != "mcp:guarded" || rec["action"] != "allow_tool" || rec["mutates_state"] != true {
		t.Fatalf("svc recorded %v", rec)
	}
}

func TestLiveDenyIsAResultAndNothingIsSent(t *testing.T) {
	s := newSetup(t, Options{}, nil)
	res := mustCall(t, s, "deny_tool", map[string]any{"x": 1})
	if !res.IsError {
		t.Fatal("a denied call's result must have IsError")
	}
	sc := structured(t, res)
	if sc["decision"] != "deny" || sc["reason"] != "live_deny" || sc["decision_id"] == "" || sc["receipt_id"] == "" {
		t.Fatalf("structuredContent %v", sc)
	}
	if len(sc) != 4 {
		t.Fatalf("structuredContent has keys beyond the proxy's four: %v", sc)
	}
	if txt := resultText(res); !strings.Contains(txt, "denied") || !strings.Contains(txt, "live_deny") {
		t.Fatalf("text %q does not name the decision and reason", txt)
	}
	if n := s.rec.total(); n != 0 {
		t.Fatalf("the server received %d calls", n)
	}
}

func TestLiveQuarantineIsAResultAndNothingIsSent(t *testing.T) {
	s := newSetup(t, Options{}, nil)
	res := mustCall(t, s, "quarantine_tool", nil)
	sc := structured(t, res)
	if !res.IsError || sc["decision"] != "quarantine" || sc["reason"] != "live_quarantine" {
		t.Fatalf("result %v %v", res.IsError, sc)
	}
	if !strings.Contains(resultText(res), "quarantined") {
		t.Fatalf("text %q", resultText(res))
	}
	if n := s.rec.total(); n != 0 {
		t.Fatalf("the server received %d calls", n)
	}
}

func TestLiveRedactSendsWithoutTheRedactedFields(t *testing.T) {
	s := newSetup(t, Options{}, nil)
	res := mustCall(t, s, "redact_tool", map[string]any{"card": "4111111111111111", "amount": 5,
		"meta": map[string]any{"ssn": "123-45-6789", "keep": true}})
	if res.IsError {
		t.Fatalf("result %+v", res)
	}
	got := s.rec.got("redact_tool")
	if len(got) != 1 {
		t.Fatalf("the server received %d calls", len(got))
	}
	jsonEq(t, got[0], map[string]any{"amount": 5, "meta": map[string]any{"keep": true}})
	if d := s.lastDecision(t); d.Decision != "redact" {
		t.Fatalf("decision %s", d.Decision)
	}
}

func TestLiveApprovalApprovedIsSentOnce(t *testing.T) {
	s := newSetup(t, Options{}, nil)
	done := s.fx.approver(s.agent.id, "approve", nil)
	args := map[string]any{"amount": 40, "to": "acct-1"}
	res := mustCall(t, s, "approval_tool", args)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("result %+v %v", resultText(res), res.StructuredContent)
	}
	got := s.rec.got("approval_tool")
	if len(got) != 1 {
		t.Fatalf("the server received %d calls, want 1", len(got))
	}
	jsonEq(t, got[0], args)
	if d := s.lastDecision(t); d.Decision != "allow" || d.Reason != "approved" {
		t.Fatalf("the presenting decision is %s %s", d.Decision, d.Reason)
	}
}

func TestLiveApprovalEditedSendsTheEditedArguments(t *testing.T) {
	s := newSetup(t, Options{}, nil)
	edited := map[string]any{"amount": 1, "to": "acct-1"}
	done := s.fx.approver(s.agent.id, "edit", edited)
	res := mustCall(t, s, "approval_tool", map[string]any{"amount": 4000, "to": "acct-1"})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("result %q", resultText(res))
	}
	got := s.rec.got("approval_tool")
	if len(got) != 1 {
		t.Fatalf("the server received %d calls", len(got))
	}
	jsonEq(t, got[0], edited)
}

func TestLiveApprovalRejectedIsNotSent(t *testing.T) {
	s := newSetup(t, Options{}, nil)
	done := s.fx.approver(s.agent.id, "reject", nil)
	res := mustCall(t, s, "approval_tool", map[string]any{"amount": 7})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	sc := structured(t, res)
	if !res.IsError || sc["decision"] != "require_approval" || sc["approval_status"] != "REJECTED" || sc["approval_id"] == "" {
		t.Fatalf("result %v %v", res.IsError, sc)
	}
	if !strings.Contains(resultText(res), "rejected") {
		t.Fatalf("text %q", resultText(res))
	}
	if n := s.rec.total(); n != 0 {
		t.Fatalf("the server received %d calls", n)
	}
}

func TestLiveNoWaitAnswersTheApprovalThenSendsOnceApproved(t *testing.T) {
	s := newSetup(t, Options{NoWait: true}, nil)
	args := map[string]any{"amount": 12}
	res := mustCall(t, s, "approval_tool", args)
	sc := structured(t, res)
	aid, _ := sc["approval_id"].(string)
	if !res.IsError || sc["decision"] != "require_approval" || sc["reason"] != "live_approval" || aid == "" ||
		sc["approval_expires_at"] == "" || sc["decision_id"] == "" || sc["approval_status"] != "PENDING" {
		t.Fatalf("result %v %v", res.IsError, sc)
	}
	if !strings.Contains(resultText(res), aid) {
		t.Fatalf("text %q does not name the approval", resultText(res))
	}
	// Asked again while pending: the same approval, no new one, nothing sent.
	res = mustCall(t, s, "approval_tool", args)
	if sc2 := structured(t, res); sc2["approval_id"] != aid || sc2["approval_status"] != "PENDING" {
		t.Fatalf("second answer %v", sc2)
	}
	if n := s.rec.total(); n != 0 {
		t.Fatalf("the server received %d calls", n)
	}
	if err := s.fx.decide(aid, "approve", nil); err != nil {
		t.Fatal(err)
	}
	res = mustCall(t, s, "approval_tool", args)
	if res.IsError {
		t.Fatalf("after approval: %q %v", resultText(res), res.StructuredContent)
	}
	got := s.rec.got("approval_tool")
	if len(got) != 1 {
		t.Fatalf("the server received %d calls", len(got))
	}
	jsonEq(t, got[0], args)
	// The approval is consumed: the same call asks again.
	res = mustCall(t, s, "approval_tool", args)
	if sc3 := structured(t, res); !res.IsError || sc3["approval_id"] == aid || sc3["approval_id"] == "" {
		t.Fatalf("third answer %v %v", res.IsError, sc3)
	}
	if n := s.rec.total(); n != 1 {
		t.Fatalf("the server received %d calls, want 1", n)
	}
}

func TestLiveNoWaitRejected(t *testing.T) {
	s := newSetup(t, Options{NoWait: true}, nil)
	args := map[string]any{"amount": 3}
	aid, _ := structured(t, mustCall(t, s, "approval_tool", args))["approval_id"].(string)
	if aid == "" {
		t.Fatal("no approval_id")
	}
	if err := s.fx.decide(aid, "reject", nil); err != nil {
		t.Fatal(err)
	}
	res := mustCall(t, s, "approval_tool", args)
	if sc := structured(t, res); !res.IsError || sc["approval_id"] != aid || sc["approval_status"] != "REJECTED" {
		t.Fatalf("after rejection %v %v", res.IsError, sc)
	}
	if n := s.rec.total(); n != 0 {
		t.Fatalf("the server received %d calls", n)
	}
}

func TestLiveReadOnlyHintDrivesMutatesState(t *testing.T) {
	s := newSetup(t, Options{}, nil)
	// read_tool is annotated readOnlyHint: mutates_state false, allowed.
	res := mustCall(t, s, "read_tool", map[string]any{"q": "x"})
	if res.IsError {
		t.Fatalf("read_tool: %q", resultText(res))
	}
	d := s.lastDecision(t)
	if rec := s.fx.decision(t, d.DecisionID); rec["mutates_state"] != false || d.Decision != "allow" {
		t.Fatalf("read_tool decision %s %s, recorded %v", d.Decision, d.Reason, rec["mutates_state"])
	}
	// plain_tool has no annotation: mutating, denied by the same rule.
	res = mustCall(t, s, "plain_tool", map[string]any{"q": "x"})
	sc := structured(t, res)
	if !res.IsError || sc["reason"] != "live_mutating" {
		t.Fatalf("plain_tool: %v %v", res.IsError, sc)
	}
	if rec := s.fx.decision(t, str(sc, "decision_id")); rec["mutates_state"] != true {
		t.Fatalf("plain_tool recorded mutates_state %v", rec["mutates_state"])
	}
	// The guard listed the tools once, for the first call.
	if n := s.rec.listings(); n != 1 {
		t.Fatalf("the server was listed %d times, want 1", n)
	}
	if got := s.rec.got("read_tool"); len(got) != 1 || len(s.rec.got("plain_tool")) != 0 {
		t.Fatalf("the server received read_tool %d, plain_tool %d", len(got), len(s.rec.got("plain_tool")))
	}
}

func TestLiveAListingOfTheApplicationIsLearned(t *testing.T) {
	s := newSetup(t, Options{}, nil)
	lr, err := s.session.ListTools(ctxT(t), nil)
	if err != nil || len(lr.Tools) != len(toolNames) {
		t.Fatalf("ListTools: %v %v", lr, err)
	}
	res := mustCall(t, s, "read_tool", nil)
	if res.IsError {
		t.Fatalf("read_tool: %q", resultText(res))
	}
	if n := s.rec.listings(); n != 1 {
		t.Fatalf("the server was listed %d times, want 1 (the application's)", n)
	}
}

func TestLiveListChangedIsRelearned(t *testing.T) {
	// Under protocol 2026-07-28 a server announces changes only to clients
	// that subscribe, which go-sdk does when a handler is set.
	s := newSetup(t, Options{}, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {}})
	res := mustCall(t, s, "plain_tool", nil)
	if sc := structured(t, res); sc["reason"] != "live_mutating" {
		t.Fatalf("plain_tool before the change: %v", sc)
	}
	tc := s.guard.cache(s.session)
	gen := tc.generation()
	s.server.RemoveTools("plain_tool")
	s.server.AddTool(&mcp.Tool{Name: "plain_tool", Description: "plain_tool", InputSchema: json.RawMessage(`{"type":"object"}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, recordingTool(s.rec, "plain_tool"))
	if !waitFor(10*time.Second, func() bool { return tc.generation() > gen }) {
		t.Fatal("notifications/tools/list_changed did not reach the guard within 10 s")
	}
	res = mustCall(t, s, "plain_tool", nil)
	if res.IsError {
		t.Fatalf("plain_tool after it became read-only: %q", resultText(res))
	}
	if len(s.rec.got("plain_tool")) != 1 {
		t.Fatal("plain_tool did not reach the server once")
	}
}

func TestLiveRunIDFromMeta(t *testing.T) {
	s := newSetup(t, Options{RunID: "fallback-run"}, nil)
	_, err := s.session.CallTool(ctxT(t), &mcp.CallToolParams{Name: "allow_tool", Arguments: map[string]any{},
		Meta: mcp.Meta{"svc/run_id": "run-from-meta"}})
	if err != nil {
		t.Fatal(err)
	}
	if rec := s.fx.decision(t, s.lastDecision(t).DecisionID); rec["run_id"] != "run-from-meta" {
		t.Fatalf("run_id %v", rec["run_id"])
	}
	mustCall(t, s, "allow_tool", nil)
	if rec := s.fx.decision(t, s.lastDecision(t).DecisionID); rec["run_id"] != "fallback-run" {
		t.Fatalf("run_id %v", rec["run_id"])
	}
	if len(s.rec.got("allow_tool")) != 2 {
		t.Fatal("allow_tool did not reach the server twice")
	}
}

func TestLiveRefusalsAsErrors(t *testing.T) {
	s := newSetup(t, Options{RefusalsAsErrors: true, NoWait: true}, nil)
	_, err := s.session.CallTool(ctxT(t), &mcp.CallToolParams{Name: "deny_tool"})
	var denied *svcsdk.Denied
	if !errors.As(err, &denied) || denied.Decision.Reason != "live_deny" {
		t.Fatalf("error %v", err)
	}
	_, err = s.session.CallTool(ctxT(t), &mcp.CallToolParams{Name: "approval_tool"})
	var required *svcsdk.ApprovalRequired
	if !errors.As(err, &required) || required.Decision.ApprovalID == "" {
		t.Fatalf("error %v", err)
	}
	_, err = s.session.CallTool(ctxT(t), &mcp.CallToolParams{Name: "approval_tool"})
	var again *svcsdk.ApprovalRequired
	if !errors.As(err, &again) || again.Decision.ApprovalID != required.Decision.ApprovalID {
		t.Fatalf("second error %v", err)
	}
	if n := s.rec.total(); n != 0 {
		t.Fatalf("the server received %d calls", n)
	}
}

func TestLivePlainCallTool(t *testing.T) {
	// A client without the guard installed: CallTool guards the call.
	fx := sharedFixtures(t)
	a := fx.agent(t)
	g, err := New(fx.client(t, a), Options{ServerKey: serverKey})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	cs := connect(t, newServer(rec), mcp.NewClient(&mcp.Implementation{Name: "plain", Version: "1"}, nil))
	res, err := CallTool(ctxT(t), g, cs, &mcp.CallToolParams{Name: "deny_tool", Arguments: map[string]any{"a": 1}})
	if err != nil || !res.IsError || structured(t, res)["reason"] != "live_deny" {
		t.Fatalf("deny: %v %v", res, err)
	}
	res, err = CallTool(ctxT(t), g, cs, &mcp.CallToolParams{Name: "allow_tool", Arguments: map[string]any{"a": 1}})
	if err != nil || res.IsError {
		t.Fatalf("allow: %v %v", res, err)
	}
	if got := rec.got("allow_tool"); len(got) != 1 || rec.total() != 1 {
		t.Fatalf("the server received %v", rec.calls)
	}
}

func TestLivePlainCallToolOnAGuardedClientDecidesOnce(t *testing.T) {
	s := newSetup(t, Options{}, nil)
	res, err := CallTool(ctxT(t), s.guard, s.session, &mcp.CallToolParams{Name: "allow_tool", Arguments: map[string]any{"b": 2}})
	if err != nil || res.IsError {
		t.Fatalf("%v %v", res, err)
	}
	if n := s.decisionCount(); n != 1 {
		t.Fatalf("%d decisions, want 1", n)
	}
	if got := s.rec.got("allow_tool"); len(got) != 1 {
		t.Fatalf("the server received %d calls", len(got))
	}
}

func TestLiveSvcStoppedFailsClosed(t *testing.T) {
	gw := startGateway(t)
	defer gw.stop()
	fx := newFixtures(t, gw)
	a := fx.agent(t)
	c, err := svcsdk.New(gw.url, a.token, svcsdk.WithSigningKey(a.key), svcsdk.WithTimeout(2*time.Second),
		svcsdk.WithFailOpenTools(svcsdk.FailOpenTool{Tool: "mcp:" + serverKey})) // never for mutating calls
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g, err := New(c, Options{ServerKey: serverKey})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	client := mcp.NewClient(&mcp.Implementation{Name: "stopped", Version: "1"}, nil)
	g.Install(client)
	cs := connect(t, newServer(rec), client)
	if res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "allow_tool"}); err != nil || res.IsError {
		t.Fatalf("before the stop: %v %v", res, err)
	}
	gw.stop()
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "allow_tool", Arguments: map[string]any{"after": true}})
	var un *svcsdk.SvcUnavailable
	if err == nil || !errors.As(err, &un) || res != nil {
		t.Fatalf("with svc stopped: %v, %v (want an *svcsdk.SvcUnavailable error)", res, err)
	}
	if !strings.Contains(err.Error(), "not sent") {
		t.Fatalf("error %q", err)
	}
	if n := rec.total(); n != 1 {
		t.Fatalf("the server received %d calls, want 1 (before the stop)", n)
	}
}

func TestLiveNoWaitExpiredApprovalAsksAgain(t *testing.T) {
	s := newSetup(t, Options{NoWait: true}, nil)
	args := map[string]any{"amount": 9}
	aid, _ := structured(t, mustCall(t, s, "approval_tool", args))["approval_id"].(string)
	if aid == "" {
		t.Fatal("no approval_id")
	}
	// SVC_APPROVAL_TTL_SECS=5: wait until svc says EXPIRED.
	if !waitFor(20*time.Second, func() bool {
		st, a := call(s.fx.gw.url, "GET", "/v2/approvals/"+aid, s.fx.op, nil)
		m, _ := a.(map[string]any)
		return st == 200 && m["status"] == "EXPIRED"
	}) {
		t.Fatal("the approval did not expire within 20 s")
	}
	res := mustCall(t, s, "approval_tool", args)
	sc := structured(t, res)
	if !res.IsError || sc["approval_status"] != "PENDING" || sc["approval_id"] == aid || sc["approval_id"] == "" {
		t.Fatalf("after expiry: %v %v", res.IsError, sc)
	}
	if n := s.rec.total(); n != 0 {
		t.Fatalf("the server received %d calls", n)
	}
}

func TestLiveApprovalTimeoutAnswersPendingThenTheSameCallIsSent(t *testing.T) {
	s := newSetup(t, Options{ApprovalTimeout: 300 * time.Millisecond}, nil)
	args := map[string]any{"amount": 5}
	res := mustCall(t, s, "approval_tool", args) // nobody decides within 300 ms
	sc := structured(t, res)
	aid, _ := sc["approval_id"].(string)
	if !res.IsError || sc["approval_status"] != "PENDING" || aid == "" {
		t.Fatalf("after the wait's timeout: %v %v", res.IsError, sc)
	}
	if err := s.fx.decide(aid, "approve", nil); err != nil {
		t.Fatal(err)
	}
	res = mustCall(t, s, "approval_tool", args) // finds the remembered approval, APPROVED
	if res.IsError {
		t.Fatalf("after approval: %q", resultText(res))
	}
	if got := s.rec.got("approval_tool"); len(got) != 1 {
		t.Fatalf("the server received %d calls", len(got))
	}
	if d := s.lastDecision(t); d.Reason != "approved" {
		t.Fatalf("presenting decision %s %s", d.Decision, d.Reason)
	}
}

func TestLiveCancelledWaitIsAnErrorAndNothingIsSent(t *testing.T) {
	s := newSetup(t, Options{}, nil)
	ctx, cancel := context.WithCancel(ctxT(t))
	go func() {
		// cancel once the approval exists, that is while the guard waits
		if _, err := s.fx.pendingApproval(s.agent.id, 20*time.Second); err == nil {
			cancel()
		}
	}()
	res, err := s.session.CallTool(ctx, &mcp.CallToolParams{Name: "approval_tool", Arguments: map[string]any{"x": 1}})
	if err == nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v %v", res, err)
	}
	if n := s.rec.total(); n != 0 {
		t.Fatalf("the server received %d calls", n)
	}
}

type transfer struct {
	Amount int    `json:"amount"`
	To     string `json:"to"`
	Card   string `json:"card,omitempty"`
}

func TestLiveStructArguments(t *testing.T) {
	s := newSetup(t, Options{}, nil)
	mustCall(t, s, "redact_tool", transfer{Amount: 3, To: "acct-2", Card: "4111"})
	got := s.rec.got("redact_tool")
	if len(got) != 1 {
		t.Fatalf("the server received %d calls", len(got))
	}
	jsonEq(t, got[0], map[string]any{"amount": 3, "to": "acct-2"})
}
