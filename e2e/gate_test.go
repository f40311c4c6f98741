package e2e

// The pull-request Security Gate end to end (SPEC 4.9 rules 1 to 6,
// CONTRACT §9; issue 27) against a loopback fake code host that answers
// the REST calls as the real one documents them (read a pull request,
// create and update a check run, post an issue comment), records them, and
// fails or hangs on demand.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/testkit"
	"svc/testkit/gateway"
)

// fakeCodeHost is the code host's REST API for one repository's pull
// requests.
type fakeCodeHost struct {
	srv *httptest.Server
	mu  sync.Mutex
	// mode: "" answers, "fail" answers 500, "hang" never answers.
	mode     string
	nextID   int64
	creates  []checkRunCall
	updates  []checkRunCall
	comments []string
	reads    int
	auth     []string
	done     chan struct{} // closed at the test's end: hung calls return
}

// checkRunCall is one create or update of a check run.
type checkRunCall struct {
	ID         int64
	HeadSHA    string `json:"head_sha"`
	Name       string `json:"name"`
	Status     string `json:"status"`
	Conclusion string `json:"conclusion"`
	Output     struct {
		Title       string `json:"title"`
		Summary     string `json:"summary"`
		Annotations []struct {
			Path            string `json:"path"`
			AnnotationLevel string `json:"annotation_level"`
			Message         string `json:"message"`
		} `json:"annotations"`
	} `json:"output"`
}

const fakeHeadSHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"

var (
	fakePullRE    = regexp.MustCompile(`^/repos/([^/]+)/([^/]+)/pulls/(\d+)$`)
	fakeRunsRE    = regexp.MustCompile(`^/repos/([^/]+)/([^/]+)/check-runs$`)
	fakeRunRE     = regexp.MustCompile(`^/repos/([^/]+)/([^/]+)/check-runs/(\d+)$`)
	fakeCommentRE = regexp.MustCompile(`^/repos/([^/]+)/([^/]+)/issues/(\d+)/comments$`)
)

