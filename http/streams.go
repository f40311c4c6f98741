package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/r3labs/sse/v2"

	"svc/messages"
	"svc/persistence"
	"svc/rules/inspect"
)

// streamOut is a handler result that takes over the response: a server-sent
// event stream or a WebSocket.
type streamOut func(w http.ResponseWriter, r *http.Request)

// Stream settings (CONTRACT §7, SPEC 6.6).
const (
	watchPoll       = 2 * time.Second  // watch streams poll the database this often
	watchKeepAlive  = 15 * time.Second // ": keep-alive" comment
	watchBuffer     = 64               // SSE events queued for one subscriber
	feedBuffer      = 256              // WebSocket frames queued for one subscriber
	feedWriteWait   = 5 * time.Second  // a frame not written in this time ends the socket
	ticketLifetime  = 60 * time.Second
	ticketKeyPrefix = "ticket:"
)

// streamStats counts open streams and the subscribers cut off for falling
// behind.
type streamStats struct {
	sseCut, wsCut atomic.Uint64
	open          atomic.Int64
}

type ticketView struct {
	Ticket    string `json:"ticket"`
	ExpiresIn int    `json:"expires_in"`
}

// ticketRecord is what a ticket stands for, kept in the shared state.
type ticketRecord struct {
	Kind     string `json:"kind"`
	TenantID string `json:"tenant_id"`
	Role     string `json:"role"`
	TokenID  string `json:"token_id"`
}

func newSSEServer() *sse.Server {
	srv := sse.New()
	srv.AutoReplay = false // only rows created after the request started
	srv.AutoStream = false
	srv.BufferSize = watchBuffer
	srv.Headers = map[string]string{"X-Accel-Buffering": "no"}
	return srv
}

// feedFrame documents one WebSocket text frame of the live feed (the
// FeedItem without the tenant id it travels with between nodes).
type feedFrame struct {
	Type string `json:"type" openapi:"enum=event|alert|incident"` // event, alert or incident
	Data any    `json:"data"`
}

func (s *Server) registerStreams() {
	s.register(Route{Method: "POST", Path: "/stream-tickets", Access: AccessViewer, Tag: "streams", Resp: ticketView{}, Status: 201,
		Summary: "A one-time ticket for browsers, which cannot set headers on WebSocket or EventSource: the stream endpoints " +
			"accept ?ticket= once, within 60 seconds, instead of the Authorization header. Tokens are never accepted in query strings.",
		Handle: s.createStreamTicket})
	s.register(Route{Method: "GET", Path: "/ws/events", Access: AccessViewer, Stream: StreamAlways, Tag: "streams", Resp: feedFrame{},
		Status: http.StatusSwitchingProtocols,
		Summary: "The live SOC feed over WebSocket: one JSON text frame per item, {\"type\":\"event\"|\"alert\"|\"incident\",\"data\":{...}}, " +
			"from every node. A client that falls 256 frames behind, or does not take a frame within 5 s, is disconnected (close " +
			"status 1008) so that it never slows the pipeline or other subscribers. A node that shuts down closes it with status 1001 " +
			"(going away): reconnect, with a new ticket, to another node.",
		Handle: s.eventsFeed})
}

// createStreamTicket serves POST /stream-tickets.
func (s *Server) createStreamTicket(c *Call) (any, error) {
	var b [24]byte
	_, _ = rand.Read(b[:])
	ticket := base64.RawURLEncoding.EncodeToString(b[:])
	raw, _ := json.Marshal(ticketRecord{Kind: c.Principal.Kind, TenantID: c.Principal.TenantID, Role: c.Principal.Role, TokenID: c.Principal.TokenID})
	if err := s.Shared.Set(c.Ctx(), ticketKeyPrefix+ticket, string(raw), ticketLifetime); err != nil {
		return nil, unavailable("shared_state_unavailable", "shared state is unavailable")
	}
	return ticketView{Ticket: ticket, ExpiresIn: int(ticketLifetime.Seconds())}, nil
}

// eventsFeed serves GET /ws/events.
func (s *Server) eventsFeed(c *Call) (any, error) { return s.websocketFeed(c), nil }

