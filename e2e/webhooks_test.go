package e2e

// Webhook export end to end (SPEC 6.5, CONTRACT §7): subscriptions CRUD
// over HTTP, and a loopback fake subscriber that records what it receives
// and fails on demand.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/persistence/storetest"
	"svc/testkit"
	"svc/testkit/gateway"
)

// whDelivery is one request the fake subscriber received.
type whDelivery struct {
	path   string
	header http.Header
	body   []byte
}

// whReceiver is a loopback webhook subscriber: one server, one path per
// subscription; a failing path answers 500.
type whReceiver struct {
	srv *httptest.Server

	mu      sync.Mutex
	got     []whDelivery
	failing map[string]bool
}

func newWhReceiver(t testing.TB) *whReceiver {
	r := &whReceiver{failing: map[string]bool{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, whDelivery{path: req.URL.Path, header: req.Header.Clone(), body: body})
		failing := r.failing[req.URL.Path]
		r.mu.Unlock()
		if failing {
			http.Error(w, "subscriber down", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *whReceiver) url(path string) string { return r.srv.URL + path }

func (r *whReceiver) fail(path string, on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failing[path] = on
}

// at returns the requests received on path, in order.
func (r *whReceiver) at(path string) []whDelivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []whDelivery
	for _, d := range r.got {
		if d.path == path {
			out = append(out, d)
		}
	}
	return out
}

// jsonWith returns the json deliveries on path whose field has value.
func (r *whReceiver) jsonWith(t testing.TB, path, field, value string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, d := range r.at(path) {
		var m map[string]any
		if err := json.Unmarshal(d.body, &m); err != nil {
			t.Fatalf("delivery on %s is not JSON: %s", path, d.body)
		}
		if m[field] == value {
			out = append(out, m)
		}
	}
	return out
}

// whCreate creates a subscription and returns the creation answer.
func whCreate(t testing.TB, s *gateway.Server, admin string, req map[string]any) map[string]any {
	t.Helper()
	return testkit.Obj(t, s.Want(t, 201, "POST", "/v2/webhooks/subscriptions", admin, req))
}

func whGet(t testing.TB, s *gateway.Server, tok, id string) map[string]any {
	t.Helper()
	return testkit.Obj(t, s.Want(t, 200, "GET", "/v2/webhooks/subscriptions/"+id, tok, nil))
}

// whVerify checks X-Svc-Signature over the body under secret.
func whVerify(t testing.TB, d whDelivery, secret string) {
	t.Helper()
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(d.body)
	want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	if got := d.header.Get("X-Svc-Signature"); !hmac.Equal([]byte(got), []byte(want)) {
		t.Errorf("X-Svc-Signature %q does not verify under the delivery secret (want %q)", got, want)
	}
}

// whCEFFields splits a CEF line on its unescaped pipes.
func whCEFFields(line string) []string {
	var out []string
	var cur strings.Builder
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '\\' && i+1 < len(line):
			cur.WriteByte(line[i])
			cur.WriteByte(line[i+1])
			i++
		case line[i] == '|' && len(out) < 7:
			out = append(out, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(line[i])
		}
	}
	return append(out, cur.String())
}

var whUUIDv4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestE2EWebhooks(t *testing.T) {
	t.Parallel()
	gateway.ForModes(t, func(t *testing.T, backend string) {
		recv := newWhReceiver(t)
		s := gateway.Start(t, backend, map[string]string{"SVC_ALLOW_PRIVATE_TARGETS": "true", "SVC_RATE_LIMIT_CAPACITY": "100000"})

		t.Run("subscriptions CRUD, secret once, roles, other tenants", func(t *testing.T) {
			tenantID, admin := s.Tenant(t, "wh-crud-"+testkit.Uniq())
			_, otherAdmin := s.Tenant(t, "wh-crud-other-"+testkit.Uniq())
			_, viewer := s.OpToken(t, admin, "viewer", "viewer")
			_, approver := s.OpToken(t, admin, "approver", "approver")
			_, agentTok := s.Agent(t, admin, "bot", nil)

			created := whCreate(t, s, admin, map[string]any{"url": recv.url("/crud"), "min_severity": "high", "format": "cef"})
			id, secret := testkit.Str(t, created, "subscription_id"), testkit.Str(t, created, "delivery_secret")
			if !whUUIDv4.MatchString(id) || !strings.HasPrefix(secret, "svc_whsec_") || len(secret) < 40 {
				t.Fatalf("id %q / secret %q", id, secret)
			}
			want := map[string]any{"tenant_id": tenantID, "url": recv.url("/crud"), "min_severity": "high", "format": "cef",
				"enabled": true, "consecutive_failures": float64(0), "delivery_status": "healthy", "last_delivery_at": nil}
			for k, v := range want {
				if created[k] != v {
					t.Errorf("created %s = %v, want %v", k, created[k], v)
				}
			}
			for _, k := range []string{"created_at", "updated_at"} {
				if ts, err := time.Parse(time.RFC3339, testkit.Str(t, created, k)); err != nil || ts.Location() != time.UTC {
					t.Errorf("%s = %v is not RFC 3339 UTC", k, created[k])
				}
			}
			second := whCreate(t, s, admin, map[string]any{"url": recv.url("/crud2"), "enabled": false})
			if second["min_severity"] != "info" || second["format"] != "json" || second["enabled"] != false ||
				second["delivery_secret"] == secret {
				t.Errorf("defaults / a fresh secret: %v", second)
			}

			// Every read: any role, never the secret.
			for _, tok := range []string{admin, viewer, approver} {
				rawList := s.Want(t, 200, "GET", "/v2/webhooks/subscriptions", tok, nil)
				rawOne := s.Want(t, 200, "GET", "/v2/webhooks/subscriptions/"+id, tok, nil)
				if strings.Contains(string(rawList)+string(rawOne), secret) || strings.Contains(string(rawOne), "delivery_secret") {
					t.Fatalf("a read shows the secret: %s %s", rawList, rawOne)
				}
				list := testkit.Arr(t, rawList)
				if len(list) != 2 || list[0]["subscription_id"] != second["subscription_id"] || list[1]["subscription_id"] != id {
					t.Fatalf("list = %v, want both, newest first", list)
				}
				if one := testkit.Obj(t, rawOne); one["url"] != recv.url("/crud") || one["delivery_status"] != "healthy" {
					t.Fatalf("GET one = %v", one)
				}
			}
			page := s.Want(t, 200, "GET", "/v2/webhooks/subscriptions?limit=1", admin, nil)
			if len(testkit.Arr(t, page)) != 1 {
				t.Errorf("limit=1 gave %s", page)
			}
			// Audit trail without the secret.
			ev := s.WaitAudit(t, admin, "event_type=config_change", "the creation's audit event", func(e map[string]any) bool {
				return e["action"] == "webhook_subscription_created"
			})
			if raw, _ := json.Marshal(ev); strings.Contains(string(raw), secret) {
				t.Errorf("the audit event carries the secret: %s", raw)
			}

			// Writes need admin; agents get nothing.
			for _, tok := range []string{viewer, approver} {
				s.Want(t, 403, "POST", "/v2/webhooks/subscriptions", tok, map[string]any{"url": recv.url("/x")})
				s.Want(t, 403, "PATCH", "/v2/webhooks/subscriptions/"+id, tok, map[string]any{"enabled": false})
				s.Want(t, 403, "DELETE", "/v2/webhooks/subscriptions/"+id, tok, nil)
			}
			s.Want(t, 403, "GET", "/v2/webhooks/subscriptions", agentTok, nil)
			s.Want(t, 401, "GET", "/v2/webhooks/subscriptions", "", nil)

			// Another tenant's id is exactly an unknown one.
			unknown := testkit.Obj(t, s.Want(t, 404, "GET", "/v2/webhooks/subscriptions/"+testkit.RandomUUID(), admin, nil))
			for _, m := range []struct{ method, path string }{{"GET", "/v2/webhooks/subscriptions/" + id},
				{"PATCH", "/v2/webhooks/subscriptions/" + id}, {"DELETE", "/v2/webhooks/subscriptions/" + id}} {
				var body any
				if m.method == "PATCH" {
					body = map[string]any{"enabled": false}
				}
				resp, raw := s.Do(t, m.method, m.path, otherAdmin, body)
				e := gateway.Envelope(t, raw, 404, "v2", "NotFound")
				if resp.StatusCode != 404 || e["message"] != unknown["message"] {
					t.Errorf("%s another tenant's subscription: %d %s, want the unknown-id 404 %v", m.method, resp.StatusCode, raw, unknown)
				}
			}
			if list := testkit.Arr(t, s.Want(t, 200, "GET", "/v2/webhooks/subscriptions", otherAdmin, nil)); len(list) != 0 {
				t.Errorf("the other tenant lists %v", list)
			}
			s.Want(t, 404, "GET", "/v2/webhooks/subscriptions/not-a-uuid", admin, nil)

			// Bad input: the envelope with details.
			bad := []struct {
				name, body, errCode, field string
			}{
				{"malformed JSON", `{"url":`, "invalid_json", ""},
				{"url of the wrong type", `{"url":["x"]}`, "invalid_type", "url"},
				{"no url", `{"format":"json"}`, "invalid_field", "url"},
				{"ftp scheme", `{"url":"ftp://example.com/hook"}`, "invalid_field", "url"},
				{"not a URL", `{"url":"hooks please"}`, "invalid_field", "url"},
				{"bad min_severity", `{"url":"https://example.com/h","min_severity":"critical"}`, "invalid_field", "min_severity"},
				{"bad format", `{"url":"https://example.com/h","format":"xml"}`, "invalid_field", "format"},
				{"enabled of the wrong type", `{"url":"https://example.com/h","enabled":1}`, "invalid_type", "enabled"},
				{"metadata address", `{"url":"http://169.254.169.254/latest/meta-data"}`, "forbidden_target", "url"},
			}
			for _, b := range bad {
				resp, raw := s.Do(t, "POST", "/v2/webhooks/subscriptions", admin, b.body)
				e := gateway.Envelope(t, raw, 400, "v2", "BadRequest")
				if resp.StatusCode != 400 || gateway.Detail(e, "error") != b.errCode || (b.field != "" && gateway.Detail(e, "field") != b.field) {
					t.Errorf("%s: %d %s, want 400 %s field %s", b.name, resp.StatusCode, raw, b.errCode, b.field)
				}
			}
			resp, raw := s.Do(t, "PATCH", "/v2/webhooks/subscriptions/"+id, admin, `{"min_severity":"urgent"}`)
			if e := gateway.Envelope(t, raw, 400, "v2", "BadRequest"); resp.StatusCode != 400 || gateway.Detail(e, "field") != "min_severity" {
				t.Errorf("bad PATCH: %d %s", resp.StatusCode, raw)
			}
			resp, raw = s.Do(t, "PATCH", "/v2/webhooks/subscriptions/"+id, admin, `{"enabled":null}`)
			if e := gateway.Envelope(t, raw, 400, "v2", "BadRequest"); resp.StatusCode != 400 || gateway.Detail(e, "field") != "enabled" {
				t.Errorf("null PATCH: %d %s", resp.StatusCode, raw)
			}
			if got := s.Want(t, 415, "POST", "/v2/webhooks/subscriptions", admin, `{"url":"https://e.com"}`, "Content-Type", "text/plain"); len(got) == 0 {
				t.Error("415 without a body")
			}

			// PATCH and DELETE.
			patched := testkit.Obj(t, s.Want(t, 200, "PATCH", "/v2/webhooks/subscriptions/"+id, admin,
				map[string]any{"url": recv.url("/crud-new"), "format": "json", "min_severity": "info", "enabled": false}))
			if patched["url"] != recv.url("/crud-new") || patched["format"] != "json" || patched["min_severity"] != "info" ||
				patched["enabled"] != false || patched["created_at"] != created["created_at"] {
				t.Errorf("patched = %v", patched)
			}
			if _, ok := patched["delivery_secret"]; ok {
				t.Error("PATCH shows the secret")
			}
			s.Want(t, 204, "DELETE", "/v2/webhooks/subscriptions/"+id, admin, nil)
			s.Want(t, 404, "GET", "/v2/webhooks/subscriptions/"+id, admin, nil)
			s.Want(t, 404, "DELETE", "/v2/webhooks/subscriptions/"+id, admin, nil)
			// /v1 serves the same resource.
			if list := testkit.Arr(t, s.Want(t, 200, "GET", "/v1/webhooks/subscriptions", admin, nil)); len(list) != 1 {
				t.Errorf("/v1 list = %v", list)
			}
		})

		t.Run("deliveries: json signed, cef, min_severity high", func(t *testing.T) {
			tenantID, admin := s.Tenant(t, "wh-deliver-"+testkit.Uniq())
			agentID, tok := s.Agent(t, admin, "exported", nil)
			js := whCreate(t, s, admin, map[string]any{"url": recv.url("/d/json"), "min_severity": "info", "format": "json"})
			cef := whCreate(t, s, admin, map[string]any{"url": recv.url("/d/cef"), "min_severity": "info", "format": "cef"})
			high := whCreate(t, s, admin, map[string]any{"url": recv.url("/d/high"), "min_severity": "high", "format": "json"})
			whCreate(t, s, admin, map[string]any{"url": recv.url("/d/off"), "enabled": false})

			gateway.AzDecide(t, s, tok, gateway.AzRead(nil), "allow", "")
			deny := gateway.AzDecide(t, s, tok, gateway.AzUntrustedWrite(nil), "deny", "")
			denyID := testkit.Str(t, deny, "decision_id")
			_, highTok := s.Agent(t, admin, "exported-high", map[string]any{"risk_tier": "high"})
			req := gateway.AzDecide(t, s, highTok, gateway.ApCall(map[string]any{"secret_param": "p@ssw0rd-value"}, nil), "require_approval", "")

			// json (info): the deny, its HIGH alert and the require_approval.
			testkit.Eventually(t, 10*time.Second, "the deny, the alert and the require_approval at the json subscriber", func() bool {
				return len(recv.jsonWith(t, "/d/json", "id", denyID)) == 1 && len(recv.jsonWith(t, "/d/json", "type", "alert")) == 1 &&
					len(recv.jsonWith(t, "/d/json", "id", testkit.Str(t, req, "decision_id"))) == 1
			})
			got := recv.jsonWith(t, "/d/json", "id", denyID)[0]
			// CONTRACT §13: a deny counts as high, a require_approval as info.
			wantDeny := map[string]any{"type": "decision", "kind": "deny", "severity": "HIGH", "tenant_id": tenantID,
				"agent_id": agentID, "schema_version": float64(1)}
			for k, v := range wantDeny {
				if got[k] != v {
					t.Errorf("deny payload %s = %v, want %v", k, got[k], v)
				}
			}
			if len(got) != 9 {
				t.Errorf("deny payload has %d fields, want the 9 of CONTRACT §7: %v", len(got), got)
			}
			if at, err := time.Parse(time.RFC3339, got["occurred_at"].(string)); err != nil || time.Since(at) > time.Minute {
				t.Errorf("occurred_at = %v", got["occurred_at"])
			}
			if sum, _ := got["summary"].(string); !strings.Contains(sum, "github.create_issue") {
				t.Errorf("summary = %q", sum)
			}
			for _, d := range recv.at("/d/json") {
				whVerify(t, d, testkit.Str(t, js, "delivery_secret"))
				if d.header.Get("Content-Type") != "application/json" || d.header.Get("X-Svc-Subscription-ID") != js["subscription_id"] {
					t.Errorf("json delivery headers: %v", d.header)
				}
				for _, secretText := range []string{testkit.Str(t, req, "approval_id"), "p@ssw0rd-value", tok, highTok, admin,
					testkit.Str(t, js, "delivery_secret")} {
					if strings.Contains(string(d.body), secretText) {
						t.Errorf("a delivery contains %q: %s", secretText, d.body)
					}
				}
			}
			if ra := recv.jsonWith(t, "/d/json", "kind", "require_approval"); len(ra) != 1 || ra[0]["severity"] != "INFO" {
				t.Errorf("require_approval payload = %v", ra)
			}
			alert := recv.jsonWith(t, "/d/json", "type", "alert")[0]
			if alert["kind"] != "confused_deputy_block" || alert["severity"] != "HIGH" || alert["agent_id"] != agentID {
				t.Errorf("alert payload = %v", alert)
			}
			// Alerts are stored in batches every 100 ms: poll for the row.
			testkit.Eventually(t, 5*time.Second, "the exported alert's id among GET /v2/alerts' HIGH alerts", func() bool {
				for _, a := range testkit.Arr(t, s.Want(t, 200, "GET", "/v2/alerts?severity=high", admin, nil)) {
					if a["alert_id"] == alert["id"] {
						return true
					}
				}
				return false
			})

			// min_severity high: the deny (high by CONTRACT §13) and the HIGH
			// alert, not the require_approval (info). The info subscriber has
			// everything by now, and the high one's deliveries were dispatched
			// with theirs.
			testkit.Eventually(t, 10*time.Second, "the deny and the HIGH alert at the high subscriber", func() bool {
				return len(recv.jsonWith(t, "/d/high", "id", alert["id"].(string))) == 1 && len(recv.jsonWith(t, "/d/high", "id", denyID)) == 1
			})
			if n := len(recv.at("/d/high")); n != 2 {
				t.Errorf("the high subscriber got %d deliveries, want the deny and the HIGH alert: %v", n, recv.at("/d/high"))
			}
			for _, d := range recv.at("/d/high") {
				whVerify(t, d, testkit.Str(t, high, "delivery_secret"))
			}
			if len(recv.at("/d/off")) != 0 {
				t.Error("the disabled subscription got a delivery")
			}

			// cef: one well-formed line per export.
			testkit.Eventually(t, 10*time.Second, "three CEF lines", func() bool { return len(recv.at("/d/cef")) == 3 })
			var denyLine string
			for _, d := range recv.at("/d/cef") {
				whVerify(t, d, testkit.Str(t, cef, "delivery_secret"))
				if ct := d.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
					t.Errorf("cef Content-Type %q", ct)
				}
				if strings.Contains(string(d.body), "externalId="+denyID) {
					denyLine = string(d.body)
				}
			}
			f := whCEFFields(denyLine)
			if len(f) != 8 || f[0] != "CEF:0" || f[1] != "svc" || f[2] != "gateway" || f[3] == "" || f[4] != "deny" ||
				!strings.Contains(f[5], "github.create_issue") || f[6] != "8" || strings.ContainsAny(denyLine, "\r\n") {
				t.Fatalf("deny CEF line %q: fields %q", denyLine, f)
			}
			ext := f[7]
			rt := regexp.MustCompile(`(^| )rt=(\d+)( |$)`).FindStringSubmatch(ext)
			if rt == nil {
				t.Fatalf("no numeric rt in %q", ext)
			}
			if ms, _ := strconv.ParseInt(rt[2], 10, 64); time.Since(time.UnixMilli(ms)).Abs() > time.Minute {
				t.Errorf("rt %s is not the decision's time in ms", rt[2])
			}
			for _, part := range []string{"suser=" + agentID, "cs1Label=tenant cs1=" + tenantID, "cat=decision"} {
				if !strings.Contains(ext, part) {
					t.Errorf("CEF extension %q lacks %q", ext, part)
				}
			}
			for _, d := range recv.at("/d/cef") {
				if strings.Contains(string(d.body), "cat=alert") && whCEFFields(string(d.body))[6] != "8" {
					t.Errorf("HIGH alert CEF severity: %s", d.body)
				}
			}

			// Each success was recorded on its subscription.
			testkit.Eventually(t, 10*time.Second, "last_delivery_at on the json subscription", func() bool {
				return whGet(t, s, admin, testkit.Str(t, js, "subscription_id"))["last_delivery_at"] != nil
			})
			if g := whGet(t, s, admin, testkit.Str(t, js, "subscription_id")); g["consecutive_failures"] != float64(0) || g["delivery_status"] != "healthy" {
				t.Errorf("after successes: %v", g)
			}
			// The counter moves after the subscriber's answer reaches the
			// exporter, so a delivery can be seen here a moment before it
			// is counted.
			testkit.Eventually(t, 10*time.Second, "svc_webhook_deliveries_sent_total at least the 7 deliveries seen", func() bool {
				return gateway.MetricValue(t, s, "svc_webhook_deliveries_sent_total") >= 7
			})
		})

		t.Run("a failing subscriber goes degraded, then dead; PATCH revives it", func(t *testing.T) {
			_, admin := s.Tenant(t, "wh-fail-"+testkit.Uniq())
			_, tok := s.Agent(t, admin, "failing", nil)
			recv.fail("/f/down", true)
			down := whCreate(t, s, admin, map[string]any{"url": recv.url("/f/down")})
			whCreate(t, s, admin, map[string]any{"url": recv.url("/f/marker")})
			downID := testkit.Str(t, down, "subscription_id")
			failedBefore := gateway.MetricValue(t, s, "svc_webhook_deliveries_failed_total")

			gateway.AzDecide(t, s, tok, gateway.AzUntrustedWrite(nil), "deny", "") // the deny and its HIGH alert
			testkit.Eventually(t, 15*time.Second, "degraded after the first failed delivery", func() bool {
				g := whGet(t, s, admin, downID)
				n, _ := g["consecutive_failures"].(float64)
				return n >= 1 && n < 10 && g["delivery_status"] == "degraded" && g["last_delivery_at"] != nil
			})
			if n := len(recv.at("/f/down")); n < 3 {
				t.Errorf("%d attempts at the failing subscriber, want 3 per delivery", n)
			}
			for range 5 {
				gateway.AzDecide(t, s, tok, gateway.AzUntrustedWrite(nil), "deny", "")
			}
			// Settled: dead, and every attempt made belongs to a recorded
			// failure (3 attempts each).
			var failures float64
			testkit.Eventually(t, 30*time.Second, "dead with every delivery recorded", func() bool {
				g := whGet(t, s, admin, downID)
				failures, _ = g["consecutive_failures"].(float64)
				return g["delivery_status"] == "dead" && failures >= 10 && len(recv.at("/f/down")) == 3*int(failures)
			})
			testkit.Eventually(t, 10*time.Second, "svc_webhook_deliveries_failed_total to grow by the recorded failures", func() bool {
				return gateway.MetricValue(t, s, "svc_webhook_deliveries_failed_total")-failedBefore >= failures
			})
			attempts := len(recv.at("/f/down"))

			// Dead: the next triggers reach the marker but not the dead one.
			for range 2 {
				d := gateway.AzDecide(t, s, tok, gateway.AzUntrustedWrite(nil), "deny", "")
				testkit.Eventually(t, 10*time.Second, "the marker's delivery", func() bool {
					return len(recv.jsonWith(t, "/f/marker", "id", testkit.Str(t, d, "decision_id"))) == 1
				})
			}
			if n := len(recv.at("/f/down")); n != attempts {
				t.Fatalf("the dead subscription got %d more attempts", n-attempts)
			}
			if g := whGet(t, s, admin, downID); g["consecutive_failures"] != failures || g["delivery_status"] != "dead" {
				t.Fatalf("a dead subscription changed without deliveries: %v", g)
			}

			// PATCH resets and revives it.
			recv.fail("/f/down", false)
			patched := testkit.Obj(t, s.Want(t, 200, "PATCH", "/v2/webhooks/subscriptions/"+downID, admin, map[string]any{}))
			if patched["consecutive_failures"] != float64(0) || patched["delivery_status"] != "healthy" {
				t.Fatalf("PATCH {} = %v, want 0 healthy", patched)
			}
			d := gateway.AzDecide(t, s, tok, gateway.AzUntrustedWrite(nil), "deny", "")
			testkit.Eventually(t, 10*time.Second, "a delivery to the revived subscription", func() bool {
				return len(recv.jsonWith(t, "/f/down", "id", testkit.Str(t, d, "decision_id"))) == 1
			})
			testkit.Eventually(t, 10*time.Second, "the success recorded", func() bool {
				g := whGet(t, s, admin, downID)
				return g["last_delivery_at"] != patched["last_delivery_at"] && g["consecutive_failures"] == float64(0) &&
					g["delivery_status"] == "healthy"
			})
		})
	})
}

