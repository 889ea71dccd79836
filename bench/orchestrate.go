package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	openai "github.com/sashabaranov/go-openai"

	"github.com/agentq/agentq"
	"github.com/agentq/agentq/internal/app"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/stepfunc"
	"github.com/agentq/agentq/internal/worker"
)

const benchConfig = `
providers:
  - { name: chaos, kind: openai, base_url: "${CHAOS}/v1", keys: ["bench-key"], timeout: 10s }
routes:
  bench: { targets: [ { provider: chaos, model: bench-model } ] }
retention: 1h
`

// shape is one workload: a spec, how many workflows of it, and which
// step ends a workflow.
type shape struct {
	name      string
	spec      string
	workflows int
	steps     int    // per workflow
	last      string // the step whose settling ends a workflow
	// funcs are the code steps the worker serves (nil for prompt steps)
	funcs map[string]agentq.StepFunc
	// handoffs reads, from a finished workflow, the milliseconds between
	// a step finishing and a dependent starting.
	handoffs func(*producer.Workflow) []float64
	// input is the i-th workflow's input; nil: {n: i}.
	input func(i int) map[string]any
	// check, when set, checks a completed workflow's record.
	check func(*producer.Workflow) error
}

func chordShape(chords, members int) shape { return chordShapeOf(chords, members, false) }

// chordShapeOf is the chords workload with prompt steps or, code true,
// with code steps each making the same single chat call (codestep.go).
func chordShapeOf(chords, members int, code bool) shape {
	var b strings.Builder
	b.WriteString("name: bench-chord\ndefaults: { route: bench }\nsteps:\n")
	ids := make([]string, members)
	for i := range ids {
		ids[i] = fmt.Sprintf("m%d", i)
		b.WriteString(stepLine(ids[i], "", fmt.Sprintf("member %d of {{ .Input.n }}", i), code))
	}
	b.WriteString(stepLine("body", strings.Join(ids, ", "), "join {{ .Steps.m0."+outputField(code)+" }}", code))
	return shape{name: "chords", spec: b.String(), workflows: chords, steps: members + 1, last: "body", funcs: stepFuncs(code),
		handoffs: func(wf *producer.Workflow) []float64 {
			var last time.Time
			for _, s := range wf.Steps[:members] {
				if s.FinishedAt != nil && s.FinishedAt.After(last) {
					last = *s.FinishedAt
				}
			}
			if body := wf.Steps[members]; body.StartedAt != nil {
				return []float64{ms(body.StartedAt.Sub(last))}
			}
			return nil
		}}
}

func chainShape(chains, length int) shape { return chainShapeOf(chains, length, false) }

