// Command bench measures agentq's orchestration overhead: N chords of M
// steps against chaosllm at zero latency, and the same number of the same
// HTTP calls made by a bare asynq handler on the same Redis in the same
// run. The ratio of their step rates is the cost of agentq's bookkeeping
// (records, checkpoints, exactly-once fan-in). See bench/README.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	openai "github.com/sashabaranov/go-openai"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/worker"
	"github.com/agentq/agentq/tasks"
)

type params struct {
	chords, members, concurrency int
	check, latency               time.Duration
	jsonOut                      string
}

// Report is what one run measured; -json writes it.
type Report struct {
	Params struct {
		Chords, Members, Concurrency int
		LatencyMs                    float64
		Redis                        string
	}
	Agentq struct {
		Seconds, StepsPerSec, ChordsPerSec float64
		HandoffP50ms, HandoffP99ms         float64
		LLMCalls                           int
	}
	Bare struct {
		Seconds, StepsPerSec float64
	}
	Ratio float64 // agentq steps/s ÷ bare steps/s
}

func main() {
	var p params
	flag.IntVar(&p.chords, "chords", 200, "chords to run")
	flag.IntVar(&p.members, "members", 10, "parallel steps per chord (each chord has one more step: its body)")
	flag.IntVar(&p.concurrency, "concurrency", 50, "worker concurrency (both runs)")
	flag.DurationVar(&p.check, "check-interval", 100*time.Millisecond, "asynq TaskCheckInterval (both runs)")
	flag.StringVar(&p.jsonOut, "json", "", "also write the report as JSON to this file")
	flag.DurationVar(&p.latency, "latency", 0, "chaosllm answers after this long (both runs); 0 measures pure orchestration")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run here")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(2)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(context.Background(), p, os.Stdout); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, p params, out io.Writer) error {
	if p.chords < 1 || p.members < 1 || p.concurrency < 1 {
		return errors.New("-chords, -members and -concurrency must be at least 1")
	}
	db, rdb, err := redistest.Open()
	if err != nil {
		return err
	}
	defer redistest.Stop()
	defer rdb.Close()
	chaos, chaosURL, stop, err := serveChaos(p.latency)
	if err != nil {
		return err
	}
	defer stop()

	var r Report
	r.Params.Chords, r.Params.Members, r.Params.Concurrency, r.Params.Redis = p.chords, p.members, p.concurrency, db.Kind
	r.Params.LatencyMs = float64(p.latency.Microseconds()) / 1000
	steps := p.chords * (p.members + 1)
	fmt.Fprintf(out, "bench: %d chords × (%d members + 1 body) = %d steps, concurrency %d, LLM latency %s, Redis %s at %s\n",
		p.chords, p.members, steps, p.concurrency, p.latency, db.Kind, db.Addr)

	secs, handoffs, err := runAgentq(ctx, p, rdb, db, chaosURL)
	if err != nil {
		return fmt.Errorf("agentq run: %w", err)
	}
	r.Agentq.Seconds = secs
	r.Agentq.StepsPerSec = float64(steps) / secs
	r.Agentq.ChordsPerSec = float64(p.chords) / secs
	r.Agentq.HandoffP50ms, r.Agentq.HandoffP99ms = percentile(handoffs, 50), percentile(handoffs, 99)
	r.Agentq.LLMCalls = chaos.Snapshot().Total
	if r.Agentq.LLMCalls != steps {
		return fmt.Errorf("agentq made %d LLM calls for %d steps", r.Agentq.LLMCalls, steps)
	}
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		return err
	}
	bsecs, err := runBare(ctx, p, rdb, chaosURL, steps)
	if err != nil {
		return fmt.Errorf("bare asynq run: %w", err)
	}
	r.Bare.Seconds = bsecs
	r.Bare.StepsPerSec = float64(steps) / bsecs
	r.Ratio = r.Agentq.StepsPerSec / r.Bare.StepsPerSec

	fmt.Fprintf(out, "\n| run | seconds | steps/s | chords/s |\n| --- | ---: | ---: | ---: |\n")
	fmt.Fprintf(out, "| agentq chords | %.2f | %.0f | %.1f |\n", r.Agentq.Seconds, r.Agentq.StepsPerSec, r.Agentq.ChordsPerSec)
	fmt.Fprintf(out, "| bare asynq, same calls | %.2f | %.0f | – |\n", r.Bare.Seconds, r.Bare.StepsPerSec)
	fmt.Fprintf(out, "\nratio agentq/bare steps/s: %.2f\n", r.Ratio)
	fmt.Fprintf(out, "fan-in hand-off (last member settled → body started): p50 %.1f ms, p99 %.1f ms over %d chords\n",
		r.Agentq.HandoffP50ms, r.Agentq.HandoffP99ms, len(handoffs))
	if p.jsonOut != "" {
		b, _ := json.MarshalIndent(r, "", "  ")
		if err := os.WriteFile(p.jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func serveChaos(latency time.Duration) (*chaosllm.Server, string, func(), error) {
	var sc chaosllm.Scenario
	if latency > 0 {
		sc.Phases = []chaosllm.Phase{{Name: "steady", Latency: chaosllm.Fixed(latency)}}
	}
	srv, err := chaosllm.New(sc, chaosllm.Options{})
	if err != nil {
		return nil, "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", nil, err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	return srv, "http://" + ln.Addr().String(), func() { hs.Close() }, nil
}

const benchConfig = `
providers:
  - { name: chaos, kind: openai, base_url: "${CHAOS}/v1", keys: ["bench-key"], timeout: 10s }
routes:
  bench: { targets: [ { provider: chaos, model: bench-model } ] }
retention: 1h
`

func runAgentq(ctx context.Context, p params, rdb *redis.Client, db redistest.DB, chaosURL string) (float64, []float64, error) {
	cfg, err := config.Load(config.Input{Path: "bench.yaml", Data: []byte(benchConfig),
		LookupEnv: func(k string) (string, bool) { return chaosURL, k == "CHAOS" }})
	if err != nil {
		return 0, nil, err
	}
	cfg.Redis.Addr, cfg.Redis.DB = db.Addr, db.DB
	cfg.Worker.Concurrency = p.concurrency
	cfg.Worker.Queues = map[string]int{"default": 1}

	var b strings.Builder
	b.WriteString("name: bench-chord\ndefaults: { route: bench }\nsteps:\n")
	ids := make([]string, p.members)
	for i := range ids {
		ids[i] = fmt.Sprintf("m%d", i)
		fmt.Fprintf(&b, "  - { id: %s, prompt: \"member %d of {{ .Input.n }}\" }\n", ids[i], i)
	}
	fmt.Fprintf(&b, "  - { id: body, depends_on: [%s], prompt: \"join {{ .Steps.m0.Output }}\" }\n", strings.Join(ids, ", "))
	client := tasks.NewClient(rdb, tasks.ClientOptions{Retention: time.Hour, Routes: []string{"bench"}})
	spec, err := client.Parse("bench-chord.yaml", []byte(b.String()))
	if err != nil {
		return 0, nil, err
	}

	var done atomic.Int64
	finished := make(chan struct{})
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ready := make(chan struct{})
	werr := make(chan error, 1)
	go func() {
		werr <- worker.Run(wctx, worker.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler), Redis: rdb,
			TaskCheckInterval: p.check, Ready: func() { close(ready) },
			Events: func(e tasks.StepEvent) {
				if e.Step == "body" && done.Add(1) == int64(p.chords) {
					close(finished)
				}
			}})
	}()
	select {
	case <-ready:
	case err := <-werr:
		return 0, nil, err
	}
	start := time.Now()
	ids2 := make([]string, 0, p.chords)
	for i := 0; i < p.chords; i++ {
		spec.Input = map[string]any{"n": i}
		id, err := client.Submit(ctx, spec)
		if err != nil {
			return 0, nil, err
		}
		ids2 = append(ids2, id)
	}
	select {
	case <-finished:
	case <-time.After(10 * time.Minute):
		return 0, nil, fmt.Errorf("only %d of %d chords finished in 10 minutes", done.Load(), p.chords)
	}
	secs := time.Since(start).Seconds()
	var handoffs []float64
	for _, id := range ids2 {
		wf, err := client.Status(ctx, id)
		if err != nil {
			return 0, nil, err
		}
		var last time.Time
		for _, s := range wf.Steps[:p.members] {
			if s.FinishedAt != nil && s.FinishedAt.After(last) {
				last = *s.FinishedAt
			}
		}
		if body := wf.Steps[p.members]; body.StartedAt != nil {
			handoffs = append(handoffs, float64(body.StartedAt.Sub(last).Microseconds())/1000)
		}
	}
	cancel()
	return secs, handoffs, <-werr
}

func runBare(ctx context.Context, p params, rdb *redis.Client, chaosURL string, n int) (float64, error) {
	ocfg := openai.DefaultConfig("bench-key")
	ocfg.BaseURL = chaosURL + "/v1"
	oc := openai.NewClientWithConfig(ocfg)
	var done atomic.Int64
	finished := make(chan struct{})
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{Concurrency: p.concurrency, TaskCheckInterval: p.check,
		Queues: map[string]int{"default": 1}, LogLevel: asynq.ErrorLevel})
	mux := asynq.NewServeMux()
	mux.HandleFunc("bare", func(ctx context.Context, t *asynq.Task) error {
		_, err := oc.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "bench-model",
			Messages: []openai.ChatCompletionMessage{{Role: "user", Content: string(t.Payload())}}})
		if err == nil && done.Add(1) == int64(n) {
			close(finished)
		}
		return err
	})
	if err := srv.Start(mux); err != nil {
		return 0, err
	}
	defer srv.Shutdown()
	ac := asynq.NewClientFromRedisClient(rdb)
	start := time.Now()
	for i := 0; i < n; i++ {
		if _, err := ac.EnqueueContext(ctx, asynq.NewTask("bare", []byte(fmt.Sprintf("member %d", i)))); err != nil {
			return 0, err
		}
	}
	select {
	case <-finished:
	case <-time.After(10 * time.Minute):
		return 0, fmt.Errorf("only %d of %d tasks finished in 10 minutes", done.Load(), n)
	}
	return time.Since(start).Seconds(), nil
}

func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(float64(len(s)-1) * p / 100)
	return s[i]
}
