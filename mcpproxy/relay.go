package mcpproxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// hooks are what one relay watches for: the answer to the request id
// (zero for a notification, a client's answer or a GET stream).
type hooks struct {
	id jsonrpc.ID
	// onHeaders runs on the upstream's answer before anything is written
	// to the client (initialize seals the session id there).
	onHeaders func(*http.Response) error
	// rewrite replaces the result of the answer to id.
	rewrite func(json.RawMessage) (json.RawMessage, error)
	// answered hears the result of the answer to id.
	answered func(json.RawMessage)
	// opened: the client's answer is an event stream svc opened already
	// (an approval offered as an elicitation): everything the relay
	// answers goes on it as events.
	opened bool
}

func (h *hooks) watches() bool { return h != nil && h.id.IsValid() }

func (h *hooks) isOpened() bool { return h != nil && h.opened }

// forwarded are the only client headers the upstream sees; the upstream's
// session id and credentials are set from the session and the server
// record. The client's Authorization, cookies and every other header stay
// here.
var forwarded = []string{"Accept", "Content-Type", VersionHeader, lastEventIDHdr}

func (p *Proxy) upstreamRequest(ctx context.Context, r *http.Request, t Target, sess Session, method string, body []byte) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	up, err := http.NewRequestWithContext(ctx, method, t.URL, rd)
	if err != nil {
		return nil, err
	}
	for _, k := range forwarded {
		if v := r.Header.Get(k); v != "" {
			up.Header.Set(k, v)
		}
	}
	if body != nil {
		up.Header.Set("Content-Type", "application/json")
	}
	for k, v := range t.Header {
		up.Header.Set(k, v)
	}
	if sess.UpstreamID != "" {
		up.Header.Set(SessionHeader, sess.UpstreamID)
	}
	return up, nil
}

