package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/retry"
)

// A map step's own task expands it: it renders for_each, records the
// items and enqueues the first max_parallel instances; each instance's
// settle enqueues the next one, and the last one settles the map (see
// store.Settle). The map step's record stays "mapped" meanwhile.

// expand runs a map step's own task: it sizes the map and releases its
// first instances. Run again (a redelivery), it releases the same ones.
func (h *Handler) expand(ctx context.Context, run *stepRun, a *store.Attempt, views map[string]spec.StepView) error {
	p, wspec, st := run.p, run.spec, run.st
	log := run.log
	var items []string
	if a.Step.State != store.StepMapped {
		raw, err := spec.RenderContext(ctx, spec.ForEachTemplate(st), wspec.Input, views)
		if err != nil {
			if ctx.Err() != nil {
				return &StepError{Class: retry.Canceled, Err: ctx.Err()}
			}
			return h.deadLetter(ctx, run, retry.BadRequest, fmt.Errorf("for_each: %w", err))
		}
		if items, err = splitArray(raw); err != nil {
			return h.deadLetter(ctx, run, retry.BadRequest, fmt.Errorf("for_each: %w", err))
		}
		switch max := spec.MaxItems(st); {
		case len(items) > max:
			return h.deadLetter(ctx, run, retry.BadRequest, fmt.Errorf("for_each yielded %d items, over the step's max_items of %d: no instance was started", len(items), max))
		case len(items) > h.o.MaxMapItems:
			return h.deadLetter(ctx, run, retry.BadRequest, fmt.Errorf("for_each yielded %d items, over this worker's limits.max_map_items of %d: no instance was started", len(items), h.o.MaxMapItems))
		}
	}
	var e *store.Expansion
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	err := untilStored(sctx, func() (err error) {
		e, err = h.st.Expand(sctx, p.Workflow, st.ID, items, spec.MaxParallel(st))
		return err
	})
	err, unconfirmed := store.Unconfirmed(err)
	switch {
	case errors.Is(err, store.ErrCanceled), errors.Is(err, store.ErrAlreadySettled), errors.Is(err, store.ErrNotFound):
		log.Info("map step not expanded", "why", err)
		return nil
	case err != nil:
		return fmt.Errorf("%w: %w", errNotRecorded, err)
	}
	if unconfirmed != nil {
		// no instance released before the expansion is confirmed: the
		// map's task comes back, expands again (the same expansion) and
		// confirms it
		if err := h.notConfirmed(ctx, run, "map expansion", unconfirmed); err != nil {
			return err
		}
	}
	if e.Items == 0 {
		log.Info("map step has no items: done at once")
		return h.settle(ctx, run, store.Outcome{Done: true, Optional: st.Optional, Output: "[]", Target: "map", Attempt: a.Step.Attempts}, "")
	}
	for i := range e.Next {
		if err := untilStored(sctx, func() error {
			return flow.EnqueueInstance(sctx, h.o.Client, p.Workflow, wspec, st, i, p.Gen, h.st.Retention())
		}); err != nil {
			return err // retried by asynq: Expand returns the same expansion
		}
	}
	log.Info("map step expanded", "items", e.Items, "released", e.Next)
	h.o.Events(StepEvent{Workflow: p.Workflow, Step: p.Step, Route: run.r.Route, State: store.StepMapped, WorkflowState: a.WorkflowState, Attempt: a.Step.Attempts})
	return nil
}

// splitArray splits a JSON array into its elements' JSON, compacted.
func splitArray(raw string) ([]string, error) {
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	var arr []json.RawMessage
	if err := dec.Decode(&arr); err != nil || arr == nil {
		what := strings.TrimSpace(raw)
		if len(what) > 80 {
			what = what[:80] + "…"
		}
		if what == "null" || what == "" {
			return nil, errors.New("yielded nothing (null): the field it reads is missing")
		}
		return nil, fmt.Errorf("yielded %s, not a JSON array", what)
	}
	out := make([]string, len(arr))
	for i, e := range arr {
		var b bytes.Buffer
		if err := json.Compact(&b, e); err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
		out[i] = b.String()
	}
	return out, nil
}

// mapRun runs a map step: its own attempt expands the items into
// instances, and each instance runs as a step of its kind (each).
type mapRun struct{ each runner }

func (m mapRun) run(ctx context.Context, h *Handler, run *stepRun, a *store.Attempt, views map[string]spec.StepView) error {
	if run.inst == nil {
		return h.expand(ctx, run, a, views)
	}
	return m.each.run(ctx, h, run, a, views)
}
