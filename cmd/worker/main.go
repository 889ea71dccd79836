// Command worker runs agentq workflow steps. See `worker --help`.
package main

import (
	"os"

	"github.com/agentq/agentq/internal/cli"
)

func main() {
	env := cli.Env{Out: os.Stdout, Err: os.Stderr}
	os.Exit(cli.Run(cli.Worker(env), env, os.Args[1:]))
}
