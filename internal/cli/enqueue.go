package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentq/agentq"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/tracing"
)

// Enqueue is the producer command tree.
func Enqueue(env Env) *cobra.Command {
	env = env.terminalSafe()
	var (
		inputs     []string
		queue      string
		wait       bool
		followed   bool
		asJSON     bool
		noCheck    bool
		unused     bool
		waitFor    time.Duration
		waitOutage time.Duration
		reconnect  time.Duration
		idemKey    string
		dl         time.Duration
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

Controls:
  --idempotency-key K   submit at most once per key: a later submit with K
                        (within the retention) prints the same workflow
                        ("existing": true with --json) and creates nothing;
                        K with another spec or input is refused (exit 2)
  --deadline D          bound the whole workflow to D from now (overrides
                        the spec's deadline:): at D it ends timed_out, its
                        unfinished steps canceled (exit 1 with --wait)
  approve ID STEP       decide on an approval step (approve: in the spec)
                        that waits for a person: --reject, --comment TEXT
  rerun ID --from STEP  run an ended or blocked workflow again from STEP
                        (the steps before it keep their outputs)
  follow ID             its events live: steps, attempts, LLM calls, tool
                        turns, streamed text (--follow on a submit does it
                        for the new workflow; docs/events.md)
  queue pause|resume Q  stop and restart workers taking queue Q's steps
                        (queue list shows each queue, paused or not)
  schedule list         the periodic workflows the workers run (schedules:
                        in the workers' agentq.yaml), each once per slot
In the spec:
  deadline: 10m         the whole workflow's bound (docs/deadlines.md)
  budget: { tokens: 200000, usd: 2.5 }
                        what all its LLM calls may spend (docs/budgets.md)
  notify: { url: https://example.com/hooks, events: [completed, failed] }
                        a signed POST when it ends (docs/webhooks.md)
  approve: { message: "Publish?" }  (a step)
                        wait for a person's decision (docs/approvals.md)
  for_each: "{{ .Steps.plan.JSON.items }}"  (a step)
                        one instance per item (docs/workflows.md, Maps)

Exit codes: 0 done; 1 the workflow failed, timed out, was canceled or is blocked on a
dead-lettered step (with --wait); 2 bad usage or input (a bad spec, flag or
id, a step no live worker serves, a missing workflow or dead letter, a
token the dashboard refused, an idempotency key used with another spec or
input, an unknown queue); 3 cannot reach Redis (or the dashboard); 4
--wait-timeout passed while the workflow still runs; 5 no live worker at
all (--no-check submits anyway); 6 written but not confirmed by the
replicas redis.durability asks for; 7 refused at a bound of limits: (a
signal no step waits for past limits.max_kept_signals): try again later.`,
		Example: `  enqueue examples/hello.yaml --wait
  enqueue report.yaml --input question="Which region grew fastest?" --json
  enqueue status wf_abc123
  enqueue report.yaml --follow    # every step, attempt and LLM call as it happens
  enqueue result wf_abc123
  enqueue order.yaml --input id=1234 --idempotency-key order-1234 --json
  enqueue report.yaml --deadline 10m --wait    # timed_out (exit 1) if not done in 10 minutes
  enqueue approve wf_abc123 review --comment "figures checked"
  enqueue rerun wf_abc123 --from report
  enqueue queue pause default    # then: enqueue queue resume default
  enqueue schedule list --json`,
		Args:          cobra.ExactArgs(1),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	c := addCommon(cmd, &env, "redis.addr", "redis.url", "redis.username", "redis.password", "redis.db", "retention")
	cmd.PersistentFlags().String("server", "", "talk to a dashboard's HTTP API at this URL instead of Redis (env AGENTQ_SERVER; changes need AGENTQ_DASHBOARD_TOKEN)")
	cmd.Flags().StringArrayVar(&inputs, "input", nil, "set input key=value (repeatable; overrides the spec's input); a key no template of the spec reads (prompts, with:, for_each, concurrency.key, wait_for.match, messages) is an error")
	cmd.Flags().BoolVar(&unused, "allow-unused-input", false, "with --input, only warn about keys no template of the spec reads")
	cmd.Flags().StringVar(&queue, "queue", "", "queue for steps that do not name one (overrides defaults.queue)")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the workflow ends, then print it")
	cmd.Flags().BoolVar(&followed, "follow", false, "print the workflow's events live until it ends (as 'enqueue follow ID'); exits as --wait")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON document")
	cmd.Flags().BoolVar(&noCheck, "no-check", false, "submit without checking the spec against what live workers serve")
	cmd.Flags().DurationVar(&waitFor, "wait-timeout", 0, "with --wait, give up after this long (0: no limit)")
	cmd.Flags().DurationVar(&waitOutage, "wait-outage", time.Minute, "with --wait, keep waiting through Redis (or the dashboard) not answering for this long, then exit 3")
	reconnectFlag(cmd, &reconnect)
	cmd.Flags().DurationVar(&dl, "deadline", 0, "bound the whole workflow to this long from now (overrides the spec's deadline:; at least 1s)")
	cmd.Flags().StringVar(&idemKey, "idempotency-key", "", "submit at most once per key: a later submit with the key (within the retention) prints the existing workflow; with another spec or input it is refused (exit 2)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		cfg, err := c.load(cmd)
		if err != nil {
			return err
		}
		if cmd.Flags().Changed("idempotency-key") {
			if err := agentq.CheckIdempotencyKey(idemKey); err != nil {
				return usageErr("--idempotency-key: %v", err)
			}
		}
		data, source, err := readSpec(args[0], cmd.InOrStdin(), cfg.Limits.MaxSpecBytes)
		if err != nil {
			return err
		}
		// validate before connecting: bad input never touches Redis
		schemaDir := ""
		if args[0] != "-" {
			schemaDir = filepath.Dir(args[0]) // output.schema paths are relative to the spec file
		}
		acfg, err := sdkConfig(cfg)
		if err != nil {
			return err
		}
		wspec, err := acfg.ParseSpec(source, data, schemaDir)
		if err != nil {
			return &ExitError{Code: ExitUsage, Err: err}
		}
		if err := applyInputs(wspec, inputs); err != nil {
			return err
		}
		if err := checkInputs(cmd.ErrOrStderr(), wspec, inputs, unused); err != nil {
			return err
		}
		if queue != "" {
			wspec.Defaults.Queue = queue
		}
		if cmd.Flags().Changed("deadline") {
			if dl < time.Second {
				return usageErr("--deadline: %s is under 1s", dl)
			}
			wspec.Deadline = spec.Duration(dl) // travels with the spec, to Redis or through --server
		}
		cl, err := c.openProducer(cmd, cfg)
		if err != nil {
			return err
		}
		defer cl.Close()
		stop, err := tracing.Setup(cmd.Context(), "agentq-enqueue", env.lookup)
		if err != nil {
			return err
		}
		defer stop(context.WithoutCancel(cmd.Context()))
		var opts []agentq.SubmitOption
		if noCheck {
			opts = append(opts, agentq.WithoutWorkerCheck())
		}
		if idemKey != "" {
			opts = append(opts, agentq.WithIdempotencyKey(idemKey))
		}
		sub, err := cl.SubmitWorkflow(cmd.Context(), wspec, opts...)
		if errors.Is(err, agentq.ErrIdempotencyConflict) {
			return &ExitError{Code: ExitUsage, Err: err}
		}
		if err != nil {
			return submitErr(source, wspec, err)
		}
		id := sub.ID
		if sub.Existing {
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: idempotency key %q names workflow %s, submitted before with the same spec and input: nothing new was created\n", cmd.Root().Name(), idemKey, id)
		}
		out := cmd.OutOrStdout()
		if followed {
			return follow(cmd.Context(), out, cmd.ErrOrStderr(), cl, id, "", asJSON, reconnect)
		}
		if !wait {
			if !asJSON {
				fmt.Fprintln(out, id)
				return nil
			}
			wf, err := cl.Status(cmd.Context(), id)
			if err != nil {
				return err
			}
			return printJSON(out, submittedJSON{wf, sub.Existing})
		}
		ctx := cmd.Context()
		if waitFor > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, waitFor)
			defer cancel()
		}
		p := newProgress(cmd.ErrOrStderr())
		wf, err := waitThroughOutages(ctx, cl, id, waitOutage, p.update, cmd.ErrOrStderr())
		p.done()
		if err != nil && waitFor > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) && cmd.Context().Err() == nil {
			return &ExitError{Code: ExitStillRunning, Err: fmt.Errorf("workflow %s is still running after %s (--wait-timeout); it goes on: follow it with 'enqueue status %s'", id, waitFor, id)}
		}
		if err != nil {
			return notFound(err, id)
		}
		if asJSON {
			err = printJSON(out, submittedJSON{wf, sub.Existing})
		} else {
			printWorkflow(out, wf, cl)
			if wf.State == record.StateCompleted {
				err = printResult(ctx, out, cl, id, false)
			}
		}
		if err != nil {
			return err
		}
		return endState(wf)
	}
	cmd.AddCommand(statusCmd(c), followCmd(c), resultCmd(c), cancelCmd(c), listCmd(c), dlqCmd(c), keysCmd(c), queueCmd(c), scheduleCmd(c), approveCmd(c), signalCmd(c), specCmd(c), rerunCmd(c), mcpCmd(c))
	return cmd
}

// submittedJSON is what enqueue --json prints: the workflow, and whether
// its idempotency key named one submitted before.
type submittedJSON struct {
	*agentq.Workflow
	Existing bool `json:"existing"`
}

// endState is the exit of a command that waited for wf.
func endState(wf *agentq.Workflow) error {
	if wf.State != record.StateCompleted {
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
	if errors.Is(err, agentq.ErrNotFound) {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("workflow %s not found (wrong id, or expired after its retention)", id)}
	}
	return err
}

// printResult prints the final steps' outputs, or every step's with all.
func printResult(ctx context.Context, w io.Writer, cl *agentq.Client, id string, all bool) error {
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
		if all && s.Map != nil {
			if err := printInstances(ctx, w, cl, id, s.ID, s.Map.Started); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintln(w, s.Output)
	}
	return nil
}

// printInstances prints a map step's instance outputs in item order, read
// a page at a time (a wide map is never held whole).
func printInstances(ctx context.Context, w io.Writer, cl *agentq.Client, id, step string, n int) error {
	return eachInstancePage(ctx, cl, id, step, n, func(page []agentq.StepRecord) {
		for _, s := range page {
			out := s.Output
			if s.State != record.StepDone {
				out = "(" + s.State + ")"
			}
			fmt.Fprintf(w, "[%s] %s\n", strings.TrimSuffix(strings.TrimPrefix(s.ID, step+"["), "]"), out)
		}
	})
}

// eachInstancePage hands fn the instances of map step step of workflow id
// that started (n of them) in item order, a page at a time.
func eachInstancePage(ctx context.Context, cl *agentq.Client, id, step string, n int, fn func([]agentq.StepRecord)) error {
	for off := 0; off < n; off += agentq.MaxInstancesPage {
		p, err := cl.Instances(ctx, id, step, off, agentq.MaxInstancesPage)
		if err != nil {
			return fmt.Errorf("workflow %s step %s: instances from %d: %w", id, step, off, err)
		}
		if len(p.Instances) == 0 {
			break
		}
		fn(p.Instances)
	}
	return nil
}
