package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agentq/agentq"
)

// approveCmd is `enqueue approve ID STEP [--reject] [--comment TEXT]`: a
// person's decision on a waiting approval step.
func approveCmd(c *common) *cobra.Command {
	var (
		reject  bool
		comment string
	)
	cmd := &cobra.Command{
		Use:   "approve ID STEP",
		Short: "Approve (or --reject) an approval step that waits for a decision",
		Long: `approve records a person's decision on an approval step (approve: in the
spec) that is waiting: the workflow goes on, and the step's dependents read
the decision as .Steps.STEP.JSON.approved and .comment. A step that is not
waiting (decided already, not reached yet, or its workflow ended) is refused
(exit 2).`,
		Example: `  enqueue approve wf_abc123 review --comment "numbers checked"
  enqueue approve wf_abc123 review --reject --comment "Q3 figures are wrong"`,
		Args: cobra.ExactArgs(2),
	}
	cmd.Flags().BoolVar(&reject, "reject", false, "reject instead of approving")
	cmd.Flags().StringVar(&comment, "comment", "", "why: kept with the decision, read by the step's dependents")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return withClient(cmd, c, func(cl *agentq.Client) error {
			state, err := cl.Decide(cmd.Context(), args[0], args[1], agentq.Decision{Approve: !reject, Comment: comment, By: "cli"})
			if errors.Is(err, agentq.ErrNotWaiting) {
				return &ExitError{Code: ExitUsage, Err: err}
			}
			if err != nil {
				return notFound(err, args[0])
			}
			verb := "approved"
			if reject {
				verb = "rejected"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s: workflow %s is %s\n", args[1], verb, args[0], state)
			return nil
		})
	}
	return cmd
}

// rerunCmd is `enqueue rerun ID --from STEP`: run an ended workflow again
// from a step.
func rerunCmd(c *common) *cobra.Command {
	var from string
	cmd := &cobra.Command{
		Use:   "rerun ID --from STEP",
		Short: "Run a workflow that ended (or is blocked) again from a step",
		Long: `rerun runs a workflow that completed, failed, timed out, was canceled or
is blocked again from STEP: the steps before it keep their outputs; STEP and
everything downstream of it lose their outputs, checkpoints and stored
sub-calls and run again (their tasks get the workflow's next generation in
their ids). A workflow still running is refused (exit 2).`,
		Example: `  enqueue rerun wf_abc123 --from report`,
		Args:    cobra.ExactArgs(1),
	}
	cmd.Flags().StringVar(&from, "from", "", "the step to run again from (required)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if from == "" {
			return usageErr("rerun: --from STEP is required")
		}
		return withClient(cmd, c, func(cl *agentq.Client) error {
			gen, err := cl.Rerun(cmd.Context(), args[0], from)
			if errors.Is(err, agentq.ErrNotFinished) || errors.Is(err, agentq.ErrInvalidSpec) {
				return &ExitError{Code: ExitUsage, Err: err}
			}
			if err != nil {
				return notFound(err, args[0])
			}
			fmt.Fprintf(cmd.OutOrStdout(), "workflow %s runs again from %s (run %d); follow it with 'enqueue status %s'\n", args[0], from, gen+1, args[0])
			return nil
		})
	}
	return cmd
}