func newFakeCodeHost(t testing.TB) *fakeCodeHost {
	f := &fakeCodeHost{nextID: 1000, done: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(func() { close(f.done); f.srv.Close() })
	return f
}

func (f *fakeCodeHost) setMode(m string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mode = m
}

func (f *fakeCodeHost) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	mode := f.mode
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	f.mu.Unlock()
	switch mode {
	case "fail":
		http.Error(w, `{"message":"Server Error"}`, http.StatusInternalServerError)
		return
	case "hang":
		select {
		case <-r.Context().Done():
		case <-f.done:
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	f.mu.Lock()
	defer f.mu.Unlock()
	path := r.URL.Path
	switch {
	case r.Method == "GET" && fakePullRE.MatchString(path):
		f.reads++
		var n int
		_, _ = fmt.Sscan(fakePullRE.FindStringSubmatch(path)[3], &n)
		_, _ = fmt.Fprintf(w, `{"number":%d,"state":"open","head":{"ref":"widget","sha":%q},"base":{"ref":"main"}}`, n, fakeHeadSHA)
	case r.Method == "POST" && fakeRunsRE.MatchString(path):
		var c checkRunCall
		_ = json.Unmarshal(body, &c)
		f.nextID++
		c.ID = f.nextID
		f.creates = append(f.creates, c)
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprintf(w, `{"id":%d,"head_sha":%q,"name":%q,"status":%q}`, c.ID, c.HeadSHA, c.Name, c.Status)
	case r.Method == "PATCH" && fakeRunRE.MatchString(path):
		var c checkRunCall
		_ = json.Unmarshal(body, &c)
		_, _ = fmt.Sscan(fakeRunRE.FindStringSubmatch(path)[3], &c.ID)
		f.updates = append(f.updates, c)
		_, _ = fmt.Fprintf(w, `{"id":%d,"name":%q,"status":%q}`, c.ID, c.Name, c.Status)
	case r.Method == "POST" && fakeCommentRE.MatchString(path):
		var c struct {
			Body string `json:"body"`
		}
		_ = json.Unmarshal(body, &c)
		f.comments = append(f.comments, c.Body)
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprintf(w, `{"id":%d,"body":%q}`, len(f.comments), c.Body)
	default:
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
	}
}

// latest is the check run's last written state (its create or update).
func (f *fakeCodeHost) latest() (checkRunCall, int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var last checkRunCall
	if n := len(f.updates); n > 0 {
		last = f.updates[n-1]
	} else if n := len(f.creates); n > 0 {
		last = f.creates[n-1]
	}
	return last, len(f.creates), len(f.comments)
}

// gateCall is an authorize call of the code-host tool on a pull request.
func gateCall(action, resource string, mutates bool, trust string) map[string]any {
	return map[string]any{"tool_call": map[string]any{"tool": "codehost", "action": action, "resource": resource, "parameters": map[string]any{}},
		"mutates_state": mutates, "source_trust": trust}
}

func TestE2ESecurityGate(t *testing.T) {
	t.Parallel()
	gateway.ForModes(t, testSecurityGate)
}

func testSecurityGate(t *testing.T, backend string) {
	host := newFakeCodeHost(t)
	s := gateway.Start(t, backend, map[string]string{"SVC_CODEHOST_APP_TOKEN": "ghs_test_token", "SVC_CODEHOST_API_URL": host.srv.URL,
		"SVC_ALLOW_PRIVATE_TARGETS": "true", "SVC_RATE_LIMIT_CAPACITY": "100000"})
	_, admin := s.Tenant(t, "gate-"+testkit.Uniq())
	_, tok := s.Agent(t, admin, "gate-agent-"+testkit.Uniq(), nil)
	// merge needs approval (a skill), writes from untrusted input are denied.
	s.Want(t, 200, "PUT", "/v2/skills/codehost", admin, map[string]any{"description": "the code host",
		"actions": map[string]any{"merge": map[string]any{"risk": "high", "mutates_state": true, "approval_required": true}}})
	pr := "acme/widgets#42"
	wait := func(what string, cond func(c checkRunCall, creates, comments int) bool) checkRunCall {
		t.Helper()
		var last checkRunCall
		testkit.Eventually(t, 20*time.Second, what, func() bool {
			c, creates, comments := host.latest()
			last = c
			return cond(c, creates, comments)
		})
		return last
	}

	// A dry run touches nothing; the first real decision creates the run.
	gateway.AzDecide(t, s, tok, merge(gateCall("read", pr, false, gateway.AzSigned), map[string]any{"dry_run": true}), "allow", "")
	gateway.AzDecide(t, s, tok, gateCall("read", pr, false, gateway.AzSigned), "allow", "")
	c := wait("the check run created", func(c checkRunCall, creates, _ int) bool { return creates == 1 && c.Conclusion == "success" })
	if c.Name != "Security Gate" || c.HeadSHA != fakeHeadSHA || c.Status != "completed" || !strings.Contains(c.Output.Summary, "1 allowed, 0 denied, 0 pending") {
		t.Errorf("created: %+v", c)
	}
	gateway.AzDecide(t, s, tok, gateCall("merge", pr, true, gateway.AzSigned), "require_approval", "")
	wait("action_required", func(c checkRunCall, _, _ int) bool {
		return c.Conclusion == "action_required" && strings.Contains(c.Output.Summary, "1 allowed, 0 denied, 1 pending")
	})
	deny := gateway.AzDecide(t, s, tok, gateCall("push", pr, true, gateway.AzUntrusted), "deny", "")
	c = wait("failure with a comment", func(c checkRunCall, _, comments int) bool { return c.Conclusion == "failure" && comments == 1 })
	if !strings.Contains(c.Output.Summary, "1 allowed, 1 denied, 1 pending") || len(c.Output.Annotations) != 2 ||
		c.Output.Annotations[0].Path != ".svc/decisions" {
		t.Errorf("after a deny: %+v", c)
	}
	host.mu.Lock()
	comment := host.comments[0]
	host.mu.Unlock()
	for _, want := range []string{deny["decision_id"].(string), "Risk score", "untrusted_mutation"} {
		if !strings.Contains(comment, want) {
			t.Errorf("the comment lacks %q: %s", want, comment)
		}
	}
	// 24 more denies: 5 comments, 20 annotations, one check run.
	for range 24 {
		gateway.AzDecide(t, s, tok, gateCall("push", pr, true, gateway.AzUntrusted), "deny", "")
	}
	c = wait("25 denies counted", func(c checkRunCall, _, _ int) bool {
		return strings.Contains(c.Output.Summary, "1 allowed, 25 denied, 1 pending")
	})
	if len(c.Output.Annotations) != 20 {
		t.Errorf("%d annotations, want 20", len(c.Output.Annotations))
	}
	time.Sleep(time.Second) // comments still in flight would show now
	if _, creates, comments := host.latest(); creates != 1 || comments != 5 {
		t.Errorf("%d check runs created, %d comments; want 1 and 5", creates, comments)
	}
	host.mu.Lock()
	for _, a := range host.auth {
		if a != "Bearer ghs_test_token" {
			t.Errorf("a call with Authorization %q", a)
			break
		}
	}
	host.mu.Unlock()

	// The pull requests the tenant's agents touched, with the gate's
	// figures; another tenant sees none of them.
	pulls := testkit.Arr(t, s.Want(t, 200, "GET", "/v2/codehost/pull-requests", admin, nil))
	if len(pulls) != 1 || pulls[0]["pull_request"] != pr || pulls[0]["conclusion"] != "failure" || pulls[0]["allowed"] != 1.0 ||
		pulls[0]["denied"] != 25.0 || pulls[0]["pending"] != 1.0 || pulls[0]["comments"] != 5.0 || pulls[0]["head_sha"] != fakeHeadSHA ||
		pulls[0]["check_run_id"] == nil {
		t.Errorf("pull requests: %v", pulls)
	}
	_, otherAdmin := s.Tenant(t, "gate-other-"+testkit.Uniq())
	if others := testkit.Arr(t, s.Want(t, 200, "GET", "/v2/codehost/pull-requests", otherAdmin, nil)); len(others) != 0 {
		t.Errorf("another tenant sees %v", others)
	}

	// Other resources and tools are not the gate's.
	gateway.AzDecide(t, s, tok, gateCall("read", "acme/widgets", false, gateway.AzSigned), "allow", "")
	gateway.AzDecide(t, s, tok, gateway.AzRead(map[string]any{"tool_call": map[string]any{"tool": "github", "action": "read", "resource": "acme/other#1", "parameters": map[string]any{}}}), "allow", "")

	// A failing, then a hanging code host: authorize answers as before,
	// and each failure is counted and dropped.
	before := gateway.MetricValue(t, s, "svc_gate_failures_total")
	host.setMode("fail")
	gateway.AzDecide(t, s, tok, gateCall("read", "acme/widgets#43", false, gateway.AzSigned), "allow", "")
	testkit.Eventually(t, 20*time.Second, "the failure counted", func() bool { return gateway.MetricValue(t, s, "svc_gate_failures_total") > before })
	host.setMode("hang")
	for range 3 {
		gateway.AzDecide(t, s, tok, gateCall("read", "acme/widgets#44", false, gateway.AzSigned), "allow", "")
	}
	before = gateway.MetricValue(t, s, "svc_gate_failures_total")
	testkit.Eventually(t, 30*time.Second, "the hung call timed out and counted", func() bool { return gateway.MetricValue(t, s, "svc_gate_failures_total") > before })
	host.setMode("")
}

// merge returns m with extra's keys set.
func merge(m, extra map[string]any) map[string]any {
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// SVC_CODEHOST_TOOL_KEY names the tool the gate watches: with GitHub
// (normalized as a tool key is), a call of tool github creates the check
// run, and one of the default's codehost touches nothing.
func TestE2ESecurityGateToolKey(t *testing.T) {
	t.Parallel()
	host := newFakeCodeHost(t)
	s := gateway.Start(t, "sqlite", map[string]string{"SVC_CODEHOST_APP_TOKEN": "ghs_test_token", "SVC_CODEHOST_API_URL": host.srv.URL,
		"SVC_ALLOW_PRIVATE_TARGETS": "true", "SVC_CODEHOST_TOOL_KEY": "GitHub"})
	_, admin := s.Tenant(t, "gate-key-"+testkit.Uniq())
	_, tok := s.Agent(t, admin, "gate-key-agent", nil)
	gateway.AzDecide(t, s, tok, gateCall("read", "acme/widgets#7", false, gateway.AzSigned), "allow", "")
	other := gateCall("read", "acme/widgets#8", false, gateway.AzSigned)
	other["tool_call"].(map[string]any)["tool"] = "github"
	gateway.AzDecide(t, s, tok, other, "allow", "")
	testkit.Eventually(t, 20*time.Second, "the check run of the github call", func() bool { _, creates, _ := host.latest(); return creates >= 1 })
	time.Sleep(300 * time.Millisecond) // a run for the codehost call would be created by now too
	host.mu.Lock()
	defer host.mu.Unlock()
	if len(host.creates) != 1 {
		t.Errorf("%d check runs created, want only the github call's: %+v", len(host.creates), host.creates)
	}
}
