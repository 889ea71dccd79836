package cli

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentq/agentq/internal/app"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/llmclient"
)

// keyRef is one configured key, named by fingerprint.
type keyRef struct {
	provider, fingerprint, id string
}

func configuredKeys(cfg config.Config) []keyRef {
	var out []keyRef
	for _, p := range cfg.Providers {
		for i, k := range p.Keys {
			out = append(out, keyRef{p.Name, llmclient.Fingerprint(p.Name, i, k.Reveal()), llmclient.KeyID(k.Reveal())})
		}
	}
	return out
}

func keysCmd(c *common) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Show and re-enable API keys (by fingerprint; keys come from the configuration)",
		Long: `A 429 cools a key for every worker until its Retry-After; a quota or auth
failure disables it for every worker until a person re-enables it here.
Keys are named by fingerprint (provider#N and the end of the key's hash);
the configuration (with the same environment as the workers) tells which
keys exist.`,
		Example: "  enqueue keys list --config agentq.yaml\n  enqueue keys enable openai#2\n  enqueue keys enable --all",
		Args:    cobra.NoArgs,
	}
	list := &cobra.Command{
		Use: "list", Short: "Every configured key and its state", Args: cobra.NoArgs,
		Example: "  enqueue keys list",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := c.load(cmd)
			if err != nil {
				return err
			}
			rdb, err := app.Redis(cmd.Context(), cfg.Redis)
			if err != nil {
				return err
			}
			defer rdb.Close()
			names := make([]string, len(cfg.Providers))
			for i, p := range cfg.Providers {
				names[i] = p.Name
			}
			st, err := store.NewKeyState(rdb, nil).Load(cmd.Context(), names)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KEY\tSTATE")
			for _, k := range configuredKeys(cfg) {
				s := st[k.provider][k.id]
				state := "ok"
				switch {
				case s.Disabled != "":
					state = "disabled: " + oneLine(s.Disabled, 120)
				case !s.CoolUntil.IsZero():
					state = "cooling until " + s.CoolUntil.UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%s\t%s\n", k.fingerprint, state)
			}
			return tw.Flush()
		},
	}
	var all bool
	enable := &cobra.Command{
		Use: "enable PROVIDER#N | --all", Short: "Re-enable a disabled or cooling key for every worker",
		Example: "  enqueue keys enable openai#2\n  enqueue keys enable --all",
		Args: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) == 1) || len(args) > 1 {
				return usageErr("give one PROVIDER#N or --all")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := c.load(cmd)
			if err != nil {
				return err
			}
			keys := configuredKeys(cfg)
			if !all {
				k, err := findKey(keys, args[0])
				if err != nil {
					return err
				}
				keys = []keyRef{k}
			}
			rdb, err := app.Redis(cmd.Context(), cfg.Redis)
			if err != nil {
				return err
			}
			defer rdb.Close()
			ks := store.NewKeyState(rdb, nil)
			for _, k := range keys {
				was, err := ks.Enable(cmd.Context(), k.provider, k.id)
				if err != nil {
					return err
				}
				if was {
					fmt.Fprintf(cmd.OutOrStdout(), "enabled %s\n", k.fingerprint)
				} else if !all {
					fmt.Fprintf(cmd.OutOrStdout(), "%s was not disabled or cooling\n", k.fingerprint)
				}
			}
			return nil
		},
	}
	enable.Flags().BoolVar(&all, "all", false, "re-enable every configured key")
	cmd.AddCommand(list, enable)
	return cmd
}

// findKey reads "provider#N" (N from 1), optionally followed by the rest of
// a fingerprint.
func findKey(keys []keyRef, ref string) (keyRef, error) {
	head, _, _ := strings.Cut(ref, " ")
	prov, num, ok := strings.Cut(head, "#")
	n, err := strconv.Atoi(num)
	if !ok || err != nil || n < 1 {
		return keyRef{}, usageErr("%q is not PROVIDER#N (e.g. openai#2)", ref)
	}
	i := 0
	for _, k := range keys {
		if k.provider == prov {
			i++
			if i == n {
				return k, nil
			}
		}
	}
	return keyRef{}, usageErr("%q: provider %q has no key #%d in the configuration", ref, prov, n)
}
