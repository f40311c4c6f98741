package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/coder/websocket"
)

// feedSubscribers keeps n live-feed WebSocket subscribers (GET
// /v2/ws/events) reading for the whole run, so that the benchmark measures
// authorize with the SOC pipeline's fan-out busy. It counts the frames they
// receive and the subscribers the server disconnects.
type feedSubscribers struct {
	frames, ended atomic.Int64
	cancel        context.CancelFunc
	wg            sync.WaitGroup
}

func startFeedSubscribers(ctx context.Context, base, token string, n int) (*feedSubscribers, error) {
	ctx, cancel := context.WithCancel(ctx)
	f := &feedSubscribers{cancel: cancel}
	url := "ws" + strings.TrimPrefix(base, "http") + "/v2/ws/events"
	for range n {
		h := http.Header{}
		h.Set("Authorization", "Bearer "+token)
		conn, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: h})
		if resp != nil && resp.Body != nil {
			_ = resp.Body.Close() // the handshake's response; the socket lives on in conn
		}
		if err != nil {
			f.stop()
			return nil, err
		}
		conn.SetReadLimit(1 << 20)
		f.wg.Go(func() {
			defer func() { _ = conn.CloseNow() }()
			for {
				// Discard each frame without buffering it: the subscribers
				// share the server's two cores, so they should cost little.
				_, r, err := conn.Reader(ctx)
				if err == nil {
					_, err = io.Copy(io.Discard, r)
				}
				if err != nil {
					if ctx.Err() == nil {
						f.ended.Add(1)
					}
					return
				}
				f.frames.Add(1)
			}
		})
	}
	return f, nil
}

func (f *feedSubscribers) stop() {
	f.cancel()
	f.wg.Wait()
}
