package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentq/agentq/internal/app"
	"github.com/agentq/agentq/internal/tracing"
	"github.com/agentq/agentq/tasks"
)

// Enqueue is the producer command tree.
func Enqueue(env Env) *cobra.Command {
	var (
		inputs  []string
		queue   string
		wait    bool
		asJSON  bool
		noCheck bool
		unused  bool
		waitFor time.Duration
	)
	cmd := &cobra.Command{
		Use:   "enqueue FILE",
		Short: "Submit a workflow spec and inspect workflows",
		Long: `enqueue submits a workflow spec (YAML or JSON; "-" reads stdin) and prints
its id, or with --wait the finished workflow (progress goes to stderr: a bar
on a terminal, one line per change otherwise). Subcommands inspect and
cancel workflows. A file whose name is also a subcommand must be given as
./NAME.

Before it submits, the spec is checked against what live workers advertise
(their queues, routes, code steps and tools): a step no live worker serves
is refused, naming the step; --no-check submits anyway, and the step waits
until a worker that serves it starts.

Exit codes: 0 done; 1 the workflow failed, was canceled or is blocked on a
dead-lettered step (with --wait); 2 bad usage or input (a bad spec, flag or
id, a step no live worker serves, a missing workflow or dead letter, a
token the dashboard refused); 3 cannot reach Redis (or the dashboard); 4
--wait-timeout passed while the workflow still runs; 5 no live worker at
all (--no-check submits anyway).`,
		Example: `  enqueue examples/hello.yaml --wait
  enqueue report.yaml --input question="Which region grew fastest?" --json
  enqueue status wf_abc123
  enqueue result wf_abc123`,
		Args:          cobra.ExactArgs(1),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	c := addCommon(cmd, &env, "redis.addr", "redis.url", "redis.username", "redis.password", "redis.db", "retention")
	cmd.PersistentFlags().String("server", "", "talk to a dashboard's HTTP API at this URL instead of Redis (env AGENTQ_SERVER; changes need AGENTQ_DASHBOARD_TOKEN)")
	cmd.Flags().StringArrayVar(&inputs, "input", nil, "set input key=value (repeatable; overrides the spec's input); a key no template reads is an error")
	cmd.Flags().BoolVar(&unused, "allow-unused-input", false, "with --input, only warn about keys no template of the spec reads")
	cmd.Flags().StringVar(&queue, "queue", "", "queue for steps that do not name one (overrides defaults.queue)")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the workflow ends, then print it")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON document")
	cmd.Flags().BoolVar(&noCheck, "no-check", false, "submit without checking the spec against what live workers serve")
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
		// validate before connecting: bad input never touches Redis
		lim := app.ClientOptions(cfg).Limits
		if args[0] != "-" {
			lim.SchemaDir = filepath.Dir(args[0]) // output.schema paths are relative to the spec file
		}
		spec, err := tasks.ParseSpec(source, data, routeSet(app.ClientOptions(cfg).Routes), lim)
		if err != nil {
			return &ExitError{Code: ExitUsage, Err: err}
		}
		if err := applyInputs(spec, inputs); err != nil {
			return err
		}
		if err := checkInputs(cmd.ErrOrStderr(), spec, inputs, unused); err != nil {
			return err
		}
		if queue != "" {
			spec.Defaults.Queue = queue
		}
		cl, closeCl, err := c.openProducer(cmd, cfg)
		if err != nil {
			return err
		}
		defer closeCl()
		stop, err := tracing.Setup(cmd.Context(), "agentq-enqueue", env.lookup)
		if err != nil {
			return err
		}
		defer stop(context.WithoutCancel(cmd.Context()))
		var opts []tasks.SubmitOption
		if noCheck {
			opts = append(opts, tasks.WithoutWorkerCheck())
		}
		id, err := cl.Submit(cmd.Context(), spec, opts...)
		if err != nil {
			return submitErr(source, err)
		}
		out := cmd.OutOrStdout()
		if !wait {
			if !asJSON {
				fmt.Fprintln(out, id)
				return nil
			}
			wf, err := cl.Status(cmd.Context(), id)
			if err != nil {
				return err
			}
			return printJSON(out, wf)
		}
		ctx := cmd.Context()
		if waitFor > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, waitFor)
			defer cancel()
		}
		p := newProgress(cmd.ErrOrStderr())
		wf, err := cl.Wait(ctx, id, 200*time.Millisecond, p.update)
		p.done()
		if err != nil && waitFor > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) && cmd.Context().Err() == nil {
			return &ExitError{Code: ExitStillRunning, Err: fmt.Errorf("workflow %s is still running after %s (--wait-timeout); it goes on: follow it with 'enqueue status %s'", id, waitFor, id)}
		}
		if err != nil {
			return notFound(err, id)
		}
		if asJSON {
			err = printJSON(out, wf)
		} else {
			printWorkflow(out, wf, app.Prices(cfg))
			if wf.State == tasks.StateCompleted {
				err = printResult(ctx, out, cl, id, false)
			}
		}
		if err != nil {
			return err
		}
		return endState(wf)
	}
	cmd.AddCommand(statusCmd(c), resultCmd(c), cancelCmd(c), listCmd(c), dlqCmd(c), keysCmd(c))
	return cmd
}

