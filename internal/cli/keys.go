package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentq/agentq"
)

func keysCmd(c *common) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Show and re-enable API keys (by fingerprint, as live workers advertise them)",
		Long: `A 429 cools a key for every worker until its Retry-After; a quota or auth
failure disables it for every worker until a person re-enables it here.
Keys are named by fingerprint (provider#N and the end of the key's hash),
as the live workers advertise them (and as the configuration names them,
if it holds keys): no API key is needed here.`,
		Example: "  enqueue keys list\n  enqueue keys list --json --server http://agentq:8080\n  enqueue keys enable openai#2\n  enqueue keys enable --all",
		Args:    cobra.NoArgs,
	}
	var asJSON bool
	list := &cobra.Command{
		Use: "list", Short: "Every key the live workers use, and its state", Args: cobra.NoArgs,
		Example: "  enqueue keys list\n  enqueue keys list --json",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withClient(cmd, c, func(k *agentq.Client) error {
				keys, err := k.Keys(cmd.Context())
				if err != nil {
					return err
				}
				if asJSON {
					if keys == nil {
						keys = []agentq.KeyInfo{}
					}
					return printJSON(cmd.OutOrStdout(), keys)
				}
				if len(keys) == 0 {
					fmt.Fprintf(cmd.ErrOrStderr(), "%s: no keys: no live worker advertises any, and the configuration has none\n", cmd.Root().Name())
					return nil
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "KEY\tSTATE\tWORKERS")
				for _, k := range keys {
					state := k.State
					switch {
					case k.State == agentq.KeyDisabled:
						state = "disabled: " + oneLine(k.Disabled, 120)
					case k.CoolUntil != nil:
						state = "cooling until " + k.CoolUntil.UTC().Format(time.RFC3339)
					}
					fmt.Fprintf(tw, "%s\t%s\t%d\n", k.Fingerprint, state, k.Workers)
				}
				return tw.Flush()
			})
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print one JSON document")
	var all bool
	enable := &cobra.Command{
		Use: "enable PROVIDER#N | --all", Short: "Re-enable a disabled or cooling key for every worker",
		Example: "  enqueue keys enable openai#2\n  enqueue keys enable 'openai#2 (…3fa1)'\n  enqueue keys enable --all",
		Args: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) == 1) || len(args) > 1 {
				return usageErr("give one PROVIDER#N or --all")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ref := ""
			if len(args) == 1 {
				ref = args[0]
			}
			return withClient(cmd, c, func(k *agentq.Client) error {
				var res agentq.KeyChanges
				var err error
				if all {
					res.Enabled, err = k.EnableAllKeys(cmd.Context())
				} else {
					res, err = k.EnableKeyChanges(cmd.Context(), ref)
				}
				if err != nil {
					return err
				}
				for _, fp := range res.Enabled {
					fmt.Fprintf(cmd.OutOrStdout(), "enabled %s\n", fp)
				}
				if !all {
					for _, fp := range res.NotChanged {
						fmt.Fprintf(cmd.OutOrStdout(), "%s was not disabled or cooling\n", fp)
					}
				}
				return nil
			})
		},
	}
	enable.Flags().BoolVar(&all, "all", false, "re-enable every key the live workers advertise (and the configuration's)")
	cmd.AddCommand(list, enable)
	return cmd
}
