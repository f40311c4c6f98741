//go:build unix

package conformance_test

import (
	"os/exec"
	"syscall"
)

// killGroup starts the driver in a process group of its own and, when the
// run's deadline passes, kills the whole group: a driver that is a script
// starting an interpreter leaves no process behind.
func killGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
