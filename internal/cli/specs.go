package cli

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/agentq/agentq"
)

// specCmd is `enqueue spec put|list|show`: specs stored by name, versioned.
func specCmd(c *common) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "spec",
		Short: "Store workflow specs by name (versioned), list and show them",
		Long: `spec keeps workflow specs by name in Redis, for workflows started by name
(a child workflow: a step's workflow: { spec: NAME }) and for workers that
register theirs. Each put that changes a spec's content makes a new version;
a workflow started from a stored spec keeps the version it started with.`,
		Example: `  enqueue spec put research research.yaml
  enqueue spec list
  enqueue spec show research --version 1`,
	}
	var version int
	var asJSON bool
	put := &cobra.Command{
		Use:   "put NAME FILE",
		Short: "Store FILE (a spec, checked as a submit's) as NAME's next version",
		Long: `put checks FILE as enqueue FILE would and stores it under NAME: a new
version, or, if NAME holds the same content already, that version (nothing
is written). It prints the name and the version.`,
		Example: `  enqueue spec put research research.yaml`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := c.load(cmd)
			if err != nil {
				return err
			}
			data, source, err := readSpec(args[1], cmd.InOrStdin(), cfg.Limits.MaxSpecBytes)
			if err != nil {
				return err
			}
			schemaDir := ""
			if args[1] != "-" {
				schemaDir = filepath.Dir(args[1])
			}
			acfg, err := sdkConfig(cfg)
			if err != nil {
				return err
			}
			wspec, err := acfg.ParseSpec(source, data, schemaDir)
			if err != nil {
				return &ExitError{Code: ExitUsage, Err: err}
			}
			return withClient(cmd, c, func(cl *agentq.Client) error {
				st, err := cl.StoreSpec(cmd.Context(), args[0], wspec)
				if errors.Is(err, agentq.ErrBadSpecName) {
					return usageErr("spec put: %v", err)
				}
				if err != nil {
					return err
				}
				for _, m := range st.Missing {
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s names child spec %q, not stored yet: a submit of %s is refused until it is (enqueue spec put %s FILE)\n", st.Name, m, st.Name, m)
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), st)
				}
				what := "stored"
				if !st.Created {
					what = "unchanged"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s version %d (%s)\n", st.Name, st.Version, what)
				return nil
			})
		},
	}
	list := &cobra.Command{
		Use:     "list",
		Short:   "List the stored specs and their latest versions",
		Example: `  enqueue spec list --json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withClient(cmd, c, func(cl *agentq.Client) error {
				sts, err := cl.StoredSpecs(cmd.Context())
				if err != nil {
					return err
				}
				if asJSON {
					if sts == nil {
						sts = []agentq.StoredSpec{}
					}
					return printJSON(cmd.OutOrStdout(), sts)
				}
				for _, st := range sts {
					fmt.Fprintf(cmd.OutOrStdout(), "%s\tversion %d\n", st.Name, st.Version)
				}
				return nil
			})
		},
	}
	show := &cobra.Command{
		Use:     "show NAME",
		Short:   "Print a stored spec (its latest version, or --version N) as YAML",
		Example: `  enqueue spec show research --version 2`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("version") && version < 1 {
				return usageErr("spec show: --version %d is not a version (versions start at 1; leave --version out for the latest)", version)
			}
			return withClient(cmd, c, func(cl *agentq.Client) error {
				wspec, v, err := cl.StoredSpec(cmd.Context(), args[0], version)
				if errors.Is(err, agentq.ErrNoSpec) || errors.Is(err, agentq.ErrBadSpecName) {
					return usageErr("spec show: %v", err)
				}
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), map[string]any{"name": args[0], "version": v, "spec": wspec})
				}
				b, err := yaml.Marshal(wspec)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "# %s version %d\n%s", args[0], v, b)
				return nil
			})
		},
	}
	show.Flags().IntVar(&version, "version", 0, "the version to show, 1 or more (left out: the latest)")
	for _, sub := range []*cobra.Command{put, list, show} {
		sub.Flags().BoolVar(&asJSON, "json", false, "print one JSON document")
	}
	cmd.AddCommand(put, list, show)
	return cmd
}
