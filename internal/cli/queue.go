package cli

import (
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/agentq/agentq"
)

// queueCmd is `enqueue queue list|pause|resume`: asynq's queues, through
// Redis or a dashboard (--server).
func queueCmd(c *common) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "queue",
		Short: "List queues; pause and resume a queue (workers take none of its steps while it is paused)",
		Long: `A paused queue keeps its steps: submits are still accepted and running
steps finish, but no worker takes another of its steps until the queue is
resumed. Queues are those live workers serve and those a step was ever
queued on; naming another is an error (exit 2). A sharded queue (queues:
NAME: shards: in the configuration) is one queue here: its shards are
listed, paused and resumed together.`,
		Example: "  enqueue queue list\n  enqueue queue pause default\n  enqueue queue resume default\n  enqueue queue list --json --server http://agentq:8080",
		Args:    cobra.NoArgs,
	}
	var asJSON bool
	list := &cobra.Command{
		Use: "list", Short: "Every queue: paused or not, its steps by state, the live workers that serve it", Args: cobra.NoArgs,
		Example: "  enqueue queue list\n  enqueue queue list --json",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withClient(cmd, c, func(cl *agentq.Client) error {
				qs, err := cl.Queues(cmd.Context())
				if err != nil {
					return err
				}
				if asJSON {
					if qs == nil {
						qs = []agentq.QueueInfo{}
					}
					return printJSON(cmd.OutOrStdout(), qs)
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "QUEUE\tSHARDS\tSTATE\tPENDING\tACTIVE\tSCHEDULED\tRETRY\tARCHIVED\tWORKERS")
				for _, q := range qs {
					state := "running"
					switch {
					case q.Paused:
						state = "paused"
					case q.PausedShards > 0:
						state = fmt.Sprintf("paused %d/%d", q.PausedShards, q.Shards)
					}
					fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d\n", q.Name, max(q.Shards, 1), state, q.Pending, q.Active, q.Scheduled, q.Retry, q.Archived, q.Workers)
				}
				return tw.Flush()
			})
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print one JSON document")
	change := func(use, short, done, already string, f func(*agentq.Client, *cobra.Command, string) (agentq.QueueChange, error)) *cobra.Command {
		return &cobra.Command{
			Use: use + " NAME", Short: short, Args: cobra.ExactArgs(1),
			Example: "  enqueue queue " + use + " default",
			RunE: func(cmd *cobra.Command, args []string) error {
				return withClient(cmd, c, func(cl *agentq.Client) error {
					ch, err := f(cl, cmd, args[0])
					if errors.Is(err, agentq.ErrUnknownQueue) {
						return &ExitError{Code: ExitUsage, Err: err}
					}
					if err != nil {
						return err
					}
					msg := already
					if ch.Changed {
						msg = done
					}
					fmt.Fprintf(cmd.OutOrStdout(), "queue %[1]s: "+msg+"\n", ch.Name)
					return nil
				})
			},
		}
	}
	pause := change("pause", "Stop workers taking the queue's steps (running ones finish; submits are still accepted)",
		"paused (its steps wait until 'enqueue queue resume %[1]s')", "was paused already",
		func(cl *agentq.Client, cmd *cobra.Command, name string) (agentq.QueueChange, error) {
			return cl.PauseQueue(cmd.Context(), name)
		})
	resume := change("resume", "Let workers take a paused queue's steps again", "resumed", "was not paused",
		func(cl *agentq.Client, cmd *cobra.Command, name string) (agentq.QueueChange, error) {
			return cl.ResumeQueue(cmd.Context(), name)
		})
	cmd.AddCommand(list, pause, resume)
	return cmd
}
