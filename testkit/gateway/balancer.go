package gateway

// Cluster mode of the end-to-end harness (issue 21): two nodes with
// SVC_CLUSTER=true on one Postgres database and one Valkey, behind a small
// round-robin reverse proxy written for the tests. Every request goes to
// the next node in turn, on a new connection dialed from the client's own
// loopback address (so the nodes see the caller's address, as behind a
// transparent balancer); streamed responses are flushed as they come and
// WebSocket upgrades are passed through (net/http/httputil.ReverseProxy).

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"svc/persistence/storetest"
	"svc/testkit"
)

// ClusterBackend is the backend name of cluster mode: startServer starts
// two nodes behind a balancer for it.
const ClusterBackend = "cluster"

// srcAddrKey carries the client's address to the balancer's dialer.
type srcAddrKey struct{}

// StartBalancer starts a round-robin reverse proxy to nodes and returns
// its base URL; it stops with the test.
func StartBalancer(t testing.TB, nodes ...*Server) string {
	t.Helper()
	targets := make([]*url.URL, len(nodes))
	for i, n := range nodes {
		u, err := url.Parse(n.Base)
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

// StartCluster starts two clustered nodes on a fresh Postgres database and
// the test Valkey, and returns a server whose base is the balancer in front
// of them; stopping it stops both nodes. Its stdout and stderr are the
// first node's; logs() has both.
func StartCluster(t testing.TB, env map[string]string) *Server {
	t.Helper()
	return startCluster(t, env, false)
}

// startCluster starts the two nodes in this process or as processes.
func startCluster(t testing.TB, env map[string]string, process bool) *Server {
	t.Helper()
	dbURL := storetest.PostgresURL(t)
	vars := map[string]string{"SVC_CLUSTER": "true", "SVC_VALKEY_URL": storetest.ValkeyURL(t)}
	for k, v := range env {
		vars[k] = v
	}
	node := func(id string) *Server {
		v := map[string]string{"SVC_NODE_ID": id}
		for k, x := range vars {
			v[k] = x
		}
		if process {
			return StartProcessOn(t, dbURL, v)
		}
		return StartOn(t, dbURL, v)
	}
	a, b := node("node-a-"+testkit.Uniq()), node("node-b-"+testkit.Uniq())
	return &Server{Base: StartBalancer(t, a, b), Debug: a.Debug, DBURL: dbURL, Stdout: a.Stdout, Stderr: a.Stderr,
		Done: make(chan struct{}), Peers: []*Server{a, b},
		Client: &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4}}}
}

// Logs is what the server (every node of a cluster) wrote to stderr.
func (s *Server) Logs() string {
	if len(s.Peers) == 0 {
		return s.Stderr.String()
	}
	out := ""
	for _, p := range s.Peers {
		out += p.Stderr.String()
	}
	return out
}
