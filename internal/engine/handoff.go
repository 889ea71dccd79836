package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
)

// Hand-offs. asynq's processor, finding its queues empty, sleeps its
// TaskCheckInterval before it looks again, and nothing wakes it: on an
// idle worker each step of a chain would wait for the next poll. So the
// worker that settles a step runs the steps it made ready itself, at
// once, when it serves their queue and has a free slot: it takes the
// step's task from the pending list (store/handoff.go; not if the queue
// is paused or another worker took it first) and runs it as asynq would
// have: active under asynq's lease (extended while it runs, so asynq's
// recoverer retries it if this worker dies), with its own timeout, its
// retry counts, the step's attempt fencing (Begin), the cancel asynq
// publishes, and the same end: completed, retried with the worker's
// backoff, or archived, through the worker's error handler.
//
// Concurrency: a hand-off takes a slot of the worker's gate only when one
// is free, and every task asynq delivers passes the same gate, so no more
// than worker.concurrency steps run at once. A task asynq delivers while
// hand-offs hold the free slots waits at the gate for the first to free.
// Queue weights decide which queue asynq serves when there is more work
// than slots; a hand-off only takes a slot nobody was waiting for.

// HandoffOptions configures a worker's hand-offs.
type HandoffOptions struct {
	// Queues are the queues the worker serves: only their steps are run.
	Queues []string
	// Concurrency is the worker's slots (worker.concurrency), shared by
	// the tasks asynq delivers and the hand-offs.
	Concurrency int
	// Run runs a handed-off task: the worker's step handler, with the
	// middleware asynq's deliveries go through.
	Run asynq.Handler
	// ErrorHandler, RetryDelay and IsFailure are the worker's asynq
	// server's: a hand-off that fails ends as asynq would end it.
	ErrorHandler asynq.ErrorHandler
	RetryDelay   asynq.RetryDelayFunc
	IsFailure    func(error) bool
	// LeaseEvery is how often running hand-offs' leases are extended; 0:
	// 5s (asynq's heartbeat).
	LeaseEvery time.Duration
	// Now is the clock of leases and retries; nil: time.Now.
	Now func() time.Time
}

// Handoffs runs the steps a settle made ready on the worker that settled
// it. Nil runs none.
type Handoffs struct {
	h      *Handler
	o      HandoffOptions
	queues map[string]bool
	gate   chan struct{}
	ctx    context.Context // the runs' base: canceled (errAborted) when a stop's wait is over
	abort  context.CancelCauseFunc

	mu       sync.Mutex
	stopping bool
	running  map[string]*handedOff // by task id
	wg       sync.WaitGroup
}

type handedOff struct {
	t      *store.ClaimedTask
	cancel context.CancelCauseFunc
	until  time.Time // its lease, as last extended
}

var (
	errAborted  = errors.New("the worker stopped before the step ended")
	errLeaseOff = errors.New("the task's lease lapsed")
)

// Handoffs returns the handler's hand-offs, which it starts on every
// settle from now on.
func (h *Handler) Handoffs(o HandoffOptions) *Handoffs {
	if o.LeaseEvery <= 0 {
		o.LeaseEvery = 5 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	ho := &Handoffs{h: h, o: o, queues: map[string]bool{}, gate: make(chan struct{}, max(o.Concurrency, 1)), running: map[string]*handedOff{}}
	for _, q := range o.Queues {
		ho.queues[q] = true
	}
	ho.ctx, ho.abort = context.WithCancelCause(context.Background())
	h.handoffs = ho
	return ho
}

// Gate is next behind the worker's slots: asynq's deliveries wait for
// one a hand-off holds.
func (ho *Handoffs) Gate(next asynq.Handler) asynq.Handler {
	return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		select {
		case ho.gate <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		defer func() { <-ho.gate }()
		return next.ProcessTask(ctx, t)
	})
}

