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
	var (
		embedded bool
		serve    bool
		waitFor  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run workflow steps from the queue",
		Long: `worker takes workflow steps from Redis, calls the LLM providers of each
step's route, and settles the results. SIGTERM or Ctrl-C stops it taking new
steps and lets running ones finish within --shutdown-timeout.

--embedded needs no services at all: it starts an in-process Redis and an
in-process chaosllm (a fake provider with a scripted outage), runs the demo
workflow through the outage, prints what happened and exits (0 if the
workflow completed). With --serve it keeps running afterwards.`,
		Example: `  worker --config agentq.yaml --concurrency 50 --queues critical=6,default=3,low=1
  worker --embedded
  AGENTQ_REDIS_URL=rediss://:secret@redis:6380/0 worker --metrics-addr :9091`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	c := addCommon(cmd, &env)
	cmd.Flags().BoolVar(&embedded, "embedded", false, "demo mode: in-process Redis and chaosllm, run the demo workflow")
	cmd.Flags().BoolVar(&serve, "serve", false, "with --embedded: keep serving after the demo")
	addWaitForRedis(cmd, &waitFor)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if serve && !embedded {
			return usageErr("--serve only goes with --embedded")
		}
		if embedded {
			if !cmd.Flags().Changed("log-level") {
				if _, ok := env.lookup("AGENTQ_LOG_LEVEL"); !ok {
					c.logLevel = "error"
				}
			}
			log, err := c.logger(cmd)
			if err != nil {
				return err
			}
			return runDemo(cmd.Context(), cmd.OutOrStdout(), log, serve)
		}
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
