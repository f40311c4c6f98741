package actors

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/hashicorp/go-hclog"

	"svc/messages"
)

// NotifierSignatureHeader carries the signature of a signed outbound
// notification: "sha256=" followed by the hex HMAC-SHA256 of the exact body
// bytes under NotifierOptions.Secret.
const NotifierSignatureHeader = "X-Svc-Webhook-Signature"

// Notifier defaults (SPEC 6.4, part 3 and part 8).
const (
	defaultNotifierFailureThreshold = 5
	defaultNotifierCooldown         = 30 * time.Second
	defaultNotifierTimeout          = 5 * time.Second
	defaultNotifierMaxInFlight      = 16
)

// NotifierOptions configures the outbound chat notifier. Zero values take
// the defaults.
type NotifierOptions struct {
	// Post delivers one body to the chat webhook (SVC_WEBHOOK_URL); the
	// transport layer provides it (outbound.Poster), actors do no
	// HTTP themselves. Nil makes the notifier a null sink that drops
	// everything and counts it as Disabled.
	Post Post
	// Secret (SVC_WEBHOOK_SECRET) signs each body in
	// NotifierSignatureHeader; empty sends unsigned POSTs.
	Secret string
	// FailureThreshold is the number of consecutive failures that opens the
	// breaker (default 5).
	FailureThreshold int
	// Cooldown is how long the breaker stays open before one probe
	// (default 30s).
	Cooldown time.Duration
	// Timeout bounds each delivery (default 5s).
	Timeout time.Duration
	// MaxInFlight bounds concurrent deliveries (default 16); beyond it a
	// notification is dropped.
	MaxInFlight int
	// Now is the breaker's clock (default time.Now).
	Now func() time.Time
}

// Post sends one JSON body with the given extra headers and returns the
// answer's HTTP status (0 when there was none). Errors must not carry the
// target URL: chat webhook URLs embed their own secret.
type Post func(ctx context.Context, body []byte, header map[string]string) (int, error)

// Breaker states as reported by NotifierStats.State.
const (
	breakerClosed int32 = iota
	breakerOpen
	breakerHalfOpen
)

// NotifierStats counts the notifier's outcomes. Safe for concurrent use;
// the actor writes, /metrics reads.
type NotifierStats struct {
	// Sent counts deliveries answered with a 2xx status.
	Sent atomic.Uint64
	// Failed counts deliveries that got a non-2xx answer, a transport
	// error or timed out.
	Failed atomic.Uint64
	// Rejected counts notifications dropped by an open or half-open breaker
	// without any network call.
	Rejected atomic.Uint64
	// Dropped counts notifications dropped because MaxInFlight deliveries
	// were already running.
	Dropped atomic.Uint64
	// Disabled counts notifications dropped because no URL is configured.
	Disabled atomic.Uint64

	state atomic.Int32
}

// State is the breaker state: "closed", "open" or "half_open".
func (s *NotifierStats) State() string {
	switch s.state.Load() {
	case breakerOpen:
		return "open"
	case breakerHalfOpen:
		return "half_open"
	default:
		return "closed"
	}
}

// notifier is the outbound chat notifier actor (SPEC 6.4). It turns deny
// and require_approval decision events, and every Notification it is sent,
// into one signed JSON POST each. Deliveries run detached in goroutines and
// report back as a notified message; the circuit breaker (SPEC part 3)
// lives in the actor's state.
type notifier struct {
	opts  NotifierOptions
	stats *NotifierStats
	log   hclog.Logger

	// ctx is cancelled when the actor stops, abandoning open deliveries.
	ctx    context.Context
	cancel context.CancelFunc

	state    int32
	failures int       // consecutive failures while closed
	openedAt time.Time // when the breaker last opened (opts.Now)
	gen      uint64    // bumped at every opening; older results are stale
	inFlight int
}

// notified reports a finished delivery back to the notifier.
type notified struct {
	owner  *notifier // the incarnation that started it
	gen    uint64
	probe  bool
	status int // 0 when there was no answer
	err    error
}

