package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/retry"
	"github.com/agentq/agentq/tasks"
)

// Concurrency keys (concurrency: { key, limit }): a step takes a slot of
// its key before it begins, and gives it back when its task ends. A step
// over the limit is marked throttled and its task ends (no worker slot
// held, nothing polled); a release hands the slot to the key's oldest
// waiter and enqueues that step's task again (a new task id), which finds
// the slot its own; the releasing task's worker slot then runs it, without
// waiting for asynq's poll (keyslotwake.go). A retried attempt keeps its
// slot through its backoff.
// store/keyslots.go has the Redis side.

// DefaultKeyLease is how long a concurrency key's slot is held without a
// renewal: a SIGKILLed worker's slots free within it.
const DefaultKeyLease = 30 * time.Second

// keySlot is a concurrency key's slot a task holds.
type keySlot struct {
	holder store.SlotHolder
	limit  int
}

// heldSlots are the slots this worker's tasks hold, renewed together.
type heldSlots struct {
	mu sync.Mutex
	m  map[store.SlotHolder]int // a holder's tasks on this worker (a duplicate delivery holds it too)
}

func (s *heldSlots) add(h store.SlotHolder) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[store.SlotHolder]int{}
	}
	s.m[h]++
}

func (s *heldSlots) remove(h store.SlotHolder) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[h]--; s.m[h] <= 0 {
		delete(s.m, h)
	}
}

func (s *heldSlots) all() []store.SlotHolder {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]store.SlotHolder, 0, len(s.m))
	for h := range s.m {
		out = append(out, h)
	}
	return out
}

// keyLease is the handler's slot lease.
func (h *Handler) keyLease() time.Duration { return cmp.Or(h.o.KeyLease, DefaultKeyLease) }

// admit takes a slot of step st's concurrency key, if it has one, for
// task t: nil and not parked for a step without a key; parked when every
// slot is held (the step is marked throttled, and its task ends: a
// release enqueues it again).
func (h *Handler) admit(ctx context.Context, t *asynq.Task, p tasks.Payload, wspec *spec.Spec, st *spec.Step, r spec.Resolved, taskID string, log *slog.Logger) (*keySlot, bool, error) {
	c := spec.ConcurrencyOf(wspec, st)
	if c == nil || t.Type() != tasks.TypeStep || spec.WaitsFor(st) != "" {
		return nil, false, nil // a wait (an approval, a signal) and its timeout hold no slot: they hold no worker
	}
	key, err := spec.RenderKey(ctx, c, wspec.Input)
	if err != nil { // checked at submit: an older producer's spec
		log.Error("step task dead-lettered", "err", err)
		return nil, false, fmt.Errorf("%s: %v: %w", retry.BadRequest, err, asynq.SkipRetry)
	}
	holder := store.SlotHolder{Key: key, Workflow: p.Workflow, Step: p.Step, Gen: p.Gen}
	var ok bool
	err = untilStored(ctx, func() (err error) {
		ok, err = h.st.Acquire(ctx, holder, c.Limit, h.keyLease(), flow.StepTaskID(p.Workflow, p.Step, p.Gen), flow.TaskQueue(p.Workflow, r), string(t.Payload()))
		return err
	})
	if errors.Is(err, store.ErrNotConfirmed) {
		// the slot or the place in line is on the primary only: the task
		// comes back (no retry used) and acquiring again confirms it
		if err := h.notConfirmed(ctx, &stepRun{p: p, r: r, log: log.With("key", key)}, "concurrency key's slot", err); err != nil {
			return nil, false, err
		}
		err = nil
	}
	if err != nil {
		return nil, false, err // retried: acquiring again changes nothing
	}
	if ok {
		h.held.add(holder)
		return &keySlot{holder: holder, limit: c.Limit}, false, nil
	}
	text := fmt.Sprintf("waits for a slot of concurrency key %q (limit %d)", key, c.Limit)
	state, marked, err := h.st.Throttle(ctx, p.Workflow, p.Step, p.Gen, taskID, text)
	if err != nil {
		return nil, false, err // retried: it waits already, and waiting again changes nothing
	}
	if marked {
		log.Info("step throttled: its concurrency key's slots are all held", "key", key, "limit", c.Limit)
		h.o.Events(StepEvent{Workflow: p.Workflow, Step: p.Step, Route: r.Route, State: store.StepThrottled, WorkflowState: state})
	}
	return nil, true, nil
}

