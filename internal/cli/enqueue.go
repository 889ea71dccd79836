package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentq/agentq/internal/app"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/tasks"
)

// Enqueue is the producer command tree.
func Enqueue(env Env) *cobra.Command {
	var (
		inputs  []string
		queue   string
		wait    bool
		asJSON  bool
		waitFor time.Duration
	)
	cmd := &cobra.Command{
		Use:   "enqueue FILE",
		Short: "Submit a workflow spec and inspect workflows",
		Long: `enqueue submits a workflow spec (YAML or JSON; "-" reads stdin) and prints
its id, or with --wait the finished workflow. Subcommands inspect and cancel
workflows. A file whose name is also a subcommand must be given as ./NAME.

Exit codes: 0 done; 1 the workflow failed, was canceled or is blocked on a
dead-lettered step (with --wait); 2 bad usage or invalid spec; 3 cannot
reach Redis.`,
		Example: `  enqueue examples/hello.yaml --wait
  enqueue report.yaml --input question="Which region grew fastest?" --json
  enqueue status wf_abc123
  enqueue result wf_abc123`,
		Args:          cobra.ExactArgs(1),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	c := addCommon(cmd, &env, "redis.addr", "redis.url", "redis.username", "redis.password", "redis.db", "retention")
	cmd.Flags().StringArrayVar(&inputs, "input", nil, "set input key=value (repeatable; overrides the spec's input)")
	cmd.Flags().StringVar(&queue, "queue", "", "queue for steps that do not name one (overrides defaults.queue)")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the workflow ends, then print it")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON document")
	cmd.Flags().DurationVar(&waitFor, "wait-timeout", 0, "with --wait, give up after this long (0: no limit)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		cfg, err := c.load(cmd)
		if err != nil {
			return err
		}
		data, source, err := readSpec(args[0], cmd.InOrStdin(), cfg.Limits.MaxSpecBytes)
		if err != nil {
			return err
		}
		var routes map[string]bool
		if len(cfg.Routes) > 0 {
			routes = map[string]bool{}
			for n := range cfg.Routes {
				routes[n] = true
			}
		}
		spec, err := tasks.ParseSpec(source, data, routes, tasks.Limits{MaxSteps: cfg.Limits.MaxSteps, MaxSpecBytes: cfg.Limits.MaxSpecBytes})
		if err != nil {
			return &ExitError{Code: ExitUsage, Err: err}
		}
		if err := applyInputs(spec, inputs); err != nil {
			return err
		}
		if queue != "" {
			spec.Defaults.Queue = queue
		}
		cl, err := app.Connect(cmd.Context(), cfg)
		if err != nil {
			return err
		}
		defer cl.Close()
		id, err := tasks.NewSubmitter(cl.Store, cl.Asynq, nil).Submit(cmd.Context(), spec)
		if err != nil {
			return fmt.Errorf("submit %s: %w", source, err)
		}
		if !wait {
			if !asJSON {
				fmt.Fprintln(cmd.OutOrStdout(), id)
				return nil
			}
			wf, err := cl.Store.Get(cmd.Context(), id)
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), wf)
		}
		return waitAndPrint(cmd, cl.Store, id, waitFor, asJSON)
	}
	cmd.AddCommand(statusCmd(c), resultCmd(c), cancelCmd(c), listCmd(c))
	return cmd
}

func readSpec(arg string, stdin io.Reader, limit int) ([]byte, string, error) {
	var r io.Reader
	source := arg
	if arg == "-" {
		r, source = stdin, "stdin"
	} else {
		f, err := os.Open(arg)
		if err != nil {
			return nil, "", usageErr("cannot read spec: %v", err)
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, "", usageErr("cannot read spec %s: %v", source, err)
	}
	return data, source, nil
}

func applyInputs(spec *tasks.Spec, inputs []string) error {
	for _, kv := range inputs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return usageErr("--input %q: want key=value", kv)
		}
		if spec.Input == nil {
			spec.Input = map[string]any{}
		}
		spec.Input[k] = v
	}
	return nil
}

// waitAndPrint polls the workflow until it ends (or is blocked), prints it
// and sets the exit code.
func waitAndPrint(cmd *cobra.Command, st *store.Store, id string, limit time.Duration, asJSON bool) error {
	ctx := cmd.Context()
	if limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	wf, err := waitWorkflow(ctx, st, id, 200*time.Millisecond)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if asJSON {
		if err := printJSON(out, wf); err != nil {
			return err
		}
	} else {
		printWorkflow(out, wf)
		if wf.State == store.StateCompleted {
			spec, _ := st.Spec(ctx, id)
			printResult(out, wf, spec)
		}
	}
	if wf.State != store.StateCompleted {
		return &ExitError{Code: ExitFailed, Err: fmt.Errorf("workflow %s ended %s", id, wf.State)}
	}
	return nil
}

