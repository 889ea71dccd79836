package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/tasks"
)

// specCache keeps parsed specs by workflow id: a workflow's spec never
// changes, so the hot path reads it from Redis once per workflow per
// worker. Workflows submitted from the same spec with different inputs
// share one parsed shape (templates, schemas, inputs per step; keyed by
// spec.ShapeKey), so a worker parses and compiles a spec once, not once
// per workflow. A step task names its spec's shape (tasks.Payload.Shape):
// a worker that knows it begins a workflow's first step without reading
// the spec first (shaped), and reads the input with the begin (complete).
type specCache struct {
	mu     sync.Mutex
	max    int // per map; the oldest entries go first
	byWF   fifo[string, *spec.Spec]
	shapes fifo[string, *spec.Spec]
}

func (c *specCache) get(ctx context.Context, st *store.Store, wf string) (*spec.Spec, error) {
	c.mu.Lock()
	s, ok := c.byWF.get(wf)
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	raw, err := st.Spec(ctx, wf)
	if err != nil {
		return nil, err
	}
	return c.add(wf, raw)
}

// add parses workflow wf's stored spec raw and keeps it.
func (c *specCache) add(wf string, raw []byte) (*spec.Spec, error) {
	s, err := c.parse(raw)
	if err != nil {
		return nil, fmt.Errorf("workflow %s: stored spec: %v: %w", wf, err, asynq.SkipRetry)
	}
	return c.keep(wf, s), nil
}

// keep keeps s as workflow wf's spec, unless another delivery kept one
// first, and returns the one kept.
func (c *specCache) keep(wf string, s *spec.Spec) *spec.Spec {
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.byWF.get(wf); ok {
		return prev
	}
	c.byWF.put(wf, s, c.max)
	return s
}

// forTask is the spec a task of type typ with payload p runs its step
// under: its workflow's (get), or, when this cache holds the shape the
// task names but not the workflow's spec, and the step can begin without
// the workflow's input (its own task, bound by no concurrency key: the
// key's template may read the input), that shape (shaped true): the
// step's begin then reads the stored spec (store.BeginReadingSpec), and
// complete gives the workflow's spec.
func (c *specCache) forTask(ctx context.Context, st *store.Store, typ string, p tasks.Payload) (s *spec.Spec, shaped bool, err error) {
	if typ == tasks.TypeStep {
		if shape, ok := c.shaped(p.Workflow, p.Shape); ok {
			if step, _, ok := spec.StepOf(shape, p.Step); ok && spec.ConcurrencyOf(shape, step) == nil {
				return shape, true, nil
			}
		}
	}
	s, err = c.get(ctx, st, p.Workflow)
	return s, false, err
}

// shaped returns, for workflow wf whose spec this cache does not hold,
// the shape its task names (key: tasks.Payload.Shape) when the cache
// holds that: every field but the input (nil), which complete adds.
func (c *specCache) shaped(wf, key string) (*spec.Spec, bool) {
	if key == "" {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byWF.get(wf); ok {
		return nil, false
	}
	return c.shapes.get(key)
}

// complete is workflow wf's spec from its shape (shaped) and its stored
// spec raw (read with the step's begin), kept: the shape with raw's
// input, or raw parsed if its shape is another.
func (c *specCache) complete(wf string, shape *spec.Spec, raw []byte) (*spec.Spec, error) {
	key, input, ok := spec.ShapeKey(raw)
	if !ok || key != spec.ShapeOf(shape) {
		return c.add(wf, raw)
	}
	s, err := withInput(shape, input)
	if err != nil {
		return nil, fmt.Errorf("workflow %s: stored spec: %v: %w", wf, err, asynq.SkipRetry)
	}
	return c.keep(wf, s), nil
}

// parse reads a stored spec, reusing the parsed shape of an identical spec
// (all but the input) when it has one.
func (c *specCache) parse(raw []byte) (*spec.Spec, error) {
	key, input, ok := spec.ShapeKey(raw)
	if !ok {
		var probe map[string]json.RawMessage
		err := json.Unmarshal(raw, &probe)
		if err == nil {
			err = errors.New("not a JSON object")
		}
		return nil, fmt.Errorf("unreadable: %v", err)
	}
	c.mu.Lock()
	shape, ok := c.shapes.get(key)
	c.mu.Unlock()
	if !ok {
		var s spec.Spec
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("unreadable: %v", err)
		}
		if err := spec.Prepare(&s); err != nil {
			return nil, err
		}
		s.Input = nil
		spec.SetShape(&s, key)
		shape = &s
		c.mu.Lock()
		c.shapes.put(key, shape, c.max)
		c.mu.Unlock()
	}
	return withInput(shape, input)
}

// withInput is a workflow's spec: its shape (the steps are read-only once
// prepared, so workflows share them) with its input (JSON; nil: none).
func withInput(shape *spec.Spec, input []byte) (*spec.Spec, error) {
	s := *shape
	if len(input) > 0 && string(input) != "null" {
		if err := spec.DecodeJSON(input, &s.Input); err != nil { // numbers as json.Number, as everywhere a step sees them
			return nil, fmt.Errorf("input unreadable: %v", err)
		}
	}
	return &s, nil
}

// fifo is a map that keeps at most max entries, dropping the oldest.
type fifo[K comparable, V any] struct {
	m     map[K]V
	order []K
}

func (f *fifo[K, V]) get(k K) (V, bool) {
	v, ok := f.m[k]
	return v, ok
}

func (f *fifo[K, V]) put(k K, v V, max int) {
	if f.m == nil {
		f.m = map[K]V{}
	}
	if _, ok := f.m[k]; ok {
		return
	}
	f.m[k] = v
	f.order = append(f.order, k)
	if len(f.order) > max {
		delete(f.m, f.order[0])
		f.order = f.order[1:]
	}
}

// newSpecCache is a cache of at most max specs.
func newSpecCache(max int) specCache { return specCache{max: max} }
