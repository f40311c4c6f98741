package svcsdk

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// MaxBodyBytes is svc's request body limit (1 MiB): a larger authorize body
// is refused locally.
const MaxBodyBytes = 1 << 20

// maxWait is the longest ?wait=N (CONTRACT 14).
const maxWait = 25

// maxAnswerBytes bounds the answers read.
const maxAnswerBytes = 32 << 20

// Client is an agent's client of svc. It is safe for concurrent use.
type Client struct {
	baseURL         string
	token           string
	signingKey      []byte
	timeout         time.Duration
	retries         int
	receiptKey      string
	apiVersion      string
	approvalTimeout time.Duration
	log             *slog.Logger
	http            *http.Client
	userAgent       string

	failOpen      map[[2]string]bool // {tool, ""} or {tool, action}, normalized
	failOpenCount atomic.Int64
	deprecated    sync.Once
}

// Option configures a [Client].
type Option func(*Client) error

// WithSigningKey sets the agent's signing key (standard base64): every
// authorize body is then signed.
func WithSigningKey(b64 string) Option {
	return func(c *Client) error {
		if b64 == "" {
			return nil
		}
		k, err := DecodeSigningKey(b64)
		if err != nil {
			return err
		}
		c.signingKey = k
		return nil
	}
}

// WithTimeout sets the total deadline of one Authorize, every attempt and
// wait included (default 3 s).
func WithTimeout(d time.Duration) Option {
	return func(c *Client) error {
		if d <= 0 {
			return errors.New("timeout must be positive")
		}
		c.timeout = d
		return nil
	}
}

// WithRetries sets how many more attempts follow the first (default 2).
func WithRetries(n int) Option {
	return func(c *Client) error {
		if n < 0 {
			n = 0
		}
		c.retries = n
		return nil
	}
}

// WithReceiptPublicKey pins the gateway's Ed25519 receipt key (standard
// base64, obtained out of band): Run then verifies the receipt of every
// mutating call before running it.
func WithReceiptPublicKey(b64 string) Option {
	return func(c *Client) error {
		if b64 == "" {
			return nil
		}
		if _, err := DecodePublicKey(b64); err != nil {
			return err
		}
		c.receiptKey = b64
		return nil
	}
}

// WithAPIVersion selects "v2" (default) or the deprecated "v1" paths.
func WithAPIVersion(v string) Option {
	return func(c *Client) error {
		if v == "" {
			return nil
		}
		if v != "v1" && v != "v2" {
			return errors.New(`api version must be "v1" or "v2"`)
		}
		c.apiVersion = v
		return nil
	}
}

// FailOpenTool names a tool (Action "") or a tool and action that may run
// without svc when svc is unavailable, for read-only calls only.
type FailOpenTool struct{ Tool, Action string }

// WithFailOpenTools lists the tools that fail open (see [FailOpenTool]);
// names are compared after rule 7.
func WithFailOpenTools(tools ...FailOpenTool) Option {
	return func(c *Client) error {
		for _, t := range tools {
			a := ""
			if t.Action != "" {
				a = NormalizeIdentifier(t.Action)
			}
			c.failOpen[[2]string{NormalizeIdentifier(t.Tool), a}] = true
		}
		return nil
	}
}

// WithApprovalTimeout sets the default timeout of WaitForApproval (and of
// Run's wait); 0 (default) waits until the approval expires.
func WithApprovalTimeout(d time.Duration) Option {
	return func(c *Client) error {
		c.approvalTimeout = d
		return nil
	}
}

// WithLogger sets the logger (default slog.Default()). FAIL-OPEN uses, hash
// mismatches and the deprecation notice are logged at WARN.
func WithLogger(l *slog.Logger) Option {
	return func(c *Client) error {
		if l != nil {
			c.log = l
		}
		return nil
	}
}