// chainShapeOf is the chains workload with prompt steps or code steps.
func chainShapeOf(chains, length int, code bool) shape {
	var b strings.Builder
	b.WriteString("name: bench-chain\ndefaults: { route: bench }\nsteps:\n")
	b.WriteString(stepLine("s0", "", "chain {{ .Input.n }}", code))
	for i := 1; i < length; i++ {
		b.WriteString(stepLine(fmt.Sprintf("s%d", i), fmt.Sprintf("s%d", i-1), fmt.Sprintf("next {{ .Steps.s%d.%s }}", i-1, outputField(code)), code))
	}
	return shape{name: "chains", spec: b.String(), workflows: chains, steps: length, last: fmt.Sprintf("s%d", length-1), funcs: stepFuncs(code),
		handoffs: func(wf *producer.Workflow) []float64 {
			var out []float64
			for i := 1; i < len(wf.Steps); i++ {
				if f, s := wf.Steps[i-1].FinishedAt, wf.Steps[i].StartedAt; f != nil && s != nil {
					out = append(out, ms(s.Sub(*f)))
				}
			}
			return out
		}}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func benchCfg(db redistest.DB, chaosURL string, concurrency int) (config.Config, error) {
	cfg, err := config.Load(config.Input{Path: "bench.yaml", Data: []byte(benchConfig),
		LookupEnv: func(k string) (string, bool) { return chaosURL, k == "CHAOS" }})
	if err != nil {
		return cfg, err
	}
	cfg.Redis.Addr, cfg.Redis.DB = db.Addr, db.DB
	cfg.Worker.Concurrency = concurrency
	cfg.Worker.Queues = map[string]int{"default": 1}
	return cfg, nil
}

// submitAll submits sh.workflows workflows, input n = 0, 1, … (or
// sh.input's).
func submitAll(ctx context.Context, client *producer.Client, sh shape) ([]string, error) {
	spec, err := client.Parse(sh.name+".yaml", []byte(sh.spec))
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, sh.workflows)
	for i := 0; i < sh.workflows; i++ {
		spec.Input = map[string]any{"n": i}
		if sh.input != nil {
			spec.Input = sh.input(i)
		}
		id, err := client.Submit(ctx, spec)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// runAgentq runs sh on an in-process agentq worker and returns the
// seconds from the first submit to the last workflow settling, and the
// hand-off latencies.
func runAgentq(ctx context.Context, p params, sh shape, rdb *redis.Client, db redistest.DB, chaosURL string, m *meter) (float64, []float64, error) {
	cfg, err := benchCfg(db, chaosURL, p.concurrency)
	if err != nil {
		return 0, nil, err
	}
	cfg.Events.Off = p.eventsOff
	cfg.Redis.Durability = p.durability
	client := producer.NewClient(rdb, producer.ClientOptions{Limits: spec.DefaultLimits(), Retention: time.Hour, Routes: []string{"bench"},
		EventLimit: cfg.Events.EventLimit(), Durability: app.Durability(cfg)})
	w, err := startWorker(ctx, p, sh, cfg, rdb)
	if err != nil {
		return 0, nil, err
	}
	defer w.stop()
	m.start(ctx)
	start := time.Now()
	ids, err := submitAll(ctx, client, sh)
	if err != nil {
		return 0, nil, err
	}
	if err := w.wait(); err != nil {
		return 0, nil, err
	}
	secs := time.Since(start).Seconds()
	m.stop(ctx)
	var handoffs []float64
	for _, id := range ids {
		wf, err := client.Status(ctx, id)
		if err != nil {
			return 0, nil, err
		}
		if wf.State != "completed" {
			return 0, nil, fmt.Errorf("workflow %s is %s", id, wf.State)
		}
		if sh.check != nil {
			if err := sh.check(wf); err != nil {
				return 0, nil, fmt.Errorf("workflow %s: %w", id, err)
			}
		}
		handoffs = append(handoffs, sh.handoffs(wf)...)
	}
	return secs, handoffs, w.stop()
}

// benchWorker is an in-process worker running sh's workflows.
type benchWorker struct {
	sh       shape
	done     *atomic.Int64
	finished chan struct{}
	cancel   context.CancelFunc
	werr     chan error
	stopped  error
	once     sync.Once
}

// startWorker starts a worker with cfg and returns once it serves.
func startWorker(ctx context.Context, p params, sh shape, cfg config.Config, rdb redis.UniversalClient) (*benchWorker, error) {
	w := &benchWorker{sh: sh, done: &atomic.Int64{}, finished: make(chan struct{}), werr: make(chan error, 1)}
	wctx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	ready := make(chan struct{})
	go func() {
		w.werr <- worker.Run(wctx, worker.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler), Redis: rdb,
			TaskCheckInterval: p.check, Ready: func() { close(ready) }, Steps: engineSteps(sh.funcs),
			Events: func(e engine.StepEvent) {
				if e.Step == sh.last && w.done.Add(1) == int64(sh.workflows) {
					close(w.finished)
				}
			}})
	}()
	select {
	case <-ready:
		return w, nil
	case err := <-w.werr:
		cancel()
		return nil, err
	}
}

// wait waits until every workflow of the shape has settled its last step.
func (w *benchWorker) wait() error {
	select {
	case <-w.finished:
		return nil
	case <-time.After(10 * time.Minute):
		return fmt.Errorf("only %d of %d %s finished in 10 minutes", w.done.Load(), w.sh.workflows, w.sh.name)
	}
}