// end gives slot back as its task ends with err: released (and handed
// on) unless asynq retries the task, which keeps it through the backoff;
// a duplicate delivery (busy) leaves it to the task that runs the step;
// a step that did not start (unready: an input open) gives it back.
func (h *Handler) end(ctx context.Context, slot *keySlot, err error) {
	if slot == nil {
		return
	}
	h.held.remove(slot.holder)
	var se *StepError
	if errors.As(err, &se) && se.Class == retry.Busy {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	d := deliveryOf(ctx)
	retried, maxRetry := d.retried, d.maxRetry
	unready := se != nil && se.Class == retry.Unready
	if err != nil && !errors.Is(err, asynq.SkipRetry) && retried < maxRetry && !unready {
		keep := h.keyLease() + h.retryWait(retried, err)
		if rerr := h.st.Renew(sctx, keep, slot.holder); rerr != nil {
			h.o.Logger.Warn("could not keep a concurrency slot through a retry's backoff (its lease lapses, and the retry takes a slot again)",
				"key", slot.holder.Key, "err", store.Excerpt(rerr.Error()))
		}
		return
	}
	var grants []store.Grant
	if rerr := untilStored(sctx, func() (err error) {
		grants, err = h.st.Release(sctx, slot.holder, slot.limit, h.keyLease())
		return err
	}); rerr != nil {
		h.o.Logger.Warn("could not release a concurrency slot (it frees when its lease lapses)", "key", slot.holder.Key, "err", store.Excerpt(rerr.Error()))
		return
	}
	for _, q := range h.enqueueGrants(sctx, grants) {
		if h.handoffs != nil { // the freed worker slot runs the woken step (keyslotwake.go)
			h.handoffs.wake(ctx, q)
		}
	}
}

// retryWait is about how long asynq waits before the retry of an attempt
// that failed with err (its retried'th retry): the handler's policy, or
// the longest backoff.
func (h *Handler) retryWait(retried int, err error) time.Duration {
	if h.o.Retry == nil {
		return time.Minute
	}
	return h.o.Retry.RetryDelay(retried, err, nil)
}

// enqueueGrants enqueues the tasks of the steps grants handed slots to,
// and returns the queues it enqueued them on. A grant whose workflow is
// gone is released (and its slot handed on); one whose task could not be
// enqueued is enqueued by the sweep once its lease lapses.
func (h *Handler) enqueueGrants(ctx context.Context, grants []store.Grant) (queues []string) {
	for len(grants) > 0 {
		g := grants[0]
		grants = grants[1:]
		t, err := h.grantTask(ctx, g)
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, errEnded) {
			more, rerr := h.st.ReleaseGrant(ctx, g, h.keyLease())
			if rerr == nil {
				grants = append(grants, more...)
			}
			continue
		}
		if err == nil {
			_, err = h.o.Client.EnqueueContext(ctx, t)
		}
		if err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
			h.o.Logger.Warn("could not enqueue a step that was handed a concurrency slot (the sweep enqueues it when the grant lapses)",
				"key", g.Key, "task", g.TaskID, "err", store.Excerpt(err.Error()))
			continue
		}
		if !slices.Contains(queues, g.Queue) {
			queues = append(queues, g.Queue)
		}
	}
	return queues
}

// errEnded is grantTask's answer for a step whose workflow ended (or was
// rerun) while it waited: the grant goes to the next waiter instead.
var errEnded = errors.New("the workflow ended")

