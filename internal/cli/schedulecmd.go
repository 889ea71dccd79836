package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentq/agentq"
)

// scheduleCmd is `enqueue schedule list`: the periodic workflows the
// workers run, through Redis or a dashboard (--server).
func scheduleCmd(c *common) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedule",
		Short: "Show the periodic workflows the workers run (schedules: in their configuration)",
		Long: `Schedules live in the workers' configuration (schedules: name, cron, spec,
input). Every worker that has them competes for one lease per schedule; the
holder submits the spec once per slot, with an idempotency key made of the
schedule's name and the slot's time, so no slot runs twice even when the
holder dies and another worker takes over (it catches up the slots of the
last minute). See docs/schedules.md.`,
		Example: "  enqueue schedule list\n  enqueue schedule list --json --server http://agentq:8080",
		Args:    cobra.NoArgs,
	}
	var asJSON bool
	list := &cobra.Command{
		Use: "list", Short: "Each schedule: its cron, the worker holding it, its last and next slots", Args: cobra.NoArgs,
		Example: "  enqueue schedule list\n  enqueue schedule list --json",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withClient(cmd, c, func(cl *agentq.Client) error {
				ss, err := cl.Schedules(cmd.Context())
				if err != nil {
					return err
				}
				if asJSON {
					if ss == nil {
						ss = []agentq.ScheduleInfo{}
					}
					return printJSON(cmd.OutOrStdout(), ss)
				}
				if len(ss) == 0 {
					fmt.Fprintf(cmd.ErrOrStderr(), "%s: no schedules: no worker with schedules: in its configuration ran one this week\n", cmd.Root().Name())
					return nil
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "SCHEDULE\tCRON\tWORKFLOW\tHOLDER\tLAST SLOT\tLAST RUN\tNEXT SLOT")
				for _, s := range ss {
					holder := s.Holder
					if holder == "" {
						holder = "none (no live worker has it)"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Cron, s.Workflow, holder, when(s.LastSlot), s.LastWorkflow, when(s.NextSlot))
				}
				return tw.Flush()
			})
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print one JSON document")
	cmd.AddCommand(list)
	return cmd
}

func when(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