// redeemTicket authenticates a stream request by its one-time ticket.
func (s *Server) redeemTicket(r *http.Request) (Principal, error) {
	ctx := r.Context()
	ticket := r.URL.Query().Get("ticket")
	raw, ok, err := s.Shared.Get(ctx, ticketKeyPrefix+ticket)
	if err != nil {
		return Principal{}, unavailable("shared_state_unavailable", "shared state is unavailable")
	}
	if !ok {
		return Principal{}, unauthorized("unknown, used or expired stream ticket")
	}
	// One use: the first redeemer deletes it; a second finds it gone.
	first, err := s.Shared.SetNX(ctx, ticketKeyPrefix+"used:"+ticket, "1", ticketLifetime)
	if err != nil {
		return Principal{}, unavailable("shared_state_unavailable", "shared state is unavailable")
	}
	_ = s.Shared.Del(ctx, ticketKeyPrefix+ticket)
	if !first {
		return Principal{}, unauthorized("unknown, used or expired stream ticket")
	}
	var rec ticketRecord
	if json.Unmarshal([]byte(raw), &rec) != nil {
		return Principal{}, unauthorized("unknown, used or expired stream ticket")
	}
	if _, err := s.Store.GetTenant(ctx, rec.TenantID); err != nil {
		return Principal{}, unauthorized("unknown, used or expired stream ticket")
	}
	return Principal{Kind: rec.Kind, TenantID: rec.TenantID, Role: rec.Role, TokenID: rec.TokenID}, nil
}

// watch serves a list route's watch=true stream: every 2 s it reads the
// rows created since the request started (list reads them after since,
// oldest first, with the route's filters) and sends each as an SSE event
// named kind with its id, plus a keep-alive comment every 15 s. A client
// that falls behind is disconnected.
func (s *Server) watch(c *Call, kind string, list func(ctx context.Context, since int64, limit int) ([]watchRow, error)) (any, error) {
	newest, err := list(c.Ctx(), 0, 1) // since 0: the newest row first
	if err != nil {
		return nil, err
	}
	since := int64(-1) // no rows yet: every row is new
	if len(newest) > 0 {
		since = newest[0].seq
	}
	cur := newWatchCursor(since, watchLag(s.Store.Backend()), time.Now())
	return streamOut(func(w http.ResponseWriter, r *http.Request) {
		id := uuid.NewString()
		s.sse.CreateStream(id)
		defer s.sse.RemoveStream(id)
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		defer context.AfterFunc(s.streamsEnd, cancel)() // the node shuts down: the stream ends
		rc := http.NewResponseController(w)
		go func() {
			poll, alive := time.NewTicker(watchPoll), time.NewTicker(watchKeepAlive)
			defer poll.Stop()
			defer alive.Stop()
			cut := func() {
				s.streams.sseCut.Add(1)
				_ = rc.SetWriteDeadline(time.Now()) // unblocks a stalled write
				cancel()
				s.sse.RemoveStream(id)
			}
			// publish queues one event, waiting up to feedWriteWait for
			// room: a poll may bring more rows than the queue holds, and a
			// reader that keeps up drains them; one that does not is cut.
			publish := func(ev *sse.Event) bool {
				deadline := time.Now().Add(feedWriteWait)
				for !s.sse.TryPublish(id, ev) {
					if time.Now().After(deadline) || ctx.Err() != nil {
						return false
					}
					time.Sleep(10 * time.Millisecond)
				}
				return true
			}
			for {
				select {
				case <-ctx.Done():
					return
				case <-alive.C:
					if !publish(&sse.Event{Comment: []byte("keep-alive")}) {
						cut()
						return
					}
				case now := <-poll.C:
					qctx, qcancel := context.WithTimeout(ctx, watchPoll)
					rows, err := cur.read(qctx, list)
					qcancel()
					if err != nil {
						s.log.Warn("watch poll failed; retrying", "kind", kind, "error", err)
						continue
					}
					for _, row := range rows {
						data, err := json.Marshal(row.view)
						if err != nil {
							continue
						}
						if !publish(&sse.Event{ID: []byte(row.id), Event: []byte(kind), Data: data}) {
							cut()
							return
						}
						cur.sent(row)
					}
					cur.polled(now)
				}
			}
		}()
		q := r.URL.Query()
		q.Set("stream", id)
		r2 := r.Clone(ctx)
		r2.URL.RawQuery = q.Encode()
		s.sse.ServeHTTP(w, r2)
	}), nil
}

