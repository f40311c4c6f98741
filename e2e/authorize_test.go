package e2e

// Black-box tests of POST /v2/authorize (SPEC 4.2 rules 1 to 14, CONTRACT
// §3, §4, §6, §13) and of what it records: decisions, receipts, audit
// events, tenant policies, skills and risk settings.

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"svc/testkit"
	"svc/testkit/gateway"
)

var (
	azHex64RE = regexp.MustCompile(`^[0-9a-f]{64}$`)
	azHex16RE = regexp.MustCompile(`^[0-9a-f]{16}$`)
	// azUUIDv7RE: decisions and receipts are appended in time order, so
	// their ids are UUID v7 (CONTRACT §10).
	azUUIDv7RE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
)

// azMatched asserts matched_policies contains id.
func azMatched(t testing.TB, m map[string]any, id string) {
	t.Helper()
	if !slices.Contains(gateway.AzStrings(m["matched_policies"]), id) {
		t.Errorf("matched_policies %v lacks %s", m["matched_policies"], id)
	}
}

// azRetryAfter asserts a 429 envelope with a positive integer Retry-After
// and the given details.error.
func azRetryAfter(t testing.TB, resp *http.Response, raw []byte, code string) {
	t.Helper()
	if resp.StatusCode != 429 {
		t.Fatalf("status %d, want 429: %s", resp.StatusCode, raw)
	}
	if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || n < 1 {
		t.Errorf("Retry-After %q, want a positive integer", resp.Header.Get("Retry-After"))
	}
	e := gateway.Envelope(t, raw, 429, "v2", "TooManyRequests")
	if code != "" && gateway.Detail(e, "error") != code {
		t.Errorf("details.error %v, want %s", gateway.Detail(e, "error"), code)
	}
}