// relay sends the request upstream (a POST with body, else the method of
// r) and relays the answer as it comes: a JSON body whole (it is one
// message), an event stream event by event, each flushed.
func (p *Proxy) relay(w http.ResponseWriter, r *http.Request, t Target, sess Session, body []byte, h *hooks) {
	method := r.Method
	ctx, cancel := context.WithCancel(r.Context())
	idle := time.Duration(0)
	if method == http.MethodPost {
		ctx, cancel = context.WithTimeout(r.Context(), p.lim.CallTimeout)
		idle = p.lim.Idle
	}
	defer cancel()
	up, err := p.upstreamRequest(ctx, r, t, sess, method, body)
	if err != nil {
		p.upstreamFailed(w, h, "the upstream request could not be built", err)
		return
	}
	// The wait for the upstream's headers is bounded as its silence is.
	var headerTimer *time.Timer
	if idle > 0 {
		headerTimer = time.AfterFunc(idle, cancel)
	}
	resp, err := p.client.Do(up) //nolint:gosec // G704: the server record's URL, checked at registration; the client's dialer enforces the outbound address rules
	if headerTimer != nil && !headerTimer.Stop() {
		err = errors.Join(err, context.DeadlineExceeded)
	}
	if err != nil {
		if resp != nil {
			_ = resp.Body.Close()
		}
		p.upstreamFailed(w, h, "the upstream did not answer in time or could not be reached", err)
		return
	}
	defer func() { _ = resp.Body.Close() }()
	if h != nil && h.onHeaders != nil {
		if err := h.onHeaders(resp); err != nil {
			p.upstreamFailed(w, h, "the session could not be sealed", err)
			return
		}
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case resp.StatusCode == http.StatusOK && mt == "text/event-stream":
		p.relayEvents(ctx, cancel, w, resp.Body, sess, t, h, idle)
	case resp.StatusCode == http.StatusOK && mt == "application/json":
		p.relayJSON(ctx, cancel, w, resp, h, idle)
	case resp.StatusCode == http.StatusOK && h.watches():
		p.upstreamFailed(w, h, "the upstream answered with content type "+mt, nil)
	case h.isOpened():
		p.upstreamFailed(w, h, fmt.Sprintf("the upstream answered %d", resp.StatusCode), nil)
	default:
		// 202 for a notification, 404 for an upstream session that ended
		// (the client starts a new one), 405 for a GET stream the
		// upstream does not offer: relayed with a bounded body.
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if ct := resp.Header.Get("Content-Type"); ct != "" && len(data) > 0 {
			w.Header().Set("Content-Type", ct)
		}
		if allow := resp.Header.Get("Allow"); allow != "" {
			w.Header().Set("Allow", allow)
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(data)
	}
}

// relayJSON relays a one-message JSON answer.
func (p *Proxy) relayJSON(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, resp *http.Response, h *hooks, idle time.Duration) {
	if idle > 0 {
		t := time.AfterFunc(idle, cancel)
		defer t.Stop()
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, int64(p.lim.MaxMessage)+1))
	switch {
	case err != nil:
		p.upstreamFailed(w, h, "the upstream's answer broke off", errors.Join(err, ctx.Err()))
		return
	case len(data) > p.lim.MaxMessage:
		p.upstreamFailed(w, h, "the upstream's answer is larger than the proxy takes", errTooLarge)
		return
	}
	out, _, err := p.inspect(data, h)
	if err != nil {
		p.upstreamFailed(w, h, "the upstream's answer is not JSON-RPC", err)
		return
	}
	if h.isOpened() {
		writeSSE(w, out)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}

// inspect checks one upstream message, applies the hooks to the answer
// to h.id, and returns the message to relay and whether it was that
// answer.
func (p *Proxy) inspect(data []byte, h *hooks) ([]byte, bool, error) {
	m, err := jsonrpc.DecodeMessage(data)
	if err != nil {
		return nil, false, err
	}
	resp, ok := m.(*jsonrpc.Response)
	if !ok || !h.watches() || resp.ID != h.id {
		return data, false, nil
	}
	if resp.Error != nil {
		return data, true, nil
	}
	if h.rewrite != nil {
		nr, err := h.rewrite(resp.Result)
		if err != nil {
			return nil, true, err
		}
		resp.Result = nr
		if data, err = jsonrpc.EncodeMessage(resp); err != nil {
			return nil, true, err
		}
	}
	if h.answered != nil {
		h.answered(resp.Result)
	}
	return data, true, nil
}

// event is one SSE event as the upstream sent it.
type event struct {
	lines [][]byte // every line but the data lines, as sent (id, event, retry, comments)
	name  string
	data  []byte
	err   error
}

// relayEvents relays an event stream event by event, each flushed as it
// is written. A message that is not JSON-RPC, a line or message larger
// than the cap, silence past idle (POST streams) or the deadline end the
// relay; a POST stream that ends before the answer to its request is
// closed with a JSON-RPC error for it, so the client never waits for an
// answer that cannot come.
func (p *Proxy) relayEvents(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, body io.Reader, sess Session, t Target,
	h *hooks, idle time.Duration) {
	if !h.isOpened() {
		openSSE(w)
	}
	rc := http.NewResponseController(w)

	events := make(chan event)
	go func() {
		defer close(events)
		br := bufio.NewReaderSize(body, 32<<10)
		for {
			ev := readEvent(br, p.lim.MaxMessage)
			select {
			case events <- ev:
			case <-ctx.Done():
				return
			}
			if ev.err != nil {
				return
			}
		}
	}()
	var idleC <-chan time.Time
	var idleTimer *time.Timer
	if idle > 0 {
		idleTimer = time.NewTimer(idle)
		defer idleTimer.Stop()
		idleC = idleTimer.C
	}
	keepAlive := time.NewTicker(p.lim.KeepAlive)
	defer keepAlive.Stop()
	answered := false
	fail := func(msg string, err error) {
		if err != nil {
			p.log.Warn("mcp proxy: upstream stream ended", "server_key", t.ServerKey, "reason", msg, "error", err)
		}
		if h.watches() && !answered {
			e, _ := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: h.id, Error: &jsonrpc.Error{Code: CodeUpstream, Message: "svc: " + msg}})
			_, _ = fmt.Fprintf(w, "event: message\ndata: %s\n\n", e)
			_ = rc.Flush()
		}
	}
	for {
		select {
		case <-ctx.Done():
			fail("the upstream did not answer in time", ctx.Err())
			return
		case <-idleC:
			cancel()
			fail("the upstream went silent", context.DeadlineExceeded)
			return
		case <-keepAlive.C:
			if _, err := io.WriteString(w, ": keepalive\n\n"); err != nil {
				return
			}
			_ = rc.Flush()
		case ev, ok := <-events:
			if !ok {
				return
			}
			if ev.err != nil {
				if errors.Is(ev.err, io.EOF) {
					if !answered && h.watches() {
						fail("the upstream's stream ended before its answer", nil)
					}
					return
				}
				fail("the upstream's stream broke off", ev.err)
				return
			}
			if idleTimer != nil {
				idleTimer.Reset(idle)
			}
			data := ev.data
			if len(data) > 0 && (ev.name == "" || ev.name == "message") {
				out, isAnswer, err := p.inspect(data, h)
				if err != nil {
					fail("the upstream sent a message that is not JSON-RPC", err)
					return
				}
				if isAnswer {
					answered = true
				}
				if listChanged(data) {
					t.Gate.Drifted(sess)
				}
				data = out
			}
			if err := writeEvent(w, ev, data); err != nil {
				return
			}
			_ = rc.Flush()
		}
	}
}

