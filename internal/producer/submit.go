package producer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
)

// Submission is what SubmitWorkflow returns.
type Submission struct {
	ID string `json:"id"`
	// Existing is true when an idempotency key named a workflow that was
	// already submitted with the same spec and input: nothing was created.
	Existing bool `json:"existing"`
	// IdempotencyKey is the submit's key: the caller's, or one generated
	// before anything was written. Submitting again with it is safe.
	IdempotencyKey string `json:"idempotency_key"`
}

// Submit is SubmitWorkflow's workflow id.
func (c *Client) Submit(ctx context.Context, wspec *spec.Spec, opts ...SubmitOption) (string, error) {
	s, err := c.SubmitWorkflow(ctx, wspec, opts...)
	return s.ID, err
}

// SubmitWorkflow writes the workflow record (before anything is enqueued)
// and enqueues the steps that depend on nothing. spec must come from
// Parse or ParseSpec. First it checks the spec against what live workers
// advertise (unless ClientOptions.SkipWorkerCheck or WithoutWorkerCheck):
// a step whose route, handler, tool or queue no live worker serves is
// refused (ErrInvalidSpec, one SpecError a step), and so is every spec
// when no worker is alive (ErrNoWorkers). The workers read for an earlier
// submit under a second ago are reused when they serve the spec, so a
// worker that stopped under a second ago may still count; a refusal is
// always from a fresh read.
//
// Every submit carries an idempotency key: WithIdempotencyKey's, or one
// generated before the first write (ClientOptions.NewKey); the workflow's
// id derives from it. A key already used within the retention with the
// same spec and input returns that workflow (Existing, nothing created,
// no check against the workers); with another spec or input it is
// refused (ErrIdempotencyConflict). An error that leaves the caller unsure
// whether the workflow was written — Redis could not be reached, the
// write was not confirmed by the replicas (ErrNotConfirmed), the call
// timed out — is a *SubmitError naming the key: submitting again with it
// (WithIdempotencyKey) runs the workflow once, whether or not the first
// submit's write landed.
func (c *Client) SubmitWorkflow(ctx context.Context, wspec *spec.Spec, opts ...SubmitOption) (Submission, error) {
	set := ApplySubmitOptions(opts...)
	key, generated := set.IdempotencyKey, set.IdempotencyKey == ""
	if generated {
		key = c.o.NewKey()
	}
	sub, err := c.submit(ctx, wspec, set, key, generated)
	sub.IdempotencyKey = key
	if retryable(err) {
		err = &SubmitError{Key: key, Workflow: store.IdempotentID(key), Err: err}
	}
	return sub, err
}