// NewNotifier returns the producer of the notifier actor. stats may be nil.
func NewNotifier(opts NotifierOptions, stats *NotifierStats, log hclog.Logger) actor.Producer {
	if opts.FailureThreshold <= 0 {
		opts.FailureThreshold = defaultNotifierFailureThreshold
	}
	if opts.Cooldown <= 0 {
		opts.Cooldown = defaultNotifierCooldown
	}
	if opts.Timeout <= 0 {
		opts.Timeout = defaultNotifierTimeout
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = defaultNotifierMaxInFlight
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if stats == nil {
		stats = &NotifierStats{}
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return func() actor.Actor {
		return &notifier{opts: opts, stats: stats, log: log}
	}
}

// Receive implements actor.Actor.
func (n *notifier) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		n.ctx, n.cancel = context.WithCancel(context.Background())
		n.setState(breakerClosed)
	case *messages.AseEvent:
		if note, ok := notificationFromEvent(m); ok {
			n.submit(ctx, note)
		}
	case *messages.Notification:
		n.submit(ctx, *m)
	case notified:
		n.finished(m)
	case *actor.Stopping, *actor.Restarting:
		if n.cancel != nil {
			n.cancel()
		}
	}
}

// notificationFromEvent maps a bus event to a notification: exactly the
// authorize_decision events with decision deny or quarantine (a deny that
// also quarantines the agent, CONTRACT §13; severity medium) or
// require_approval (severity low). Everything else reports false.
//
// The summary names the decision, tool, action and agent; the detail line
// gives the reason, risk score, matched policy ids and the decision id.
// Resource, parameters, redacted paths, scan payloads and every other
// field are left out.
func notificationFromEvent(ev *messages.AseEvent) (messages.Notification, bool) {
	if ev == nil || ev.Kind != messages.KindAuthorizeDecision {
		return messages.Notification{}, false
	}
	var sev string
	switch ev.Decision {
	case "deny", "quarantine":
		sev = messages.NotifySeverityMedium
	case "require_approval":
		sev = messages.NotifySeverityLow
	default:
		return messages.Notification{}, false
	}
	agent := ev.AgentID
	if agent == "" {
		agent = messages.UnknownAgent
	}
	policies := "none"
	if len(ev.MatchedPolicies) > 0 {
		policies = strings.Join(ev.MatchedPolicies, ", ")
	}
	detail := fmt.Sprintf("reason: %s; risk %d; policies: %s", ev.Reason, ev.RiskScore, policies)
	if ev.Evidence != nil && ev.Evidence.DecisionID != nil && *ev.Evidence.DecisionID != "" {
		detail += "; decision " + *ev.Evidence.DecisionID
	}
	return messages.Notification{
		Kind:     ev.Kind,
		Severity: sev,
		TenantID: ev.TenantID,
		AgentID:  agent,
		At:       ev.OccurredAt,
		Summary:  fmt.Sprintf("%s: %s.%s by agent %s", ev.Decision, ev.Tool, ev.Action, agent),
		Detail:   detail,
	}, true
}

func (n *notifier) submit(ctx actor.Context, note messages.Notification) {
	if n.opts.Post == nil {
		n.stats.Disabled.Add(1)
		return
	}
	probe := false
	switch n.state {
	case breakerOpen:
		if n.opts.Now().Sub(n.openedAt) < n.opts.Cooldown {
			n.stats.Rejected.Add(1)
			return
		}
		probe = true
	case breakerHalfOpen:
		n.stats.Rejected.Add(1) // the probe is in flight
		return
	}
	if n.inFlight >= n.opts.MaxInFlight {
		n.stats.Dropped.Add(1)
		return
	}
	body, err := n.body(note)
	if err != nil {
		n.stats.Dropped.Add(1)
		n.log.Error("notification not encodable; dropped", "kind", note.Kind, "error", err)
		return
	}
	if probe {
		n.setState(breakerHalfOpen)
		n.log.Info("notifier circuit half-open; sending one probe")
	}
	n.inFlight++
	self, root := ctx.Self(), ctx.ActorSystem().Root
	res := notified{owner: n, gen: n.gen, probe: probe}
	base, post, secret, timeout := n.ctx, n.opts.Post, n.opts.Secret, n.opts.Timeout
	go func() {
		res.status, res.err = deliverNotification(base, post, secret, timeout, body)
		root.Send(self, res)
	}()
}