// websocketFeed serves GET /ws/events.
func (s *Server) websocketFeed(c *Call) streamOut {
	tenant := c.Principal.TenantID
	return func(w http.ResponseWriter, r *http.Request) {
		// Subscribed before the handshake answers: a client that sees the
		// 101 and then acts (or whose agents do) gets every item after it.
		sub, cancel := s.Feed.Subscribe(tenant, feedBuffer)
		defer cancel()
		cw := &corkingWriter{ResponseWriter: w}
		conn, err := websocket.Accept(cw, r, nil)
		if err != nil {
			return // Accept has answered the handshake error
		}
		if cw.conn == nil { // Accept hijacks through cw; nothing else can happen
			_ = conn.CloseNow()
			return
		}
		defer func() { _ = conn.CloseNow() }()
		ctx := conn.CloseRead(r.Context()) // ends when the client closes
		// One watchdog instead of a deadline per frame (a timer and a
		// context callback for each write): a write still blocked after
		// feedWriteWait closes the socket.
		var writing atomic.Int64 // start of the write in progress (unix ns), 0 between writes
		go func() {
			t := time.NewTicker(feedWriteWait / 5)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					if st := writing.Load(); st != 0 && time.Since(time.Unix(0, st)) > feedWriteWait {
						s.streams.wsCut.Add(1)
						_ = conn.CloseNow()
						return
					}
				}
			}
		}()
		wctx := context.WithoutCancel(ctx) // no per-write timeout: the watchdog's job
		for {
			select {
			case <-ctx.Done():
				_ = conn.Close(websocket.StatusNormalClosure, "")
				return
			case <-s.streamsEnd.Done():
				_ = conn.Close(websocket.StatusGoingAway, "the gateway is shutting down")
				return
			case frame, ok := <-sub.C:
				if !ok { // the feed cut it off (counted there)
					_ = conn.Close(websocket.StatusPolicyViolation, "subscriber fell behind")
					return
				}
				writing.Store(time.Now().UnixNano())
				cut, err := writeBurst(wctx, conn, cw.conn, frame, sub.C)
				writing.Store(0)
				if cut {
					_ = conn.Close(websocket.StatusPolicyViolation, "subscriber fell behind")
					return
				}
				if err != nil {
					return
				}
			}
		}
	}
}

// feedBurst bounds the frames written in one corked burst.
const feedBurst = 64

// writeBurst writes frame and then whatever frames are already queued (up
// to feedBurst), each its own WebSocket message as CONTRACT §11 says, with
// the connection corked so that the burst leaves in one write. cut reports
// that the feed closed the subscription during the burst.
func writeBurst(ctx context.Context, conn *websocket.Conn, cork *corkConn, frame []byte, queue <-chan []byte) (cut bool, err error) {
	cork.Cork()
	err = conn.Write(ctx, websocket.MessageText, frame)
burst:
	for n := 1; err == nil && n < feedBurst; n++ {
		select {
		case next, ok := <-queue:
			if !ok {
				cut = true
				break burst
			}
			err = conn.Write(ctx, websocket.MessageText, next)
		default:
			break burst
		}
	}
	if uerr := cork.Uncork(); err == nil {
		err = uerr
	}
	return cut, err
}

// watchPage is how many rows one watch query reads.
const watchPage = 500

// watchLag is how long after its sequence number was drawn a row may still
// become visible. On Postgres several writers (two nodes' alert batches,
// the pipeline's alert and incident writers) draw numbers and commit in
// either order, so a row can appear below one already sent; SQLite has one
// writer, and rows appear in their order.
func watchLag(backend string) time.Duration {
	if backend == "postgres" {
		return 5 * time.Second
	}
	return 0
}