// WithHTTPClient sets the HTTP client (default: a client of its own with
// keep-alive; its Timeout should be 0, deadlines come from the SDK).
func WithHTTPClient(h *http.Client) Option {
	return func(c *Client) error {
		if h != nil {
			c.http = h
		}
		return nil
	}
}

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option {
	return func(c *Client) error {
		if ua != "" {
			c.userAgent = ua
		}
		return nil
	}
}

// New returns a client of the gateway at baseURL (http or https) for the
// agent whose token is agentToken.
func New(baseURL, agentToken string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("svc: base URL must be an absolute http or https URL, not %q", baseURL)
	}
	if agentToken == "" {
		return nil, errors.New("svc: agent token is required")
	}
	c := &Client{
		baseURL:    strings.TrimRight(u.Scheme+"://"+u.Host+u.Path, "/"),
		token:      agentToken,
		timeout:    3 * time.Second,
		retries:    2,
		apiVersion: "v2",
		log:        slog.Default(),
		userAgent:  "svc-sdk-go/" + Version,
		failOpen:   map[[2]string]bool{},
	}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, fmt.Errorf("svc: %w", err)
		}
	}
	if c.http == nil {
		// http.DefaultTransport is an *http.Transport unless the program has
		// replaced it; a replacement cannot be cloned, so it is used as it is.
		rt := http.DefaultTransport
		if dt, ok := http.DefaultTransport.(*http.Transport); ok {
			tr := dt.Clone()
			tr.MaxIdleConnsPerHost = 16
			rt = tr
		}
		c.http = &http.Client{Transport: rt}
	}
	if c.apiVersion == "v1" {
		c.deprecate("api_version='v1' uses svc's deprecated /v1 paths (sunset Wed, 31 Dec 2026 23:59:59 GMT)")
	}
	return c, nil
}

// FailOpenCount is how many times a call failed open.
func (c *Client) FailOpenCount() int { return int(c.failOpenCount.Load()) }

// Close releases idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

func (c *Client) warn(format string, a ...any) {
	c.log.Warn(fmt.Sprintf(format, a...))
}

func (c *Client) deprecate(why string) {
	c.deprecated.Do(func() { c.warn("svc: %s", why) })
}

// response is one complete answer.
type response struct {
	status int
	header http.Header
	body   []byte
	parsed bool
	json   any
}

func (r *response) JSON() any {
	if !r.parsed {
		r.parsed = true
		if len(r.body) > 0 {
			d := json.NewDecoder(bytes.NewReader(r.body))
			d.UseNumber()
			var v any
			if d.Decode(&v) == nil && !d.More() {
				r.json = v
			}
		}
	}
	return r.json
}

func (c *Client) observe(r *response) {
	dep, sunset := r.header.Values("Deprecation"), r.header.Values("Sunset")
	if len(dep) > 0 || len(sunset) > 0 {
		c.deprecate(fmt.Sprintf("the gateway marks this API as deprecated (deprecation: %s, sunset: %s)",
			headerText(dep), headerText(sunset)))
	}
}

func headerText(v []string) string {
	if len(v) == 0 {
		return "None"
	}
	return v[0]
}

// send performs one HTTP exchange and reads the whole answer.
func (c *Client) send(ctx context.Context, method, path string, body []byte, signed bool) (*response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.baseURL+"/"+c.apiVersion+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		if signed && c.signingKey != nil {
			req.Header.Set(SignatureHeader, signWith(c.signingKey, body))
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	// The body is read below (up to maxAnswerBytes) before it is closed; an
	// error from closing it says nothing about the answer, so it is dropped.
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return nil, err
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: data}, nil
}

// ctxErr returns the caller's context error, wrapped, when ctx is done.
func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("svc: %w", context.Cause(ctx))
	}
	return nil
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctxErr(ctx)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctxErr(ctx)
	}
}

