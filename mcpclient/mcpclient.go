// Package mcpclient lists an MCP server's tools over streamable HTTP with
// the official Go SDK (github.com/modelcontextprotocol/go-sdk): initialize,
// then tools/list through every page. It is its own package because it is
// neither actor, rule, storage nor the gateway's API: an outbound client,
// which takes the caller's *http.Client (whose dialer enforces the
// outbound address guard) and bounds what a server may make it do: one
// deadline for the whole discovery, a cap on the bytes read across every
// answer, a cap on the tools, no retries and no standing event stream.
package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"svc/rules/manifest"
)

// Errors a discovery reports (wrapped with the detail).
var (
	// ErrTimeout: the server did not finish within the deadline.
	ErrTimeout = errors.New("mcpclient: the server did not answer in time")
	// ErrTooLarge: the server's answers exceeded the byte or tool cap.
	ErrTooLarge = errors.New("mcpclient: the server's answer is too large")
	// ErrProtocol: the server did not speak MCP (a refused connection, an
	// HTTP error, an answer that is not JSON-RPC, an MCP error).
	ErrProtocol = errors.New("mcpclient: the server did not answer as an MCP server")
)

// Limits bound one discovery.
type Limits struct {
	// Timeout bounds the whole discovery (connect, initialize, every page).
	Timeout time.Duration
	// MaxBytes caps the bytes read from the server across every answer.
	MaxBytes int64
	// MaxTools caps the tools listed.
	MaxTools int
}

// DefaultLimits are the gateway's: 10 s, 8 MiB, manifest.MaxTools.
var DefaultLimits = Limits{Timeout: 10 * time.Second, MaxBytes: 8 << 20, MaxTools: manifest.MaxTools}

// Tools connects to the MCP server at endpoint with client and lists its
// tools. It returns at the deadline whatever the server does: the SDK may
// still be closing the session then (its cancellation notice and session
// DELETE are bounded at 5 s each), which it finishes on its own goroutine
// (against a hanging server that close took up to 5 s past the deadline).
func Tools(ctx context.Context, client *http.Client, endpoint, version string, lim Limits) ([]manifest.Tool, error) {
	ctx, cancel := context.WithTimeout(ctx, lim.Timeout)
	defer cancel()
	type result struct {
		tools []manifest.Tool
		err   error
	}
	done := make(chan result, 1)
	go func() {
		tools, err := list(ctx, client, endpoint, version, lim)
		done <- result{tools, err}
	}()
	select {
	case r := <-done:
		return r.tools, r.err
	case <-ctx.Done():
		// A result that arrived as the deadline passed wins over it.
		select {
		case r := <-done:
			return r.tools, r.err
		default:
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, ErrTimeout
		}
		return nil, fmt.Errorf("%w: %w", ErrProtocol, ctx.Err())
	}
}

// list is Tools without the return at the deadline.
func list(ctx context.Context, client *http.Client, endpoint, version string, lim Limits) ([]manifest.Tool, error) {
	capped := &cappedTransport{base: client.Transport, left: lim.MaxBytes}
	if capped.base == nil {
		capped.base = http.DefaultTransport
	}
	tap := &listTap{base: capped, max: lim.MaxTools}
	hc := &http.Client{Transport: tap, CheckRedirect: client.CheckRedirect, Jar: client.Jar}
	c := mcp.NewClient(&mcp.Implementation{Name: "svc", Version: version}, nil)
	session, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, MaxRetries: -1,
		DisableStandaloneSSE: true, MaxEventSize: int(min(lim.MaxBytes, 1<<30))}, nil)
	if err != nil {
		return nil, classify(ctx, capped, tap, err)
	}
	defer func() { _ = session.Close() }()
	// The tap takes every page's tools off the wire: the SDK sees empty
	// pages and follows their cursors.
	for _, err := range session.Tools(ctx, nil) {
		if err != nil {
			return nil, classify(ctx, capped, tap, err)
		}
	}
	if err := tap.why(); err != nil {
		return nil, err
	}
	return tap.listed(), nil
}

// classify names why a discovery failed: the deadline, the byte cap, or
// anything else the server did.
func classify(ctx context.Context, capped *cappedTransport, tap *listTap, err error) error {
	switch {
	case capped.over.Load():
		return fmt.Errorf("%w: more than the cap's bytes", ErrTooLarge)
	case tap.why() != nil:
		return tap.why()
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
		return ErrTimeout
	}
	return fmt.Errorf("%w: %w", ErrProtocol, err)
}

// cappedTransport counts the bytes of every answer's body against one
// budget; past it, reads fail.
type cappedTransport struct {
	base http.RoundTripper
	left int64
	over atomic.Bool
}

func (t *cappedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &cappedBody{ReadCloser: resp.Body, t: t}
	return resp, nil
}

type cappedBody struct {
	io.ReadCloser
	t *cappedTransport
}

var errCap = errors.New("mcpclient: byte cap reached")

func (b *cappedBody) Read(p []byte) (int, error) {
	left := atomic.LoadInt64(&b.t.left)
	if left <= 0 {
		b.t.over.Store(true)
		return 0, errCap
	}
	if int64(len(p)) > left {
		p = p[:left]
	}
	n, err := b.ReadCloser.Read(p)
	atomic.AddInt64(&b.t.left, -int64(n))
	return n, err
}
