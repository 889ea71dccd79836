package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// Dashboard is the dashboard command. Its pages (asynqmon at /asynq/,
// workflows, providers, dead letters, REST API, /metrics) arrive with
// issue 05; until then it says so and exits 2.
func Dashboard(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:           "dashboard",
		Short:         "Web dashboard (not yet available)",
		Long:          "dashboard will serve asynqmon, workflow and provider pages and a REST API. It is not built yet; use `enqueue status` and `enqueue list` meanwhile.",
		Example:       "  enqueue list --state running",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(*cobra.Command, []string) error {
			return &ExitError{Code: ExitUsage, Err: errors.New("not yet: the dashboard arrives in a later release; use `enqueue status ID` and `enqueue list` meanwhile")}
		},
	}
	addCommon(cmd, &env)
	return cmd
}