// call sends with bounded retries inside deadline: it returns the first
// answer that is not retried, or SvcUnavailable / the final answer's error
// when attempts or time run out.
func (c *Client) call(ctx context.Context, method, path string, deadline time.Time, bodyFn func() ([]byte, error), signed bool) (*response, error) {
	attempt := 0
	var last *response
	var lastErr error
	for {
		if err := ctxErr(ctx); err != nil {
			return nil, err
		}
		if time.Until(deadline) <= 0 {
			break
		}
		var body []byte
		if bodyFn != nil {
			b, err := bodyFn()
			if err != nil {
				return nil, err
			}
			body = b
		}
		actx, cancel := context.WithDeadline(ctx, deadline)
		resp, err := c.send(actx, method, path, body, signed)
		cancel()
		if err != nil {
			if e := ctxErr(ctx); e != nil {
				return nil, e
			}
			last, lastErr = nil, err
			c.log.Debug(fmt.Sprintf("svc: %s %s: %v (attempt %d)", method, path, err, attempt+1))
		} else {
			c.observe(resp)
			if !ShouldRetry(resp.status) {
				return resp, nil
			}
			last, lastErr = resp, nil
			c.log.Debug(fmt.Sprintf("svc: %s %s: HTTP %d (attempt %d)", method, path, resp.status, attempt+1))
		}
		if attempt >= c.retries {
			break
		}
		delay := Backoff(attempt, 100*time.Millisecond, time.Second)
		if last != nil {
			if ra, ok := RetryAfter(last.header.Get("Retry-After"), time.Now()); ok {
				delay = ra
			}
		}
		if delay >= time.Until(deadline) {
			break // the wait does not fit in the deadline: fail now
		}
		if err := sleep(ctx, delay); err != nil {
			return nil, err
		}
		attempt++
	}
	if last != nil {
		return nil, fromResponse(last.status, last.JSON(), last.header, "svc: ")
	}
	why := "no time left"
	if lastErr != nil {
		why = lastErr.Error()
	}
	return nil, &SvcUnavailable{SvcError{ErrorCode: "svc_unavailable", Err: lastErr,
		Message: fmt.Sprintf("svc: unreachable within the deadline (%s)", why)}}
}

// ---------------------------------------------------------------------------
// Authorize

// Webhook is SPEC 4.2's webhook: svc POSTs the approval's outcome to URL,
// signed with Secret.
type Webhook struct {
	URL    string `json:"url"`
	Secret string `json:"secret"`
}

// AuthorizeOptions are the optional members of an authorize request.
type AuthorizeOptions struct {
	MutatesState bool
	SourceTrust  string
	Environment  string
	// RequestID is reused on every retry; a UUIDv7 when empty.
	RequestID string
	// ApprovalID presents a granted approval.
	ApprovalID string
	Trace      map[string]any
	DryRun     bool
	Webhook    *Webhook
}

