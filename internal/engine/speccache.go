package engine

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sort"
	"sync"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
)

// specCache keeps parsed specs by workflow id: a workflow's spec never
// changes, so the hot path reads it from Redis once per workflow per
// worker. Workflows submitted from the same spec with different inputs
// share one parsed shape (templates, schemas, inputs per step), so a
// worker parses and compiles a spec once, not once per workflow.
type specCache struct {
	mu     sync.Mutex
	max    int // per map; the oldest entries go first
	byWF   fifo[string, *spec.Spec]
	shapes fifo[[sha256.Size]byte, *spec.Spec]
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
	if s, err = c.parse(raw); err != nil {
		return nil, fmt.Errorf("workflow %s: stored spec: %v: %w", wf, err, asynq.SkipRetry)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.byWF.get(wf); ok {
		return prev, nil
	}
	c.byWF.put(wf, s, c.max)
	return s, nil
}

// parse reads a stored spec, reusing the parsed shape of an identical spec
// (all but the input) when it has one.
func (c *specCache) parse(raw []byte) (*spec.Spec, error) {
	var parts map[string]json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, fmt.Errorf("unreadable: %v", err)
	}
	names := make([]string, 0, len(parts))
	for k := range parts {
		if k != "input" {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	h := sha256.New()
	for _, k := range names {
		fmt.Fprintf(h, "%q %d:", k, len(parts[k]))
		h.Write(parts[k])
	}
	var key [sha256.Size]byte
	h.Sum(key[:0])
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
		shape = &s
		c.mu.Lock()
		c.shapes.put(key, shape, c.max)
		c.mu.Unlock()
	}
	// the steps are read-only once prepared, so workflows share them
	s := *shape
	if in := parts["input"]; len(in) > 0 && string(in) != "null" {
		if err := spec.DecodeJSON(in, &s.Input); err != nil { // numbers as json.Number, as everywhere a step sees them
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