// stop stops the worker (once) and returns how it ended.
func (w *benchWorker) stop() error {
	w.once.Do(func() {
		w.cancel()
		w.stopped = <-w.werr
	})
	return w.stopped
}

// floorScript is the cheapest durable write of a step's answer.
var floorScript = redis.NewScript(`redis.call('HSET', KEYS[1], 'output', ARGV[1]) return 1`)

// runBare makes the same calls from a plain asynq handler on the same
// Redis: for chords, workflows×steps independent tasks; for chains, each
// task enqueues the next link of its chain when its call returns.
//
// writes > 0 adds that many round trips per task, each storing the answer
// under the task's key with a Lua script: the floor of what any durable
// per-step bookkeeping costs on top of asynq (-floor).
func runBare(ctx context.Context, p params, sh shape, rdb *redis.Client, chaosURL string, m *meter, writes int) (float64, error) {
	ocfg := openai.DefaultConfig("bench-key")
	ocfg.BaseURL = chaosURL + "/v1"
	// a pool of idle connections as large as agentq's adapters keep, so
	// that both sides reuse their connections and the comparison is of the
	// bookkeeping (http.DefaultTransport keeps 2 per host)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = max(p.concurrency, 2)
	tr.MaxIdleConns = max(tr.MaxIdleConns, p.concurrency)
	ocfg.HTTPClient = &http.Client{Transport: tr}
	oc := openai.NewClientWithConfig(ocfg)
	n := sh.workflows * sh.steps
	chain := sh.name == "chains"
	var done atomic.Int64
	finished := make(chan struct{})
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{Concurrency: p.concurrency, TaskCheckInterval: p.check,
		Queues: map[string]int{"default": 1}, LogLevel: asynq.ErrorLevel})
	ac := asynq.NewClientFromRedisClient(rdb)
	mux := asynq.NewServeMux()
	mux.HandleFunc("bare", func(ctx context.Context, t *asynq.Task) error {
		resp, err := oc.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "bench-model",
			Messages: []openai.ChatCompletionMessage{{Role: "user", Content: string(t.Payload())}}})
		if err != nil {
			return err
		}
		if writes > 0 {
			id, _ := asynq.GetTaskID(ctx)
			for i := 0; i < writes; i++ {
				if err := floorScript.Run(ctx, rdb, []string{"bench:floor:" + id}, resp.Choices[0].Message.Content).Err(); err != nil {
					return err
				}
			}
		}
		if chain {
			// payload "chain <n> <link>"
			f := strings.Fields(string(t.Payload()))
			link, _ := strconv.Atoi(f[2])
			if link+1 < sh.steps {
				if _, err := ac.EnqueueContext(ctx, asynq.NewTask("bare", fmt.Appendf(nil, "chain %s %d", f[1], link+1))); err != nil {
					return err
				}
			}
		}
		if done.Add(1) == int64(n) {
			close(finished)
		}
		return nil
	})
	if err := srv.Start(mux); err != nil {
		return 0, err
	}
	defer srv.Shutdown()
	m.start(ctx)
	start := time.Now()
	first := n
	if chain {
		first = sh.workflows
	}
	for i := 0; i < first; i++ {
		payload := fmt.Appendf(nil, "member %d", i)
		if chain {
			payload = fmt.Appendf(nil, "chain %d 0", i)
		}
		if _, err := ac.EnqueueContext(ctx, asynq.NewTask("bare", payload)); err != nil {
			return 0, err
		}
	}
	select {
	case <-finished:
	case <-time.After(10 * time.Minute):
		return 0, fmt.Errorf("only %d of %d tasks finished in 10 minutes", done.Load(), n)
	}
	secs := time.Since(start).Seconds()
	m.stop(ctx)
	return secs, nil
}

// engineSteps are the SDK's step functions as the worker runs them (what
// agentq.Worker.HandleStep does for a user's).
func engineSteps(funcs map[string]agentq.StepFunc) map[string]engine.StepFunc {
	if funcs == nil {
		return nil
	}
	out := make(map[string]engine.StepFunc, len(funcs))
	for name, fn := range funcs {
		out[name] = stepfunc.Of(fn)
	}
	return out
}