// UUIDv7 returns a time-ordered UUID version 7 (RFC 9562), lower-case.
func UUIDv7() string {
	var b [16]byte
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(time.Now().UnixMilli()))
	copy(b[:6], ms[2:]) // the 48-bit big-endian unix_ts_ms
	_, _ = rand.Read(b[6:])
	b[6] = 0x70 | b[6]&0x0F
	b[8] = 0x80 | b[8]&0x3F
	h := fmt.Sprintf("%x", b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// NewNonce returns a fresh random nonce (32 URL-safe characters).
func NewNonce() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func hasNUL(v any) bool {
	switch x := v.(type) {
	case string:
		return strings.IndexByte(x, 0) >= 0
	case map[string]any:
		for k, e := range x {
			if hasNUL(k) || hasNUL(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if hasNUL(e) {
				return true
			}
		}
	}
	return false
}

// marshal writes compact JSON as UTF-8 (no HTML escaping): the bytes that are
// signed and sent.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// prepare checks a call and converts its parameters to JSON values.
func prepareCall(call ToolCall) (ToolCall, error) {
	if strings.TrimSpace(call.Tool) == "" {
		return call, newInvalidRequest("invalid_tool_call", "tool must be a non-empty string")
	}
	if strings.TrimSpace(call.Action) == "" {
		return call, newInvalidRequest("invalid_tool_call", "action must be a non-empty string")
	}
	pv, err := jsonValue(call.Parameters)
	if err != nil {
		return call, &InvalidRequest{base(canonCode(err), "the request holds a value with no JSON form: %v", err)}
	}
	params, _ := pv.(map[string]any)
	if params == nil {
		params = map[string]any{}
	}
	out := ToolCall{Tool: call.Tool, Action: call.Action, Parameters: params}
	if call.Resource != nil {
		r := *call.Resource
		out.Resource = &r
	}
	return out, nil
}

func (c *Client) mayFailOpen(tool, action string, o AuthorizeOptions) bool {
	if o.MutatesState || o.ApprovalID != "" || len(c.failOpen) == 0 {
		return false
	}
	t, a := NormalizeIdentifier(tool), NormalizeIdentifier(action)
	return c.failOpen[[2]string{t, ""}] || c.failOpen[[2]string{t, a}]
}

// Authorize asks svc about one call (POST /v2/authorize) and returns its
// Decision. deny, quarantine and require_approval are returned, not errors
// (Run returns errors for them). A 403 before policy (environment not
// allowed, tool not bound) is a deny Decision with Status 403 and no
// DecisionID.
//
// One RequestID (a UUIDv7 unless given) is reused on every retry; each
// attempt carries a fresh nonce and, with a signing key, the HMAC of exactly
// the bytes sent. Errors: *InvalidRequest (local pre-check, nothing sent),
// *SvcAuthError (401), *SvcUnavailable (unreachable, or 429/502/503/504
// after retries, unless the tool fails open), *SvcError (anything else not
// understood), or the context's error.
func (c *Client) Authorize(ctx context.Context, call ToolCall, o AuthorizeOptions) (*Decision, error) {
	tc, err := prepareCall(call)
	if err != nil {
		return nil, err
	}
	trace, err := jsonValue(o.Trace)
	if err != nil {
		return nil, &InvalidRequest{base(canonCode(err), "trace has no JSON form: %v", err)}
	}
	for _, f := range []struct {
		name string
		v    any
	}{{"tool_call", []any{tc.Tool, tc.Action, tc.Parameters}}, {"trace", trace}, {"environment", o.Environment},
		{"source_trust", o.SourceTrust}, {"request_id", o.RequestID}, {"approval_id", o.ApprovalID}} {
		if hasNUL(f.v) {
			return nil, newInvalidRequest("nul_character", "%s holds U+0000, which svc refuses", f.name)
		}
	}
	if tc.Resource != nil && hasNUL(*tc.Resource) {
		return nil, newInvalidRequest("nul_character", "tool_call holds U+0000, which svc refuses")
	}
	if o.Webhook != nil && (hasNUL(o.Webhook.URL) || hasNUL(o.Webhook.Secret)) {
		return nil, newInvalidRequest("nul_character", "webhook holds U+0000, which svc refuses")
	}
	for _, s := range []string{o.Environment, o.SourceTrust, o.RequestID, o.ApprovalID, tc.Tool, tc.Action} {
		if _, err := jsonValue(s); err != nil {
			return nil, &InvalidRequest{base("invalid_utf8", "the request holds a string that is not UTF-8")}
		}
	}
	if tc.Resource != nil {
		if _, err := jsonValue(*tc.Resource); err != nil {
			return nil, &InvalidRequest{base("invalid_utf8", "the request holds a string that is not UTF-8")}
		}
	}
	local, err := ActionHash(tc)
	if err != nil {
		return nil, &InvalidRequest{base("invalid_tool_call", "the tool call has no canonical form: %v", err)}
	}
	rid := o.RequestID
	if rid == "" {
		rid = UUIDv7()
	}
	req := map[string]any{"tool_call": tc, "mutates_state": o.MutatesState, "request_id": rid}
	if o.SourceTrust != "" {
		req["source_trust"] = o.SourceTrust
	}
	if trace != nil {
		req["trace"] = trace
	}
	if o.Environment != "" {
		req["environment"] = o.Environment
	}
	if o.ApprovalID != "" {
		req["approval_id"] = o.ApprovalID
	}
	if o.DryRun {
		req["dry_run"] = true
	}
	if o.Webhook != nil {
		req["webhook"] = o.Webhook
	}
	bodyFn := func() ([]byte, error) {
		req["nonce"] = NewNonce()
		b, err := marshal(req)
		if err != nil {
			return nil, &InvalidRequest{base("invalid_value", "the request has no JSON form: %v", err)}
		}
		if len(b) > MaxBodyBytes {
			return nil, newInvalidRequest("body_too_large", "the request body is %d bytes, over svc's 1 MiB limit", len(b))
		}
		return b, nil
	}
	if _, err := bodyFn(); err != nil { // the pre-check, before anything is sent
		return nil, err
	}
	fill := func(d *Decision) *Decision {
		d.LocalActionHash, d.HashCertain, d.ToolCall, d.MutatesState = local, tc.certain(), &tc, o.MutatesState
		return d
	}
	resp, err := c.call(ctx, http.MethodPost, "/authorize", time.Now().Add(c.timeout), bodyFn, true)
	if err != nil {
		var un *SvcUnavailable
		if errors.As(err, &un) && c.mayFailOpen(tc.Tool, tc.Action, o) {
			n := c.failOpenCount.Add(1)
			c.warn("svc: FAIL-OPEN for read-only tool %q action %q (request_id %s, use %d): %v", tc.Tool, tc.Action, rid, n, err)
			return fill(&Decision{Decision: DecisionAllow, Reason: "fail_open_svc_unavailable", RequestID: rid,
				FailOpen: true, RedactedFields: []string{}, MatchedPolicies: []string{}}), nil
		}
		return nil, err
	}
	return c.decision(resp, rid, fill)
}

func (c *Client) decision(resp *response, rid string, fill func(*Decision) *Decision) (*Decision, error) {
	body := resp.JSON()
	switch resp.status {
	case 200:
		m, ok := body.(map[string]any)
		if !ok {
			raw := resp.body
			if len(raw) > 1000 {
				raw = raw[:1000]
			}
			return nil, &SvcError{Status: 200, Body: string(raw), Header: resp.header, ErrorCode: "unreadable_answer",
				Message: "svc: the authorize answer is not a JSON object"}
		}
		d := fill(decisionFromBody(m, 200))
		if got, _ := m["decision"].(string); got != d.Decision {
			c.warn("svc: unknown decision %s read as deny (request_id %s)", describe(m["decision"]), rid)
		}
		if d.RequestID == "" {
			d.RequestID = rid
		}
		if d.ActionHash != "" && d.LocalActionHash != "" && d.ActionHash != d.LocalActionHash {
			d.HashMismatch = true
			how := "local hash certain"
			if !d.HashCertain {
				how = "local hash uncertain: identifiers beyond this toolchain's Unicode tables, server's trusted"
			}
			c.warn("svc: action_hash mismatch: server %s, local %s (%s; decision %s)", d.ActionHash, d.LocalActionHash, how, d.DecisionID)
		}
		return d, nil
	case 403:
		e := envelopeError(403, body, resp.header, "")
		reason := e.ErrorCode
		if reason == "" {
			reason = e.Reason
		}
		if reason == "" {
			reason = "forbidden"
		}
		return fill(&Decision{Decision: DecisionDeny, Reason: reason, RequestID: rid, Raw: body, Status: 403,
			Message: e.Message, RedactedFields: []string{}, MatchedPolicies: []string{}}), nil
	}
	return nil, fromResponse(resp.status, body, resp.header, "svc: ")
}

func describe(v any) string {
	if v == nil {
		return "None"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
