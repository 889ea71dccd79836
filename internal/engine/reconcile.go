package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/retry"
	"github.com/agentq/agentq/tasks"
)

// ReconciledRequeued is why the reconciler enqueued a pending or queued
// step again (its task never reached asynq, or was lost): the metric's
// label value. A step it settles dead has its class as the reason
// (retry.LeaseExpired, Archived, Missing, Unsettled).
const ReconciledRequeued = "requeued"

// ReconcilerOptions configures a Reconciler.
type ReconcilerOptions struct {
	Inspector *asynq.Inspector // required
	// Interval is the time between passes; 0: 30s.
	Interval time.Duration
	// Grace is how long a workflow goes unlooked-at, and a running step's
	// lease must have been over, before the reconciler touches them (a
	// step being enqueued or recovered right now is left alone); 0:
	// twice Interval.
	Grace time.Duration
	// Workflows and Lookups bound a pass: workflows looked at (0: 200) and
	// asynq task lookups (0: 1000). The rest wait for the next pass.
	Workflows, Lookups int
	// Owner names this worker in the cluster-wide lock; "": host, pid and
	// a random suffix.
	Owner string
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// ReconcileCounts is what one pass did.
type ReconcileCounts struct {
	Led       bool // this worker held the lock and made the pass
	Workflows int  // workflows looked at
	Lookups   int  // asynq task lookups
	Settled   int  // steps settled dead
	Requeued  int  // steps enqueued again
	TooOld    int  // workflows open past limits.max_open_age, ended timed_out
	Dropped   int  // index entries of expired workflows dropped
}

// Reconciler settles steps that asynq ended without a word to agentq: its
// recoverer archives a task whose lease expired on its last attempt (a
// worker SIGKILLed or OOM-killed then) without calling the ErrorHandler,
// and a task can vanish. One worker of a cluster at a time (a Redis lock)
// walks the open-workflow index a page per pass, asks asynq about each
// step that is running, queued or a pending root (GetTaskInfo on its
// task id), and settles a step whose task is archived, gone, or completed
// without a result dead, with the reason, as the handler's own
// dead-letter path does. A pending or queued step whose task never made
// it to asynq is enqueued again instead (its task id keeps it from running
// twice), and so is a throttled step that lost its place in its
// concurrency key's line.
type Reconciler struct {
	h *Handler
	o ReconcilerOptions
	// sweep is where the next page of the workflow index's sweep starts
	// (store.SweepIndex); the leader's own, from the oldest after a handover
	sweep int64
}

// Reconciler returns the handler's reconciler.
func (h *Handler) Reconciler(o ReconcilerOptions) (*Reconciler, error) {
	if o.Inspector == nil {
		return nil, errors.New("engine: the reconciler needs an asynq inspector")
	}
	if o.Interval <= 0 {
		o.Interval = 30 * time.Second
	}
	if o.Grace <= 0 {
		o.Grace = 2 * o.Interval
	}
	if o.Workflows <= 0 {
		o.Workflows = 200
	}
	if o.Lookups <= 0 {
		o.Lookups = 1000
	}
	if o.Owner == "" {
		host, _ := os.Hostname()
		var b [6]byte
		_, _ = rand.Read(b[:])
		o.Owner = fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Reconciler{h: h, o: o}, nil
}

// Run makes a pass every Interval until ctx ends.
func (r *Reconciler) Run(ctx context.Context) {
	t := time.NewTicker(r.o.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := r.Pass(ctx); err != nil && ctx.Err() == nil {
			r.h.o.Logger.Warn("reconciler pass failed", "err", store.Excerpt(err.Error()))
		}
	}
}

// Pass takes or renews the cluster-wide lock and, holding it, looks at
// the workflows due for a look.
func (r *Reconciler) Pass(ctx context.Context) (ReconcileCounts, error) {
	var c ReconcileCounts
	st := r.h.st
	// the lock outlives a missed pass or two; a holder that stops renewing
	// hands over after that
	led, err := st.Lead(ctx, "reconciler", r.o.Owner, 3*r.o.Interval)
	if err != nil || !led {
		return c, err
	}
	c.Led = true
	if err := r.sweepIndex(ctx, &c); err != nil {
		r.h.o.Logger.Warn("reconciler could not sweep the workflow index", "err", store.Excerpt(err.Error()))
	}
	now := r.o.Now()
	ids, err := st.DueWorkflows(ctx, now.Add(-r.o.Grace), r.o.Workflows)
	if err != nil {
		return c, err
	}
	for _, id := range ids {
		if c.Lookups >= r.o.Lookups {
			break
		}
		c.Workflows++
		open, err := r.visit(ctx, id, now, &c)
		if err != nil {
			// looked at again after Grace, not first in line at every pass
			r.h.o.Logger.Warn("reconciler could not look at a workflow", "wf", flow.BoundID(id), "err", store.Excerpt(err.Error()))
		}
		if open || err != nil {
			err = st.Revisit(ctx, id, now)
		} else {
			err = st.Forget(ctx, id)
		}
		if err != nil {
			return c, err
		}
	}
	return c, nil
}

// sweepPage and sweepPages bound one pass's sweep of the workflow index:
// pages of sweepPage entries until it reaches the entries younger than
// the retention, at most sweepPages of them (each three round trips), so
// that a fleet submitting far more than a page a pass stays swept.
const (
	sweepPage  = 1000
	sweepPages = 50
)

// sweepIndex sweeps the workflow index (store.SweepIndex): entries of
// expired workflows dropped, workflows open past limits.max_open_age
// ended timed_out, with their event and webhook.
func (r *Reconciler) sweepIndex(ctx context.Context, c *ReconcileCounts) error {
	why := fmt.Sprintf("open longer than limits.max_open_age (%s)", r.h.st.MaxOpenAge())
	var errs []error
	for range sweepPages {
		sw, err := r.h.st.SweepIndex(ctx, r.sweep, sweepPage)
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		r.sweep = sw.Next
		c.Dropped += sw.Dropped
		for _, wf := range sw.TooOld {
			wspec, err := r.h.specs.get(ctx, r.h.st, wf)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err == nil {
				err = r.h.timeOut(ctx, wf, wspec, why)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("workflow %s: %w", flow.BoundID(wf), err))
				continue
			}
			c.TooOld++
		}
		if sw.Next == 0 {
			break // caught up: the next pass starts from the oldest
		}
	}
	return errors.Join(errs...)
}

// visit looks at one workflow's steps and reports whether it may still
// have steps in flight.
func (r *Reconciler) visit(ctx context.Context, wf string, now time.Time, c *ReconcileCounts) (bool, error) {
	pr, err := r.h.st.Progress(ctx, wf)
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrOldLayout):
		return false, nil
	case err != nil:
		return true, err
	}
	switch pr.State {
	case store.StateCompleted, store.StateFailed, store.StateCanceled:
		return false, nil
	}
	wspec, err := r.h.specs.get(ctx, r.h.st, wf)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return true, err
	}
	open := false
	var errs []error
	for _, sp := range pr.Steps {
		st, ok := wspec.Step(sp.ID)
		if !ok {
			continue
		}
		if sp.State == store.StepMapped {
			open = true
			if err := r.instances(ctx, wf, wspec, st, sp, pr.Gen, now, c); err != nil {
				errs = append(errs, fmt.Errorf("step %s: %w", st.ID, err))
			}
			continue
		}
		if sp.State == store.StepWaiting && spec.WaitsFor(st) == spec.WaitChild {
			open = true // kept in view until its child's end is told
			if err := r.childWait(ctx, wf, sp, pr.Gen); err != nil {
				errs = append(errs, fmt.Errorf("step %s: %w", st.ID, err))
			}
			continue
		}
		due, inFlight := r.due(sp, now, len(st.DependsOn) == 0, now.After(pr.CreatedAt.Add(r.o.Grace)))
		open = open || inFlight
		if due {
			if sp.State != store.StepThrottled { // a place in line is no asynq lookup
				c.Lookups++
			}
			if err := r.step(ctx, wf, wspec, st, nil, sp, pr.Gen, c); err != nil {
				errs = append(errs, fmt.Errorf("step %s: %w", st.ID, err))
			}
		}
	}
	return open, errors.Join(errs...)
}

