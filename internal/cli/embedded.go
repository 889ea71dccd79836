package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/app"
	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/cli/demo"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/worker"
	"github.com/agentq/agentq/tasks"
)

// demoTimeout bounds the whole demo.
const demoTimeout = 2 * time.Minute

// runDemo is worker --embedded: miniredis, chaosllm and a worker in this
// process; the demo workflow goes through a scripted outage.
func runDemo(ctx context.Context, out io.Writer, log *slog.Logger, serve bool) error {
	mr := miniredis.NewMiniRedis()
	if err := mr.StartAddr("127.0.0.1:0"); err != nil {
		return fmt.Errorf("embedded redis: %w", err)
	}
	defer mr.Close()
	// miniredis expires keys only when told time has passed
	ffCtx, stopFF := context.WithCancel(ctx)
	defer stopFF()
	go fastForward(ffCtx, mr, time.Second)

	sc, err := chaosllm.ParseScenario(demo.Scenario)
	if err != nil {
		return err
	}
	chaos, err := chaosllm.New(sc, chaosllm.Options{Logger: log})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("embedded chaosllm: %w", err)
	}
	hs := &http.Server{Handler: chaos, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	deadURL, err := refusedURL()
	if err != nil {
		return err
	}
	chaosURL := "http://" + ln.Addr().String()
	vars := map[string]string{"CHAOS_URL": chaosURL, "DEAD_URL": deadURL}
	cfg, err := config.Load(config.Input{Path: "embedded agentq.yaml", Data: demo.Config,
		LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }})
	if err != nil {
		return err
	}
	cfg.Redis.Addr = mr.Addr()

	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	client := tasks.NewClient(rdb, app.ClientOptions(cfg))

	fmt.Fprintf(out, "agentq embedded demo: in-process Redis at %s, chaosllm at %s\n", mr.Addr(), chaosURL)
	fmt.Fprintln(out, "scripted outage: the first 4 LLM calls get 503 everywhere; then the primary's next 2 calls get 500; the news provider refuses connections throughout")
	start := time.Now()
	var mu sync.Mutex
	events := func(e tasks.StepEvent) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, "  %6.2fs  %-8s %s\n", time.Since(start).Seconds(), e.Step, describe(e))
	}
	wctx, stopWorker := context.WithCancel(ctx)
	defer stopWorker()
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- worker.Run(wctx, worker.Options{Config: cfg, Logger: log, Redis: rdb, Events: events,
			TaskCheckInterval: 100 * time.Millisecond, DelayedTaskCheckInterval: 200 * time.Millisecond,
			Ready: func() { close(ready) }})
	}()
	select {
	case <-ready:
	case err := <-done:
		return fmt.Errorf("embedded worker: %w", err)
	}

	spec, err := client.Parse("embedded sales-report.yaml", demo.Workflow)
	if err != nil {
		return err
	}
	id, err := client.Submit(ctx, spec)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "submitted workflow %s (%s, %d steps: sql → clean → report, with summary fanned in)\n", id, spec.Name, len(spec.Steps))
	wctxWait, cancelWait := context.WithTimeout(ctx, demoTimeout)
	defer cancelWait()
	wf, err := client.Wait(wctxWait, id, 100*time.Millisecond, nil)
	if err != nil {
		return err
	}
	mu.Lock()
	fmt.Fprintln(out)
	printWorkflow(out, wf, app.Prices(cfg))
	if wf.State == tasks.StateCompleted {
		fmt.Fprintln(out, "\nresult (report):")
		if err := printResult(ctx, out, client, id, false); err != nil {
			mu.Unlock()
			return err
		}
	}
	fmt.Fprintf(out, "\nchaosllm saw %s\n", summarize(chaos.Snapshot()))
	mu.Unlock()
	if serve && ctx.Err() == nil {
		fmt.Fprintf(out, "\nserving: Redis at %s, chaosllm at %s; Ctrl-C to stop\n", mr.Addr(), chaosURL)
		<-ctx.Done()
	}
	stopWorker()
	if err := <-done; err != nil {
		return err
	}
	if wf.State != tasks.StateCompleted {
		return &ExitError{Code: ExitFailed, Err: fmt.Errorf("demo workflow %s ended %s", id, wf.State)}
	}
	return nil
}

func describe(e tasks.StepEvent) string {
	switch {
	case e.State == "retrying":
		return fmt.Sprintf("attempt %d failed (%s): every target of route %s failed; asynq retries it with backoff", e.Attempt, e.Class, e.Route)
	case e.Degraded:
		return fmt.Sprintf("degraded: every target of route %s failed (%s); answered with the route's fallback text", e.Route, e.Class)
	case e.State == "done":
		return fmt.Sprintf("done via %s (attempt %d)", e.Target, e.Attempt)
	default:
		return fmt.Sprintf("%s (%s): %v", e.State, e.Class, e.Err)
	}
}

func summarize(s chaosllm.Stats) string {
	by := map[string][]string{}
	for _, l := range s.Calls {
		by[l.Endpoint] = append(by[l.Endpoint], fmt.Sprintf("%s=%d", l.Outcome, l.Count))
	}
	eps := make([]string, 0, len(by))
	for ep := range by {
		eps = append(eps, ep)
	}
	sort.Strings(eps)
	parts := make([]string, len(eps))
	for i, ep := range eps {
		parts[i] = ep + " " + strings.Join(by[ep], " ")
	}
	return fmt.Sprintf("%d calls: %s", s.Total, strings.Join(parts, "; "))
}

func fastForward(ctx context.Context, mr *miniredis.Miniredis, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			mr.FastForward(every)
		}
	}
}

// refusedURL is an http URL on a loopback port nothing listens on.
func refusedURL() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return "", err
	}
	return "http://" + addr, nil
}
