package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// A class is one kind of call of the mix, with the decision both servers
// must answer for it.
type class struct {
	name     string
	expected string // the decision svc (and OPA with bench/opa) answers
	build    func(variant int) callSpec
}

// callSpec is one tool call as the agent sends it.
type callSpec struct {
	Tool        string         `json:"tool"`
	Action      string         `json:"action"`
	Resource    *string        `json:"resource"`
	Parameters  map[string]any `json:"parameters"`
	Mutates     bool           `json:"-"`
	SourceTrust string         `json:"-"`
}

const defaultMix = "read=60,mutate=20,deny=10,redact=10"

// classes are the calls of the mix. The skill "crm" is registered (see
// crmSkill); "payments" is not, so its calls carry skill null.
var classes = []class{
	{name: "read", expected: "allow", build: func(v int) callSpec {
		// A read-only call: base policy default_allow_read.
		return callSpec{Tool: "crm", Action: "get_contact", Resource: strPtr(fmt.Sprintf("contact/c-%d", v)),
			Parameters:  map[string]any{"contact_id": fmt.Sprintf("c-%d", v), "fields": []any{"email", "phone"}},
			SourceTrust: "trusted_internal_unsigned"}
	}},
	{name: "mutate", expected: "allow", build: func(v int) callSpec {
		// A mutation at trusted_internal_signed: default_allow_trusted_mutation.
		return callSpec{Tool: "crm", Action: "update_contact", Resource: strPtr(fmt.Sprintf("contact/c-%d", v)),
			Parameters: map[string]any{"contact_id": fmt.Sprintf("c-%d", v), "email": fmt.Sprintf("user%d@example.com", v)},
			Mutates:    true, SourceTrust: "trusted_internal_signed"}
	}},
	{name: "deny", expected: "deny", build: func(v int) callSpec {
		// The same mutation from an untrusted_external source: untrusted_mutation.
		return callSpec{Tool: "crm", Action: "update_contact", Resource: strPtr(fmt.Sprintf("contact/c-%d", v)),
			Parameters: map[string]any{"contact_id": fmt.Sprintf("c-%d", v), "email": fmt.Sprintf("attacker%d@example.net", v)},
			Mutates:    true, SourceTrust: "untrusted_external"}
	}},
	{name: "redact", expected: "redact", build: func(v int) callSpec {
		// A trusted charge with a card number: allowed by the base set and
		// redacted by the tenant policy bench_redact.
		return callSpec{Tool: "payments", Action: "charge", Resource: nil,
			Parameters: map[string]any{"amount": 4200 + v, "currency": "eur", "card_number": "4242424242424242",
				"order_id": fmt.Sprintf("o-%d", v)},
			Mutates: true, SourceTrust: "trusted_internal_signed"}
	}},
}

func classNames() []string {
	out := make([]string, len(classes))
	for i, c := range classes {
		out[i] = c.name
	}
	return out
}

type skillAction struct {
	Risk             string `json:"risk"`
	MutatesState     bool   `json:"mutates_state"`
	ApprovalRequired bool   `json:"approval_required"`
}

const crmKey, crmDescription = "crm", "Customer records"

var crmSkill = map[string]skillAction{
	"get_contact":    {Risk: "low"},
	"update_contact": {Risk: "medium", MutatesState: true},
}

// variants per class: the parameters vary so that action hashes vary.
const variants = 32

type mixWeight struct {
	Class  string `json:"class"`
	Weight int    `json:"weight"`
}

func parseMix(s string) ([]mixWeight, error) {
	var out []mixWeight
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		name, w, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, fmt.Errorf("%q is not class=weight", part)
		}
		n, err := strconv.Atoi(w)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q: weight must be a non-negative integer", part)
		}
		if classIndex(name) < 0 {
			return nil, fmt.Errorf("unknown class %q (have %s)", name, strings.Join(classNames(), ", "))
		}
		if seen[name] {
			return nil, fmt.Errorf("class %q given twice", name)
		}
		seen[name] = true
		if n > 0 {
			out = append(out, mixWeight{name, n})
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no class with a positive weight")
	}
	return out, nil
}

