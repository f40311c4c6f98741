package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"syscall"
	"time"

	"svc/actors"
)

// WebhookPoster is the transport of the outbound chat notifier
// (actors.Post): one POST to target per call, without following redirects
// (a 3xx answer counts as a failure), reading at most 64 KiB of the answer.
// Its errors never carry the URL, which for chat webhooks embeds a secret.
// Connections are checked where they are dialled (CONTRACT §7, and safe
// from DNS rebinding): never to a link-local, metadata, multicast or
// unspecified address; to loopback and private addresses only when
// allowPrivate (SVC_ALLOW_PRIVATE_TARGETS).
func WebhookPoster(target string, allowPrivate bool) actors.Post {
	client := OutboundClient(allowPrivate)
	return func(ctx context.Context, body []byte, header map[string]string) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
		if err != nil {
			return 0, scrubURL(err)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, scrubURL(err)
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}
}

// scrubURL drops the URL from a transport error.
func scrubURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

// ErrForbiddenTarget is the dial error for an address outbound requests
// may not reach.
var ErrForbiddenTarget = errors.New("httpapi: outbound target address not allowed")

// OutboundClient is the HTTP client of every outbound request: redirects
// are not followed, and each connection's address passes CheckTarget.
func OutboundClient(allowPrivate bool) *http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second, Control: func(_, address string, _ syscall.RawConn) error {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return err
		}
		ip, err := netip.ParseAddr(host)
		if err != nil {
			return fmt.Errorf("%w: %s", ErrForbiddenTarget, host)
		}
		return CheckTarget(ip, allowPrivate)
	}}
	transport := http.DefaultTransport.(*http.Transport).Clone() //nolint:errcheck // the default transport is an *http.Transport
	transport.Proxy = nil                                        // a proxy would hide the real target from the check
	transport.DialContext = dialer.DialContext
	return &http.Client{Transport: transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// CheckTarget refuses link-local (cloud metadata among them), multicast and
// unspecified addresses always, and loopback, private (RFC 1918, unique
// local) and shared (100.64.0.0/10) addresses unless allowPrivate.
func CheckTarget(ip netip.Addr, allowPrivate bool) error {
	ip = ip.Unmap()
	switch {
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast(), ip.IsInterfaceLocalMulticast(), ip.IsMulticast(), ip.IsUnspecified():
		return fmt.Errorf("%w: %s is link-local, multicast or unspecified", ErrForbiddenTarget, ip)
	case ip.IsLoopback(), ip.IsPrivate(), sharedRange.Contains(ip):
		if !allowPrivate {
			return fmt.Errorf("%w: %s is loopback or private (SVC_ALLOW_PRIVATE_TARGETS is false)", ErrForbiddenTarget, ip)
		}
	}
	return nil
}

var sharedRange = netip.MustParsePrefix("100.64.0.0/10")
