package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// The minimal subscriber against a real WebSocket server (the library the
// gateway uses): the handshake is accepted, messages of every length
// encoding are counted once each, and a close from the server counts the
// subscriber as disconnected.
func TestFeedSubscribersCountFrames(t *testing.T) {
	sizes := []int{0, 1, 125, 126, 65535, 65536, 200000}
	sent := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v2/ws/events" || r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		ctx := context.Background()
		for _, n := range sizes {
			if err := c.Write(ctx, websocket.MessageText, []byte(strings.Repeat("x", n))); err != nil {
				return
			}
		}
		// A message through the streaming writer (possibly several frames).
		wr, err := c.Writer(ctx, websocket.MessageText)
		if err == nil {
			_, _ = wr.Write([]byte("part one "))
			_ = wr.Close()
		}
		close(sent)
		_ = c.Close(websocket.StatusPolicyViolation, "subscriber fell behind")
	}))
	defer srv.Close()

	f, err := startFeedSubscribers(context.Background(), srv.URL, "tok", 1)
	if err != nil {
		t.Fatal(err)
	}
	<-sent
	deadline := time.Now().Add(10 * time.Second)
	for f.ended.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	f.stop()
	if got, want := f.frames.Load(), int64(len(sizes)+1); got != want {
		t.Fatalf("counted %d messages, want %d", got, want)
	}
	if f.ended.Load() != 1 {
		t.Fatalf("ended = %d after the server's close, want 1", f.ended.Load())
	}

	if _, err := startFeedSubscribers(context.Background(), srv.URL, "wrong", 1); err == nil {
		t.Fatal("a refused handshake was accepted")
	}
}
