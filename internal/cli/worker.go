package cli

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentq/agentq/internal/tracing"
	"github.com/agentq/agentq/internal/worker"
)

// Worker is the worker command.
func Worker(env Env) *cobra.Command {
	var waitFor time.Duration
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run workflow steps from the queue",
		Long: `worker takes workflow steps from Redis, calls the LLM providers of each
step's route, and settles the results. SIGTERM or Ctrl-C stops it taking new
steps and lets running ones finish within --shutdown-timeout.

It runs prompt steps. Code steps (run: NAME) and tools run on a worker you
build with the Go SDK (package agentq), which is this worker with your
functions added. For a demo that needs no services, run
go run ./examples/analyst from the repository.`,
		Example: `  worker --config agentq.yaml --concurrency 50 --queues critical=6,default=3,low=1
  AGENTQ_REDIS_URL=rediss://:secret@redis:6380/0 worker --metrics-addr :9091`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	c := addCommon(cmd, &env)
	c.providerKeys = true // the one command that calls providers
	addWaitForRedis(cmd, &waitFor)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg, err := c.load(cmd)
		if err != nil {
			return err
		}
		log, err := c.logger(cmd)
		if err != nil {
			return err
		}
		stop, err := tracing.Setup(cmd.Context(), "agentq-worker", env.lookup)
		if err != nil {
			return err
		}
		defer stop(context.WithoutCancel(cmd.Context()))
		return worker.Run(cmd.Context(), worker.Options{Config: cfg, Logger: log, WaitForRedis: waitFor})
	}
	return cmd
}