func classIndex(name string) int {
	for i, c := range classes {
		if c.name == name {
			return i
		}
	}
	return -1
}

// schedule spreads the classes by weight (smooth weighted round robin), so
// that every stretch of the sequence has the mix's proportions.
func schedule(mix []mixWeight) []int {
	g := 0
	for _, m := range mix {
		g = gcd(g, m.Weight)
	}
	total := 0
	w := make([]int, len(mix))
	for i, m := range mix {
		w[i] = m.Weight / g
		total += w[i]
	}
	cur := make([]int, len(mix))
	seq := make([]int, 0, total)
	for range total {
		best := 0
		for i := range mix {
			cur[i] += w[i]
			if cur[i] > cur[best] {
				best = i
			}
		}
		cur[best] -= total
		seq = append(seq, classIndex(mix[best].Class))
	}
	return seq
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// request is one prepared HTTP request: its body and bearer token.
type request struct {
	body     []byte
	raw      []byte // the whole HTTP/1.1 request, for -client raw
	token    string
	class    int
	expected []byte // `"decision":"<expected>"`, as both servers encode it
}

// workload holds every prepared request; next picks them round-robin.
type workload struct {
	endpoint string
	agents   int
	seq      []int
	// reqs[agent][class][variant]
	reqs [][][]request
	// info for the report
	tenantID string
	opToken  string
	// runs > 0: every body holds a run id placeholder (runSlot) that pick
	// fills in per call.
	runs int
}

// runSlot is the run id placeholder of a body: 16 characters that pick
// overwrites with the call's run, in hex.
const runSlot = "RRRRRRRRRRRRRRRR"

// pick returns the n-th request: the agents take turns, and the classes
// interleave in the schedule's order both across consecutive requests and
// across each agent's own calls (agent k's r-th call takes schedule entry
// k+r). An earlier version gave all agents the same class for a whole
// round, so the server saw blocks of identical calls (50 mutations, then
// 50 reads, ...), which no fleet sends.
func (w *workload) pick(n int64) *request {
	agents, seq := int64(w.agents), int64(len(w.seq))
	agent, round := n%agents, n/agents
	cls := w.seq[(agent+round)%seq]
	req := &w.reqs[agent][cls][(round/seq)%variants]
	if w.runs <= 0 {
		return req
	}
	// The call's run: its agent, its class and which block of runs of the
	// agent's calls of that class it falls in, so that a run holds runs
	// calls of one tool (the last of each agent and class fewer).
	return w.inRun(req, fmt.Sprintf("%08x%06x%02x", w.classCalls(agent, round, cls)/int64(w.runs), agent, cls))
}

// classCalls is how many calls of class cls agent made before its round-th
// call: each whole pass over the schedule holds cls a fixed number of
// times, and the pass under way the times it came up so far.
func (w *workload) classCalls(agent, round int64, cls int) int64 {
	seq := int64(len(w.seq))
	var per, sofar int64
	for j := range seq {
		if w.seq[(agent+j)%seq] == cls {
			per++
			if j < round%seq {
				sofar++
			}
		}
	}
	return round/seq*per + sofar
}

// inRun is req with its run id placeholder set to id (16 characters).
func (w *workload) inRun(req *request, id string) *request {
	q := *req
	q.body = patchRun(req.body, id)
	if req.raw != nil {
		q.raw = patchRun(req.raw, id)
	}
	return &q
}

// patchRun returns a copy of b with its run id placeholder replaced.
func patchRun(b []byte, id string) []byte {
	i := bytes.Index(b, []byte(runSlot))
	out := append([]byte(nil), b...)
	copy(out[i:], id)
	return out
}

// agentInfo is what the OPA input names as the agent.
type agentInfo struct {
	id, name, token string
}

// svcBody is the body of POST /v2/authorize; with runs, it names the run
// placeholder.
func svcBody(c callSpec, runs bool) ([]byte, error) {
	b := map[string]any{"tool_call": c, "mutates_state": c.Mutates, "source_trust": c.SourceTrust}
	if runs {
		b["trace"] = map[string]any{"run_id": runSlot}
	}
	return json.Marshal(b)
}

// opaBody is {"input": ...}: the document svc's engine evaluates for the
// same call (rules/policy.Input): normalized identifiers, the effective
// trust as both trust_level and root_trust_level (no upstream hop), the
// server-side tier and status, and the registry's metadata for the action.
func opaBody(tenantID string, a agentInfo, c callSpec) ([]byte, error) {
	var skill any
	if c.Tool == crmKey {
		if act, ok := crmSkill[c.Action]; ok {
			skill = map[string]any{"key": crmKey, "description": crmDescription, "action": c.Action, "risk": act.Risk,
				"mutates_state": act.MutatesState, "approval_required": act.ApprovalRequired}
		}
	}
	in := map[string]any{
		"tenant_id":        tenantID,
		"agent":            map[string]any{"id": a.id, "name": a.name, "risk_tier": "low", "status": "active"},
		"tool_call":        c,
		"mutates_state":    c.Mutates,
		"trust_level":      c.SourceTrust,
		"root_trust_level": c.SourceTrust,
		"environment":      "",
		"skill":            skill,
		"mcp":              nil,
	}
	return json.Marshal(map[string]any{"input": in})
}

// prepare registers what the target needs and builds every request.
func prepare(ctx context.Context, o options, client *http.Client, logf func(string, ...any)) (*workload, error) {
	w := &workload{agents: o.agents, seq: schedule(o.mix)}
	if o.target == "svc" {
		w.runs = o.runs
	}
	var agents []agentInfo
	switch o.target {
	case "svc":
		w.endpoint = o.url + "/v2/authorize"
		var err error
		agents, err = setupSvc(ctx, o, client, w, logf)
		if err != nil {
			return nil, err
		}
	case "opa":
		w.endpoint = o.url + "/v1/data/svc/decision"
		w.tenantID = "00000000-0000-4000-8000-00000000b0b0"
		for i := range o.agents {
			agents = append(agents, agentInfo{id: fmt.Sprintf("00000000-0000-4000-8000-%012d", i+1), name: fmt.Sprintf("bench-agent-%03d", i)})
		}
	}
	w.reqs = make([][][]request, o.agents)
	// svc bodies do not name the agent: build them once and share them.
	shared := make([][][]byte, len(classes))
	for ci, c := range classes {
		shared[ci] = make([][]byte, variants)
		for v := range variants {
			b, err := svcBody(c.build(v), w.runs > 0)
			if err != nil {
				return nil, err
			}
			shared[ci][v] = b
		}
	}
	for ai, a := range agents {
		w.reqs[ai] = make([][]request, len(classes))
		for ci, c := range classes {
			w.reqs[ai][ci] = make([]request, variants)
			for v := range variants {
				r := request{token: a.token, class: ci, expected: []byte(`"decision":"` + c.expected + `"`), body: shared[ci][v]}
				if o.target == "opa" {
					b, err := opaBody(w.tenantID, a, c.build(v))
					if err != nil {
						return nil, err
					}
					r.body = b
				}
				w.reqs[ai][ci][v] = r
			}
		}
	}
	return w, nil
}

// setupSvc creates the tenant (or uses the operator token's), the risk
// settings, the skill, the tenant policy and the agents.
func setupSvc(ctx context.Context, o options, client *http.Client, w *workload, logf func(string, ...any)) ([]agentInfo, error) {
	suffix := strconv.FormatInt(time.Now().UnixNano()%1_000_000_000, 36)
	op := o.operatorToken
	if op == "" {
		var t struct {
			TenantID      string `json:"tenant_id"`
			OperatorToken string `json:"operator_token"`
		}
		if err := call(ctx, client, "POST", o.url+"/v2/tenants", o.adminToken, map[string]any{"name": "bench-" + suffix}, 201, &t); err != nil {
			return nil, fmt.Errorf("create tenant: %w", err)
		}
		op, w.tenantID = t.OperatorToken, t.TenantID
		logf("tenant %s created", t.TenantID)
	}
	w.opToken = op
	// More than denial_threshold denies within window_minutes move an agent
	// one tier up, and a high-tier agent's mutations then need approval: at
	// thousands of denies a second every agent would be high-tier within
	// seconds and the mix would change under the benchmark. Raise the
	// threshold to its maximum and shorten the window instead; the deny path
	// still does all its work (the denial window is updated on every deny).
	if err := call(ctx, client, "PUT", o.url+"/v2/tenants/risk-escalation", op,
		map[string]any{"denial_threshold": 10000, "window_minutes": 1}, 200, nil); err != nil {
		return nil, fmt.Errorf("risk escalation: %w", err)
	}
	if err := call(ctx, client, "PUT", o.url+"/v2/skills/"+crmKey, op,
		map[string]any{"description": crmDescription, "actions": crmSkill}, 200, nil); err != nil {
		return nil, fmt.Errorf("register skill: %w", err)
	}
	rego, err := os.ReadFile(o.tenantPolicy)
	if err != nil {
		return nil, fmt.Errorf("-tenant-policy: %w", err)
	}
	pol := map[string]any{"name": "bench_redact", "rego": string(rego), "description": "benchmark: redact card numbers"}
	if err := call(ctx, client, "POST", o.url+"/v2/policies", op, pol, 201, nil); err != nil {
		var se *statusError
		if !errors.As(err, &se) || se.status != http.StatusConflict {
			return nil, fmt.Errorf("install tenant policy: %w", err)
		}
		if err := call(ctx, client, "PUT", o.url+"/v2/policies/bench_redact", op, map[string]any{"rego": string(rego), "enabled": true}, 200, nil); err != nil {
			return nil, fmt.Errorf("update tenant policy: %w", err)
		}
	}
	if err := installRunPolicies(ctx, o, client, op, logf); err != nil {
		return nil, err
	}
	agents := make([]agentInfo, 0, o.agents)
	for i := range o.agents {
		var a struct {
			AgentID    string `json:"agent_id"`
			Name       string `json:"name"`
			AgentToken string `json:"agent_token"`
		}
		name := fmt.Sprintf("bench-%s-%03d", suffix, i)
		if err := call(ctx, client, "POST", o.url+"/v2/agents", op, map[string]any{"name": name}, 201, &a); err != nil {
			return nil, fmt.Errorf("register agent %d: %w", i, err)
		}
		agents = append(agents, agentInfo{id: a.AgentID, name: a.Name, token: a.AgentToken})
	}
	logf("%d agents registered, skill %q, tenant policy bench_redact installed", len(agents), crmKey)
	return agents, nil
}

// installRunPolicies installs each .rego file of -run-policies as a tenant
// policy named after the file.
func installRunPolicies(ctx context.Context, o options, client *http.Client, op string, logf func(string, ...any)) error {
	if o.runPolicies == "" {
		return nil
	}
	files, err := filepath.Glob(filepath.Join(o.runPolicies, "*.rego"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("-run-policies %s: no .rego files", o.runPolicies)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		name := strings.TrimSuffix(filepath.Base(f), ".rego")
		if err := call(ctx, client, "POST", o.url+"/v2/policies", op, map[string]any{"name": name, "rego": string(src)}, 201, nil); err != nil {
			return fmt.Errorf("install run policy %s: %w", name, err)
		}
	}
	logf("%d run policies installed from %s", len(files), o.runPolicies)
	return nil
}

type statusError struct {
	status int
	body   string
}

func (e *statusError) Error() string { return fmt.Sprintf("status %d: %s", e.status, e.body) }

// call sends one JSON request and decodes the answer into out.
func call(ctx context.Context, client *http.Client, method, url, token string, body any, want int, out any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return &statusError{resp.StatusCode, strings.TrimSpace(string(b))}
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// tenantStats reads GET /v2/tenants/stats: how many decisions svc recorded.
func tenantStats(ctx context.Context, client *http.Client, url, op string) (map[string]any, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url+"/v2/tenants/stats", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+op)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	var out map[string]any
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

func strPtr(s string) *string { return &s }

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
