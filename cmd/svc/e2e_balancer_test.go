package main

// Cluster mode of the end-to-end harness (issue 21): two nodes with
// SVC_CLUSTER=true on one Postgres database and one Valkey, behind a small
// round-robin reverse proxy written for the tests. Every request goes to
// the next node in turn, on a new connection dialed from the client's own
// loopback address (so the nodes see the caller's address, as behind a
// transparent balancer); streamed responses are flushed as they come and
// WebSocket upgrades are passed through (net/http/httputil.ReverseProxy).

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"svc/persistence/storetest"
)

// clusterBackend is the backend name of cluster mode: startServer starts
// two nodes behind a balancer for it.
const clusterBackend = "cluster"

// srcAddrKey carries the client's address to the balancer's dialer.
type srcAddrKey struct{}

// startBalancer starts a round-robin reverse proxy to nodes and returns
// its base URL; it stops with the test.
func startBalancer(t testing.TB, nodes ...*server) string {
	t.Helper()
	targets := make([]*url.URL, len(nodes))
	for i, n := range nodes {
		u, err := url.Parse(n.base)
		if err != nil {
			t.Fatal(err)
		}
		targets[i] = u
	}
	var next atomic.Uint64
	transport := &http.Transport{
		DisableKeepAlives: true, // a new connection per request
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			d := net.Dialer{Timeout: 5 * time.Second}
			if ip, _ := ctx.Value(srcAddrKey{}).(string); ip != "" {
				d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(ip)}
			}
			return d.DialContext(ctx, network, addr)
		},
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(targets[(next.Add(1)-1)%uint64(len(targets))])
			// Keep the client's Host, as load balancers do: a browser's
			// WebSocket is accepted only when its Origin is the Host.
			pr.Out.Host = pr.In.Host
		},
		Transport:     transport,
		FlushInterval: -1, // server-sent events reach the client as they come
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			t.Logf("balancer: %v", err)
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), srcAddrKey{}, host)))
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// startCluster starts two clustered nodes on a fresh Postgres database and
// the test Valkey, and returns a server whose base is the balancer in front
// of them; stopping it stops both nodes. Its stdout and stderr are the
// first node's; logs() has both.
func startCluster(t testing.TB, env map[string]string) *server {
	t.Helper()
	dbURL := storetest.PostgresURL(t)
	vars := map[string]string{"SVC_CLUSTER": "true", "SVC_VALKEY_URL": storetest.ValkeyURL(t)}
	for k, v := range env {
		vars[k] = v
	}
	node := func(id string) *server {
		v := map[string]string{"SVC_NODE_ID": id}
		for k, x := range vars {
			v[k] = x
		}
		return startServerOn(t, dbURL, v)
	}
	a, b := node("node-a-"+uniq()), node("node-b-"+uniq())
	return &server{base: startBalancer(t, a, b), debug: a.debug, dbURL: dbURL, stdout: a.stdout, stderr: a.stderr,
		done: make(chan struct{}), peers: []*server{a, b},
		client: &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4}}}
}

// logs is what the server (every node of a cluster) wrote to stderr.
func (s *server) logs() string {
	if len(s.peers) == 0 {
		return s.stderr.String()
	}
	out := ""
	for _, p := range s.peers {
		out += p.stderr.String()
	}
	return out
}

// TestE2EBalancer checks the harness's balancer itself: calls alternate
// between the two nodes, and each node sees the caller's own address.
func TestE2EBalancer(t *testing.T) {
	t.Parallel()
	s := startCluster(t, nil)
	seen := map[string]int{}
	for range 6 {
		// The client directly: (*server).do may fetch the OpenAPI document
		// through the balancer too, which would take a turn.
		resp, err := s.client.Get(s.base + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("readyz through the balancer: %d %s", resp.StatusCode, raw)
		}
		seen[str(t, obj(t, raw), "node_id")]++
	}
	if len(seen) != 2 {
		t.Fatalf("nodes answering through the balancer: %v, want two, alternately", seen)
	}
	for node, n := range seen {
		if n != 3 {
			t.Errorf("node %s answered %d of 6, want 3 (round robin)", node, n)
		}
	}
}