func (c *Client) submit(ctx context.Context, wspec *spec.Spec, set SubmitSettings, key string, generated bool) (Submission, error) {
	var idem *keyed
	if !generated {
		// the key's fingerprint covers what the submit asks for: the spec,
		// its input, and a deadline given beside it (WithDeadline)
		asked := wspec
		if set.Deadline > 0 {
			cp := *wspec
			cp.Deadline = spec.Duration(set.Deadline)
			asked = &cp
		}
		k, found, err := c.lookupKey(ctx, key, asked)
		if err != nil || found {
			return Submission{ID: k.id, Existing: found}, err
		}
		idem = &k
	}
	if err := c.checkSubmit(ctx, wspec, set); err != nil {
		return Submission{}, err
	}
	if err := c.checkChildSpecs(ctx, wspec); err != nil {
		return Submission{}, err
	}
	if !c.o.SkipWorkerCheck && !set.SkipWorkerCheck {
		if err := c.checkWorkers(ctx, wspec); err != nil {
			return Submission{}, err
		}
	}
	if wspec.Defaults.MaxRetries == nil && c.o.MaxRetries != nil {
		cp := *wspec
		n := *c.o.MaxRetries
		cp.Defaults.MaxRetries = &n
		wspec = &cp
	}
	if !maps.Equal(wspec.Shards, c.o.Shards) {
		// the shards of its queues now: the workflow keeps them
		cp := *wspec
		cp.Shards = c.o.Shards
		wspec = &cp
	}
	// A generated key keeps no record of its own (a write fewer): its
	// workflow's id is the key's, so a submit again with it finds the
	// workflow (ErrExists below) and claims the key then.
	id := store.IdempotentID(key)
	data, err := json.Marshal(wspec)
	if err != nil {
		return Submission{}, fmt.Errorf("encode spec: %w", err)
	}
	if shape, _, ok := spec.ShapeKey(data); ok {
		// its step tasks name the spec's shape: a worker that knows it
		// begins a step without reading the spec first
		cp := *wspec
		spec.SetShape(&cp, shape)
		wspec = &cp
	}
	ids := make([]string, len(wspec.Steps))
	for i, st := range wspec.Steps {
		ids[i] = st.ID
	}
	if idem != nil {
		if err := c.store.ClaimIdempotency(ctx, id, idem.hash); err != nil {
			return Submission{}, idem.conflict(err, c.o.Retention)
		}
	}
	deadline := c.deadlineAt(wspec, set)
	w := store.NewWorkflow{ID: id, Name: wspec.Name, Spec: data, Steps: ids, DeadlineAt: deadline, Ready: wspec.Roots(), IdempotencyKey: key,
		KeyRecord: idem != nil}
	// The record's script enqueues the roots too, in the same round trip,
	// where the store can (store.Task) and no deadline task has to be
	// scheduled first (without its deadline task a workflow must not run).
	if c.store.EnqueuesTasks() && deadline.IsZero() {
		for _, root := range wspec.Roots() {
			st, _ := wspec.Step(root)
			w.Roots = append(w.Roots, flow.QueuedTask(id, root, 0, wspec, st, c.o.Retention))
		}
	}
	enqueued, err := c.store.Create(ctx, w)
	if errors.Is(err, store.ErrExists) {
		// a concurrent submit with the same key created it first, or an
		// earlier try of this one did: one cut short between its record
		// and its roots' tasks left it pending, so they are enqueued (a
		// task that exists already is left as it is). Found but not
		// confirmed (an earlier try told so, on the primary alone), the
		// caller is told so again and retries with its key.
		_, unconfirmed := store.Unconfirmed(err)
		return Submission{ID: id, Existing: true}, errors.Join(c.enqueueIfPending(ctx, id), unconfirmed)
	}
	// not confirmed: created on the primary all the same; what follows is
	// done as for any submit, and the caller is told at the end
	err, unconfirmed := store.Unconfirmed(err)
	if err != nil {
		if idem != nil {
			_ = c.store.ReleaseIdempotency(context.WithoutCancel(ctx), id, idem.hash)
		}
		return Submission{}, err
	}
	flow.WorkflowSpan(ctx, id, wspec.Name, len(ids))
	if !enqueued {
		if err := c.scheduleDeadline(ctx, id, wspec, deadline); err != nil {
			return Submission{ID: id}, err
		}
		if err := c.enqueueRoots(ctx, id, wspec); err != nil {
			return Submission{ID: id}, err
		}
	}
	return Submission{ID: id}, unconfirmed
}

// retryable reports a submit's error that leaves the caller unsure
// whether it was written (Redis unreachable, the write not confirmed, the
// call cut short), as opposed to a refusal before anything was written
// (a bad spec, no worker, a key's conflict): the one a key retries.
func retryable(err error) bool {
	return err != nil && (flow.Unavailable(err) || errors.Is(err, ErrNotConfirmed) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled))
}

// SubmitError is a submit that failed after its idempotency key was
// chosen. Submitting the same spec and input again with Key is safe: it
// returns the workflow if the first submit created it, and creates it
// once if not.
type SubmitError struct {
	Key      string
	Workflow string // the id the key names
	Err      error
}

func (e *SubmitError) Error() string {
	return fmt.Sprintf("%v (workflow %s; resubmit with idempotency key %s to retry safely)", e.Err, e.Workflow, strconv.Quote(e.Key))
}

// Unwrap is the submit's own error.
func (e *SubmitError) Unwrap() error { return e.Err }

// enqueueIfPending enqueues the roots of workflow id if none of its steps
// has started (its submitter may have stopped before enqueueing them).
func (c *Client) enqueueIfPending(ctx context.Context, id string) error {
	w, err := c.store.Summary(ctx, id)
	if err != nil || w.State != record.StatePending {
		return err
	}
	return c.enqueueStoredRoots(ctx, id)
}

// enqueueStoredRoots enqueues the roots of workflow id, read from its
// stored spec; a task that exists already is success.
func (c *Client) enqueueStoredRoots(ctx context.Context, id string) error {
	stored, err := c.spec(ctx, id)
	if err != nil {
		return err
	}
	return c.enqueueRoots(ctx, id, stored)
}

// enqueueRoots enqueues the steps of a new workflow that depend on
// nothing; a task that exists already is success. With durability on
// they are confirmed as the record was: not confirmed, they are enqueued
// all the same and the answer is ErrNotConfirmed.
func (c *Client) enqueueRoots(ctx context.Context, id string, wspec *spec.Spec) error {
	ts, err := flow.StepTasks(id, wspec, wspec.Roots(), 0, c.o.Retention)
	if err != nil {
		return err
	}
	return flow.Enqueue(ctx, c.store, c.asynq, ts...)
}
