//go:build !linux

package agentq_test

import "os/exec"

// dieWithTest: only Linux can have a child killed with its parent.
func dieWithTest(*exec.Cmd) {}
