package e2e

// Cluster mode of the end-to-end harness (issue 21): two nodes with
// SVC_CLUSTER=true on one Postgres database and one Valkey, behind a small
// round-robin reverse proxy written for the tests. Every request goes to
// the next node in turn, on a new connection dialed from the client's own
// loopback address (so the nodes see the caller's address, as behind a
// transparent balancer); streamed responses are flushed as they come and
// WebSocket upgrades are passed through (net/http/httputil.ReverseProxy).

import (
	"io"
	"testing"

	"svc/testkit"
	"svc/testkit/gateway"
)

// TestE2EBalancer checks the harness's balancer itself: calls alternate
// between the two nodes, and each node sees the caller's own address.
func TestE2EBalancer(t *testing.T) {
	t.Parallel()
	s := gateway.StartCluster(t, nil)
	seen := map[string]int{}
	for range 6 {
		// The client directly: (*server).do may fetch the OpenAPI document
		// through the balancer too, which would take a turn.
		resp, err := s.Client.Get(s.Base + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("readyz through the balancer: %d %s", resp.StatusCode, raw)
		}
		seen[testkit.Str(t, testkit.Obj(t, raw), "node_id")]++
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