// listChanged reports notifications/tools/list_changed.
func listChanged(data []byte) bool {
	if !bytes.Contains(data, []byte("list_changed")) {
		return false
	}
	var n struct {
		Method string `json:"method"`
	}
	return json.Unmarshal(data, &n) == nil && n.Method == "notifications/tools/list_changed"
}

func writeEvent(w io.Writer, ev event, data []byte) error {
	var b bytes.Buffer
	for _, l := range ev.lines {
		b.Write(l)
		b.WriteByte('\n')
	}
	if ev.data != nil {
		// One data line: a JSON-RPC message holds no raw newline.
		for _, line := range bytes.Split(data, []byte("\n")) {
			b.WriteString("data: ")
			b.Write(line)
			b.WriteByte('\n')
		}
	}
	b.WriteByte('\n')
	_, err := w.Write(b.Bytes())
	return err
}

// readEvent reads one event (up to its blank line). Its data is at most
// limit bytes, as is every line.
func readEvent(br *bufio.Reader, limit int) event {
	var ev event
	for {
		line, err := readLine(br, limit)
		if err != nil {
			if errors.Is(err, io.EOF) && (len(ev.lines) > 0 || ev.data != nil) {
				return ev // a last event without its blank line
			}
			ev.err = err
			return ev
		}
		if len(line) == 0 {
			if len(ev.lines) == 0 && ev.data == nil {
				continue
			}
			return ev
		}
		switch {
		case bytes.HasPrefix(line, []byte("data:")):
			d := bytes.TrimPrefix(line[5:], []byte(" "))
			if ev.data != nil {
				ev.data = append(ev.data, '\n')
			} else {
				ev.data = []byte{}
			}
			if len(ev.data)+len(d) > limit {
				ev.err = errTooLarge
				return ev
			}
			ev.data = append(ev.data, d...)
		case bytes.HasPrefix(line, []byte("event:")):
			ev.name = string(bytes.TrimSpace(line[6:]))
			ev.lines = append(ev.lines, line)
		default:
			ev.lines = append(ev.lines, line)
		}
	}
}

// readLine reads one line without its end (LF, CRLF), at most limit bytes.
func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	var out []byte
	for {
		frag, isPrefix, err := br.ReadLine()
		if err != nil {
			return nil, err
		}
		if len(out)+len(frag) > limit {
			return nil, errTooLarge
		}
		out = append(out, frag...)
		if !isPrefix {
			return out, nil
		}
	}
}

// upstreamFailed answers a request whose upstream failed before any of
// its answer was written: a JSON-RPC error for a request, 502 otherwise.
func (p *Proxy) upstreamFailed(w http.ResponseWriter, h *hooks, msg string, err error) {
	if err != nil {
		p.log.Warn("mcp proxy: upstream failed", "reason", msg, "error", err)
	}
	if h.watches() && h.isOpened() {
		e, _ := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: h.id, Error: &jsonrpc.Error{Code: CodeUpstream, Message: "svc: " + msg}})
		writeSSE(w, e)
		return
	}
	if h.watches() {
		writeError(w, http.StatusOK, h.id, CodeUpstream, "svc: "+msg, nil)
		return
	}
	httpError(w, http.StatusBadGateway, "svc: "+msg)
}

// openSSE answers 200 with an event stream and flushes the headers.
func openSSE(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	_ = rc.SetWriteDeadline(time.Time{})
}

// writeSSE writes one message as an event and flushes it.
func writeSSE(w http.ResponseWriter, msg []byte) {
	_, _ = fmt.Fprintf(w, "event: message\ndata: %s\n\n", msg)
	_ = http.NewResponseController(w).Flush()
}