// grantTask is the task of the step grant g handed a slot to: its own
// task's settings under the grant's task id, with the retries its
// attempts so far left (a new task's count starts again).
func (h *Handler) grantTask(ctx context.Context, g store.Grant) (*asynq.Task, error) {
	p, err := tasks.DecodePayload([]byte(g.Payload))
	if err != nil {
		return nil, fmt.Errorf("grant %s: %w: %w", g.TaskID, store.ErrNotFound, err)
	}
	w, err := h.st.Summary(ctx, p.Workflow)
	if err != nil {
		return nil, err
	}
	if record.Terminal(w.State) || w.Generation != p.Gen {
		return nil, errEnded
	}
	wspec, err := h.specs.get(ctx, h.st, p.Workflow)
	if err != nil {
		return nil, err
	}
	st, _, ok := spec.StepOf(wspec, p.Step)
	if !ok {
		return nil, fmt.Errorf("grant %s: %w", g.TaskID, store.ErrNotFound)
	}
	attempts, err := h.st.StepAttempts(ctx, p.Workflow, p.Step)
	if err != nil {
		return nil, err
	}
	qt := flow.QueuedTask(p.Workflow, p.Step, p.Gen, wspec, st, h.st.Retention())
	return asynq.NewTask(qt.Type, qt.Payload, asynq.TaskID(g.TaskID), asynq.Queue(qt.Queue), asynq.Timeout(qt.Timeout),
		asynq.MaxRetry(max(0, qt.MaxRetry-attempts)), asynq.Retention(qt.Retention)), nil
}

// KeyLoads are the concurrency keys' top loads and totals (metrics).
func (h *Handler) KeyLoads(ctx context.Context, top int) ([]store.KeyLoad, int64, int64, error) {
	return h.st.KeyLoads(ctx, top)
}

// SlotKeeper renews the concurrency slots this worker's tasks hold and
// sweeps lapsed ones (every worker sweeps: a sweep is one read while no
// lease lapsed).
type SlotKeeper struct {
	h    *Handler
	insp *asynq.Inspector
}

// SlotKeeper returns the handler's slot keeper; insp looks up the tasks
// of grants whose lease lapsed.
func (h *Handler) SlotKeeper(insp *asynq.Inspector) *SlotKeeper { return &SlotKeeper{h: h, insp: insp} }

// Run renews and sweeps, each every third of the lease on its own (a slow
// sweep never delays a renewal), until ctx ends.
func (k *SlotKeeper) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, f := range []func(context.Context){k.Renew, k.Sweep} {
		wg.Go(func() {
			tick := time.NewTicker(k.h.keyLease() / 3)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
					f(ctx)
				}
			}
		})
	}
	wg.Wait()
}

// sweepBatch bounds the lapsed leases one pass ends.
const sweepBatch = 100

// Renew renews the slots this worker's tasks hold, once.
func (k *SlotKeeper) Renew(ctx context.Context) {
	if err := k.h.st.Renew(ctx, k.h.keyLease(), k.h.held.all()...); err != nil {
		k.h.o.Logger.Warn("could not renew concurrency slots", "err", store.Excerpt(err.Error()))
	}
}

// Sweep ends lapsed leases once.
func (k *SlotKeeper) Sweep(ctx context.Context) {
	h := k.h
	lease := h.keyLease()
	made, lapsed, err := h.st.Sweep(ctx, lease, sweepBatch)
	if err != nil {
		h.o.Logger.Warn("could not sweep concurrency slots", "err", store.Excerpt(err.Error()))
		return
	}
	h.enqueueGrants(ctx, made)
	for _, g := range lapsed {
		k.lapsed(ctx, g)
	}
}

// lapsed looks at a grant whose task has not taken it over within the
// lease: still in asynq (a queue backlog) it is kept; gone, it is
// enqueued again; ended without taking it, it is released.
func (k *SlotKeeper) lapsed(ctx context.Context, g store.Grant) {
	h := k.h
	info, err := k.insp.GetTaskInfo(g.Queue, g.TaskID)
	switch {
	case errors.Is(err, asynq.ErrTaskNotFound) || errors.Is(err, asynq.ErrQueueNotFound):
		h.enqueueGrants(ctx, []store.Grant{g})
	case err != nil:
		return // looked at again at the next pass
	case info.State == asynq.TaskStateCompleted || info.State == asynq.TaskStateArchived:
		more, err := h.st.ReleaseGrant(ctx, g, h.keyLease())
		if err == nil {
			h.enqueueGrants(ctx, more)
		}
		return
	}
	if err := h.st.Regrant(ctx, g, h.keyLease()); err != nil {
		h.o.Logger.Warn("could not keep a concurrency grant", "key", g.Key, "err", store.Excerpt(err.Error()))
	}
}

// errPanicked ends a slot's task that panicked: asynq retries it, so the
// slot is kept as for any retry.
var errPanicked = errors.New("the step's task panicked")
