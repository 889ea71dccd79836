package producer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
)

// Submission is what SubmitWorkflow returns.
type Submission struct {
	ID string `json:"id"`
	// Existing is true when an idempotency key named a workflow that was
	// already submitted with the same spec and input: nothing was created.
	Existing bool `json:"existing"`
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
// With WithIdempotencyKey, a key already used within the retention with
// the same spec and input returns that workflow (Existing, nothing
// created, no check against the workers); with another spec or input it
// is refused (ErrIdempotencyConflict).
func (c *Client) SubmitWorkflow(ctx context.Context, wspec *spec.Spec, opts ...SubmitOption) (Submission, error) {
	set := ApplySubmitOptions(opts...)
	var idem *keyed
	if set.IdempotencyKey != "" {
		// the key's fingerprint covers what the submit asks for: the spec,
		// its input, and a deadline given beside it (WithDeadline)
		asked := wspec
		if set.Deadline > 0 {
			cp := *wspec
			cp.Deadline = spec.Duration(set.Deadline)
			asked = &cp
		}
		k, found, err := c.lookupKey(ctx, set.IdempotencyKey, asked)
		if err != nil || found {
			return Submission{ID: k.id, Existing: found}, err
		}
		idem = &k
	}
	if err := spec.CheckKeys(ctx, wspec); err != nil {
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
	id := c.o.NewID()
	if idem != nil {
		id = idem.id
	}
	data, err := json.Marshal(wspec)
	if err != nil {
		return Submission{}, fmt.Errorf("encode spec: %w", err)
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
	w := store.NewWorkflow{ID: id, Name: wspec.Name, Spec: data, Steps: ids, DeadlineAt: deadline, Ready: wspec.Roots()}
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
	if err != nil {
		if idem == nil {
			return Submission{}, err
		}
		if errors.Is(err, store.ErrExists) {
			// a concurrent submit with the same key created it first
			return Submission{ID: id, Existing: true}, nil
		}
		_ = c.store.ReleaseIdempotency(context.WithoutCancel(ctx), id, idem.hash)
		return Submission{}, err
	}
	flow.WorkflowSpan(ctx, id, wspec.Name, len(ids))
	if enqueued {
		return Submission{ID: id}, nil
	}
	if err := c.scheduleDeadline(ctx, id, wspec, deadline); err != nil {
		return Submission{ID: id}, err
	}
	return Submission{ID: id}, c.enqueueRoots(ctx, id, wspec)
}

// enqueueRoots enqueues the steps of a new workflow that depend on
// nothing; a task that exists already is success.
func (c *Client) enqueueRoots(ctx context.Context, id string, wspec *spec.Spec) error {
	for _, root := range wspec.Roots() {
		if err := flow.EnqueueStep(ctx, c.asynq, id, wspec, root, 0, c.o.Retention); err != nil {
			return err
		}
	}
	return nil
}
