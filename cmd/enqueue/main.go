// Command enqueue submits and inspects agentq workflows. See `enqueue --help`.
package main

import (
	"os"

	"github.com/agentq/agentq/internal/cli"
)

func main() {
	env := cli.Env{Out: os.Stdout, Err: os.Stderr}
	os.Exit(cli.Run(cli.Enqueue(env), env, os.Args[1:]))
}
