package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentq/agentq"
	"github.com/agentq/agentq/internal/record"
)

func statusCmd(c *common) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use: "status ID", Short: "Print a workflow's state and its steps (a table)", Args: cobra.ExactArgs(1),
		Long: `status prints a workflow's state and its steps. It exits 1 for a workflow
that failed, is blocked on a dead-lettered step, was canceled or timed out
(as --wait does), 0 for one that completed or is still on its way.`,
		Example: "  enqueue status wf_abc123\n  enqueue status wf_abc123 --json",
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, c, func(cl *agentq.Client) error {
				wf, err := cl.Status(cmd.Context(), args[0])
				if err != nil {
					return notFound(err, args[0])
				}
				if asJSON {
					if err := printJSON(cmd.OutOrStdout(), wf); err != nil {
						return err
					}
				} else {
					printWorkflow(cmd.OutOrStdout(), wf, cl)
				}
				switch wf.State {
				case record.StateFailed, record.StateBlocked, record.StateCanceled, record.StateTimedOut:
					return endState(wf)
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON document")
	return cmd
}

func resultCmd(c *common) *cobra.Command {
	var asJSON, all bool
	cmd := &cobra.Command{
		Use:   "result ID",
		Short: "Print a completed workflow's result: the outputs of its final steps (--all: every step)",
		Long: `result prints the outputs of the steps nothing depends on (a chord's body,
a chain's last step); --all prints every step's output under its id, a
map's one line per instance. --json prints the workflow as one JSON
document (as status --json); with --all each map step in it has its
instances too, every one that started, in item order ("instances", read
a page at a time). It exits 1 if the workflow has not completed.`,
		Args:    cobra.ExactArgs(1),
		Example: "  enqueue result wf_abc123\n  enqueue result wf_abc123 --all\n  enqueue result wf_abc123 --json",
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, c, func(cl *agentq.Client) error {
				wf, err := cl.Status(cmd.Context(), args[0])
				if err != nil {
					return notFound(err, args[0])
				}
				if asJSON && all {
					if err := printWorkflowWithInstances(cmd.Context(), cmd.OutOrStdout(), cl, wf); err != nil {
						return err
					}
				} else if asJSON {
					if err := printJSON(cmd.OutOrStdout(), wf); err != nil {
						return err
					}
				} else if wf.State == record.StateCompleted {
					if err := printResult(cmd.Context(), cmd.OutOrStdout(), cl, args[0], all); err != nil {
						return err
					}
				}
				return endState(wf)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the workflow as one JSON document")
	cmd.Flags().BoolVar(&all, "all", false, "print every step's output (with --json: each map step's instances too)")
	return cmd
}

// stepWithInstances is a step of result --json --all: a map step's record
// with its instances.
type stepWithInstances struct {
	agentq.StepRecord
	Instances []agentq.StepRecord `json:"instances,omitempty"`
}

// printWorkflowWithInstances prints wf as status --json does, with each
// map step's started instances under it ("instances"), read a page at a
// time.
func printWorkflowWithInstances(ctx context.Context, w io.Writer, cl *agentq.Client, wf *agentq.Workflow) error {
	steps := make([]stepWithInstances, len(wf.Steps))
	for i, s := range wf.Steps {
		steps[i].StepRecord = s
		if s.Map == nil {
			continue
		}
		steps[i].Instances = []agentq.StepRecord{}
		if err := eachInstancePage(ctx, cl, wf.ID, s.ID, s.Map.Started, func(page []agentq.StepRecord) {
			steps[i].Instances = append(steps[i].Instances, page...)
		}); err != nil {
			return err
		}
	}
	return printJSON(w, struct {
		*agentq.Workflow
		Steps []stepWithInstances `json:"steps"`
	}{wf, steps})
}

func cancelCmd(c *common) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a workflow: queued steps are deleted, running ones are interrupted, nothing further runs",
		Args:  cobra.ExactArgs(1), Example: "  enqueue cancel wf_abc123",
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, c, func(cl *agentq.Client) error {
				st, err := cl.Cancel(cmd.Context(), args[0])
				if err != nil {
					return notFound(err, args[0])
				}
				fmt.Fprintf(cmd.OutOrStdout(), "workflow %s: %s\n", args[0], st)
				return nil
			})
		},
	}
}

func listCmd(c *common) *cobra.Command {
	var (
		state  string
		limit  int
		asJSON bool
	)
	cmd := &cobra.Command{
		Use: "list", Short: "List recent workflows, newest first", Args: cobra.NoArgs,
		Example: "  enqueue list --state running",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := agentq.CheckState(state); err != nil { // before connecting: bad input never touches Redis
				return usageErr("--state: %v", err)
			}
			return withClient(cmd, c, func(cl *agentq.Client) error {
				wfs, err := cl.Recent(cmd.Context(), state, limit)
				if err != nil {
					return err
				}
				if asJSON {
					if wfs == nil {
						wfs = []agentq.Workflow{}
					}
					return printJSON(cmd.OutOrStdout(), wfs)
				}
				for _, wf := range wfs {
					fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\t%s\t%s\n", wf.ID, wf.State, wf.Name, wf.CreatedAt.Format(time.RFC3339))
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&state, "state", "", "only workflows in this state")
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON document")
	return cmd
}