// due says whether a step's task is to be looked up, and whether the step
// may still be in flight. A pending step has a task only when it was
// enqueued without inputs to wait for (a root, a released map instance),
// and is looked up once overdue.
func (r *Reconciler) due(sp store.StepProgress, now time.Time, enqueued, overdue bool) (due, inFlight bool) {
	switch sp.State {
	case store.StepRunning:
		return sp.LeaseUntil == nil || now.After(sp.LeaseUntil.Add(r.o.Grace)), true
	case store.StepQueued:
		return true, true // the workflow was not looked at for Grace
	case store.StepPending:
		return enqueued && overdue, enqueued // a step with inputs has no task until they settle
	case store.StepThrottled:
		return true, true // waits for its concurrency key's slot: no task until a grant; its place in line is looked up
	}
	return false, false // settled or canceled
}

// instances looks at the released instances of a map step, a page at a
// time, as visit looks at steps.
func (r *Reconciler) instances(ctx context.Context, wf string, wspec *spec.Spec, st *spec.Step, sp store.StepProgress, gen int, now time.Time, c *ReconcileCounts) error {
	if sp.Map == nil {
		return nil
	}
	var errs []error
	for from := 0; from < sp.Map.Started && c.Lookups < r.o.Lookups; from += flow.OutputsPage {
		page, err := r.h.st.InstanceProgress(ctx, wf, st.ID, from, min(flow.OutputsPage, sp.Map.Started-from))
		if err != nil {
			return err
		}
		for i, ip := range page {
			if due, _ := r.due(ip, now, true, true); due && c.Lookups < r.o.Lookups {
				if ip.State != store.StepThrottled { // a place in line is no asynq lookup
					c.Lookups++
				}
				if err := r.step(ctx, wf, wspec, st, &spec.Instance{Index: from + i}, ip, gen, c); err != nil {
					errs = append(errs, fmt.Errorf("instance %s: %w", ip.ID, err))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// step asks asynq about one step's task and acts on the answer.
func (r *Reconciler) step(ctx context.Context, wf string, wspec *spec.Spec, st *spec.Step, inst *spec.Instance, sp store.StepProgress, gen int, c *ReconcileCounts) error {
	res := spec.Resolve(wspec, st)
	id := sp.ID // the step's, or the instance's
	if sp.State == store.StepThrottled {
		return r.throttled(ctx, wf, wspec, st, id, gen, c)
	}
	taskID := flow.StepTaskID(wf, id, gen)
	if sp.State == store.StepRunning && sp.Owner != "" {
		taskID = sp.Owner // a concurrency grant's task runs it
	}
	info, err := r.o.Inspector.GetTaskInfo(flow.TaskQueue(wf, res), taskID)
	missing := errors.Is(err, asynq.ErrTaskNotFound) || errors.Is(err, asynq.ErrQueueNotFound)
	if err != nil && !missing {
		return err
	}
	p := tasks.Payload{Workflow: wf, Step: id, Gen: gen}
	sctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	var (
		class  retry.Class
		reason string
	)
	switch {
	case missing && sp.State != store.StepRunning:
		// never reached asynq (a producer, or a settle, stopped before its
		// enqueue) or lost: enqueue it; its task id keeps it from running
		// twice, and Begin's lease and checkpoint do the rest
		t, err := flow.NewTask(wf, id, gen, wspec, st, r.h.st.Retention())
		if err == nil {
			_, err = r.h.o.Client.EnqueueContext(sctx, t)
		}
		if err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
			return fmt.Errorf("enqueue %s: %w", taskID, err)
		}
		c.Requeued++
		r.h.o.Logger.Warn("reconciler enqueued a step whose task was not in asynq", "wf", wf, "step", id, "state", sp.State)
		r.h.o.Events(StepEvent{Workflow: wf, Step: id, Route: res.Route, State: store.StepQueued, Reconciled: ReconciledRequeued})
		return nil
	case missing:
		// keep a dead letter to requeue or discard, as for any dead step
		if err := r.archiveInPlace(sctx, wf, id, gen, wspec, st, res); err != nil {
			return err
		}
		class, reason = retry.Missing, "missing: the step was running but its task is in no asynq state (deleted, or its queue is gone)"
	case info.State == asynq.TaskStateArchived && sp.State == store.StepRunning && strings.Contains(info.LastErr, asynq.ErrLeaseExpired.Error()):
		class, reason = retry.LeaseExpired, "lease_expired: task archived by asynq without a result: lease expired on its last attempt (the worker was killed or cut off from Redis)"
	case info.State == asynq.TaskStateArchived && sp.State == store.StepRunning:
		class, reason = retry.Archived, "archived: task archived by asynq without a result: "+info.LastErr
	case info.State == asynq.TaskStateArchived:
		class, reason = retry.Archived, "archived: task archived by asynq before the step began: "+info.LastErr
	case info.State == asynq.TaskStateCompleted && sp.State == store.StepRunning:
		class, reason = retry.Unsettled, "unsettled: the step's task completed without recording the step's outcome"
	default:
		return nil // asynq still has it: pending, scheduled, retrying or active
	}
	if r.h.settleAbandoned(sctx, p, wspec, st, inst, sp.Attempts, class, reason, string(class)) {
		c.Settled++
	}
	return nil
}

// archiveInPlace puts an archived task where a running step's lost task
// was, so that the dead step can be requeued or discarded like any dead
// letter: enqueued far in the future, then archived at once.
func (r *Reconciler) archiveInPlace(ctx context.Context, wf, id string, gen int, wspec *spec.Spec, st *spec.Step, res spec.Resolved) error {
	t, err := flow.NewTask(wf, id, gen, wspec, st, r.h.st.Retention())
	if err != nil {
		return err
	}
	if _, err := r.h.o.Client.EnqueueContext(ctx, t, asynq.ProcessIn(r.h.st.Retention())); err != nil {
		if errors.Is(err, asynq.ErrTaskIDConflict) {
			return fmt.Errorf("its task came back meanwhile: %w", err)
		}
		return fmt.Errorf("recreate %s: %w", flow.StepTaskID(wf, id, gen), err)
	}
	if err := r.o.Inspector.ArchiveTask(flow.TaskQueue(wf, res), flow.StepTaskID(wf, id, gen)); err != nil {
		return fmt.Errorf("archive %s: %w", flow.StepTaskID(wf, id, gen), err)
	}
	return nil
}

// childWait tells a waiting child workflow step its child ended, again,
// if the child did (its own end's telling was lost: Redis away longer
// than the settle's wait). Telling twice is one task: its id.
func (r *Reconciler) childWait(ctx context.Context, wf string, sp store.StepProgress, gen int) error {
	child := flow.ChildID(wf, sp.ID, gen, sp.Attempts)
	w, err := r.h.st.Summary(ctx, child)
	if errors.Is(err, store.ErrNotFound) {
		return nil // not created yet: the step's own task (asynq brings it back) creates it
	}
	if err != nil {
		return err
	}
	return flow.TellParent(ctx, r.h.o.Client, r.h.st, child, w.State)
}
