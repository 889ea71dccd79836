//go:build !unix

package mcptool

import "os/exec"

// ownGroup does nothing where process groups are not unix's.
func ownGroup(*exec.Cmd) {}

// killGroup kills the command's process.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
