package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentq/agentq"
)

func dlqCmd(c *common) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "Review dead-lettered steps: list, show, requeue, discard",
		Long: `A step is dead-lettered when its request is bad (400/422, or a context or
content limit with no fallback) or its retries are exhausted. asynq keeps it
in its archive (asynqmon shows it there too) and its workflow is blocked.
Requeue it when the cause is fixed and the workflow resumes from it;
discard it and the workflow fails.`,
		Example: `  enqueue dlq list --class bad_request
  enqueue dlq show wf_abc123:summary
  enqueue dlq requeue wf_abc123:summary
  enqueue dlq requeue --all --class server
  enqueue dlq discard wf_abc123:summary`,
		Args: cobra.NoArgs,
	}
	var (
		class  string
		asJSON bool
	)
	list := &cobra.Command{
		Use: "list", Short: "List dead letters, newest first", Args: cobra.NoArgs,
		Example: "  enqueue dlq list\n  enqueue dlq list --class rate_limited --json",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withClient(cmd, c, func(cl *agentq.Client) error {
				dls, err := cl.DeadLettersOfClass(cmd.Context(), class)
				if err != nil {
					return err
				}
				if asJSON {
					if dls == nil {
						dls = []agentq.ParkedStep{}
					}
					return printJSON(cmd.OutOrStdout(), dls)
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "TASK\tCLASS\tATTEMPTS\tFAILED\tREASON")
				for _, d := range dls {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", d.TaskID, d.Class, d.Attempts, d.FailedAt.Format(time.RFC3339), oneLine(d.Reason, 100))
				}
				return tw.Flush()
			})
		},
	}
	list.Flags().StringVar(&class, "class", "", "only dead letters of this error class")
	list.Flags().BoolVar(&asJSON, "json", false, "print one JSON document")

	var showJSON bool
	show := &cobra.Command{
		Use: "show TASK", Short: "Show a dead letter: why it failed, the step's last recorded error, and its rendered prompt", Args: cobra.ExactArgs(1),
		Example: "  enqueue dlq show wf_abc123:summary",
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, c, func(cl *agentq.Client) error {
				d, err := cl.DeadLetterTaskDetail(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if showJSON {
					return printJSON(cmd.OutOrStdout(), d)
				}
				w := cmd.OutOrStdout()
				fmt.Fprintf(w, "task      %s (queue %s)\nworkflow  %s, step %s, route %s\nclass     %s\nattempts  %d\nfailed    %s\n",
					d.TaskID, d.Queue, d.Workflow, d.Step, d.Route, d.Class, d.Attempts, d.FailedAt.Format(time.RFC3339))
				fmt.Fprintf(w, "\nlast error:\n  %s\n", d.Reason)
				if d.StepError != "" && d.StepError != d.Reason {
					// what the step's record says when it differs from the task's
					// last error (a requeue, or the safety net settled it)
					fmt.Fprintf(w, "\nstep's recorded error:\n  %s\n", d.StepError)
				}
				if d.RejectedOutput != "" {
					fmt.Fprintf(w, "\nrejected output (the last answer that failed the step's output check):\n%s\n", d.RejectedOutput)
				}
				if d.System != "" {
					fmt.Fprintf(w, "\nsystem prompt:\n%s\n", d.System)
				}
				fmt.Fprintf(w, "\nprompt:\n%s\n", d.Prompt)
				return nil
			})
		},
	}
	show.Flags().BoolVar(&showJSON, "json", false, "print one JSON document")

	var all bool
	var reClass string
	requeue := &cobra.Command{
		Use: "requeue TASK | --all [--class C]", Short: "Send dead letters back to their queues; their workflows resume",
		Example: "  enqueue dlq requeue wf_abc123:summary\n  enqueue dlq requeue --all --class server",
		Args: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) == 1) || len(args) > 1 {
				return usageErr("give one TASK or --all")
			}
			if reClass != "" && !all {
				return usageErr("--class goes with --all")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, c, func(cl *agentq.Client) error {
				if all {
					n, err := cl.RequeueAll(cmd.Context(), reClass)
					fmt.Fprintf(cmd.OutOrStdout(), "requeued %d dead letter(s)\n", n)
					return err
				}
				if err := cl.RequeueTask(cmd.Context(), args[0]); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "requeued %s\n", args[0])
				return nil
			})
		},
	}
	requeue.Flags().BoolVar(&all, "all", false, "requeue every dead letter")
	requeue.Flags().StringVar(&reClass, "class", "", "with --all: only those of this class")

	discard := &cobra.Command{
		Use: "discard TASK", Short: "Delete a dead letter for good; its blocked workflow fails", Args: cobra.ExactArgs(1),
		Example: "  enqueue dlq discard wf_abc123:summary",
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, c, func(cl *agentq.Client) error {
				if err := cl.DiscardTask(cmd.Context(), args[0]); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "discarded %s\n", args[0])
				return nil
			})
		},
	}
	cmd.AddCommand(list, show, requeue, discard)
	return cmd
}