// Run keeps the running hand-offs' leases and hears asynq's cancels until
// ctx ends; then Stop ends them.
func (ho *Handoffs) Run(ctx context.Context) {
	sub := ho.h.o.Redis.Subscribe(ctx, cancelChannel)
	defer func() { _ = sub.Close() }()
	cancels := sub.Channel()
	tick := time.NewTicker(ho.o.LeaseEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-cancels:
			if ok {
				ho.cancelRun(m.Payload, context.Canceled)
			}
		case <-tick.C:
			ho.extendLeases(ctx)
		}
	}
}

// cancelChannel is where asynq's Inspector.CancelProcessing publishes a
// task id.
const cancelChannel = "asynq:cancel"

func (ho *Handoffs) cancelRun(id string, cause error) {
	ho.mu.Lock()
	defer ho.mu.Unlock()
	if r := ho.running[id]; r != nil {
		r.cancel(cause)
	}
}

// extendLeases extends every running hand-off's lease; one whose lease
// is gone, or lapsed while Redis did not answer, is stopped (asynq's
// recoverer has it back).
func (ho *Handoffs) extendLeases(ctx context.Context) {
	ho.mu.Lock()
	byQueue := map[string][]string{}
	for id, r := range ho.running {
		byQueue[r.t.Queue] = append(byQueue[r.t.Queue], id)
	}
	ho.mu.Unlock()
	now := ho.o.Now()
	until := now.Add(store.TaskLease)
	for q, ids := range byQueue {
		lctx, cancel := context.WithTimeout(ctx, settleTimeout)
		lost, err := ho.h.st.ExtendTaskLeases(lctx, q, ids, until)
		cancel()
		ho.mu.Lock()
		for _, id := range ids {
			r := ho.running[id]
			switch {
			case r == nil:
			case err == nil && !contains(lost, id):
				r.until = until
			case err == nil || now.After(r.until):
				r.cancel(errLeaseOff)
			}
		}
		ho.mu.Unlock()
	}
}

func contains(ids []string, id string) bool {
	for _, v := range ids {
		if v == id {
			return true
		}
	}
	return false
}

// Stop starts no more hand-offs, waits up to timeout for the running ones
// to end, then stops them and puts their tasks back on their queues.
func (ho *Handoffs) Stop(timeout time.Duration) {
	ho.mu.Lock()
	ho.stopping = true
	ho.mu.Unlock()
	done := make(chan struct{})
	go func() { ho.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		ho.abort(errAborted)
		<-done
	}
}

// offer runs the steps ready (of workflow wf's run gen) that this worker
// serves, while it has free slots.
func (ho *Handoffs) offer(ctx context.Context, wf string, wspec *spec.Spec, ready []string, gen int) {
	for _, id := range ready {
		st, _, ok := spec.StepOf(wspec, id)
		if !ok || !ho.queues[spec.Resolve(wspec, st).Queue] {
			continue
		}
		if !ho.start(ctx, spec.Resolve(wspec, st).Queue, flow.StepTaskID(wf, id, gen)) {
			return // no free slot (or stopping): asynq runs the rest
		}
	}
}

