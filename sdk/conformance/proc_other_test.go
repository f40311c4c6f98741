//go:build !unix

package conformance_test

import "os/exec"

// killGroup: without process groups, the deadline kills the driver
// process itself (exec.CommandContext's default).
func killGroup(*exec.Cmd) {}