func routeSet(names []string) map[string]bool {
	if names == nil {
		return nil
	}
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

// endState is the exit of a command that waited for wf.
func endState(wf *tasks.Workflow) error {
	if wf.State != tasks.StateCompleted {
		return &ExitError{Code: ExitFailed, Err: fmt.Errorf("workflow %s is %s", wf.ID, wf.State)}
	}
	return nil
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

func notFound(err error, id string) error {
	if errors.Is(err, tasks.ErrNotFound) {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("workflow %s not found (wrong id, or expired after its retention)", id)}
	}
	return err
}

// printResult prints the final steps' outputs, or every step's with all.
func printResult(ctx context.Context, w io.Writer, cl producer, id string, all bool) error {
	r, err := cl.Result(ctx, id)
	if err != nil {
		return notFound(err, id)
	}
	steps := r.Final
	if all {
		steps = r.Workflow.Steps
	}
	for _, s := range steps {
		if len(steps) > 1 {
			fmt.Fprintf(w, "== %s ==\n", s.ID)
		}
		fmt.Fprintln(w, s.Output)
	}
	return nil
}

func statusCmd(c *common) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use: "status ID", Short: "Print a workflow's state and its steps (a table)", Args: cobra.ExactArgs(1),
		Example: "  enqueue status wf_abc123\n  enqueue status wf_abc123 --json",
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, c, func(cl producer) error {
				wf, err := cl.Status(cmd.Context(), args[0])
				if err != nil {
					return notFound(err, args[0])
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), wf)
				}
				printWorkflow(cmd.OutOrStdout(), wf, app.Prices(c.loaded))
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
a chain's last step); --all prints every step's output under its id. It
exits 1 if the workflow has not completed.`,
		Args:    cobra.ExactArgs(1),
		Example: "  enqueue result wf_abc123\n  enqueue result wf_abc123 --all\n  enqueue result wf_abc123 --json",
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, c, func(cl producer) error {
				wf, err := cl.Status(cmd.Context(), args[0])
				if err != nil {
					return notFound(err, args[0])
				}
				if asJSON {
					if err := printJSON(cmd.OutOrStdout(), wf); err != nil {
						return err
					}
				} else if wf.State == tasks.StateCompleted {
					if err := printResult(cmd.Context(), cmd.OutOrStdout(), cl, args[0], all); err != nil {
						return err
					}
				}
				return endState(wf)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the workflow as one JSON document")
	cmd.Flags().BoolVar(&all, "all", false, "print every step's output")
	return cmd
}

func cancelCmd(c *common) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a workflow: queued steps are deleted, running ones are interrupted, nothing further runs",
		Args:  cobra.ExactArgs(1), Example: "  enqueue cancel wf_abc123",
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, c, func(cl producer) error {
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
			switch state {
			case "", tasks.StatePending, tasks.StateRunning, tasks.StateBlocked, tasks.StateCompleted, tasks.StateFailed, tasks.StateCanceled:
			default:
				return usageErr("--state %q: want pending, running, blocked, completed, failed or canceled", state)
			}
			return withClient(cmd, c, func(cl producer) error {
				wfs, err := cl.List(cmd.Context(), state, limit)
				if err != nil {
					return err
				}
				if asJSON {
					if wfs == nil {
						wfs = []*tasks.Workflow{}
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
