// Command dashboard serves the agentq web dashboard. See `dashboard --help`.
package main

import (
	"os"
	"runtime/debug"

	"github.com/agentq/agentq/internal/cli"
	"github.com/agentq/agentq/internal/dashcli"
)

func main() {
	// A dashboard holding thousands of idle event streams allocates little
	// but keeps each connection's buffers: a GC target of 50% keeps its
	// heap near what it uses (3,000 idle streams: docs/benchmarks.md).
	// GOGC (and GOMEMLIMIT) in the environment win.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(50)
	}
	env := cli.Env{Out: os.Stdout, Err: os.Stderr}
	os.Exit(cli.Run(dashcli.Command(env), env, os.Args[1:]))
}
