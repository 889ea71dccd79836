package engine_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/router"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/internal/worker"
	"github.com/agentq/agentq/llmclient"
	"github.com/agentq/agentq/retry"
	"github.com/agentq/agentq/tasks"
)

// runWorker runs a worker on e's Redis and chaosllm, with e's worker
// options changed by adjust, until the test ends. It returns the worker's
// /metrics URL.
func runWorker(t *testing.T, e *testenv.Env, log *slog.Logger, adjust func(*worker.Options)) string {
	t.Helper()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	o := e.WorkerOptions(log)
	var metricsURL string
	o.Config.Worker.MetricsAddr = "127.0.0.1:0"
	o.MetricsListening = func(a net.Addr) { metricsURL = "http://" + a.String() + "/metrics" }
	o.Events = func(ev engine.StepEvent) {
		select {
		case e.Events <- ev:
		default:
		}
	}
	if adjust != nil {
		adjust(&o)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	o.Ready = func() { close(ready) }
	go func() { done <- worker.Run(ctx, o) }()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("worker did not start: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		<-done // before the cleanups close its Redis
		t.Fatal("worker did not start within 30s")
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	})
	return metricsURL
}

// panicky is an router.Observer that panics on every call to one
// model, in the handler's goroutine, after the step began its attempt: a
// bug in the step's path.
type panicky struct {
	model string
	msg   string
	n     atomic.Int32
}

func (p *panicky) Call(_ string, t router.Target, _ string, _ retry.Class, _ time.Duration, _ llmclient.Usage) {
	if t.Model == p.model {
		p.n.Add(1)
		panic(p.msg)
	}
}
func (p *panicky) Fallback(string, string, string) {}
func (p *panicky) KeyEvent(string, string, string) {}

// A step that panics on its only attempt (max_retries: 0) is archived by
// asynq; the error handler settles it dead with the panic's message,
// bounded, and the workflow is blocked. An optional step that panics lets
// its dependent run, as the handler's own dead-letter path does. The
// worker goes on serving.
func TestPanickingStepEndsDeadAndTheWorkerGoesOn(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	bug := &panicky{model: "m-solo", msg: "index out of range in the step's path " + strings.Repeat("x", 64<<10)}
	url := runWorker(t, e, nil, func(o *worker.Options) { o.Observer = bug })

	id := e.Submit(t, e.Spec(step("solo", ", max_retries: 0")))
	wf := e.Wait(t, id, 10*time.Second, store.StateBlocked, store.StateCompleted)
	s := wf.Steps[0]
	if wf.State != store.StateBlocked || s.State != store.StepDead || s.Attempts != 1 {
		t.Fatalf("after a panic: workflow %s, step %+v; want blocked, dead after one attempt", wf.State, s)
	}
	if !strings.HasPrefix(s.Error, "panic: ") || !strings.Contains(s.Error, "index out of range in the step's path xxx") ||
		len(s.Error) > store.MaxReasonBytes {
		t.Fatalf("step error (%d bytes): %.200q; want the panic's message, at most %d bytes", len(s.Error), s.Error, store.MaxReasonBytes)
	}
	if info := archived(t, e, tasks.TaskID(id, "s")); info.Retried != 0 {
		t.Fatalf("archived task: %+v", info)
	}

	optional := e.Submit(t, e.Spec(`
name: optional-panics
steps:
  - { id: extra, route: solo, optional: true, max_retries: 0, prompt: "extra" }
  - { id: report, route: main, depends_on: [extra], prompt: "report {{ .Steps.extra.Output }}" }
`))
	wf = e.Wait(t, optional, 10*time.Second, store.StateCompleted, store.StateBlocked)
	if wf.State != store.StateCompleted || wf.Steps[0].State != store.StepDead || wf.Steps[1].State != store.StepDone {
		t.Fatalf("optional step panicked: workflow %s, steps %+v; want completed past the dead optional step", wf.State, wf.Steps)
	}

	next := e.Submit(t, e.Spec(step("main", ", max_retries: 0")))
	e.Wait(t, next, 10*time.Second, store.StateCompleted)
	if n := bug.n.Load(); n != 2 {
		t.Fatalf("%d panics, want 2 (one per panicking step, no retry)", n)
	}
	body := scrape(t, url)
	if got := value(t, body, `agentq_dead_letters_total{class="panic"}`); got != 2 {
		t.Fatalf("agentq_dead_letters_total{class=\"panic\"} = %v, want 2", got)
	}
}

