package agentq_test

import (
	"os/exec"
	"syscall"
)

// dieWithTest has the kernel kill a server the docs test started if the
// test process dies first (a panic, a -timeout), so none is left running.
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