// TestE2EWebhookPrivateTarget: without SVC_ALLOW_PRIVATE_TARGETS a
// subscription to a loopback or private literal address is refused when it
// is created or changed (CONTRACT §7); link-local is refused always.
func TestE2EWebhookPrivateTarget(t *testing.T) {
	t.Parallel()
	recv := newWhReceiver(t)
	s := gateway.Start(t, "sqlite", nil)
	_, admin := s.Tenant(t, "wh-private-"+testkit.Uniq())
	port := recv.srv.URL[strings.LastIndex(recv.srv.URL, ":")+1:]
	for _, target := range []string{recv.url("/x"), "http://localhost:" + port + "/x", "http://[::1]:" + port + "/x",
		"https://10.0.0.7/hook", "https://192.168.1.20/hook", "http://169.254.169.254/latest"} {
		resp, raw := s.Do(t, "POST", "/v2/webhooks/subscriptions", admin, map[string]any{"url": target})
		e := gateway.Envelope(t, raw, 400, "v2", "BadRequest")
		if resp.StatusCode != 400 || gateway.Detail(e, "field") != "url" || gateway.Detail(e, "error") != "forbidden_target" {
			t.Errorf("POST %s: %d %s, want 400 forbidden_target on url", target, resp.StatusCode, raw)
		}
	}
	// A name is accepted (it is checked where each delivery dials), and
	// cannot be moved to a private literal afterwards.
	sub := whCreate(t, s, admin, map[string]any{"url": "https://hooks.example.com/svc"})
	resp, raw := s.Do(t, "PATCH", "/v2/webhooks/subscriptions/"+testkit.Str(t, sub, "subscription_id"), admin, map[string]any{"url": recv.url("/x")})
	if e := gateway.Envelope(t, raw, 400, "v2", "BadRequest"); resp.StatusCode != 400 || gateway.Detail(e, "error") != "forbidden_target" {
		t.Errorf("PATCH to loopback: %d %s", resp.StatusCode, raw)
	}
	if g := whGet(t, s, admin, testkit.Str(t, sub, "subscription_id")); g["url"] != "https://hooks.example.com/svc" {
		t.Errorf("the refused PATCH changed the url: %v", g)
	}
	if len(recv.at("/x")) != 0 {
		t.Error("the loopback receiver was contacted")
	}
}

