package agentq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/worker"
)

// Worker runs the steps of workflows: prompt steps, and the code steps
// whose functions it was given. Register functions before Run.
type Worker struct {
	cfg    Config
	log    *slog.Logger
	events func(StepEvent)
	ready  func()
	wait   time.Duration // WithWaitForRedis

	mu      sync.Mutex
	steps   map[string]engine.StepFunc
	tools   map[string]engine.Tool // Tool's registrations
	specs   map[string]*spec.Spec  // RegisterSpec's
	errs    []error
	running bool
}

// WorkerOption tunes NewWorker.
type WorkerOption func(*Worker)

// WithLogger sends the worker's logs to l (default: discarded). Secrets of
// the configuration never reach it.
func WithLogger(l *slog.Logger) WorkerOption { return func(w *Worker) { w.log = l } }

// StepEvent reports, to WithEvents, a settled step, or (State
// "retrying") a failed attempt that will be retried: Workflow, Step,
// Route, State, WorkflowState, Target (the provider/model that answered),
// Degraded, Attempt, Class and Err (a failure's), RetryAfter (a
// provider's ask), Reconciled (set when the reconciler, not a handler,
// settled the step: why) and HandedOff.
type StepEvent = engine.StepEvent

// WithReady calls fn once the worker takes steps and has told Redis what
// it serves (a client's submit checks specs against that).
func WithReady(fn func()) WorkerOption { return func(w *Worker) { w.ready = fn } }

// WithWaitForRedis makes Run keep trying to reach Redis at start, with
// backoff (0.5s doubling to 10s, each failed try logged at warn level),
// for up to d in all, what the worker command's --wait-for-redis does:
// a worker started with Redis (in a Kubernetes pod, a compose file)
// waits for it instead of failing. d ≤ 0 (the default): one try, and Run
// returns at once with an error when Redis does not answer. Run also stops
// waiting when its ctx ends.
func WithWaitForRedis(d time.Duration) WorkerOption { return func(w *Worker) { w.wait = d } }

// WithEvents calls fn for every step event of this worker (progress
// output, metrics of your own). fn must not block.
func WithEvents(fn func(StepEvent)) WorkerOption { return func(w *Worker) { w.events = fn } }

// NewWorker returns a worker for cfg.
func NewWorker(cfg Config, opts ...WorkerOption) (*Worker, error) {
	if cfg.c == nil {
		return nil, errors.New("agentq: NewWorker: the Config is empty (use LoadConfig or ParseConfig)")
	}
	w := &Worker{cfg: cfg, log: slog.New(slog.DiscardHandler), steps: map[string]engine.StepFunc{}}
	for _, o := range opts {
		o(w)
	}
	return w, nil
}

// HandleStep registers fn as the code step name (a spec's run: name). A
// bad or repeated name, or a registration after Run, is reported by Run.
func (w *Worker) HandleStep(name string, fn StepFunc) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.running:
		w.errs = append(w.errs, fmt.Errorf("HandleStep(%q): the worker is already running", name))
	case !spec.ValidHandlerName(name):
		w.errs = append(w.errs, fmt.Errorf("HandleStep(%q): a name is a letter, then letters, digits, _, . or -, at most 64", name))
	case fn == nil:
		w.errs = append(w.errs, fmt.Errorf("HandleStep(%q): the function is nil", name))
	case w.steps[name] != nil:
		w.errs = append(w.errs, fmt.Errorf("HandleStep(%q): registered twice", name))
	default:
		w.steps[name] = fn.engineFunc()
	}
}

// Run serves until ctx is done, then stops gracefully: running steps get
// the configured shutdown timeout to finish; unfinished ones go back to the
// queue and resume from their checkpoints. It returns at once with an
// error if a registration was bad or Redis cannot be reached (within
// WithWaitForRedis's wait, if given).
func (w *Worker) Run(ctx context.Context) error {
	w.mu.Lock()
	if err := errors.Join(w.errs...); err != nil {
		w.mu.Unlock()
		return fmt.Errorf("agentq: %w", err)
	}
	if w.running {
		w.mu.Unlock()
		return errors.New("agentq: the worker is already running")
	}
	w.running = true
	steps := make(map[string]engine.StepFunc, len(w.steps))
	for k, v := range w.steps {
		steps[k] = v
	}
	tools, specs := maps.Clone(w.tools), maps.Clone(w.specs)
	w.mu.Unlock()
	return worker.Run(ctx, worker.Options{Config: *w.cfg.c, Logger: w.log, Steps: steps, Tools: tools, Specs: specs, Events: w.events, Ready: w.ready, WaitForRedis: w.wait})
}
