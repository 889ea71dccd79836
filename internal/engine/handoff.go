package engine

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/tasks"
)

// Hand-offs. asynq's processor, finding its queues empty, sleeps its
// TaskCheckInterval before it looks again, and nothing wakes it: on an
// idle worker each step of a chain would wait for the next poll. So a
// step's task, once its own step settled, runs the step it made ready in
// the same worker slot before it gives the slot back to asynq: it takes
// that step's task from the pending list (store/handoff.go) and runs it
// as asynq would — active under asynq's lease (extended while it runs, so
// asynq's recoverer retries it if this worker dies), with its own
// timeout, retry counts, the step's attempt fencing (Begin), the cancel
// asynq publishes, and the same end: completed, retried with the worker's
// backoff, or archived, through the worker's error handler. That step may
// hand its own successor on in turn.
//
// What stays asynq's: the slot is the one asynq gave the first task, so
// the worker never runs more than worker.concurrency steps; a paused
// queue's task is not taken; while every slot of the worker is busy,
// nor is one whose queue has tasks that waited before it (they go first,
// in asynq's queue weights' order); one step per slot is handed on (the
// others a settle made ready wait for asynq); only a step this worker
// serves is. (A slot whose step's release of a concurrency key woke a
// waiting step then takes its queue's oldest tasks, whichever they are,
// as asynq's poll would: keyslotwake.go.) A hand-off must fit in the
// slot's time: asynq gives a step's
// task its timeout plus flow.HandoffSlack (its payload's slack), Serve
// holds each step to its own timeout, and a successor is taken only while
// its timeout still fits before asynq's deadline for the slot.

// HandoffOptions configures a worker's hand-offs.
type HandoffOptions struct {
	// Queues are the queues the worker serves: only their steps are taken.
	Queues []string
	// Concurrency is the worker's slots (worker.concurrency): while all
	// are busy, a step is handed on only if no task waited in its queue
	// before it.
	Concurrency int
	// Run runs a handed-off task: the worker's step handler, with the
	// middleware asynq's deliveries go through.
	Run asynq.Handler
	// ErrorHandler, RetryDelay and IsFailure are the worker's asynq
	// server's: a hand-off that fails ends as asynq would end it.
	// RetryDelay is required.
	ErrorHandler asynq.ErrorHandler
	RetryDelay   asynq.RetryDelayFunc
	IsFailure    func(error) bool
	// LeaseEvery is how often running hand-offs' leases are extended; 0:
	// 5s (asynq's heartbeat).
	LeaseEvery time.Duration
	// Now is the clock of leases and retries; nil: time.Now.
	Now func() time.Time
	// Off hands nothing on (worker.no_handoffs); Serve still holds each
	// step to its own timeout.
	Off bool
}

// Handoffs runs, in a step task's slot, the steps it makes ready. Nil
// runs none.
type Handoffs struct {
	h      *Handler
	o      HandoffOptions
	queues map[string]bool
	ctx    context.Context // the runs' base: canceled (errAborted) when a stop's wait is over
	abort  context.CancelCauseFunc

	busy      atomic.Int64  // slots asynq's deliveries hold
	listening chan struct{} // closed once Run hears asynq's cancels

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

// slot is a worker slot a task holds: the step its run hands on, taken
// while the slot is open (a run abandoned at its timeout closes it, so
// its late settle hands nothing on).
type slot struct {
	mu    sync.Mutex
	until time.Time // asynq's deadline for the task that holds the slot
	open  bool
	next  *claimed
	// drain is the queue whose oldest tasks the slot takes once its run
	// and hand-off are done: a concurrency key's release woke a waiting
	// step there (keyslot.go); "" for none
	drain string
}

// claimed is a handed-on step's task with its step's timeout.
type claimed struct {
	t       *store.ClaimedTask
	timeout time.Duration
}

type slotKey struct{}

// close ends the run that holds s and returns the step it handed on and
// the queue it drains.
func (s *slot) close() (*claimed, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open = false
	n, q := s.next, s.drain
	s.next, s.drain = nil, ""
	return n, q
}

var (
	errAborted  = errors.New("the worker stopped before the step ended")
	errLeaseOff = errors.New("the task's lease lapsed")
)

// handoffMargin is what a hand-off leaves of its slot's time after its
// timeout: its end's writes.
const handoffMargin = settleTimeout

// Handoffs returns the handler's hand-offs, which its settles use from
// now on.
func (h *Handler) Handoffs(ctx context.Context, o HandoffOptions) (*Handoffs, error) {
	if o.Run == nil || o.RetryDelay == nil {
		return nil, errors.New("engine: hand-offs need the step handler and the retry delay")
	}
	if o.LeaseEvery <= 0 {
		o.LeaseEvery = 5 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	ho := &Handoffs{h: h, o: o, queues: map[string]bool{}, running: map[string]*handedOff{}, listening: make(chan struct{})}
	for _, q := range o.Queues {
		ho.queues[q] = true
	}
	// the runs outlive the tasks that hand them on, and end at the stop's abort
	ho.ctx, ho.abort = context.WithCancelCause(context.WithoutCancel(ctx))
	h.handoffs = ho
	return ho, nil
}

// Serve is next with hand-offs: a task's run, held to its step's own
// timeout (its asynq timeout less the payload's slack: given up on
// there as asynq gives up on a task at its deadline), then the steps it
// hands on in its slot, one after another, before the slot goes back to
// asynq.
func (ho *Handoffs) Serve(next asynq.Handler) asynq.Handler {
	return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		ho.busy.Add(1)
		defer ho.busy.Add(-1)
		until, ok := ctx.Deadline()
		s := &slot{until: until, open: ok && !ho.o.Off}
		err := ho.runOwn(ctx, next, t, s)
		for {
			c, drain := s.close()
			if c == nil && drain != "" && ctx.Err() == nil && !ho.isStopping() {
				c = ho.takeNext(ctx, drain, until)
			}
			if c == nil {
				break
			}
			if ctx.Err() != nil || !ho.begin() {
				// asynq gave up on the slot (its deadline, a cancel, a
				// shutdown), or the worker stops: the step waits for asynq
				ho.requeue(ctx, c.t)
				break
			}
			s = &slot{until: until, open: true, drain: drain}
			ho.run(c, s)
		}
		return err
	})
}

