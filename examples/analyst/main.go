// Command analyst is the example to copy: a workflow whose steps are an
// LLM writing SQL, Go running it against an embedded SQLite database, Go
// computing statistics, and an LLM writing the report with a tool it may
// call for one more figure, with a fan-in and an optional step.
//
//	go run ./examples/analyst                      # embedded: in-memory Redis, a fake provider with an outage
//	go run ./examples/analyst --config agentq.yaml # your Redis and providers (routes report and realtime)
//
// It imports only agentq's public packages.
package main

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite"

	"github.com/agentq/agentq"
	"github.com/agentq/agentq/embedded"
)

var (
	//go:embed sales.sql
	salesSQL string
	//go:embed analyst.yaml
	workflow []byte
	//go:embed agentq.yaml
	embeddedConfig []byte
	//go:embed outage.yaml
	outage []byte
)

func main() {
	cfgPath := flag.String("config", "", "agentq.yaml of your own (default: the embedded Redis and fake provider)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, *cfgPath); err != nil {
		fmt.Fprintln(os.Stderr, "analyst:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, cfgPath string) error {
	var cfg agentq.Config
	if cfgPath == "" {
		env, err := embedded.Start(ctx, embedded.Options{Config: embeddedConfig, Scenario: outage})
		if err != nil {
			return err
		}
		defer env.Close()
		defer func() { fmt.Fprintf(out, "\nthe fake provider answered: %s\n", calls(env.ProviderCalls())) }()
		cfg = env.Config
		fmt.Fprintln(out, "analyst example: in-memory Redis and a fake provider (the first 3 calls get 503, then the primary returns 500 twice; the news provider is down)")
	} else {
		var err error
		if cfg, err = agentq.LoadConfig(cfgPath); err != nil {
			return err
		}
	}
	db, err := sql.Open("sqlite", "file:sales?mode=memory&cache=shared")
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, salesSQL); err != nil {
		return fmt.Errorf("seed the database: %w", err)
	}
	a := &analyst{db: db}

	start := time.Now()
	var mu sync.Mutex
	ready := make(chan struct{})
	w, err := agentq.NewWorker(cfg, agentq.WithReady(func() { close(ready) }), agentq.WithEvents(func(e agentq.StepEvent) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, "  %5.1fs  %-9s %s\n", time.Since(start).Seconds(), e.Step, describe(e))
	}))
	if err != nil {
		return err
	}
	w.HandleStep("run_sql", a.runSQL)
	w.HandleStep("growth", growth)
	w.Tool("fetch_figure", figureSchema, a.fetchFigure)
	wctx, stopWorker := context.WithCancel(ctx)
	defer stopWorker()
	werr := make(chan error, 1)
	go func() { werr <- w.Run(wctx) }()
	select {
	case <-ready:
	case err := <-werr:
		return err
	}

	client, err := agentq.NewClient(ctx, cfg)
	if err != nil {
		return err
	}
	defer client.Close()
	spec, err := client.Parse("analyst.yaml", workflow)
	if err != nil {
		return err
	}
	id, err := client.Submit(ctx, spec)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "submitted %s: sql → rows → stats ┐\n                      headlines (optional) ┴→ report\n", id)
	wctx2, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	wf, err := client.Wait(wctx2, id, 100*time.Millisecond)
	if err != nil {
		return err
	}
	stopWorker()
	if err := <-werr; err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	if wf.State != agentq.StateCompleted {
		return fmt.Errorf("workflow %s ended %s", id, wf.State)
	}
	res, err := client.Result(ctx, id)
	if err != nil {
		return err
	}
	for _, s := range res.Final {
		fmt.Fprintf(out, "\nreport (by %s):\n  %s\n", s.Target, s.Output)
	}
	return nil
}

func describe(e agentq.StepEvent) string {
	switch {
	case e.State == "retrying":
		return fmt.Sprintf("attempt %d failed (%s); retried with backoff", e.Attempt, e.Class)
	case e.Degraded:
		return fmt.Sprintf("degraded (%s): answered with the route's fallback text", e.Class)
	case e.State == "done":
		return fmt.Sprintf("done by %s (attempt %d)", e.Target, e.Attempt)
	}
	return fmt.Sprintf("%s (%s)", e.State, e.Class)
}

func calls(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s ×%d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