// waitWorkflow polls until the workflow is terminal or blocked.
func waitWorkflow(ctx context.Context, st *store.Store, id string, every time.Duration) (*store.Workflow, error) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		wf, err := st.Get(ctx, id)
		if err != nil {
			return nil, notFound(err, id)
		}
		if store.Terminal(wf.State) || wf.State == store.StateBlocked {
			return wf, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("gave up waiting for workflow %s (state %s): %w", id, wf.State, ctx.Err())
		case <-t.C:
		}
	}
}

func notFound(err error, id string) error {
	if errors.Is(err, store.ErrNotFound) {
		return &ExitError{Code: ExitFailed, Err: fmt.Errorf("workflow %s not found (wrong id, or expired after its retention)", id)}
	}
	return err
}

// printResult prints the outputs of the steps nothing depends on.
func printResult(w io.Writer, wf *store.Workflow, specJSON []byte) {
	var spec tasks.Spec
	_ = json.Unmarshal(specJSON, &spec)
	deps := map[string][]string{}
	for _, s := range spec.Steps {
		deps[s.ID] = s.DependsOn
	}
	out := sinks(wf, deps)
	for _, s := range out {
		if len(out) > 1 {
			fmt.Fprintf(w, "== %s ==\n", s.ID)
		}
		fmt.Fprintln(w, s.Output)
	}
}

func connect(cmd *cobra.Command, c *common) (*app.Clients, error) {
	cfg, err := c.load(cmd)
	if err != nil {
		return nil, err
	}
	return app.Connect(cmd.Context(), cfg)
}

// getWorkflow connects and reads one workflow; the caller closes the clients.
func getWorkflow(cmd *cobra.Command, c *common, id string) (*app.Clients, *store.Workflow, error) {
	cl, err := connect(cmd, c)
	if err != nil {
		return nil, nil, err
	}
	wf, err := cl.Store.Get(cmd.Context(), id)
	if err != nil {
		cl.Close()
		return nil, nil, notFound(err, id)
	}
	return cl, wf, nil
}

func statusCmd(c *common) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use: "status ID", Short: "Print a workflow's state and its steps", Args: cobra.ExactArgs(1),
		Example: "  enqueue status wf_abc123 --json",
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, wf, err := getWorkflow(cmd, c, args[0])
			if err != nil {
				return err
			}
			defer cl.Close()
			if asJSON {
				return printJSON(cmd.OutOrStdout(), wf)
			}
			printWorkflow(cmd.OutOrStdout(), wf)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON document")
	return cmd
}

func resultCmd(c *common) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use: "result ID", Short: "Print a finished workflow's result (the outputs of its last steps)", Args: cobra.ExactArgs(1),
		Example: "  enqueue result wf_abc123",
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, wf, err := getWorkflow(cmd, c, args[0])
			if err != nil {
				return err
			}
			defer cl.Close()
			if asJSON {
				if err := printJSON(cmd.OutOrStdout(), wf); err != nil {
					return err
				}
			} else if wf.State == store.StateCompleted {
				spec, _ := cl.Store.Spec(cmd.Context(), args[0])
				printResult(cmd.OutOrStdout(), wf, spec)
			}
			if wf.State != store.StateCompleted {
				return &ExitError{Code: ExitFailed, Err: fmt.Errorf("workflow %s has no result: it is %s", wf.ID, wf.State)}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON document")
	return cmd
}

func cancelCmd(c *common) *cobra.Command {
	return &cobra.Command{
		Use: "cancel ID", Short: "Cancel a workflow: steps not yet started will not run", Args: cobra.ExactArgs(1),
		Example: "  enqueue cancel wf_abc123",
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := connect(cmd, c)
			if err != nil {
				return err
			}
			defer cl.Close()
			st, err := cl.Store.Cancel(cmd.Context(), args[0])
			if err != nil {
				return notFound(err, args[0])
			}
			fmt.Fprintf(cmd.OutOrStdout(), "workflow %s: %s\n", args[0], st)
			return nil
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
			switch state {
			case "", store.StatePending, store.StateRunning, store.StateBlocked, store.StateCompleted, store.StateFailed, store.StateCanceled:
			default:
				return usageErr("--state %q: want pending, running, blocked, completed, failed or canceled", state)
			}
			cl, err := connect(cmd, c)
			if err != nil {
				return err
			}
			defer cl.Close()
			wfs, err := cl.Store.List(cmd.Context(), state, limit)
			if err != nil {
				return err
			}
			if asJSON {
				if wfs == nil {
					wfs = []*store.Workflow{}
				}
				return printJSON(cmd.OutOrStdout(), wfs)
			}
			for _, wf := range wfs {
				fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\t%s\t%s\n", wf.ID, wf.State, wf.Name, wf.CreatedAt.Format(time.RFC3339))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&state, "state", "", "only workflows in this state")
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON document")
	return cmd
}
