package svcsdk

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	testKey   = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("s"), 32))
	testToken = "svc_agent_" + strings.Repeat("x", 43)
)

type fakeReq struct {
	Method, Path string
	Header       http.Header
	Body         []byte
}

func (r fakeReq) JSON() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(r.Body, &m)
	return m
}

type reply struct {
	status int
	body   any // []byte as is, nil empty, anything else JSON
	header map[string]string
	delay  time.Duration
}

type fake struct {
	*httptest.Server
	mu       sync.Mutex
	requests []fakeReq
	handler  func(fakeReq) reply
	conns    int
}

func newFake(t *testing.T) *fake {
	f := &fake{handler: func(fakeReq) reply {
		return reply{status: 200, body: map[string]any{"decision": "allow", "reason": "ok"}}
	}}
	f.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		req := fakeReq{Method: r.Method, Path: r.URL.RequestURI(), Header: r.Header.Clone(), Body: b}
		f.mu.Lock()
		f.requests = append(f.requests, req)
		h := f.handler
		f.mu.Unlock()
		rep := h(req)
		if rep.delay > 0 {
			select {
			case <-time.After(rep.delay):
			case <-r.Context().Done():
				return
			}
		}
		for k, v := range rep.header {
			w.Header().Set(k, v)
		}
		var raw []byte
		switch b := rep.body.(type) {
		case nil:
		case []byte:
			raw = b
		default:
			raw, _ = json.Marshal(b)
		}
		w.WriteHeader(rep.status)
		_, _ = w.Write(raw)
	}))
	f.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			f.mu.Lock()
			f.conns++
			f.mu.Unlock()
		}
	}
	f.Start()
	t.Cleanup(f.Close)
	return f
}

// script answers requests in turn; the last answer repeats.
func (f *fake) script(answers ...reply) {
	i := 0
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handler = func(fakeReq) reply {
		f.mu.Lock()
		defer f.mu.Unlock()
		a := answers[min(i, len(answers)-1)]
		i++
		return a
	}
}

func (f *fake) handle(h func(fakeReq) reply) {
	f.mu.Lock()
	f.handler = h
	f.mu.Unlock()
}

func (f *fake) reqs(substr string) []fakeReq {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeReq
	for _, r := range f.requests {
		if strings.Contains(r.Path, substr) {
			out = append(out, r)
		}
	}
	return out
}

func envelope(status int, reason, code, msg string) map[string]any {
	details := map[string]any{}
	if code != "" {
		details["error"] = code
	}
	return map[string]any{"kind": "Status", "apiVersion": "v2", "status": "Failure", "message": msg, "reason": reason,
		"details": details, "code": status}
}

// logSink collects the records a client logs.
type logSink struct {
	mu   sync.Mutex
	msgs []string
}

func (s *logSink) Enabled(context.Context, slog.Level) bool { return true }
func (s *logSink) WithAttrs([]slog.Attr) slog.Handler       { return s }
func (s *logSink) WithGroup(string) slog.Handler            { return s }
func (s *logSink) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		s.mu.Lock()
		s.msgs = append(s.msgs, r.Message)
		s.mu.Unlock()
	}
	return nil
}

func (s *logSink) count(substr string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.msgs {
		if strings.Contains(m, substr) {
			n++
		}
	}
	return n
}

func newClient(t *testing.T, url string, opts ...Option) (*Client, *logSink) {
	t.Helper()
	sink := &logSink{}
	all := append([]Option{WithSigningKey(testKey), WithLogger(slog.New(sink))}, opts...)
	c, err := New(url, testToken, all...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, sink
}

func hmacHex(body []byte) string {
	m := hmac.New(sha256.New, bytes.Repeat([]byte("s"), 32))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func rfc3339(d time.Duration) string { return time.Now().Add(d).UTC().Format(time.RFC3339Nano) }

func freeURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

func mustHash(t *testing.T, tc ToolCall) string {
	t.Helper()
	h, err := ActionHash(tc)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// The receipt key of the tests.
var (
	receiptPriv   = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32))
	receiptPubKey = publicKey(receiptPriv)
	receiptPub    = base64.StdEncoding.EncodeToString(receiptPubKey)
)

// publicKey is priv's public key. It runs at package initialisation, where
// there is no test to fail, hence the panic.
func publicKey(priv ed25519.PrivateKey) ed25519.PublicKey {
	pub, ok := priv.Public().(ed25519.PublicKey)
	if !ok {
		panic("ed25519.PrivateKey.Public returned no ed25519.PublicKey")
	}
	return pub
}

func makeReceipt(t *testing.T, actionHash string, signed bool) map[string]any {
	t.Helper()
	r := map[string]any{"receipt_id": "0190a000-0000-7000-8000-000000000001", "tenant_id": "default",
		"decision_id": "0190a000-0000-7000-8000-000000000002", "seq": json.Number("3"), "action_hash": actionHash,
		"decision": "allow", "prev_receipt_hash": strings.Repeat("a", 64), "key_id": "", "created_at": "2026-01-01T00:00:00Z",
		"signature": nil}
	if signed {
		r["key_id"] = KeyID(receiptPubKey)
	}
	h, err := ReceiptHash(r)
	if err != nil {
		t.Fatal(err)
	}
	r["receipt_hash"] = h
	if signed {
		raw, _ := hex.DecodeString(h)
		r["signature"] = base64.StdEncoding.EncodeToString(ed25519.Sign(receiptPriv, raw))
	}
	return r
}
