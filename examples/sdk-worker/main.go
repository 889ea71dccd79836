// Command sdk-worker is a worker you build with the SDK and deploy as your
// own image: the agentq worker plus your code steps. It is what the
// multi-stage Dockerfile beside it builds, what the compose override runs
// in place of the stock workers, and what the Helm chart runs with
// worker.image (docs/deploy.md).
//
//	go run ./examples/sdk-worker --config examples/local.yaml
//
// The configuration comes from --config, else AGENTQ_CONFIG (the chart and
// compose set it); AGENTQ_* variables apply over it (AGENTQ_QUEUES,
// AGENTQ_REDIS_ADDR, AGENTQ_METRICS_ADDR, …). SIGTERM stops it gracefully:
// running steps get worker.shutdown_timeout to finish.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/agentq/agentq"
)

func main() {
	cfgPath := flag.String("config", os.Getenv("AGENTQ_CONFIG"), "agentq.yaml (default: $AGENTQ_CONFIG)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if err := run(ctx, *cfgPath, log); err != nil {
		fmt.Fprintln(os.Stderr, "sdk-worker:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfgPath string, log *slog.Logger) error {
	if cfgPath == "" {
		return errors.New("no configuration: pass --config or set AGENTQ_CONFIG")
	}
	cfg, err := agentq.LoadConfig(cfgPath)
	if err != nil {
		return err
	}
	w, err := agentq.NewWorker(cfg, agentq.WithLogger(log))
	if err != nil {
		return err
	}
	register(w)
	return w.Run(ctx)
}

// register adds this worker's code steps (a spec's run: NAME).
func register(w *agentq.Worker) {
	// words counts the words of its input step's answer (with: { from: STEP })
	w.HandleStep("words", func(ctx context.Context, s *agentq.Step) (any, error) {
		var args struct {
			From string `json:"from"`
		}
		if err := s.Args(&args); err != nil {
			return nil, agentq.DeadLetter(err)
		}
		v, ok := s.Step(args.From)
		if !ok {
			return nil, agentq.DeadLetter(fmt.Errorf("step %q is not among this step's inputs", args.From))
		}
		return len(strings.Fields(v.Output)), nil
	})
}
