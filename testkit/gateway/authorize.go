package gateway

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"svc/testkit"
)

// AzRead is a read-only call at trusted_internal_signed (allowed by
// default_allow_read).
func AzRead(extra map[string]any) map[string]any {
	return AzBody("github", "list_issues", false, AzSigned, extra)
}

// AzUntrustedWrite is a mutating call at untrusted_external (denied by
// untrusted_mutation).
func AzUntrustedWrite(extra map[string]any) map[string]any {
	return AzBody("github", "create_issue", true, AzUntrusted, extra)
}

// AzTrustedWrite is a mutating call at trusted_internal_signed (allowed by
// default_allow_trusted_mutation for a low-tier agent).
func AzTrustedWrite(extra map[string]any) map[string]any {
	return AzBody("github", "create_issue", true, AzSigned, extra)
}

// AzWant asserts the status of an authorize call and returns its body.
func AzWant(t testing.TB, s *Server, tok string, body any, status int, headers ...string) map[string]any {
	t.Helper()
	resp, m, raw := AzPost(t, s, tok, body, headers...)
	if resp.StatusCode != status {
		t.Fatalf("POST /v2/authorize: status %d, want %d; body %s", resp.StatusCode, status, raw)
	}
	return m
}

// AzDecide asserts a 200 answer with the given decision (and reason unless
// empty) and returns the body.
func AzDecide(t testing.TB, s *Server, tok string, body any, decision, reason string) map[string]any {
	t.Helper()
	m := AzWant(t, s, tok, body, 200)
	if m["decision"] != decision || (reason != "" && m["reason"] != reason) {
		t.Fatalf("decision %v reason %v, want %s %s; body %v", m["decision"], m["reason"], decision, reason, m)
	}
	return m
}

// AzStrings converts a JSON array of strings.
func AzStrings(v any) []string {
	a, _ := v.([]any)
	out := make([]string, 0, len(a))
	for _, x := range a {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// AzDecisions lists the tenant's decisions (up to 500, newest first).
func AzDecisions(t testing.TB, s *Server, tok string) []map[string]any {
	t.Helper()
	return testkit.Arr(t, s.Want(t, 200, "GET", "/v2/decisions?limit=500", tok, nil))
}

// AzSeed returns a random Ed25519 seed and its standard base64.
func AzSeed(t testing.TB) ([]byte, string) {
	t.Helper()
	seed := make([]byte, ed25519.SeedSize)
	if _, err := rand.Read(seed); err != nil {
		t.Fatal(err)
	}
	return seed, base64.StdEncoding.EncodeToString(seed)
}

// AzConcurrent sends n copies of body at once (released together).
func AzConcurrent(s *Server, tok string, n int, body []byte) []AzResult {
	c := AzClient(n)
	defer c.CloseIdleConnections()
	out := make([]AzResult, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			out[i] = AzSend(c, s.Base, tok, body)
		})
	}
	close(start)
	wg.Wait()
	return out
}

func AzJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ApRequire registers a high-tier agent and makes one call that needs
// approval; it returns the agent's token and id and the approval id.
func ApRequire(t testing.TB, s *Server, admin string) (agentTok, agentID, approvalID string) {
	t.Helper()
	agentID, agentTok = s.Agent(t, admin, "ap-"+testkit.Uniq(), map[string]any{"risk_tier": "high"})
	m := AzDecide(t, s, agentTok, ApCall(map[string]any{"x": 1}, nil), "require_approval", "")
	approvalID, _ = m["approval_id"].(string)
	if len(approvalID) != 36 {
		t.Fatalf("require_approval without approval_id: %v", m)
	}
	exp, err := time.Parse(time.RFC3339Nano, testkit.Str(t, m, "approval_expires_at"))
	if err != nil || exp.Before(time.Now().Add(25*time.Minute)) || exp.After(time.Now().Add(31*time.Minute)) {
		t.Fatalf("approval_expires_at %v, want about now + 1800 s (err %v)", m["approval_expires_at"], err)
	}
	return agentTok, agentID, approvalID
}

// Trust levels used throughout.
const (
	AzSigned    = "trusted_internal_signed"
	AzUntrusted = "untrusted_external"
	AzMalicious = "malicious_suspected"
)

// AzBody builds an authorize request; extra fields are merged in.
func AzBody(tool, action string, mutates bool, trust string, extra map[string]any) map[string]any {
	b := map[string]any{
		"tool_call":     map[string]any{"tool": tool, "action": action, "parameters": map[string]any{}},
		"mutates_state": mutates,
		"source_trust":  trust,
	}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

// AzPost sends POST /v2/authorize and decodes an object body when there is
// one.
func AzPost(t testing.TB, s *Server, tok string, body any, headers ...string) (*http.Response, map[string]any, []byte) {
	t.Helper()
	resp, raw := s.Do(t, "POST", "/v2/authorize", tok, body, headers...)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp, m, raw
}

// AzResult is one answer of a concurrent authorize call.
type AzResult struct {
	Status int
	Body   map[string]any
	Raw    []byte
	Err    error
}

// AzClient is a client for many concurrent calls to one server.
func AzClient(conns int) *http.Client {
	return &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxIdleConns: conns}}
}

// AzSend posts one authorize call; safe to use from any goroutine (it never
// calls t.Fatal).
func AzSend(c *http.Client, base, tok string, body []byte) AzResult {
	req, err := http.NewRequest("POST", base+"/v2/authorize", bytes.NewReader(body))
	if err != nil {
		return AzResult{Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := c.Do(req)
	if err != nil {
		return AzResult{Err: err}
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return AzResult{Status: resp.StatusCode, Err: err}
	}
	r := AzResult{Status: resp.StatusCode, Raw: raw}
	_ = json.Unmarshal(raw, &r.Body)
	return r
}

// ApCall is the mutating call a high-tier agent needs approval for
// (high_tier_mutation), with its parameters.
func ApCall(params map[string]any, extra map[string]any) map[string]any {
	b := map[string]any{
		"tool_call":     map[string]any{"tool": "crm", "action": "update_contact", "resource": "contact/1", "parameters": params},
		"mutates_state": true,
		"source_trust":  AzSigned,
	}
	for k, v := range extra {
		b[k] = v
	}
	return b
}