// azSign is the X-Svc-Request-Signature value for body under key.
func azSign(key, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// azExport writes GET /v2/receipts/export to a file and returns its lines.
func azExport(t testing.TB, s *gateway.Server, tok string) (path string, lines []string) {
	t.Helper()
	raw := s.Want(t, 200, "GET", "/v2/receipts/export", tok, nil)
	path = filepath.Join(t.TempDir(), "receipts.jsonl")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
}

// azVerifyFile runs `svc verify-receipts` on lines written to a new file.
func azVerifyFile(t testing.TB, lines []string) (int, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "edited.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := gateway.RunCLI("verify-receipts", path)
	return code, out + errOut
}

// TestE2EAuthorize covers the authorize path end to end.
func TestE2EAuthorize(t *testing.T) {
	t.Parallel()
	gateway.ForModes(t, func(t *testing.T, backend string) {
		seed, seedB64 := gateway.AzSeed(t)
		s := gateway.Start(t, backend, map[string]string{"SVC_RECEIPT_SIGNING_KEY": seedB64})

		t.Run("decisions", func(t *testing.T) {
			_, admin := s.Tenant(t, "az-dec-"+testkit.Uniq())
			_, tok := s.Agent(t, admin, "decider", nil)

			t.Run("read-only allow at trusted", func(t *testing.T) {
				m := gateway.AzDecide(t, s, tok, gateway.AzRead(nil), "allow", "")
				for _, f := range []string{"decision_id", "receipt_id"} {
					if v, _ := m[f].(string); !azUUIDv7RE.MatchString(v) {
						t.Errorf("%s = %v, want a UUID v7", f, m[f])
					}
				}
				if d, r := m["decision_id"].(string), m["receipt_id"].(string); d >= r {
					t.Errorf("decision_id %s not before receipt_id %s: time-ordered ids of one decision", d, r)
				}
				for _, f := range []string{"receipt_hash", "action_hash"} {
					if v, _ := m[f].(string); !azHex64RE.MatchString(v) {
						t.Errorf("%s = %v, want 64 lower-case hex", f, m[f])
					}
				}
				azMatched(t, m, "default_allow_read")
				if m["root_trust_level"] != gateway.AzSigned {
					t.Errorf("root_trust_level %v, want %s", m["root_trust_level"], gateway.AzSigned)
				}
				score, ok := m["composite_risk_score"].(float64)
				if !ok || score != math.Trunc(score) || score < 0 || score > 100 {
					t.Errorf("composite_risk_score %v, want an integer 0..100", m["composite_risk_score"])
				}
				if m["dry_run"] != false {
					t.Errorf("dry_run %v, want false", m["dry_run"])
				}
				if rf, ok := m["redacted_fields"].([]any); !ok || len(rf) != 0 {
					t.Errorf("redacted_fields %v, want []", m["redacted_fields"])
				}
			})

			t.Run("untrusted mutation denied", func(t *testing.T) {
				m := gateway.AzDecide(t, s, tok, gateway.AzUntrustedWrite(nil), "deny", "untrusted_mutation")
				azMatched(t, m, "untrusted_mutation")
				if id, _ := m["decision_id"].(string); id == "" {
					t.Errorf("deny without decision_id: %v", m)
				}
			})

			t.Run("malicious mutation quarantines", func(t *testing.T) {
				id, qtok := s.Agent(t, admin, "to-quarantine", nil)
				m := gateway.AzDecide(t, s, qtok, gateway.AzBody("github", "delete_repo", true, gateway.AzMalicious, nil), "quarantine", "")
				azMatched(t, m, "malicious_quarantine")
				_, raw := s.Do(t, "POST", "/v2/authorize", qtok, gateway.AzRead(nil))
				gateway.Envelope(t, raw, 401, "v2", "Unauthorized")
				if a := s.GetAgent(t, admin, id); a["status"] != "quarantined" {
					t.Errorf("agent status %v after a quarantine decision, want quarantined", a["status"])
				}
				d := testkit.Obj(t, s.Want(t, 200, "GET", "/v2/decisions/"+testkit.Str(t, m, "decision_id"), admin, nil))
				if d["decision"] != "quarantine" {
					t.Errorf("recorded decision %v, want quarantine", d["decision"])
				}
				// restore: quarantined to active, and the token works again.
				s.Want(t, 200, "POST", "/v2/agents/"+id+"/restore", admin, nil)
				gateway.AzDecide(t, s, qtok, gateway.AzRead(nil), "allow", "")
			})

			t.Run("high tier mutation requires approval", func(t *testing.T) {
				id, htok := s.Agent(t, admin, "high-tier", nil)
				s.Want(t, 200, "PATCH", "/v2/agents/"+id, admin, map[string]any{"risk_tier": "high"})
				m := gateway.AzDecide(t, s, htok, gateway.AzTrustedWrite(nil), "require_approval", "high_risk_tier_mutation")
				azMatched(t, m, "high_tier_mutation")
				// A read by the same agent is still allowed.
				gateway.AzDecide(t, s, htok, gateway.AzRead(nil), "allow", "")
				// A client-supplied tier is ignored (the server's tier decides).
				body := gateway.AzTrustedWrite(map[string]any{"risk_tier": "low", "agent": map[string]any{"risk_tier": "low"}})
				gateway.AzDecide(t, s, htok, body, "require_approval", "")
			})

			t.Run("skill registry", func(t *testing.T) {
				s.Want(t, 200, "PUT", "/v2/skills/deploy", admin, map[string]any{"description": "deployments", "actions": map[string]any{
					"prod":    map[string]any{"risk": "critical", "mutates_state": true, "approval_required": false},
					"staging": map[string]any{"risk": "medium", "mutates_state": true, "approval_required": true},
				}})
				// The registry's outcomes (critical, approval_required, a
				// registered mutation sent as a read, every spelling of a key)
				// are table-tested in actors/agent_test.go; here, one through
				// HTTP and the registry's own API.
				m := gateway.AzDecide(t, s, tok, gateway.AzBody("deploy", "prod", true, gateway.AzSigned, nil), "deny", "")
				azMatched(t, m, "critical")

				// Keys are normalized as calls are (rule 7).
				sk := testkit.Obj(t, s.Want(t, 200, "PUT", "/v2/skills/Danger%20Zone", admin, map[string]any{"actions": map[string]any{
					"Wipe": map[string]any{"risk": "critical", "mutates_state": true}}}))
				if sk["skill_key"] != "danger zone" || fmt.Sprint(sk["actions"]) != "map[wipe:map[approval_required:false mutates_state:true risk:critical]]" {
					t.Errorf("registered skill %v, want key and action normalized", sk)
				}
				m = gateway.AzDecide(t, s, tok, gateway.AzBody("DANGER%20ZONE", " WIPE ", false, gateway.AzSigned, nil), "deny", "")
				azMatched(t, m, "critical")
				if g := testkit.Obj(t, s.Want(t, 200, "GET", "/v2/skills/DANGER%20zone", admin, nil)); g["skill_key"] != "danger zone" {
					t.Errorf("GET by another spelling: %v", g)
				}
				_, raw := s.Do(t, "PUT", "/v2/skills/twice", admin, map[string]any{"actions": map[string]any{
					"Wipe": map[string]any{"risk": "low"}, "wipe": map[string]any{"risk": "critical"}}})
				if e := gateway.Envelope(t, raw, 400, "v2", "BadRequest"); !strings.HasPrefix(fmt.Sprint(gateway.Detail(e, "field")), "actions.") {
					t.Errorf("two action keys that normalize alike: details.field %v", gateway.Detail(e, "field"))
				}
				// A wrong type inside the actions map is named down to its key.
				_, raw = s.Do(t, "PUT", "/v2/skills/typed", admin, map[string]any{"actions": map[string]any{
					"deploy": map[string]any{"risk": "low", "mutates_state": "yes"}}})
				if e := gateway.Envelope(t, raw, 400, "v2", "BadRequest"); gateway.Detail(e, "field") != "actions.deploy.mutates_state" || gateway.Detail(e, "error") != "invalid_type" {
					t.Errorf("mutates_state a string: details %v, want field actions.deploy.mutates_state", e["details"])
				}
				s.Want(t, 204, "DELETE", "/v2/skills/Danger%20Zone", admin, nil)
				gateway.AzDecide(t, s, tok, gateway.AzBody("danger zone", "wipe", false, gateway.AzSigned, nil), "allow", "")
			})

			t.Run("v1 path", func(t *testing.T) {
				resp, raw := s.Do(t, "POST", "/v1/authorize", tok, gateway.AzRead(nil))
				if resp.StatusCode != 200 || testkit.Obj(t, raw)["decision"] != "allow" {
					t.Fatalf("POST /v1/authorize: %d %s", resp.StatusCode, raw)
				}
				if resp.Header.Get("Deprecation") != "true" || resp.Header.Get("Sunset") != sunset {
					t.Errorf("/v1/authorize Deprecation %q Sunset %q", resp.Header.Get("Deprecation"), resp.Header.Get("Sunset"))
				}
			})

		})

		t.Run("environments and permissions", func(t *testing.T) {
			_, admin := s.Tenant(t, "az-env-"+testkit.Uniq())
			// The representative 403 (rules 5 and 6 are table-tested in
			// rules/authz and actors/agent_test.go).
			_, etok := s.Agent(t, admin, "prod-only", map[string]any{"allowed_environments": []string{"prod"}})
			before := len(gateway.AzDecisions(t, s, admin))

			forbidden := func(t *testing.T, tok string, body map[string]any) {
				t.Helper()
				resp, _, raw := gateway.AzPost(t, s, tok, body)
				if resp.StatusCode != 403 {
					t.Fatalf("status %d, want 403: %s", resp.StatusCode, raw)
				}
				if e := gateway.Envelope(t, raw, 403, "v2", "Forbidden"); gateway.Detail(e, "error") != "FORBIDDEN" {
					t.Errorf("details.error %v, want FORBIDDEN", gateway.Detail(e, "error"))
				}
			}
			t.Run("dev", func(t *testing.T) { forbidden(t, etok, gateway.AzRead(map[string]any{"environment": "dev"})) })
			t.Run("403s write no decision", func(t *testing.T) {
				if after := len(gateway.AzDecisions(t, s, admin)); after != before {
					t.Errorf("decisions %d after the 403s, want %d", after, before)
				}
			})
			gateway.AzDecide(t, s, etok, gateway.AzRead(map[string]any{"environment": "prod"}), "allow", "")
		})

		t.Run("agent status", func(t *testing.T) {
			_, admin := s.Tenant(t, "az-status-"+testkit.Uniq())
			fid, ftok := s.Agent(t, admin, "frozen", nil)
			s.Want(t, 200, "POST", "/v2/agents/"+fid+"/freeze", admin, nil)
			m := gateway.AzDecide(t, s, ftok, gateway.AzTrustedWrite(nil), "deny", "agent_frozen")
			d := testkit.Obj(t, s.Want(t, 200, "GET", "/v2/decisions/"+testkit.Str(t, m, "decision_id"), admin, nil))
			if d["decision"] != "deny" || d["reason"] != "agent_frozen" || d["agent_id"] != fid {
				t.Errorf("recorded frozen decision = %v", d)
			}
			if rid, _ := m["receipt_id"].(string); rid == "" || d["receipt_id"] != rid {
				t.Errorf("frozen deny receipt_id %v, stored %v; every recorded decision gets a receipt", m["receipt_id"], d["receipt_id"])
			}
			s.Want(t, 200, "POST", "/v2/agents/"+fid+"/unfreeze", admin, nil)
			gateway.AzDecide(t, s, ftok, gateway.AzTrustedWrite(nil), "allow", "")

			rid, rtok := s.Agent(t, admin, "revoked", nil)
			s.Want(t, 200, "POST", "/v2/agents/"+rid+"/revoke", admin, nil)
			_, _, raw := gateway.AzPost(t, s, rtok, gateway.AzRead(nil))
			gateway.Envelope(t, raw, 401, "v2", "Unauthorized")

			did, dtok := s.Agent(t, admin, "deleted", nil)
			s.Want(t, 204, "DELETE", "/v2/agents/"+did, admin, nil)
			_, _, raw = gateway.AzPost(t, s, dtok, gateway.AzRead(nil))
			gateway.Envelope(t, raw, 401, "v2", "Unauthorized")
		})

		t.Run("request signing", func(t *testing.T) {
			_, admin := s.Tenant(t, "az-sign-"+testkit.Uniq())
			g := testkit.Obj(t, s.Want(t, 201, "POST", "/v2/agents", admin, map[string]any{"name": "signer", "signing_key": "generate"}))
			tok := testkit.Str(t, g, "agent_token")
			key, err := base64.StdEncoding.DecodeString(testkit.Str(t, g, "signing_key"))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := json.Marshal(gateway.AzRead(nil))
			other := make([]byte, 32)
			_, _ = rand.Read(other)
			cases := []struct {
				name string
				sig  []string
			}{
				{"missing", nil},
				{"wrong key", []string{"X-Svc-Request-Signature", azSign(other, body)}},
				{"other body", []string{"X-Svc-Request-Signature", azSign(key, append(body, ' '))}},
				{"no scheme", []string{"X-Svc-Request-Signature", strings.TrimPrefix(azSign(key, body), "sha256=")}},
				{"not hex", []string{"X-Svc-Request-Signature", "sha256=zz"}},
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					_, _, raw := gateway.AzPost(t, s, tok, body, c.sig...)
					gateway.Envelope(t, raw, 401, "v2", "Unauthorized")
				})
			}
			t.Run("correct", func(t *testing.T) {
				m := gateway.AzWant(t, s, tok, body, 200, "X-Svc-Request-Signature", azSign(key, body))
				if m["decision"] != "allow" {
					t.Errorf("signed call decision %v", m["decision"])
				}
			})
		})

		t.Run("operator tokens are refused", func(t *testing.T) {
			tenantID, admin := s.Tenant(t, "az-op-"+testkit.Uniq())
			_, raw := s.Do(t, "POST", "/v2/authorize", admin, gateway.AzRead(nil))
			gateway.Envelope(t, raw, 403, "v2", "Forbidden")
			_, raw = s.Do(t, "POST", "/v2/authorize", gateway.SuperToken, gateway.AzRead(nil), "X-Svc-Tenant-ID", tenantID)
			gateway.Envelope(t, raw, 403, "v2", "Forbidden")
		})

		t.Run("auth failure lockout", func(t *testing.T) {
			lk := gateway.Start(t, backend, map[string]string{"SVC_AUTH_FAILURE_LIMIT": "5"})
			tenantT, adminT := lk.Tenant(t, "az-lock-t-"+testkit.Uniq())
			_, tokT := lk.Agent(t, adminT, "victim", nil)
			tenantU, adminU := lk.Tenant(t, "az-lock-u-"+testkit.Uniq())
			_, tokU := lk.Agent(t, adminU, "bystander", nil)
			// An unknown operator token is an unknown token too: 401, counted.
			bad := []string{"svc_agent_" + strings.Repeat("A", 43), "garbage", "svc_op_" + strings.Repeat("B", 43), "", "svc_agent_short"}
			// The credential is judged before the body: a bad token with a
			// malformed or missing body is still 401, and counted.
			bodies := []any{gateway.AzRead(nil), `{"tool_call":`, nil, gateway.AzRead(nil), `[1,2]`}
			for i, b := range bad {
				resp, raw := lk.Do(t, "POST", "/v2/authorize", b, bodies[i], "X-Svc-Tenant-ID", tenantT)
				if resp.StatusCode != 401 {
					t.Fatalf("bad token %d: status %d, want 401: %s", i+1, resp.StatusCode, raw)
				}
			}
			// Locked: a further failed attempt from the pair is 429, whatever
			// its body, with Retry-After.
			for _, b := range []any{gateway.AzRead(nil), `{"tool_call":`} {
				resp, raw := lk.Do(t, "POST", "/v2/authorize", "svc_agent_"+strings.Repeat("C", 43), b, "X-Svc-Tenant-ID", tenantT)
				azRetryAfter(t, resp, raw, "auth_locked")
			}
			// A valid credential from the locked address is still served
			// (CONTRACT §13): a stranger sharing the address cannot lock the
			// agent out. Its malformed body is the 400 it always is.
			if m := gateway.AzWant(t, lk, tokT, gateway.AzRead(nil), 200, "X-Svc-Tenant-ID", tenantT); m["decision"] != "allow" {
				t.Errorf("valid token from a locked address: %v", m)
			}
			gateway.AzWant(t, lk, tokT, gateway.AzRead(nil), 200)
			_, raw := lk.Do(t, "POST", "/v2/authorize", tokT, `{"tool_call":`, "X-Svc-Tenant-ID", tenantT)
			gateway.Envelope(t, raw, 400, "v2", "BadRequest")
			// And the pair stays locked for failures.
			resp, raw := lk.Do(t, "POST", "/v2/authorize", "garbage", gateway.AzRead(nil), "X-Svc-Tenant-ID", tenantT)
			azRetryAfter(t, resp, raw, "auth_locked")
			// Another tenant header from the same address is not locked.
			if m := gateway.AzWant(t, lk, tokU, gateway.AzRead(nil), 200, "X-Svc-Tenant-ID", tenantU); m["decision"] != "allow" {
				t.Errorf("other tenant: %v", m)
			}
		})

		t.Run("rate limit", func(t *testing.T) {
			rl := gateway.Start(t, backend, map[string]string{"SVC_RATE_LIMIT_CAPACITY": "3", "SVC_RATE_LIMIT_REFILL_RATE": "0.001"})
			_, admin := rl.Tenant(t, "az-rate-"+testkit.Uniq())
			_, tok := rl.Agent(t, admin, "busy", nil)
			_, tok2 := rl.Agent(t, admin, "calm", nil)
			for i := 0; i < 3; i++ {
				gateway.AzWant(t, rl, tok, gateway.AzRead(nil), 200)
			}
			resp, _, raw := gateway.AzPost(t, rl, tok, gateway.AzRead(nil))
			azRetryAfter(t, resp, raw, "rate_limited")
			gateway.AzWant(t, rl, tok2, gateway.AzRead(nil), 200) // the bucket is per agent
		})

		t.Run("quota", func(t *testing.T) {
			q := gateway.Start(t, backend, map[string]string{"SVC_QUOTA_LIMIT": "2"})
			_, admin := q.Tenant(t, "az-quota-"+testkit.Uniq())
			_, tok := q.Agent(t, admin, "metered", nil)
			rid := "quota-" + testkit.Uniq()
			first := gateway.AzWant(t, q, tok, gateway.AzRead(map[string]any{"request_id": rid}), 200)
			gateway.AzWant(t, q, tok, gateway.AzRead(nil), 200)
			resp, _, raw := gateway.AzPost(t, q, tok, gateway.AzRead(nil))
			azRetryAfter(t, resp, raw, "quota_exceeded")
			// Rule 2 precedes rule 3: a known request_id is answered even
			// when the quota is spent.
			again := gateway.AzWant(t, q, tok, gateway.AzRead(map[string]any{"request_id": rid}), 200)
			if again["decision_id"] != first["decision_id"] {
				t.Errorf("replayed request_id: decision_id %v, want %v", again["decision_id"], first["decision_id"])
			}
		})

		t.Run("idempotency and dry run", func(t *testing.T) {
			_, admin := s.Tenant(t, "az-idem-"+testkit.Uniq())
			_, tok := s.Agent(t, admin, "retrier", nil)
			rid := "req-" + testkit.Uniq()
			a := gateway.AzDecide(t, s, tok, gateway.AzTrustedWrite(map[string]any{"request_id": rid}), "allow", "")
			b := gateway.AzDecide(t, s, tok, gateway.AzTrustedWrite(map[string]any{"request_id": rid}), "allow", "")
			if a["decision_id"] == nil || a["decision_id"] != b["decision_id"] || a["receipt_id"] != b["receipt_id"] {
				t.Errorf("retry: decision_id %v receipt_id %v, want %v %v", b["decision_id"], b["receipt_id"], a["decision_id"], a["receipt_id"])
			}
			if a["request_id"] != rid {
				t.Errorf("request_id echoed as %v, want %s", a["request_id"], rid)
			}
			// The earlier decision is returned even for a different call.
			c := gateway.AzWant(t, s, tok, gateway.AzUntrustedWrite(map[string]any{"request_id": rid}), 200)
			if c["decision_id"] != a["decision_id"] || c["decision"] != "allow" {
				t.Errorf("same request_id, other call: %v; want the earlier decision %v", c, a["decision_id"])
			}
			count := func() (total, withID int) {
				for _, d := range gateway.AzDecisions(t, s, admin) {
					total++
					if d["request_id"] == rid {
						withID++
					}
				}
				return total, withID
			}
			if total, withID := count(); total != 1 || withID != 1 {
				t.Errorf("%d decisions, %d with request_id %s; want 1 and 1", total, withID, rid)
			}

			dry := gateway.AzDecide(t, s, tok, gateway.AzUntrustedWrite(map[string]any{"dry_run": true}), "deny", "untrusted_mutation")
			if dry["dry_run"] != true {
				t.Errorf("dry_run %v, want true", dry["dry_run"])
			}
			for _, f := range []string{"decision_id", "receipt_id", "receipt_hash"} {
				if v, ok := dry[f]; ok && v != "" && v != nil {
					t.Errorf("dry run answered %s %v", f, v)
				}
			}
			if total, _ := count(); total != 1 {
				t.Errorf("%d decisions after a dry run, want 1", total)
			}
			if n := len(testkit.Arr(t, s.Want(t, 200, "GET", "/v2/receipts", admin, nil))); n != 1 {
				t.Errorf("%d receipts after a dry run, want 1", n)
			}
			if n := len(s.AuditEvents(t, admin, "event_type=authorize_decision")); n > 1 {
				t.Errorf("%d authorize_decision audit events after one decision and a dry run, want at most 1", n)
			}

			// A dry run with a request_id neither claims nor reads it.
			rid2 := "dry-" + testkit.Uniq()
			d1 := gateway.AzDecide(t, s, tok, gateway.AzRead(map[string]any{"request_id": rid2, "dry_run": true}), "allow", "")
			if d1["dry_run"] != true || d1["decision_id"] != nil {
				t.Errorf("dry run with request_id: %v", d1)
			}
			recorded := gateway.AzDecide(t, s, tok, gateway.AzRead(map[string]any{"request_id": rid2}), "allow", "")
			if recorded["dry_run"] != false || recorded["decision_id"] == nil {
				t.Errorf("first real call after a dry run with its request_id: %v", recorded)
			}
			d2 := gateway.AzDecide(t, s, tok, gateway.AzRead(map[string]any{"request_id": rid2, "dry_run": true}), "allow", "")
			if d2["dry_run"] != true || d2["decision_id"] != nil {
				t.Errorf("dry run after a real call with its request_id: %v", d2)
			}
			if total, _ := count(); total != 2 {
				t.Errorf("%d decisions, want 2", total)
			}

			// A dry run refused before policy writes no audit row either
			// (rule 11): after a real refusal's event is flushed, it is the
			// only authorize_refused event (one buffer, written in order).
			_, etok := s.Agent(t, admin, "dry-prod-only", map[string]any{"allowed_environments": []string{"prod"}})
			for _, dry := range []bool{true, false} {
				resp, _, raw := gateway.AzPost(t, s, etok, gateway.AzRead(map[string]any{"environment": "dev", "dry_run": dry}))
				if resp.StatusCode != 403 {
					t.Fatalf("dry_run %v outside the allowed environments: status %d, want 403: %s", dry, resp.StatusCode, raw)
				}
			}
			testkit.Eventually(t, 10*time.Second, "the refusal's audit event", func() bool {
				return len(s.AuditEvents(t, admin, "event_type=authorize_refused")) > 0
			})
			if n := len(s.AuditEvents(t, admin, "event_type=authorize_refused")); n != 1 {
				t.Errorf("%d authorize_refused events after a refused dry run and a refused call, want 1", n)
			}

			// A simulated quarantine changes nothing.
			qid, qtok := s.Agent(t, admin, "dry-malicious", nil)
			q := gateway.AzDecide(t, s, qtok, gateway.AzBody("github", "delete_repo", true, gateway.AzMalicious, map[string]any{"dry_run": true}), "quarantine", "")
			if q["dry_run"] != true || q["decision_id"] != nil {
				t.Errorf("dry-run quarantine answer: %v", q)
			}
			if a := s.GetAgent(t, admin, qid); a["status"] != "active" {
				t.Errorf("a dry-run quarantine moved the agent to %v", a["status"])
			}
			gateway.AzDecide(t, s, qtok, gateway.AzRead(nil), "allow", "")
		})

		t.Run("replay nonce", func(t *testing.T) {
			_, admin := s.Tenant(t, "az-nonce-"+testkit.Uniq())
			_, tok := s.Agent(t, admin, "noncer", nil)
			_, tok2 := s.Agent(t, admin, "other-noncer", nil)
			nonce := "nonce-" + testkit.Uniq()
			gateway.AzDecide(t, s, tok, gateway.AzRead(map[string]any{"nonce": nonce}), "allow", "")
			m := gateway.AzDecide(t, s, tok, gateway.AzRead(map[string]any{"nonce": nonce}), "deny", "replay_nonce_reused")
			if id, _ := m["decision_id"].(string); id == "" {
				t.Errorf("replay deny is not recorded: %v", m)
			}
			gateway.AzDecide(t, s, tok2, gateway.AzRead(map[string]any{"nonce": nonce}), "allow", "") // nonces are per agent
			// A dry run does not consume a nonce.
			n2 := "nonce-" + testkit.Uniq()
			gateway.AzDecide(t, s, tok, gateway.AzRead(map[string]any{"nonce": n2, "dry_run": true}), "allow", "")
			gateway.AzDecide(t, s, tok, gateway.AzRead(map[string]any{"nonce": n2}), "allow", "")
			// Lengths count characters, not bytes: four "é" are 8 bytes but too
			// short; 128 of them are 256 bytes and allowed.
			for _, bad := range []string{"abc", strings.Repeat("n", 129), strings.Repeat("é", 4), strings.Repeat("é", 129)} {
				_, _, raw := gateway.AzPost(t, s, tok, gateway.AzRead(map[string]any{"nonce": bad}))
				if e := gateway.Envelope(t, raw, 400, "v2", "BadRequest"); gateway.Detail(e, "field") != "nonce" {
					t.Errorf("nonce of %d chars: details.field %v, want nonce", utf8.RuneCountInString(bad), gateway.Detail(e, "field"))
				}
			}
			gateway.AzDecide(t, s, tok, gateway.AzRead(map[string]any{"nonce": strings.Repeat("é", 120) + testkit.Uniq()}), "allow", "")
		})

		t.Run("tenant policies", func(t *testing.T) {
			_, admin := s.Tenant(t, "az-pol-a-"+testkit.Uniq())
			_, tok := s.Agent(t, admin, "payer", nil)
			_, adminB := s.Tenant(t, "az-pol-b-"+testkit.Uniq())
			_, tokB := s.Agent(t, adminB, "payer-b", nil)
			rego := "package svc.policies.pci\n\n" +
				`results contains {"decision": "redact", "reason": "card", "redact_fields": ["parameters.card_number"]} if input.tool_call.action == "charge"` + "\n"
			charge := func() map[string]any {
				b := gateway.AzRead(nil)
				b["tool_call"] = map[string]any{"tool": "payments", "action": "charge",
					"parameters": map[string]any{"card_number": "4111111111111111", "amount": 10}}
				return b
			}
			p := testkit.Obj(t, s.Want(t, 201, "POST", "/v2/policies", admin, map[string]any{"name": "pci", "rego": rego, "description": "cards"}))
			if p["name"] != "pci" || p["enabled"] != true {
				t.Errorf("created policy = %v", p)
			}
			// What a create returns is what a read returns (both backends keep
			// microseconds).
			if g := testkit.Obj(t, s.Want(t, 200, "GET", "/v2/policies/pci", admin, nil)); g["created_at"] != p["created_at"] || g["updated_at"] != p["updated_at"] {
				t.Errorf("created_at/updated_at %v/%v on create, %v/%v on read", p["created_at"], p["updated_at"], g["created_at"], g["updated_at"])
			}
			m := gateway.AzDecide(t, s, tok, charge(), "redact", "")
			if fmt.Sprint(m["redacted_fields"]) != "[parameters.card_number]" {
				t.Errorf("redacted_fields %v, want [parameters.card_number]", m["redacted_fields"])
			}
			azMatched(t, m, "pci")
			if d := testkit.Obj(t, s.Want(t, 200, "GET", "/v2/decisions/"+testkit.Str(t, m, "decision_id"), admin, nil)); fmt.Sprint(d["redacted_fields"]) != "[parameters.card_number]" || d["decision"] != "redact" {
				t.Errorf("stored redact decision = %v", d)
			}
			if r := gateway.AzDecide(t, s, tok, gateway.AzBody("payments", "refund", false, gateway.AzSigned, nil), "allow", ""); len(gateway.AzStrings(r["redacted_fields"])) != 0 {
				t.Errorf("refund redacted %v", r["redacted_fields"])
			}
			if mb := gateway.AzDecide(t, s, tokB, charge(), "allow", ""); len(gateway.AzStrings(mb["redacted_fields"])) != 0 {
				t.Errorf("tenant B is redacted by tenant A's policy: %v", mb)
			}

			t.Run("policy id and combination", func(t *testing.T) {
				block := "package svc.policies.blocklist\n\n" +
					`results contains {"policy": "no_big_charges", "decision": "deny", "reason": "too_big"} if input.tool_call.parameters.amount > 1000` + "\n"
				s.Want(t, 201, "POST", "/v2/policies", admin, map[string]any{"name": "blocklist", "rego": block})
				big := charge()
				big["tool_call"].(map[string]any)["parameters"].(map[string]any)["amount"] = 5000
				m := gateway.AzDecide(t, s, tok, big, "deny", "too_big") // deny > redact > allow
				azMatched(t, m, "no_big_charges")
				if slices.Contains(gateway.AzStrings(m["matched_policies"]), "blocklist") {
					t.Errorf("matched_policies %v names the module, not its policy id", m["matched_policies"])
				}
				gateway.AzDecide(t, s, tok, charge(), "redact", "")
				s.Want(t, 204, "DELETE", "/v2/policies/blocklist", admin, nil)
				gateway.AzDecide(t, s, tok, big, "redact", "")
			})
			t.Run("syntax error", func(t *testing.T) {
				bad := "package svc.policies.broken\n\nresults contains {\"decision\": \"deny\" if {\n"
				resp, raw := s.Do(t, "POST", "/v2/policies", admin, map[string]any{"name": "broken", "rego": bad})
				if resp.StatusCode != 422 {
					t.Fatalf("status %d, want 422: %s", resp.StatusCode, raw)
				}
				e := gateway.Envelope(t, raw, 422, "v2", "Invalid")
				errs, _ := gateway.Detail(e, "errors").([]any)
				if len(errs) == 0 {
					t.Fatalf("details.errors empty: %s", raw)
				}
				first, _ := errs[0].(map[string]any)
				line, lok := first["line"].(float64)
				_, cok := first["col"].(float64)
				if !lok || !cok || line < 1 {
					t.Errorf("details.errors[0] = %v, want numeric line >= 1 and col", first)
				}
				if msg, _ := first["message"].(string); msg == "" {
					t.Errorf("details.errors[0] without message: %v", first)
				}
			})
			t.Run("wrong package", func(t *testing.T) {
				wrong := "package svc.policies.other\n\nresults contains {\"decision\": \"allow\", \"reason\": \"x\"} if true\n"
				resp, raw := s.Do(t, "POST", "/v2/policies", admin, map[string]any{"name": "pci2", "rego": wrong})
				if resp.StatusCode != 422 {
					t.Fatalf("status %d, want 422: %s", resp.StatusCode, raw)
				}
				e := gateway.Envelope(t, raw, 422, "v2", "Invalid")
				if errs, _ := gateway.Detail(e, "errors").([]any); len(errs) == 0 {
					t.Errorf("details.errors empty: %s", raw)
				}
				s.Want(t, 404, "GET", "/v2/policies/pci2", admin, nil)
			})
			t.Run("disable, enable, delete", func(t *testing.T) {
				s.Want(t, 200, "PUT", "/v2/policies/pci", admin, map[string]any{"enabled": false})
				gateway.AzDecide(t, s, tok, charge(), "allow", "")
				s.Want(t, 200, "PUT", "/v2/policies/pci", admin, map[string]any{"enabled": true})
				gateway.AzDecide(t, s, tok, charge(), "redact", "")
				s.Want(t, 204, "DELETE", "/v2/policies/pci", admin, nil)
				s.Want(t, 404, "GET", "/v2/policies/pci", admin, nil)
				gateway.AzDecide(t, s, tok, charge(), "allow", "")
			})
			t.Run("reload", func(t *testing.T) {
				s.Want(t, 200, "POST", "/v2/policies/reload", admin, nil)
				s.WaitAudit(t, admin, "event_type=config_change", "config_change policy_file_reload", func(e map[string]any) bool {
					return e["action"] == "policy_file_reload"
				})
				gateway.AzDecide(t, s, tok, gateway.AzRead(nil), "allow", "")
			})
			t.Run("reload of a policy file that does not compile", func(t *testing.T) {
				// SVC_POLICY_FILE is a copy of the embedded set; one file is then
				// broken. The reload is 422 with the errors' file, line and
				// column, and the set in force stays.
				dir := t.TempDir()
				base := filepath.Join("..", "rules", "policy", "base")
				entries, err := os.ReadDir(base)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range entries {
					b, err := os.ReadFile(filepath.Join(base, e.Name()))
					if err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o600); err != nil {
						t.Fatal(err)
					}
				}
				fs := gateway.Start(t, backend, map[string]string{"SVC_POLICY_FILE": dir})
				_, fadmin := fs.Tenant(t, "az-file-"+testkit.Uniq())
				_, ftok := fs.Agent(t, fadmin, "filed", nil)
				gateway.AzDecide(t, fs, ftok, gateway.AzRead(nil), "allow", "")
				fs.Want(t, 200, "POST", "/v2/policies/reload", fadmin, nil)
				broken := filepath.Join(dir, "critical.rego")
				if err := os.WriteFile(broken, []byte("package svc.base.critical\n\nresults contains x if {\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				_, raw := fs.Do(t, "POST", "/v2/policies/reload", fadmin, nil)
				e := gateway.Envelope(t, raw, 422, "v2", "Invalid")
				list, _ := gateway.Detail(e, "errors").([]any)
				if len(list) == 0 {
					t.Fatalf("reload of a broken file: details.errors missing: %s", raw)
				}
				first, _ := list[0].(map[string]any)
				if first["file"] != broken || first["line"] == nil || first["col"] == nil || first["message"] == "" {
					t.Errorf("reload error entry %v; want file %s, line, col, message", first, broken)
				}
				gateway.AzDecide(t, fs, ftok, gateway.AzRead(nil), "allow", "")
			})
		})

		t.Run("receipts", func(t *testing.T) {
			_, admin := s.Tenant(t, "az-rcpt-"+testkit.Uniq())
			_, tok := s.Agent(t, admin, "receipted", nil)
			var ids, hashes []string
			for i := 0; i < 4; i++ {
				body := gateway.AzRead(nil)
				if i%2 == 1 {
					body = gateway.AzUntrustedWrite(nil)
				}
				m := gateway.AzWant(t, s, tok, body, 200)
				ids = append(ids, testkit.Str(t, m, "receipt_id"))
				hashes = append(hashes, testkit.Str(t, m, "receipt_hash"))
			}
			list := testkit.Arr(t, s.Want(t, 200, "GET", "/v2/receipts", admin, nil))
			if len(list) != 4 {
				t.Fatalf("%d receipts, want 4", len(list))
			}
			for i, r := range list {
				j := 3 - i // newest first
				if r["receipt_id"] != ids[j] || r["seq"] != float64(j+1) || r["receipt_hash"] != hashes[j] {
					t.Errorf("receipt %d = %v; want id %s seq %d hash %s", i, r, ids[j], j+1, hashes[j])
				}
				if k, _ := r["key_id"].(string); !azHex16RE.MatchString(k) {
					t.Errorf("receipt key_id %v", r["key_id"])
				}
				if sig, _ := r["signature"].(string); sig == "" {
					t.Errorf("signed server wrote an unsigned receipt: %v", r)
				}
				wantPrev := ""
				if j > 0 {
					wantPrev = hashes[j-1]
				}
				if r["prev_receipt_hash"] != wantPrev {
					t.Errorf("receipt seq %d prev_receipt_hash %v, want %q", j+1, r["prev_receipt_hash"], wantPrev)
				}
			}
			for _, id := range ids {
				v := testkit.Obj(t, s.Want(t, 200, "GET", "/v2/receipts/"+id+"/verify", admin, nil))
				if v["valid"] != true || v["hash_valid"] != true || v["signature_valid"] != true || v["receipt_id"] != id {
					t.Errorf("verify %s = %v", id, v)
				}
			}
			s.Want(t, 404, "GET", "/v2/receipts/"+testkit.RandomUUID()+"/verify", admin, nil)

			pk := testkit.Obj(t, s.Want(t, 200, "GET", "/v2/receipts/public-key", admin, nil))
			pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
			sum := sha256.Sum256(pub)
			if pk["key_id"] != hex.EncodeToString(sum[:])[:16] || pk["public_key"] != base64.StdEncoding.EncodeToString(pub) {
				t.Errorf("public-key = %v; want key_id %s and the seed's public key", pk, hex.EncodeToString(sum[:])[:16])
			}
			if k, _ := pk["key_id"].(string); !azHex16RE.MatchString(k) {
				t.Errorf("key_id %v is not 16 hex", pk["key_id"])
			}

			chain := testkit.Obj(t, s.Want(t, 200, "POST", "/v2/receipts/verify-chain", admin, nil))
			if chain["valid"] != true || chain["checked"] != float64(4) || len(chain["errors"].([]any)) != 0 {
				t.Errorf("verify-chain = %v; want valid, checked 4", chain)
			}
			rng := testkit.Obj(t, s.Want(t, 200, "POST", "/v2/receipts/verify-chain", admin, map[string]any{"from_seq": 2, "to_seq": 3}))
			if rng["valid"] != true || rng["checked"] != float64(2) {
				t.Errorf("verify-chain seq 2..3 = %v; want valid, checked 2", rng)
			}
			ok := testkit.Obj(t, s.Want(t, 200, "POST", "/v2/receipts/verify-chain", admin, map[string]any{"receipt_ids": ids[:3]}))
			if ok["valid"] != true {
				t.Errorf("verify-chain of the first three in order = %v", ok)
			}
			swapped := testkit.Obj(t, s.Want(t, 200, "POST", "/v2/receipts/verify-chain", admin, map[string]any{"receipt_ids": []string{ids[1], ids[0]}}))
			errs, _ := swapped["errors"].([]any)
			if swapped["valid"] != false || len(errs) == 0 {
				t.Fatalf("verify-chain in swapped order = %v; want invalid with errors", swapped)
			}
			e0, _ := errs[0].(map[string]any)
			if _, ok := e0["index"].(float64); !ok {
				t.Errorf("chain error lacks a numeric index: %v", e0)
			}
			if msg, _ := e0["error"].(string); msg == "" {
				t.Errorf("chain error lacks an error text: %v", e0)
			}

			// Each error's index is the position in receipt_ids, found or not.
			gappy := testkit.Obj(t, s.Want(t, 200, "POST", "/v2/receipts/verify-chain", admin,
				map[string]any{"receipt_ids": []string{ids[0], testkit.RandomUUID(), ids[2], ids[3]}}))
			gerrs, _ := gappy["errors"].([]any)
			atIndex := map[float64][]string{}
			for _, e := range gerrs {
				em, _ := e.(map[string]any)
				i, _ := em["index"].(float64)
				atIndex[i] = append(atIndex[i], fmt.Sprint(em["error"]))
			}
			if gappy["valid"] != false || len(atIndex[1]) != 1 || atIndex[1][0] != "receipt not found" || len(atIndex[2]) == 0 || len(atIndex) != 2 {
				t.Errorf("verify-chain with an unknown id at index 1: errors by index %v; want not found at 1 and the broken link at 2 only", atIndex)
			}

			if walked, pages := listAll(t, s, admin, "/v2/receipts", "receipt_id", 3); pages != 2 ||
				!slices.Equal(walked, []string{ids[3], ids[2], ids[1], ids[0]}) {
				t.Errorf("receipt walk with limit 3: %v in %d pages", walked, pages)
			}

			path, lines := azExport(t, s, admin)
			if len(lines) != 5 {
				t.Fatalf("export has %d lines, want a header and 4 receipts", len(lines))
			}
			if code, out, errOut := gateway.RunCLI("verify-receipts", path); code != 0 {
				t.Errorf("verify-receipts on the export: exit %d\n%s%s", code, out, errOut)
			}
			// Pinned to the served key it passes; pinned to another key it
			// fails, since an export re-signed whole would name its own key.
			if code, out, errOut := gateway.RunCLI("verify-receipts", "-public-key", fmt.Sprint(pk["public_key"]), path); code != 0 ||
				!strings.Contains(out, "key_id: "+fmt.Sprint(pk["key_id"])) {
				t.Errorf("verify-receipts -public-key (the served key): exit %d\n%s%s", code, out, errOut)
			}
			other := base64.StdEncoding.EncodeToString(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32)).Public().(ed25519.PublicKey))
			if code, out, _ := gateway.RunCLI("verify-receipts", "-public-key", other, path); code != 1 || !strings.Contains(out, "not with the -public-key given") {
				t.Errorf("verify-receipts -public-key (another key): exit %d\n%s", code, out)
			}
			if code, _, _ := gateway.RunCLI("verify-receipts", "-public-key", "not-a-key", path); code != 2 {
				t.Errorf("verify-receipts -public-key not-a-key: exit %d, want 2 (usage)", code)
			}
			t.Run("tampered decision", func(t *testing.T) {
				edited := slices.Clone(lines)
				var r map[string]any
				if err := json.Unmarshal([]byte(edited[2]), &r); err != nil {
					t.Fatal(err)
				}
				if r["decision"] == "allow" {
					r["decision"] = "deny"
				} else {
					r["decision"] = "allow"
				}
				b, _ := json.Marshal(r)
				edited[2] = string(b)
				if code, out := azVerifyFile(t, edited); code == 0 {
					t.Errorf("verify-receipts accepts a changed decision:\n%s", out)
				}
			})
			t.Run("deleted middle line", func(t *testing.T) {
				edited := slices.Delete(slices.Clone(lines), 2, 3)
				if code, out := azVerifyFile(t, edited); code == 0 {
					t.Errorf("verify-receipts accepts a chain with a receipt removed:\n%s", out)
				}
			})
			t.Run("newest line removed, header rewritten to match", func(t *testing.T) {
				// Every remaining receipt and link verifies; only the
				// header's signature binds it to the served head.
				edited := slices.Clone(lines[:len(lines)-1])
				var h, last map[string]any
				if err := json.Unmarshal([]byte(edited[0]), &h); err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal([]byte(edited[len(edited)-1]), &last); err != nil {
					t.Fatal(err)
				}
				if _, ok := h["header_signature"].(string); !ok {
					t.Fatalf("signed export header without header_signature: %s", lines[0])
				}
				h["count"], h["head_seq"], h["head_hash"] = len(edited)-1, last["seq"], last["receipt_hash"]
				b, _ := json.Marshal(h)
				edited[0] = string(b)
				if code, out := azVerifyFile(t, edited); code == 0 || !strings.Contains(out, "header signature invalid") {
					t.Errorf("verify-receipts accepts an export with its newest receipt dropped and the header rewritten:\n%s", out)
				}
			})
		})

		t.Run("newest receipt removed from the database", func(t *testing.T) {
			// The stored chain head outlives the receipt: verify-chain and
			// the export (checked offline) must both see the chain stop short.
			// A receipt is part of its decision's one record, so the record
			// goes.
			if backend != "sqlite" {
				t.Skip("edits the database file directly; the check itself is backend-independent (http/decisions.go)")
			}
			tenantID, admin := s.Tenant(t, "az-trunc-"+testkit.Uniq())
			_, tok := s.Agent(t, admin, "truncated", nil)
			for i := 0; i < 3; i++ {
				gateway.AzWant(t, s, tok, gateway.AzTrustedWrite(nil), 200)
			}
			if v := testkit.Obj(t, s.Want(t, 200, "POST", "/v2/receipts/verify-chain", admin, nil)); v["valid"] != true || v["checked"] != float64(3) {
				t.Fatalf("verify-chain before = %v", v)
			}
			db, err := sql.Open("sqlite", strings.TrimPrefix(s.DBURL, "sqlite://")+"?_pragma=busy_timeout(10000)") // the server writes too
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = db.Close() }()
			if res, err := db.Exec(`DELETE FROM decisions WHERE tenant_id = ? AND receipt_seq = 3`, tenantID); err != nil {
				t.Fatal(err)
			} else if n, _ := res.RowsAffected(); n != 1 {
				t.Fatalf("deleted %d receipts, want 1", n)
			}
			v := testkit.Obj(t, s.Want(t, 200, "POST", "/v2/receipts/verify-chain", admin, nil))
			errs, _ := v["errors"].([]any)
			if v["valid"] != false || v["checked"] != float64(2) || len(errs) != 1 {
				t.Fatalf("verify-chain after removing the newest receipt = %v; want invalid, checked 2, one error", v)
			}
			if e, _ := errs[0].(map[string]any); e["index"] != float64(2) || !strings.Contains(fmt.Sprint(e["error"]), "missing at the end") {
				t.Errorf("chain error %v; want index 2, receipts missing at the end", e)
			}
			if r := testkit.Obj(t, s.Want(t, 200, "POST", "/v2/receipts/verify-chain", admin, map[string]any{"from_seq": 1, "to_seq": 2})); r["valid"] != true {
				t.Errorf("verify-chain of seq 1..2, which stops before the head = %v; want valid", r)
			}
			path, lines := azExport(t, s, admin)
			if len(lines) != 3 {
				t.Fatalf("export has %d lines, want a header and 2 receipts", len(lines))
			}
			if code, out, errOut := gateway.RunCLI("verify-receipts", path); code == 0 || !strings.Contains(out, "head seq mismatch") {
				t.Errorf("verify-receipts on the export of a truncated chain: exit %d\n%s%s", code, out, errOut)
			}
		})

		t.Run("unsigned receipts", func(t *testing.T) {
			plain := gateway.Start(t, backend, nil)
			_, admin := plain.Tenant(t, "az-plain-"+testkit.Uniq())
			_, tok := plain.Agent(t, admin, "unsigned", nil)
			m := gateway.AzWant(t, plain, tok, gateway.AzRead(nil), 200)
			v := testkit.Obj(t, plain.Want(t, 200, "GET", "/v2/receipts/"+testkit.Str(t, m, "receipt_id")+"/verify", admin, nil))
			if sv, present := v["signature_valid"]; !present || sv != nil || v["valid"] != true || v["hash_valid"] != true {
				t.Errorf("unsigned verify = %v; want valid, hash_valid, signature_valid null", v)
			}
			_, raw := plain.Do(t, "GET", "/v2/receipts/public-key", admin, nil)
			gateway.Envelope(t, raw, 404, "v2", "NotFound")
			path, _ := azExport(t, plain, admin)
			if code, out, errOut := gateway.RunCLI("verify-receipts", path); code != 0 {
				t.Errorf("verify-receipts on an unsigned export: exit %d\n%s%s", code, out, errOut)
			}
		})

		t.Run("decisions api", func(t *testing.T) {
			_, admin := s.Tenant(t, "az-dapi-"+testkit.Uniq())
			_, adminB := s.Tenant(t, "az-dapi-b-"+testkit.Uniq())
			_, tok := s.Agent(t, admin, "listed", nil)
			var created []string
			for i := 0; i < 3; i++ {
				created = append(created, testkit.Str(t, gateway.AzDecide(t, s, tok, gateway.AzRead(nil), "allow", ""), "decision_id"))
			}
			denyID := testkit.Str(t, gateway.AzDecide(t, s, tok, gateway.AzUntrustedWrite(nil), "deny", ""), "decision_id")
			created = append(created, denyID)
			created = append(created, testkit.Str(t, gateway.AzDecide(t, s, tok, gateway.AzTrustedWrite(nil), "allow", ""), "decision_id"))

			t.Run("search", func(t *testing.T) {
				found := testkit.Arr(t, s.Want(t, 200, "GET", "/v2/decisions?q=untrusted", admin, nil))
				if len(found) != 1 || found[0]["decision_id"] != denyID {
					t.Errorf("q=untrusted gives %v, want only %s", found, denyID)
				}
				if none := testkit.Arr(t, s.Want(t, 200, "GET", "/v2/decisions?q=zzzznothing", admin, nil)); len(none) != 0 {
					t.Errorf("q=zzzznothing gives %d decisions", len(none))
				}
				if other := testkit.Arr(t, s.Want(t, 200, "GET", "/v2/decisions?q=untrusted", adminB, nil)); len(other) != 0 {
					t.Errorf("tenant B's search finds tenant A's deny: %v", other)
				}
			})
			t.Run("cursor pagination", func(t *testing.T) {
				all := gateway.AzDecisions(t, s, admin)
				if len(all) != 5 {
					t.Fatalf("%d decisions, want 5", len(all))
				}
				for i, d := range all {
					if d["decision_id"] != created[4-i] {
						t.Errorf("list position %d is %v, want %s (newest first)", i, d["decision_id"], created[4-i])
					}
				}
				ids, pages := listAll(t, s, admin, "/v2/decisions", "decision_id", 2)
				if pages != 3 || !slices.Equal(ids, []string{created[4], created[3], created[2], created[1], created[0]}) {
					t.Errorf("walk with limit 2: %v in %d pages", ids, pages)
				}
			})
			t.Run("cross-tenant id", func(t *testing.T) {
				respX, rawX := s.Do(t, "GET", "/v2/decisions/"+denyID, adminB, nil)
				respU, rawU := s.Do(t, "GET", "/v2/decisions/"+testkit.RandomUUID(), adminB, nil)
				if respX.StatusCode != 404 || respU.StatusCode != 404 {
					t.Fatalf("cross-tenant %d, unknown %d; want 404 both", respX.StatusCode, respU.StatusCode)
				}
				gateway.Envelope(t, rawX, 404, "v2", "NotFound")
				if string(rawX) != string(rawU) {
					t.Errorf("cross-tenant body %s differs from unknown-id body %s", rawX, rawU)
				}
				s.Want(t, 200, "GET", "/v2/decisions/"+denyID, admin, nil)
			})
			t.Run("stats", func(t *testing.T) {
				st := testkit.Obj(t, s.Want(t, 200, "GET", "/v2/tenants/stats", admin, nil))
				if st["total_decisions"] != float64(5) || st["decisions_allow"] != float64(4) || st["decisions_deny"] != float64(1) ||
					st["decisions_require_approval"] != float64(0) || st["agents_total"] != float64(1) || st["agents_active"] != float64(1) {
					t.Errorf("stats = %v", st)
				}
				br, _ := st["trust_level_breakdown"].(map[string]any)
				if br[gateway.AzSigned] != float64(4) || br[gateway.AzUntrusted] != float64(1) {
					t.Errorf("trust_level_breakdown = %v; want %s 4, %s 1", br, gateway.AzSigned, gateway.AzUntrusted)
				}
			})
		})

		t.Run("risk settings and tier escalation", func(t *testing.T) {
			_, admin := s.Tenant(t, "az-risk-"+testkit.Uniq())
			weights := map[string]any{"trust": 1.5, "mutation": 0.2, "skill_risk": 0.2, "risk_tier": 0.2, "recent_denials": 0.1}
			_, raw := s.Do(t, "PUT", "/v2/tenants/risk-weights", admin, weights)
			if e := gateway.Envelope(t, raw, 400, "v2", "BadRequest"); gateway.Detail(e, "field") != "trust" {
				t.Errorf("details.field %v, want trust", gateway.Detail(e, "field"))
			}
			weights["trust"] = 0.5
			s.Want(t, 200, "PUT", "/v2/tenants/risk-weights", admin, weights)
			got := testkit.Obj(t, s.Want(t, 200, "GET", "/v2/tenants/risk-weights", admin, nil))
			for k, v := range weights {
				if got[k] != v {
					t.Errorf("risk weight %s = %v, want %v", k, got[k], v)
				}
			}
			esc := map[string]any{"denial_threshold": 2, "window_minutes": 60}
			s.Want(t, 200, "PUT", "/v2/tenants/risk-escalation", admin, esc)
			if g := testkit.Obj(t, s.Want(t, 200, "GET", "/v2/tenants/risk-escalation", admin, nil)); g["denial_threshold"] != float64(2) || g["window_minutes"] != float64(60) {
				t.Errorf("risk-escalation = %v", g)
			}

			id, tok := s.Agent(t, admin, "escalating", nil)
			// Simulated denies are not recorded and do not count.
			for i := 0; i < 3; i++ {
				gateway.AzDecide(t, s, tok, gateway.AzUntrustedWrite(map[string]any{"dry_run": true}), "deny", "untrusted_mutation")
			}
			// "More than denial_threshold": two denies are not enough.
			for i := 0; i < 2; i++ {
				gateway.AzDecide(t, s, tok, gateway.AzUntrustedWrite(nil), "deny", "untrusted_mutation")
			}
			if tier := s.GetAgent(t, admin, id)["risk_tier"]; tier != "low" {
				t.Errorf("risk_tier %v after 3 dry-run and 2 real denies (threshold 2), want low", tier)
			}
			gateway.AzDecide(t, s, tok, gateway.AzUntrustedWrite(nil), "deny", "untrusted_mutation")
			testkit.Eventually(t, 10*time.Second, "risk_tier medium after 3 denies over a threshold of 2", func() bool {
				return s.GetAgent(t, admin, id)["risk_tier"] == "medium"
			})
			s.WaitAudit(t, admin, "event_type=agent_risk_escalated", "agent_risk_escalated audit event", func(e map[string]any) bool {
				return e["agent_id"] == id
			})
			// One step at a time: three more denies move medium to high, and
			// the stored tier is real authorization state.
			for i := 0; i < 3; i++ {
				gateway.AzDecide(t, s, tok, gateway.AzUntrustedWrite(nil), "deny", "untrusted_mutation")
			}
			testkit.Eventually(t, 10*time.Second, "risk_tier high after 3 more denies", func() bool {
				return s.GetAgent(t, admin, id)["risk_tier"] == "high"
			})
			gateway.AzDecide(t, s, tok, gateway.AzTrustedWrite(nil), "require_approval", "high_risk_tier_mutation")
		})

		t.Run("bad input", func(t *testing.T) {
			_, admin := s.Tenant(t, "az-bad-"+testkit.Uniq())
			_, tok := s.Agent(t, admin, "sloppy", nil)
			cases := []struct {
				name, body  string
				headers     []string
				status      int
				reason      string
				code, field string
			}{
				{name: "malformed json", body: `{"tool_call":`, status: 400, reason: "BadRequest", code: "invalid_json"},
				{name: "invalid UTF-8 in a parameter", body: "{\"tool_call\":{\"tool\":\"github\",\"action\":\"x\",\"parameters\":{\"q\":\"caf\xe9\"}},\"source_trust\":\"trusted_internal_signed\"}",
					status: 400, reason: "BadRequest", code: "invalid_json"},
				{name: "parameters as a string", body: `{"tool_call":{"tool":"github","action":"x","parameters":"a=b"},"source_trust":"trusted_internal_signed"}`,
					status: 400, reason: "BadRequest", field: "tool_call.parameters"},
				{name: "missing tool", body: `{"tool_call":{"action":"x"},"source_trust":"trusted_internal_signed"}`,
					status: 400, reason: "BadRequest", field: "tool_call.tool"},
				{name: "missing action", body: `{"tool_call":{"tool":"github"},"source_trust":"trusted_internal_signed"}`,
					status: 400, reason: "BadRequest", field: "tool_call.action"},
				{name: "invalid source_trust", body: `{"tool_call":{"tool":"github","action":"x"},"source_trust":"very_trusted"}`,
					status: 400, reason: "BadRequest", field: "source_trust"},
				{name: "invalid root trust", body: `{"tool_call":{"tool":"github","action":"x"},"source_trust":"unknown","trace":{"root_trust_level":"nope"}}`,
					status: 400, reason: "BadRequest", field: "trace.root_trust_level"},
				{name: "mutates_state not boolean", body: `{"tool_call":{"tool":"github","action":"x"},"mutates_state":"yes"}`,
					status: 400, reason: "BadRequest", field: "mutates_state"},
				{name: "text/plain", body: `{"tool_call":{"tool":"github","action":"x"}}`, headers: []string{"Content-Type", "text/plain"},
					status: 415, reason: "UnsupportedMediaType"},
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					resp, raw := s.Do(t, "POST", "/v2/authorize", tok, c.body, c.headers...)
					if resp.StatusCode != c.status {
						t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, raw)
					}
					e := gateway.Envelope(t, raw, c.status, "v2", c.reason)
					if c.code != "" && gateway.Detail(e, "error") != c.code {
						t.Errorf("details.error %v, want %s", gateway.Detail(e, "error"), c.code)
					}
					if c.field != "" {
						if gateway.Detail(e, "field") != c.field {
							t.Errorf("details.field %v, want %s", gateway.Detail(e, "field"), c.field)
						}
						if msg, _ := e["message"].(string); !strings.Contains(msg, c.field) {
							t.Errorf("message %q does not name %s", msg, c.field)
						}
					}
				})
			}
			if n := len(gateway.AzDecisions(t, s, admin)); n != 0 {
				t.Errorf("rejected requests wrote %d decisions", n)
			}
		})
	})
}
