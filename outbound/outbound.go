// Package outbound is the gateway's HTTP client for requests it makes to
// others (webhook deliveries, chat notifications, approval callbacks, the
// code host, MCP servers), with the address guard of CONTRACT §7: every
// connection's address is checked where it is dialled (safe from DNS
// rebinding), never a link-local (cloud metadata), multicast or unspecified
// address, and loopback, private and shared addresses only when allowed
// (SVC_ALLOW_PRIVATE_TARGETS). Redirects are never followed.
package outbound

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
	"strings"
	"syscall"
	"time"
)

// ErrForbiddenTarget is an address outbound requests may not reach. Its
// text is the one the API has always answered with.
var ErrForbiddenTarget = errors.New("httpapi: outbound target address not allowed")

// Client is the HTTP client of every outbound request: redirects are not
// followed, no proxy is used (it would hide the real target from the
// check), and each connection's address passes CheckTarget.
func Client(allowPrivate bool) *http.Client {
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
	transport.Proxy = nil
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

// CheckTargetHost applies CheckTarget to a host that is an IP literal, and
// treats localhost names as loopback; other names are left to the
// dial-time check. It admits a target's URL before it is stored.
func CheckTargetHost(host string, allowPrivate bool) error {
	if ip, err := netip.ParseAddr(host); err == nil {
		return CheckTarget(ip, allowPrivate)
	}
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if !allowPrivate && (h == "localhost" || strings.HasSuffix(h, ".localhost")) {
		return fmt.Errorf("%w: %s is loopback (SVC_ALLOW_PRIVATE_TARGETS is false)", ErrForbiddenTarget, host)
	}
	return nil
}

// Poster is the transport of the outbound chat notifier (actors.Post):
// one POST to target per call through Client, reading at most 64 KiB of
// the answer; a 3xx answer is returned as it is (a failure for the
// caller). Its errors never carry the URL, which for chat webhooks embeds
// a secret.
func Poster(target string, allowPrivate bool) func(ctx context.Context, body []byte, header map[string]string) (int, error) {
	post := ExportPoster(allowPrivate)
	return func(ctx context.Context, body []byte, header map[string]string) (int, error) {
		return post(ctx, target, body, header)
	}
}

// ExportPoster is the transport of the webhook exporter and the approval
// callbacks (actors.ExportPost): one POST per call to the given target,
// as Poster.
func ExportPoster(allowPrivate bool) func(ctx context.Context, target string, body []byte, header map[string]string) (int, error) {
	client := Client(allowPrivate)
	return func(ctx context.Context, target string, body []byte, header map[string]string) (int, error) {
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

// Answer is what an Exchanger's POST was answered.
type Answer struct {
	Status      int
	ContentType string
	// Body is at most the first 64 KiB of the answer.
	Body []byte
}

// Exchanger is the transport of the receipt log's witness requests
// (receiptlog.Post): one POST of a text/plain body to target per call,
// through Client, returning the answer's status, content type and body.
func Exchanger(allowPrivate bool) func(ctx context.Context, target string, body []byte) (Answer, error) {
	client := Client(allowPrivate)
	return func(ctx context.Context, target string, body []byte) (Answer, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
		if err != nil {
			return Answer{}, scrubURL(err)
		}
		req.Header.Set("Content-Type", "text/plain; charset=utf-8")
		resp, err := client.Do(req)
		if err != nil {
			return Answer{}, scrubURL(err)
		}
		defer func() { _ = resp.Body.Close() }()
		answer, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if err != nil {
			return Answer{}, scrubURL(err)
		}
		return Answer{Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), Body: answer}, nil
	}
}