// TestE2EWebhookCluster: two clustered nodes. A subscription change on one
// node reaches the other's exporter at once (a broadcast invalidation), not
// only when its cached list expires (5 s).
func TestE2EWebhookCluster(t *testing.T) {
	valkey := storetest.ValkeyURL(t)
	dbURL := storetest.PostgresURL(t)
	recv := newWhReceiver(t)
	env := map[string]string{"SVC_CLUSTER": "true", "SVC_VALKEY_URL": valkey, "SVC_RATE_LIMIT_CAPACITY": "100000",
		"SVC_ALLOW_PRIVATE_TARGETS": "true"}
	a := gateway.StartOn(t, dbURL, env)
	b := gateway.StartOn(t, dbURL, env)
	_, admin := a.Tenant(t, "wh-cluster-"+testkit.Uniq())
	_, tok := a.Agent(t, admin, "roamer", nil)
	first := whCreate(t, a, admin, map[string]any{"url": recv.url("/c/first")})

	// Node b reads the tenant's subscriptions for this deny and caches them.
	d := gateway.AzDecide(t, b, tok, gateway.AzUntrustedWrite(nil), "deny", "")
	testkit.Eventually(t, 10*time.Second, "node b's delivery to the first subscription", func() bool {
		return len(recv.jsonWith(t, "/c/first", "id", testkit.Str(t, d, "decision_id"))) == 1
	})
	loaded := time.Now()

	// Created on node a: node b delivers the very next deny to it.
	whCreate(t, a, admin, map[string]any{"url": recv.url("/c/second")})
	d = gateway.AzDecide(t, b, tok, gateway.AzUntrustedWrite(nil), "deny", "")
	testkit.Eventually(t, 10*time.Second, "node b's delivery to the subscription created on node a", func() bool {
		return len(recv.jsonWith(t, "/c/second", "id", testkit.Str(t, d, "decision_id"))) == 1
	})

	// Deleted on node a: node b stops at once. The second subscription's
	// delivery was dispatched with the first's.
	a.Want(t, 204, "DELETE", "/v2/webhooks/subscriptions/"+testkit.Str(t, first, "subscription_id"), admin, nil)
	d = gateway.AzDecide(t, b, tok, gateway.AzUntrustedWrite(nil), "deny", "")
	testkit.Eventually(t, 10*time.Second, "node b's delivery to the remaining subscription", func() bool {
		return len(recv.jsonWith(t, "/c/second", "id", testkit.Str(t, d, "decision_id"))) == 1
	})
	if n := len(recv.jsonWith(t, "/c/first", "id", testkit.Str(t, d, "decision_id"))); n != 0 {
		t.Errorf("node b delivered to a subscription deleted on node a")
	}
	t.Logf("changes checked %s after node b cached the subscriptions (its cache lifetime is 5 s)", time.Since(loaded))
}