// A handler that outlives the step's timeout (here: it ignores its
// deadline, and the provider answers after 2s while the timeout is 1s) on
// its last attempt: asynq enforces the deadline and archives the task;
// the error handler settles the step dead ("deadline exceeded") and the
// workflow is blocked. The abandoned goroutine's late answer does not
// revive the step; it is kept in memory, so a requeue records it without
// calling the provider again.
func TestAsynqEnforcedDeadlineEndsDead(t *testing.T) {
	var logs testenv.Buffer
	e := testenv.Start(t, testenv.Options{LogTo: &logs,
		Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{{Latency: chaosllm.Fixed(2 * time.Second)}}},
		Middleware: func(next asynq.Handler) asynq.Handler {
			return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
				return next.ProcessTask(context.WithoutCancel(ctx), t) // a handler deaf to its deadline
			})
		}})
	id := e.Submit(t, e.Spec(step("solo", ", timeout: 1s, max_retries: 0")))
	start := time.Now()
	wf := e.Wait(t, id, 10*time.Second, store.StateBlocked, store.StateCompleted)
	s := wf.Steps[0]
	if wf.State != store.StateBlocked || s.State != store.StepDead || !strings.Contains(s.Error, "deadline exceeded") {
		t.Fatalf("after asynq's deadline: workflow %s, step %+v; want blocked, dead with deadline exceeded", wf.State, s)
	}
	if took := time.Since(start); took > 1900*time.Millisecond {
		t.Fatalf("settled after %s, want before the late answer (2s)", took)
	}
	// the late answer arrives and is refused by the store
	poll.Until(t, 10*time.Second, func() (bool, string) {
		return strings.Contains(logs.String(), "outcome of an abandoned attempt not recorded"),
			"the abandoned attempt never tried to record its answer; logs:\n" + logs.String()
	})
	wf, _ = e.Store.Get(context.Background(), id)
	if s := wf.Steps[0]; wf.State != store.StateBlocked || s.State != store.StepDead || s.Output != "" {
		t.Fatalf("after the late answer: workflow %s, step %+v; want still blocked, dead, no output", wf.State, s)
	}
	if n := e.Chaos.Snapshot().Count("openai", "", "ok"); n != 1 {
		t.Fatalf("%d answers, want 1", n)
	}
	// requeued: the answer the worker kept is recorded, not bought again
	if err := e.Client.Requeue(context.Background(), tasks.TaskID(id, "s")); err != nil {
		t.Fatal(err)
	}
	wf = e.Wait(t, id, 10*time.Second, store.StateCompleted)
	if s := wf.Steps[0]; s.Attempts != 2 || !strings.HasSuffix(s.Output, " to: hello") || e.Chaos.Snapshot().Count("openai", "", "ok") != 1 {
		t.Fatalf("after the requeue: step %+v, %d answers; want done on attempt 2 with the one answer", s, e.Chaos.Snapshot().Count("openai", "", "ok"))
	}
}

// A step task naming a workflow that does not exist is archived with the
// reason (never completed as if it ran), and the log line about it stays
// short however long the id.
func TestUnknownWorkflowPayloadIsArchived(t *testing.T) {
	var logs testenv.Buffer
	e := testenv.Start(t, testenv.Options{LogTo: &logs})
	for name, wf := range map[string]string{"short": "wf_gone", "huge": "wf_" + strings.Repeat("z", 1<<20)} {
		payload := fmt.Sprintf(`{"wf": %q, "step": "s"}`, wf)
		if _, err := e.Asynq.Enqueue(asynq.NewTask(tasks.TypeStep, []byte(payload)), asynq.TaskID("unknown-"+name), asynq.MaxRetry(3)); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"short", "huge"} {
		info := archived(t, e, "unknown-"+name)
		if info.Retried != 0 || !strings.Contains(info.LastErr, "not found") || len(info.LastErr) > 1024 {
			t.Errorf("%s: retried %d, last error (%d bytes) %.200q; want archived at once with a short reason", name, info.Retried, len(info.LastErr), info.LastErr)
		}
	}
	for _, l := range strings.Split(logs.String(), "\n") {
		if len(l) > 8<<10 {
			t.Errorf("a log line of %d bytes: %.200s", len(l), l)
		}
	}
	if !strings.Contains(logs.String(), "step task dead-lettered: workflow not found") {
		t.Errorf("no log line about the unknown workflow:\n%.2000s", logs.String())
	}
	id := e.Submit(t, e.Spec(step("solo", "")))
	e.Wait(t, id, 10*time.Second, store.StateCompleted)
}