// runOwn runs asynq's task t in slot s, held to its step's timeout.
func (ho *Handoffs) runOwn(ctx context.Context, next asynq.Handler, t *asynq.Task, s *slot) error {
	ctx = context.WithValue(ctx, slotKey{}, s)
	p, perr := tasks.DecodePayload(t.Payload())
	until, ok := ctx.Deadline()
	if perr != nil || p.Slack <= 0 || !ok {
		err := next.ProcessTask(ctx, t)
		ho.logPanic(t, err) // a step's panic comes back an error (ProcessTask)
		return err
	}
	ctx, cancel := context.WithDeadline(ctx, until.Add(-time.Duration(p.Slack)*time.Second))
	defer cancel()
	done := make(chan error, 1)
	goPooled(func() { done <- process(ctx, next, t) }) // a panic is an error, as asynq makes it
	select {
	case err := <-done:
		ho.logPanic(t, err)
		return err
	case <-ctx.Done():
		ho.giveUp(ctx, s)
		return ctx.Err()
	}
}

// giveUp closes the slot of a run given up on (its late settle hands
// nothing on) and puts back on its queue a step it handed on already.
func (ho *Handoffs) giveUp(ctx context.Context, s *slot) {
	if c, _ := s.close(); c != nil {
		ho.requeue(ctx, c.t)
	}
}

func (ho *Handoffs) isStopping() bool {
	ho.mu.Lock()
	defer ho.mu.Unlock()
	return ho.stopping
}

// begin counts a hand-off in, unless the worker stops.
func (ho *Handoffs) begin() bool {
	ho.mu.Lock()
	defer ho.mu.Unlock()
	if ho.stopping {
		return false
	}
	ho.wg.Add(1)
	return true
}

// requeue puts claimed task t back on its queue unrun; ctx's end does
// not stop it (it is written after a run given up on).
func (ho *Handoffs) requeue(ctx context.Context, t *store.ClaimedTask) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if err := untilStored(ctx, func() error { return ho.h.st.RequeueTask(ctx, t) }); err != nil {
		ho.h.o.Logger.Warn("a handed-off step's task could not go back to its queue; asynq recovers it when its lease lapses",
			"task", t.ID, "err", store.Excerpt(err.Error()))
	}
}

// offer hands on, in the slot ctx's task holds, the first step of ready
// (of workflow wf's run gen) that this worker serves, if the slot is
// open, has nothing handed on yet, and has time for that step's timeout.
func (ho *Handoffs) offer(ctx context.Context, wf string, wspec *spec.Spec, ready []string, gen int) {
	s, _ := ctx.Value(slotKey{}).(*slot)
	if s == nil || ho.isStopping() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.open || s.next != nil {
		return
	}
	for _, id := range ready {
		st, _, ok := spec.StepOf(wspec, id)
		if !ok {
			continue
		}
		r := spec.Resolve(wspec, st)
		queue := flow.TaskQueue(wf, r)
		if !ho.queues[queue] || !ho.h.serves(st) {
			continue
		}
		if ho.o.Now().Add(r.Timeout + handoffMargin).After(s.until) {
			return // not in this slot's time: asynq runs it
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
		// a free slot would take the tasks waiting in the queue at its
		// next poll anyway; with none, those that waited first go first
		pending := math.MaxInt32
		if ho.busy.Load() >= int64(ho.o.Concurrency) {
			pending = inQueue(wspec, ready, r.Queue)
		}
		t, err := ho.h.st.ClaimTask(cctx, queue, flow.StepTaskID(wf, id, gen), pending, ho.o.Now().Add(store.TaskLease))
		cancel()
		switch {
		case errors.Is(err, store.ErrNotClaimable):
			ho.requeue(ctx, t)
		case err == nil && t != nil:
			s.next = &claimed{t: t, timeout: r.Timeout}
		}
		return // one step per slot
	}
}

// inQueue counts the steps of ready whose tasks go to queue.
func inQueue(wspec *spec.Spec, ready []string, queue string) int {
	n := 0
	for _, id := range ready {
		if st, _, ok := spec.StepOf(wspec, id); ok && spec.Resolve(wspec, st).Queue == queue {
			n++
		}
	}
	return n
}