// start takes task id of queue and runs it, if a slot is free; false when
// none is (the task stays for asynq).
func (ho *Handoffs) start(ctx context.Context, queue, id string) bool {
	ho.mu.Lock()
	if ho.stopping {
		ho.mu.Unlock()
		return false
	}
	ho.wg.Add(1)
	ho.mu.Unlock()
	select {
	case ho.gate <- struct{}{}:
	default:
		ho.wg.Done()
		return false
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	t, err := ho.h.st.ClaimTask(cctx, queue, id, ho.o.Now().Add(store.TaskLease))
	cancel()
	switch {
	case errors.Is(err, store.ErrNotClaimable):
		_ = ho.h.st.RequeueTask(context.WithoutCancel(ctx), t)
		fallthrough
	case err != nil || t == nil:
		<-ho.gate
		ho.wg.Done()
		return err == nil || errors.Is(err, store.ErrNotClaimable) // taken by another worker, or paused: go on
	}
	go func() {
		defer ho.wg.Done()
		defer func() { <-ho.gate }()
		ho.run(t)
	}()
	return true
}

// run runs claimed task t and ends it as asynq's processor would.
func (ho *Handoffs) run(t *store.ClaimedTask) {
	now := ho.o.Now()
	ctx, cancel := context.WithCancelCause(ho.ctx)
	defer cancel(nil)
	ho.mu.Lock()
	ho.running[t.ID] = &handedOff{t: t, cancel: cancel, until: now.Add(store.TaskLease)}
	ho.mu.Unlock()
	defer func() {
		ho.mu.Lock()
		delete(ho.running, t.ID)
		ho.mu.Unlock()
	}()
	rctx, rcancel := context.WithDeadline(ctx, taskDeadline(t, now))
	defer rcancel()
	rctx = withDelivery(rctx, delivery{taskID: t.ID, retried: t.Retried, maxRetry: t.Retry, handoff: true})
	task := asynq.NewTask(t.Type, t.Payload)
	err := ho.process(rctx, task)
	cause := context.Cause(ctx)
	// the end is written even when the run's context ended (asynq writes
	// it under the lease's own deadline)
	ectx, ecancel := context.WithTimeout(context.Background(), settleTimeout)
	defer ecancel()
	var end error
	switch {
	case errors.Is(cause, errAborted):
		end = ho.h.st.RequeueTask(ectx, t)
	case errors.Is(cause, errLeaseOff):
		// asynq's recoverer has the task back: only the error handler hears
		if ho.o.ErrorHandler != nil {
			ho.o.ErrorHandler.HandleError(rctx, task, asynq.ErrLeaseExpired)
		}
	case err == nil:
		end = ho.h.st.CompleteTask(ectx, t)
	default:
		if ho.o.ErrorHandler != nil {
			ho.o.ErrorHandler.HandleError(rctx, task, err)
		}
		switch {
		case errors.Is(err, asynq.RevokeTask):
			t.Retention = 0
			end = ho.h.st.CompleteTask(ectx, t)
		case t.Retried >= t.Retry || errors.Is(err, asynq.SkipRetry):
			end = ho.h.st.ArchiveTask(ectx, t, err.Error())
		default:
			d := ho.o.RetryDelay(t.Retried, err, task)
			end = ho.h.st.RetryTask(ectx, t, ho.o.Now().Add(d), err.Error(), ho.o.IsFailure == nil || ho.o.IsFailure(err))
		}
	}
	if end != nil {
		// the task stays active: asynq's recoverer retries it when its
		// lease lapses, and the step's checkpoint answers that run
		ho.h.o.Logger.Warn("a handed-off step's task could not be ended; asynq recovers it when its lease lapses",
			"task", t.ID, "err", store.Excerpt(end.Error()))
	}
}

// process runs task under ctx; a panic is an error, as asynq makes it.
func (ho *Handoffs) process(ctx context.Context, task *asynq.Task) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{msg: fmt.Sprint(r), stack: string(debug.Stack())}
		}
	}()
	return ho.o.Run.ProcessTask(ctx, task)
}

// panicError is a handed-off step's panic (asynq's own is internal to it).
type panicError struct{ msg, stack string }

func (e *panicError) Error() string { return "panic error cause by: panic " + e.msg }

// taskDeadline is asynq's deadline for a task it starts at now: its
// timeout from now, or its deadline, whichever comes first; asynq's
// default 30 minutes without either.
func taskDeadline(t *store.ClaimedTask, now time.Time) time.Time {
	switch {
	case t.Timeout == 0 && t.Deadline == 0:
		return now.Add(30 * time.Minute)
	case t.Deadline == 0:
		return now.Add(time.Duration(t.Timeout) * time.Second)
	case t.Timeout == 0:
		return time.Unix(t.Deadline, 0)
	}
	return time.Unix(min(now.Unix()+t.Timeout, t.Deadline), 0)
}
