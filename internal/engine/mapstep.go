package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/retry"
)

// A map step's own task expands it: it renders for_each, records the
// items and enqueues the first max_parallel instances; each instance's
// settle enqueues the next one, and the last one settles the map (see
// store.Settle). The map step's record stays "mapped" meanwhile.

// instanceID is the step id of a map's n-th instance.
func instanceID(step string, n int) string { return store.InstanceID(step, n) }

// parseInstance splits "<id>[<n>]" into the map step's id and n.
func parseInstance(id string) (string, int, bool) {
	base, rest, ok := strings.Cut(id, "[")
	if !ok || !strings.HasSuffix(rest, "]") {
		return "", 0, false
	}
	n, err := strconv.Atoi(strings.TrimSuffix(rest, "]"))
	if err != nil || n < 0 || strconv.Itoa(n) != strings.TrimSuffix(rest, "]") {
		return "", 0, false
	}
	return base, n, true
}

// stepOf finds the step a task's payload names: a step of the spec, or an
// instance of one of its map steps.
func stepOf(spec *Spec, id string) (*Step, *instance, bool) {
	if st, ok := spec.Step(id); ok {
		return st, nil, true
	}
	base, n, ok := parseInstance(id)
	if !ok {
		return nil, nil, false
	}
	st, ok := spec.Step(base)
	if !ok || !st.IsMap() || n >= st.maxItems() {
		return nil, nil, false
	}
	return st, &instance{index: n}, true
}

// inputsOf is what Begin loads for a step: a map instance reads only what
// its own templates name.
func inputsOf(st *Step, inst *instance) []string {
	if inst != nil {
		return st.itemInputs
	}
	return st.inputs
}

// expand runs a map step's own task: it sizes the map and releases its
// first instances. Run again (a redelivery), it releases the same ones.
func (h *Handler) expand(ctx context.Context, run stepRun, a *store.Attempt, views map[string]StepView) error {
	p, spec, st := run.p, run.spec, run.st
	log := run.log
	var items []string
	if a.Step.State != store.StepMapped {
		raw, err := renderContext(ctx, st.forEachT.t, spec.Input, views)
		if err != nil {
			if ctx.Err() != nil {
				return &StepError{Class: retry.Canceled, Err: ctx.Err()}
			}
			return h.deadLetter(ctx, run, retry.BadRequest, fmt.Errorf("for_each: %w", err))
		}
		if items, err = splitArray(raw); err != nil {
			return h.deadLetter(ctx, run, retry.BadRequest, fmt.Errorf("for_each: %w", err))
		}
		switch max := st.maxItems(); {
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
		e, err = h.st.Expand(sctx, p.Workflow, st.ID, items, st.maxParallel())
		return err
	})
	switch {
	case errors.Is(err, store.ErrCanceled), errors.Is(err, store.ErrAlreadySettled), errors.Is(err, store.ErrNotFound):
		log.Info("map step not expanded", "why", err)
		return nil
	case err != nil:
		return fmt.Errorf("%w: %w", errNotRecorded, err)
	}
	if e.Items == 0 {
		log.Info("map step has no items: done at once")
		return h.settle(ctx, run, store.Outcome{Done: true, Optional: st.Optional, Output: "[]", Target: "map", Attempt: a.Step.Attempts}, "")
	}
	for i := range e.Next {
		if err := untilStored(sctx, func() error {
			return enqueueInstance(sctx, h.o.Client, p.Workflow, spec, st, i, p.Gen, h.st.Retention())
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

// decodeItem decodes an instance's stored item.
func decodeItem(raw string) (any, error) {
	if raw == "" {
		return nil, errors.New("the instance has no item (its map was not expanded)")
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("the instance's item is not JSON: %w", err)
	}
	return v, nil
}

// mapKind is a map step (for_each): its own attempt expands the items
// into instances, and each instance runs as a step of kind each.
type mapKind struct{ each stepKind }

func (m mapKind) claims(st *Step) bool { return st.IsMap() && m.each.claims(st) }

func (m mapKind) check(s *Spec, st *Step, where string, lim Limits, bad problemFunc) {
	m.each.check(s, st, where, lim, bad)
}

func (m mapKind) prepare(st *Step) error { return m.each.prepare(st) }

func (m mapKind) takes(st *Step) ([]string, string) { return m.each.takes(st) }

func (m mapKind) need(st *Step, r resolved) (string, string) { return m.each.need(st, r) }

func (m mapKind) jsonOutput(st *Step) bool { return m.each.jsonOutput(st) }

func (m mapKind) run(ctx context.Context, h *Handler, run stepRun, a *store.Attempt, views map[string]StepView) error {
	if run.inst == nil {
		return h.expand(ctx, run, a, views)
	}
	return m.each.run(ctx, h, run, a, views)
}

// instanceTasks are the map's released instances not done: their tasks
// may wait or run. Instances are read a page at a time (one HMGET per
// page), so a cancel of a 10,000-item map looks up only the instances
// still in flight.
func (mapKind) instanceTasks(ctx context.Context, rec *store.Store, wf string, st *Step, r *StepRecord, gen int, queue string) []stepTask {
	m := r.Map
	if m == nil {
		return nil
	}
	var out []stepTask
	for from := 0; from < m.Started; from += outputsPage {
		page, err := rec.InstanceProgress(ctx, wf, st.ID, from, min(outputsPage, m.Started-from))
		for n := range min(outputsPage, m.Started-from) {
			if err == nil && page[n].State == store.StepDone {
				continue // done: its task finished (a dead one may have been requeued from the dead-letter queue)
			}
			inst := instanceID(st.ID, from+n)
			out = append(out, stepTask{inst, queue, StepTaskID(wf, inst, gen)})
		}
	}
	return out
}

func (mapKind) items(ctx context.Context, rec *store.Store, wf string, st *Step) (int, bool) {
	m, err := rec.Counts(ctx, wf, st.ID)
	if err != nil || m == nil {
		return 0, false
	}
	return m.Items, true
}

func (m mapKind) input(ctx context.Context, st *Step, data promptData) (string, string) {
	return m.each.input(ctx, st, data)
}