// watchCursor is where a watch stream is: it reads the rows after the
// highest sequence number sent, and, with a lag, again the rows sent in the
// last lag (those after the highest number sent lag ago), sending each id
// once. A row that becomes visible more than lag after its number was
// drawn is missed.
type watchCursor struct {
	lag   time.Duration
	since int64            // highest sequence number sent
	marks []watchMark      // since after each poll, oldest first
	ids   map[string]int64 // rows sent after from(), by id
}

type watchMark struct {
	at    time.Time
	since int64
}

func newWatchCursor(since int64, lag time.Duration, now time.Time) *watchCursor {
	return &watchCursor{lag: lag, since: since, marks: []watchMark{{now, since}}, ids: map[string]int64{}}
}

// from is the sequence number reads start after: since without a lag, else
// the since of the newest poll at least lag old (rows drawn before it have
// had lag to appear), or of the oldest poll kept.
func (c *watchCursor) from() int64 {
	if c.lag == 0 {
		return c.since
	}
	return c.marks[0].since
}

// read returns the rows not sent yet, oldest first, reading every page
// after from().
func (c *watchCursor) read(ctx context.Context, list func(ctx context.Context, since int64, limit int) ([]watchRow, error)) ([]watchRow, error) {
	var out []watchRow
	after := c.from()
	for {
		rows, err := list(ctx, after, watchPage)
		if err != nil {
			return out, err
		}
		for _, row := range rows {
			if _, dup := c.ids[row.id]; !dup {
				out = append(out, row)
			}
			after = row.seq
		}
		if len(rows) < watchPage {
			return out, nil
		}
	}
}

// sent records a row as sent.
func (c *watchCursor) sent(row watchRow) {
	c.since = max(c.since, row.seq)
	if c.lag > 0 {
		c.ids[row.id] = row.seq
	}
}

// polled records a poll at now, and forgets what has had lag to appear.
func (c *watchCursor) polled(now time.Time) {
	if c.lag == 0 {
		return
	}
	c.marks = append(c.marks, watchMark{now, c.since})
	for len(c.marks) > 1 && now.Sub(c.marks[1].at) >= c.lag {
		c.marks = c.marks[1:]
	}
	from := c.from()
	for id, seq := range c.ids {
		if seq <= from {
			delete(c.ids, id)
		}
	}
}

// watchRow is one row of a watch stream.
type watchRow struct {
	seq  int64
	id   string
	view any
}

// watchAlerts and watchIncidents plug the list filters into watch; a list
// with SinceSeq 0 reads the newest rows first, otherwise the rows after
// SinceSeq oldest first (persistence.AlertFilter).
func (s *Server) watchAlerts(c *Call, f persistence.AlertFilter) (any, error) {
	tenant := c.Principal.TenantID
	// The MCP inspection's alerts are visible by polling only (SPEC 4.8,
	// 6.6).
	f.ExcludeRules = []string{inspect.RuleSensitiveData, inspect.RuleInjection}
	return s.watch(c, messages.FeedAlert, func(ctx context.Context, since int64, limit int) ([]watchRow, error) {
		f.SinceSeq = since
		rows, err := s.Store.ListAlerts(ctx, tenant, f, persistence.Page{Limit: limit})
		return viewAll(rows, func(a persistence.Alert) watchRow { return watchRow{a.Seq, a.ID, viewAlert(a)} }), err
	})
}

func (s *Server) watchIncidents(c *Call, f persistence.IncidentFilter) (any, error) {
	tenant := c.Principal.TenantID
	return s.watch(c, messages.FeedIncident, func(ctx context.Context, since int64, limit int) ([]watchRow, error) {
		f.SinceSeq = since
		rows, err := s.Store.ListIncidents(ctx, tenant, f, persistence.Page{Limit: limit})
		return viewAll(rows, func(in persistence.Incident) watchRow { return watchRow{in.Seq, in.ID, viewIncident(in)} }), err
	})
}

// isWatch reports a watch=true list request (400 for another value).
func isWatch(c *Call) (bool, error) {
	v := c.R.URL.Query().Get("watch")
	if v == "" {
		return false, nil
	}
	switch v {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, invalidField("watch", "true or false")
}
