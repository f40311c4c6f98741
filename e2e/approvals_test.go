package e2e

// Approvals end to end (SPEC 3 Approval, 4.3, 4.9; CONTRACT §4, §5): created
// by a require_approval decision, decided once over REST or the chat
// button, presented once on authorize, consumed once; the abuse limits; and
// single use under 100 concurrent consumers on each backend.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/testkit"
	"svc/testkit/gateway"
)

const chatSecret = "chat-signing-secret-for-tests"

func apGet(t testing.TB, s *gateway.Server, tok, id string) map[string]any {
	t.Helper()
	return testkit.Obj(t, s.Want(t, 200, "GET", "/v2/approvals/"+id, tok, nil))
}

func apDecide(t testing.TB, s *gateway.Server, tok, id, op string, status int, body any) map[string]any {
	t.Helper()
	raw := s.Want(t, status, "POST", "/v2/approvals/"+id+"/"+op, tok, body)
	if status >= 400 {
		return gateway.Envelope(t, raw, status, "v2", "")
	}
	return testkit.Obj(t, raw)
}

// chatRequest posts a chat-platform callback signed with secret at the
// given timestamp; tamper changes the body after signing.
func chatRequest(t testing.TB, s *gateway.Server, secret string, ts time.Time, value, action string, user map[string]any, tamper bool) (*http.Response, []byte) {
	t.Helper()
	payload, _ := json.Marshal(map[string]any{"type": "block_actions", "user": user,
		"actions": []map[string]any{{"action_id": action, "value": value}}})
	body := "payload=" + url.QueryEscape(string(payload))
	stamp := strconv.FormatInt(ts.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("v0:" + stamp + ":" + body))
	sig := "v0=" + hex.EncodeToString(mac.Sum(nil))
	if tamper {
		body = strings.Replace(body, "approve", "reject", 1)
	}
	req, err := http.NewRequest("POST", s.Base+"/v1/callbacks/chat", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Chat-Request-Timestamp", stamp)
	req.Header.Set("X-Chat-Signature", sig)
	resp, err := s.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, raw
}

func TestE2EApprovals(t *testing.T) {
	t.Parallel()
	gateway.ForModes(t, func(t *testing.T, backend string) {
		s := gateway.Start(t, backend, map[string]string{"SVC_RATE_LIMIT_CAPACITY": "100000", "SVC_CHAT_SIGNING_SECRET": chatSecret,
			"SVC_APPROVAL_CALLBACK_IP_LIMIT": "100000", "SVC_APPROVAL_ATTEMPT_LIMIT": "1000"})
		tenantID, admin := s.Tenant(t, "ap-"+testkit.Uniq())

		t.Run("lifecycle", func(t *testing.T) {
			tok, agentID, id := gateway.ApRequire(t, s, admin)
			a := apGet(t, s, admin, id)
			if a["status"] != "PENDING" || a["agent_id"] != agentID || a["approval_id"] != id || a["consumed_at"] != nil ||
				a["decided_at"] != nil || len(testkit.Str(t, a, "action_hash")) != 64 || len(testkit.Str(t, a, "decision_id")) != 36 {
				t.Fatalf("new approval: %v", a)
			}
			tc, _ := a["tool_call"].(map[string]any)
			if tc["tool"] != "crm" || tc["action"] != "update_contact" {
				t.Fatalf("tool_call %v", a["tool_call"])
			}
			stats := testkit.Obj(t, s.Want(t, 200, "GET", "/v2/tenants/stats", admin, nil))
			if n, _ := stats["pending_approvals"].(float64); n < 1 {
				t.Errorf("pending_approvals %v, want >= 1", stats["pending_approvals"])
			}
			list := testkit.Arr(t, s.Want(t, 200, "GET", "/v2/approvals?agent_id="+agentID, admin, nil))
			if len(list) != 1 || list[0]["approval_id"] != id {
				t.Fatalf("list by agent: %v", list)
			}
			// Presented while pending: not granted.
			gateway.AzDecide(t, s, tok, gateway.ApCall(map[string]any{"x": 1}, map[string]any{"approval_id": id}), "deny", "approval_not_granted")
			e := apDecide(t, s, admin, id, "approve", 400, map[string]any{"reason": "no approver"})
			if gateway.Detail(e, "field") != "approver_user_id" {
				t.Errorf("missing approver: %v", e)
			}
			apDecide(t, s, admin, id, "approve", 400, map[string]any{"approver_user_id": "  "})
			a = apDecide(t, s, admin, id, "approve", 200, map[string]any{"approver_user_id": "alice", "reason": "looks fine"})
			if a["status"] != "APPROVED" || a["approver_user_id"] != "alice" || a["reason"] != "looks fine" || a["decided_at"] == nil {
				t.Fatalf("approved: %v", a)
			}
			apDecide(t, s, admin, id, "approve", 409, map[string]any{"approver_user_id": "alice"})
			apDecide(t, s, admin, id, "reject", 409, map[string]any{"approver_user_id": "alice"})
			gateway.AzDecide(t, s, tok, gateway.ApCall(map[string]any{"x": 2}, map[string]any{"approval_id": id}), "deny", "approval_mismatch")
			ok := gateway.AzDecide(t, s, tok, gateway.ApCall(map[string]any{"x": 1}, map[string]any{"approval_id": id}), "allow", "approved")
			if len(testkit.Str(t, ok, "receipt_id")) != 36 {
				t.Errorf("approved allow without a receipt: %v", ok)
			}
			gateway.AzDecide(t, s, tok, gateway.ApCall(map[string]any{"x": 1}, map[string]any{"approval_id": id}), "deny", "approval_consumed")
			apDecide(t, s, tok, id, "consume", 409, nil)
			a = apGet(t, s, tok, id)
			if a["status"] != "APPROVED" || a["consumed_at"] == nil {
				t.Fatalf("after use: %v", a)
			}
			// The audit trail names each step.
			s.WaitAudit(t, admin, "event_type=approval_approved", "approval_approved audit", func(e map[string]any) bool { return true })
		})

		t.Run("reject", func(t *testing.T) {
			tok, _, id := gateway.ApRequire(t, s, admin)
			a := apDecide(t, s, admin, id, "reject", 200, map[string]any{"approver_user_id": "bob"})
			if a["status"] != "REJECTED" {
				t.Fatalf("rejected: %v", a)
			}
			gateway.AzDecide(t, s, tok, gateway.ApCall(map[string]any{"x": 1}, map[string]any{"approval_id": id}), "deny", "approval_not_granted")
			apDecide(t, s, tok, id, "consume", 409, nil)
			apDecide(t, s, admin, id, "approve", 409, map[string]any{"approver_user_id": "bob"})
		})

		t.Run("edit", func(t *testing.T) {
			tok, _, id := gateway.ApRequire(t, s, admin)
			before := testkit.Str(t, apGet(t, s, admin, id), "action_hash")
			e := apDecide(t, s, admin, id, "edit", 400, map[string]any{"approver_user_id": "carol"})
			if gateway.Detail(e, "field") != "parameters" {
				t.Errorf("edit without parameters: %v", e)
			}
			apDecide(t, s, admin, id, "edit", 400, map[string]any{"approver_user_id": "carol", "parameters": "x=3"})
			a := apDecide(t, s, admin, id, "edit", 200, map[string]any{"approver_user_id": "carol", "parameters": map[string]any{"x": 3}})
			tc, _ := a["tool_call"].(map[string]any)
			params, _ := tc["parameters"].(map[string]any)
			if a["status"] != "APPROVED" || params["x"] != float64(3) || a["action_hash"] == before {
				t.Fatalf("edited: %v", a)
			}
			gateway.AzDecide(t, s, tok, gateway.ApCall(map[string]any{"x": 1}, map[string]any{"approval_id": id}), "deny", "approval_mismatch")
			got := gateway.AzDecide(t, s, tok, gateway.ApCall(map[string]any{"x": 3}, map[string]any{"approval_id": id}), "allow", "approved")
			if got["action_hash"] != a["action_hash"] {
				t.Errorf("presented hash %v, edited %v", got["action_hash"], a["action_hash"])
			}
			apDecide(t, s, admin, id, "edit", 409, map[string]any{"approver_user_id": "carol", "parameters": map[string]any{}})
		})

		t.Run("consume and roles", func(t *testing.T) {
			tok, _, id := gateway.ApRequire(t, s, admin)
			_, approver := s.OpToken(t, admin, "approver-"+testkit.Uniq(), "approver")
			_, viewer := s.OpToken(t, admin, "viewer-"+testkit.Uniq(), "viewer")
			apDecide(t, s, viewer, id, "approve", 403, map[string]any{"approver_user_id": "v"})
			apDecide(t, s, tok, id, "approve", 403, map[string]any{"approver_user_id": "agent"})
			apDecide(t, s, tok, id, "consume", 409, nil) // pending
			apDecide(t, s, approver, id, "approve", 200, map[string]any{"approver_user_id": "dave"})
			apDecide(t, s, viewer, id, "consume", 403, nil)
			apDecide(t, s, approver, id, "consume", 403, nil)
			otherTok, _, _ := gateway.ApRequire(t, s, admin)
			apDecide(t, s, otherTok, id, "consume", 404, nil) // another agent's approval
			s.Want(t, 404, "GET", "/v2/approvals/"+id, otherTok, nil)
			// An agent reads its own approvals by id; the list is an
			// operator endpoint (CONTRACT §2).
			s.Want(t, 403, "GET", "/v2/approvals", otherTok, nil)
			a := apDecide(t, s, tok, id, "consume", 200, nil)
			if a["consumed_at"] == nil {
				t.Fatalf("consumed: %v", a)
			}
			apDecide(t, s, tok, id, "consume", 409, nil)
			gateway.AzDecide(t, s, tok, gateway.ApCall(map[string]any{"x": 1}, map[string]any{"approval_id": id}), "deny", "approval_consumed")
			// An admin may consume too.
			_, _, id2 := gateway.ApRequire(t, s, admin)
			apDecide(t, s, admin, id2, "approve", 200, map[string]any{"approver_user_id": "dave"})
			apDecide(t, s, admin, id2, "consume", 200, nil)
		})

		t.Run("tenant isolation and bad input", func(t *testing.T) {
			_, _, id := gateway.ApRequire(t, s, admin)
			_, otherAdmin := s.Tenant(t, "ap-other-"+testkit.Uniq())
			s.Want(t, 404, "GET", "/v2/approvals/"+id, otherAdmin, nil)
			apDecide(t, s, otherAdmin, id, "approve", 404, map[string]any{"approver_user_id": "mallory"})
			apDecide(t, s, otherAdmin, id, "consume", 404, nil)
			if l := testkit.Arr(t, s.Want(t, 200, "GET", "/v2/approvals", otherAdmin, nil)); len(l) != 0 {
				t.Errorf("other tenant lists %d approvals", len(l))
			}
			if apGet(t, s, admin, id)["status"] != "PENDING" {
				t.Error("another tenant changed the approval")
			}
			apDecide(t, s, admin, testkit.RandomUUID(), "approve", 404, map[string]any{"approver_user_id": "x"})
			apDecide(t, s, admin, "not-a-uuid", "reject", 404, map[string]any{"approver_user_id": "x"})
			s.Want(t, 404, "GET", "/v2/approvals/not-a-uuid", admin, nil)
			e := gateway.Envelope(t, s.Want(t, 400, "POST", "/v2/approvals/"+id+"/approve", admin, "{not json"), 400, "v2", "BadRequest")
			if gateway.Detail(e, "error") != "invalid_json" {
				t.Errorf("malformed JSON: %v", e)
			}
			e = gateway.Envelope(t, s.Want(t, 400, "POST", "/v2/approvals/"+id+"/approve", admin, map[string]any{"approver_user_id": 7}), 400, "v2", "BadRequest")
			if gateway.Detail(e, "field") != "approver_user_id" {
				t.Errorf("wrong type: %v", e)
			}
			s.Want(t, 415, "POST", "/v2/approvals/"+id+"/approve", admin, `{"approver_user_id":"x"}`, "Content-Type", "text/plain")
			s.Want(t, 400, "GET", "/v2/approvals?limit=-1", admin, nil)
			s.Want(t, 400, "GET", "/v2/approvals?cursor=not-a-cursor", admin, nil)
			if apGet(t, s, admin, id)["status"] != "PENDING" {
				t.Error("bad input changed the approval")
			}
		})

		t.Run("100 concurrent consumes", func(t *testing.T) {
			tok, _, id := gateway.ApRequire(t, s, admin)
			apDecide(t, s, admin, id, "approve", 200, map[string]any{"approver_user_id": "erin"})
			statuses := make([]int, 100)
			var wg sync.WaitGroup
			start := make(chan struct{})
			c := gateway.AzClient(100)
			for i := range statuses {
				wg.Go(func() {
					<-start
					req, _ := http.NewRequest("POST", s.Base+"/v2/approvals/"+id+"/consume", nil)
					req.Header.Set("Authorization", "Bearer "+tok)
					resp, err := c.Do(req)
					if err != nil {
						return
					}
					statuses[i] = resp.StatusCode
					_ = resp.Body.Close()
				})
			}
			close(start)
			wg.Wait()
			count := map[int]int{}
			for _, st := range statuses {
				count[st]++
			}
			if count[200] != 1 || count[409] != 99 {
				t.Fatalf("100 concurrent consumes answered %v, want one 200 and 99 409", count)
			}
		})

		t.Run("100 concurrent presentations", func(t *testing.T) {
			tok, _, id := gateway.ApRequire(t, s, admin)
			apDecide(t, s, admin, id, "approve", 200, map[string]any{"approver_user_id": "frank"})
			res := gateway.AzConcurrent(s, tok, 100, gateway.AzJSON(t, gateway.ApCall(map[string]any{"x": 1}, map[string]any{"approval_id": id})))
			allowed, consumed := 0, 0
			for _, r := range res {
				if r.Err != nil || r.Status != 200 {
					t.Fatalf("presentation: %d %v %s", r.Status, r.Err, r.Raw)
				}
				switch {
				case r.Body["decision"] == "allow" && r.Body["reason"] == "approved":
					allowed++
				case r.Body["decision"] == "deny" && r.Body["reason"] == "approval_consumed":
					consumed++
				default:
					t.Errorf("unexpected answer %s", r.Raw)
				}
			}
			if allowed != 1 || consumed != 99 {
				t.Fatalf("100 presentations: %d allowed, %d approval_consumed; want 1 and 99", allowed, consumed)
			}
			if apGet(t, s, admin, id)["consumed_at"] == nil {
				t.Error("approval not consumed")
			}
		})

		t.Run("chat callback", func(t *testing.T) {
			_, _, id := gateway.ApRequire(t, s, admin)
			user := map[string]any{"id": "U123", "username": "grace"}
			value := tenantID + ":" + id
			resp, raw := chatRequest(t, s, chatSecret, time.Now().Add(-6*time.Minute), value, "approve", user, false)
			if resp.StatusCode != 401 || gateway.Detail(gateway.Envelope(t, raw, 401, "v1", "Unauthorized"), "error") != "stale_timestamp" {
				t.Fatalf("stale: %d %s", resp.StatusCode, raw)
			}
			resp, raw = chatRequest(t, s, chatSecret, time.Now(), value, "approve", user, true)
			if resp.StatusCode != 401 || gateway.Detail(gateway.Envelope(t, raw, 401, "v1", "Unauthorized"), "error") != "invalid_signature" {
				t.Fatalf("tampered: %d %s", resp.StatusCode, raw)
			}
			resp, raw = chatRequest(t, s, "another-secret", time.Now(), value, "approve", user, false)
			if resp.StatusCode != 401 || gateway.Detail(gateway.Envelope(t, raw, 401, "v1", "Unauthorized"), "error") != "invalid_signature" {
				t.Fatalf("wrong secret: %d %s", resp.StatusCode, raw)
			}
			for _, bad := range []string{"", id, tenantID + ":", tenantID + ":not-a-uuid", "x:" + id} {
				resp, raw = chatRequest(t, s, chatSecret, time.Now(), bad, "approve", user, false)
				if resp.StatusCode != 400 {
					t.Errorf("value %q: %d %s, want 400", bad, resp.StatusCode, raw)
				}
			}
			big, err := http.NewRequest("POST", s.Base+"/v1/callbacks/chat", strings.NewReader("payload="+strings.Repeat("x", 2<<20)))
			if err != nil {
				t.Fatal(err)
			}
			big.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if r, err := s.Client.Do(big); err != nil || r.StatusCode != 400 {
				t.Errorf("an oversized callback body: %v %v, want 400", r, err)
			} else {
				_ = r.Body.Close()
			}
			resp, raw = chatRequest(t, s, chatSecret, time.Now(), value, "escalate", user, false)
			if resp.StatusCode != 400 {
				t.Errorf("unknown action_id: %d %s", resp.StatusCode, raw)
			}
			// Another tenant's id with this approval: unknown there.
			otherTenant, _ := s.Tenant(t, "ap-chat-other-"+testkit.Uniq())
			resp, raw = chatRequest(t, s, chatSecret, time.Now(), otherTenant+":"+id, "approve", user, false)
			if resp.StatusCode != 404 {
				t.Errorf("cross-tenant value: %d %s, want 404", resp.StatusCode, raw)
			}
			if apGet(t, s, admin, id)["status"] != "PENDING" {
				t.Fatal("a refused callback changed the approval")
			}
			resp, raw = chatRequest(t, s, chatSecret, time.Now(), value, "approve", user, false)
			if resp.StatusCode != 200 {
				t.Fatalf("callback: %d %s", resp.StatusCode, raw)
			}
			m := testkit.Obj(t, raw)
			if m["ok"] != true || m["approval_id"] != id || m["status"] != "APPROVED" {
				t.Fatalf("callback answer %v", m)
			}
			a := apGet(t, s, admin, id)
			if a["approver_user_id"] != "grace" || a["reason"] != "Decided via chat interactive callback" {
				t.Fatalf("chat-approved: %v", a)
			}
			resp, raw = chatRequest(t, s, chatSecret, time.Now(), value, "reject", user, false)
			if resp.StatusCode != 409 {
				t.Fatalf("second callback: %d %s", resp.StatusCode, raw)
			}
			// user.id when there is no username; reject.
			_, _, id2 := gateway.ApRequire(t, s, admin)
			resp, raw = chatRequest(t, s, chatSecret, time.Now(), tenantID+":"+id2, "reject", map[string]any{"id": "U777"}, false)
			if resp.StatusCode != 200 || testkit.Obj(t, raw)["status"] != "REJECTED" {
				t.Fatalf("reject by id: %d %s", resp.StatusCode, raw)
			}
			if a := apGet(t, s, admin, id2); a["approver_user_id"] != "U777" {
				t.Errorf("approver %v, want U777", a["approver_user_id"])
			}
		})
	})
}

// TestE2EApprovalLimits covers the expiry, the abuse limits and the chat
// callback without its secret (each needs its own settings).
func TestE2EApprovalLimits(t *testing.T) {
	t.Parallel()
	gateway.ForModes(t, func(t *testing.T, backend string) {
		s := gateway.Start(t, backend, map[string]string{"SVC_RATE_LIMIT_CAPACITY": "100000", "SVC_APPROVAL_TTL_SECS": "1",
			"SVC_APPROVAL_CALLBACK_IP_LIMIT": "10", "SVC_APPROVAL_ATTEMPT_LIMIT": "2"})
		_, admin := s.Tenant(t, "ap-limits-"+testkit.Uniq())

		t.Run("chat callback disabled without its secret", func(t *testing.T) {
			resp, raw := chatRequest(t, s, chatSecret, time.Now(), testkit.RandomUUID()+":"+testkit.RandomUUID(), "approve", map[string]any{"id": "U1"}, false)
			if resp.StatusCode != 404 {
				t.Fatalf("callback without SVC_CHAT_SIGNING_SECRET: %d %s", resp.StatusCode, raw)
			}
		})

		t.Run("expiry", func(t *testing.T) {
			agentID, tok := s.Agent(t, admin, "ap-exp-"+testkit.Uniq(), map[string]any{"risk_tier": "high"})
			m := gateway.AzDecide(t, s, tok, gateway.ApCall(map[string]any{"x": 1}, nil), "require_approval", "")
			id := testkit.Str(t, m, "approval_id")
			testkit.Eventually(t, 5*time.Second, "the approval to read EXPIRED", func() bool { return apGet(t, s, admin, id)["status"] == "EXPIRED" })
			if l := testkit.Arr(t, s.Want(t, 200, "GET", "/v2/approvals?agent_id="+agentID, admin, nil)); len(l) != 1 || l[0]["status"] != "EXPIRED" {
				t.Errorf("listed: %v", l)
			}
			apDecide(t, s, admin, id, "approve", 409, map[string]any{"approver_user_id": "late"})
			gateway.AzDecide(t, s, tok, gateway.ApCall(map[string]any{"x": 1}, map[string]any{"approval_id": id}), "deny", "approval_expired")
		})

		t.Run("failed attempts per approval id", func(t *testing.T) {
			id := testkit.RandomUUID()
			apDecide(t, s, admin, id, "approve", 404, map[string]any{"approver_user_id": "x"})
			apDecide(t, s, admin, id, "reject", 404, map[string]any{"approver_user_id": "x"})
			resp, raw := s.Do(t, "POST", "/v2/approvals/"+id+"/approve", admin, map[string]any{"approver_user_id": "x"})
			azRetryAfter(t, resp, raw, "approval_attempts_exceeded")
		})

		t.Run("a bad body and a wrong role are failed attempts too", func(t *testing.T) {
			_, viewer := s.OpToken(t, admin, "ap-viewer-"+testkit.Uniq(), "viewer")
			_, tok := s.Agent(t, admin, "ap-cap-"+testkit.Uniq(), map[string]any{"risk_tier": "high"})
			id := testkit.Str(t, gateway.AzDecide(t, s, tok, gateway.ApCall(map[string]any{"x": 2}, nil), "require_approval", ""), "approval_id")
			resp, raw := s.Do(t, "POST", "/v2/approvals/"+id+"/approve", admin, `{"approver_user_id":`)
			if resp.StatusCode != 400 {
				t.Fatalf("malformed body: %d %s", resp.StatusCode, raw)
			}
			apDecide(t, s, viewer, id, "approve", 403, map[string]any{"approver_user_id": "v"})
			resp, raw = s.Do(t, "POST", "/v2/approvals/"+id+"/approve", admin, map[string]any{"approver_user_id": "x"})
			azRetryAfter(t, resp, raw, "approval_attempts_exceeded")
		})

		t.Run("strangers at an address do not use up an approver's bucket", func(t *testing.T) {
			// Calls without a valid credential (none, unknown tokens) from
			// this address empty the strangers' bucket and are refused with
			// 429; an approver's real approve from the same address is
			// still served, as a valid agent token is under the authorize
			// lockout.
			_, approver := s.OpToken(t, admin, "ap-nat-"+testkit.Uniq(), "approver")
			_, tok := s.Agent(t, admin, "ap-nat-"+testkit.Uniq(), map[string]any{"risk_tier": "high"})
			id := testkit.Str(t, gateway.AzDecide(t, s, tok, gateway.ApCall(map[string]any{"x": 3}, nil), "require_approval", ""), "approval_id")
			limited := false
			for i := range 20 {
				token := ""
				if i%2 == 1 {
					token = "svc_op_not-a-real-token-" + testkit.Uniq()
				}
				resp, raw := s.Do(t, "POST", "/v2/approvals/"+id+"/approve", token, map[string]any{"approver_user_id": "mallory"})
				switch resp.StatusCode {
				case 401:
				case 429:
					azRetryAfter(t, resp, raw, "approval_ip_limited")
					limited = true
				default:
					t.Fatalf("stranger call %d: %d %s", i, resp.StatusCode, raw)
				}
			}
			if !limited {
				t.Error("20 approve calls without a valid credential from one address were never limited")
			}
			if m := apDecide(t, s, approver, id, "approve", 200, map[string]any{"approver_user_id": "alice"}); m["status"] != "APPROVED" {
				t.Errorf("the approver's approve: %v", m)
			}
		})

		t.Run("per-IP bucket", func(t *testing.T) {
			// The bucket holds 10 and refills at 10/60 per second; the calls
			// above took some of it. Unknown ids answer 404 until it is empty.
			for i := range 12 {
				resp, raw := s.Do(t, "POST", "/v2/approvals/"+testkit.RandomUUID()+"/approve", admin, map[string]any{"approver_user_id": "x"})
				if resp.StatusCode == 429 {
					azRetryAfter(t, resp, raw, "approval_ip_limited")
					if i < 1 {
						t.Errorf("limited after %d calls", i)
					}
					return
				}
				if resp.StatusCode != 404 {
					t.Fatalf("call %d: %d %s", i, resp.StatusCode, raw)
				}
			}
			t.Fatal("12 approve calls from one address were never limited (SVC_APPROVAL_CALLBACK_IP_LIMIT=10)")
		})
	})
}
