// Command dashboard serves the agentq web dashboard. See `dashboard --help`.
package main

import (
	"os"

	"github.com/agentq/agentq/internal/cli"
	"github.com/agentq/agentq/internal/dashcli"
)

func main() {
	env := cli.Env{Out: os.Stdout, Err: os.Stderr}
	os.Exit(cli.Run(dashcli.Command(env), env, os.Args[1:]))
}
