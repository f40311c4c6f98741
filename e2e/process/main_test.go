// Package process holds the end-to-end tests that need the svc binary as a
// process: signals and exit codes, SIGKILL mid-write, TLS on the binary's
// listener, the command line, and the README's walk run as written.
package process

import (
	"testing"

	"svc/testkit/gateway"
)

func TestMain(m *testing.M) { gateway.Main(m) }