// deliverNotification POSTs body once; a nil error means a 2xx answer.
func deliverNotification(base context.Context, post Post, secret string, timeout time.Duration, body []byte) (int, error) {
	c, cancel := context.WithTimeout(base, timeout)
	defer cancel()
	header := map[string]string{"Content-Type": "application/json"}
	if secret != "" {
		header[NotifierSignatureHeader] = signNotification(secret, body)
	}
	status, err := post(c, body, header)
	if err != nil {
		return status, err
	}
	if status < 200 || status > 299 {
		return status, fmt.Errorf("chat webhook answered %d", status)
	}
	return status, nil
}

// signNotification is the value of NotifierSignatureHeader for body.
func signNotification(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

func (n *notifier) finished(m notified) {
	if m.err == nil {
		n.stats.Sent.Add(1)
	} else {
		n.stats.Failed.Add(1)
		n.log.Debug("notification delivery failed", "status", m.status, "error", m.err)
	}
	if m.owner != n {
		return // started by an earlier incarnation of this actor
	}
	n.inFlight--
	switch {
	case m.probe:
		if m.err == nil {
			n.failures = 0
			n.setState(breakerClosed)
			n.log.Info("notifier circuit closed; probe succeeded")
		} else {
			n.open("probe failed", m.err)
		}
	case m.gen != n.gen || n.state != breakerClosed:
		// Started before the breaker last opened: the probe decides.
	case m.err == nil:
		n.failures = 0
	default:
		n.failures++
		if n.failures >= n.opts.FailureThreshold {
			n.open("failure threshold reached", m.err)
		}
	}
}

func (n *notifier) open(why string, err error) {
	n.gen++
	n.openedAt = n.opts.Now()
	n.setState(breakerOpen)
	n.log.Warn("notifier circuit open; dropping notifications until the cooldown ends",
		"why", why, "consecutive_failures", n.failures, "cooldown", n.opts.Cooldown, "error", err)
}

func (n *notifier) setState(s int32) {
	n.state = s
	n.stats.state.Store(s)
}

// Wire shape of the chat body (SPEC 6.4).
type chatBody struct {
	Text        string           `json:"text"`
	Attachments []chatAttachment `json:"attachments"`
}

type chatAttachment struct {
	Color  string      `json:"color"`
	Fields []chatField `json:"fields"`
	Footer string      `json:"footer"`
	TS     int64       `json:"ts"`
}

type chatField struct {
	Title string `json:"title"`
	Value string `json:"value"`
	Short bool   `json:"short"`
}

// body renders note as the chat JSON body.
func (n *notifier) body(note messages.Notification) ([]byte, error) {
	at := note.At
	if at.IsZero() {
		at = n.opts.Now()
	}
	at = at.UTC()
	sev := strings.ToLower(strings.TrimSpace(note.Severity))
	summary, detail := oneLine(note.Summary), oneLine(note.Detail)
	text := summary
	if detail != "" {
		text += "\n> " + detail
	}
	return json.Marshal(chatBody{
		Text: text,
		Attachments: []chatAttachment{{
			Color: notifyColor(sev),
			Fields: []chatField{
				{Title: "Kind", Value: note.Kind, Short: true},
				{Title: "Severity", Value: sev, Short: true},
				{Title: "Tenant", Value: note.TenantID, Short: true},
				{Title: "Agent", Value: note.AgentID, Short: true},
				{Title: "Timestamp", Value: at.Format(time.RFC3339), Short: true},
				{Title: "Summary", Value: summary, Short: false},
			},
			Footer: "svc",
			TS:     at.Unix(),
		}},
	})
}

// notifyColor maps a severity to the attachment color: high danger, medium
// warning, anything else good.
func notifyColor(sev string) string {
	switch sev {
	case messages.NotifySeverityHigh:
		return "danger"
	case messages.NotifySeverityMedium:
		return "warning"
	default:
		return "good"
	}
}

// oneLine folds line breaks so that summary and detail stay one line each.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}
