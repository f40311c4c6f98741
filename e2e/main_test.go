// Package e2e is the end-to-end suite: every capability checked through
// HTTP against gateways run in this test process (testkit/gateway), on
// SQLite, on Postgres, and on two clustered nodes behind a round-robin
// balancer. What only a process shows (signals, exit codes, SIGKILL, TLS)
// is in e2e/process.
package e2e

import (
	"testing"

	"svc/testkit/gateway"
)

func TestMain(m *testing.M) { gateway.Main(m) }
