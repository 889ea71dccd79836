package engine

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
)

// maxMapViewBytes bounds the outputs one render loads of all the maps it
// reads: past it, reduce in a code step, which reads them a page at a time.
const maxMapViewBytes = 32 << 20

// errMapViewTooLarge marks a render whose map outputs are over
// maxMapViewBytes: the step is dead-lettered (the same outputs would be
// too large again), unlike a failed read, which is retried.
var errMapViewTooLarge = errors.New("more than a template may read")

// mapPages reads a map's instances in item order, a page at a time, as
// views; it stops at the first error or when yield returns false.
func mapPages(ctx context.Context, st *store.Store, wf string, wspec *spec.Spec, id string, n int) iter.Seq2[spec.StepView, error] {
	return func(yield func(spec.StepView, error) bool) {
		for from := 0; from < n; from += flow.OutputsPage {
			page, err := st.InstanceOutputs(ctx, wf, id, from, min(flow.OutputsPage, n-from))
			if err != nil {
				yield(spec.StepView{}, err)
				return
			}
			for _, r := range page {
				if !yield(spec.ViewOf(wspec, id, r.Output, r.Degraded, r.State != store.StepDone), nil) {
					return
				}
			}
		}
	}
}

// loadMapViews fills in the views of the map steps among a step's inputs
// that its templates read; a code step's function reads the rest itself
// (CodeStep.Outputs).
func (h *Handler) loadMapViews(ctx context.Context, run *stepRun, a *store.Attempt, views map[string]spec.StepView) error {
	reads := spec.TemplateReads(run.st)
	budget := maxMapViewBytes
	for id, d := range a.Deps {
		if !reads[id] {
			continue
		}
		if d.Map == nil {
			if st, ok := run.spec.Step(id); ok && st.IsMap() {
				// a map that never expanded (dead-lettered, optional): no outputs
				v := views[id]
				v.Map = &spec.MapView{Outputs: []any{}}
				views[id] = v
			}
			continue
		}
		instances := make([]spec.StepView, 0, d.Map.Items)
		for v, err := range mapPages(ctx, h.st, run.p.Workflow, run.spec, id, d.Map.Items) {
			if err != nil {
				return fmt.Errorf("read the outputs of map step %s: %w", id, err)
			}
			if budget -= len(v.Output); budget < 0 {
				return fmt.Errorf("the outputs of map step %s are over %d MiB, %w: reduce them in a code step (run:), which reads them a page at a time", id, maxMapViewBytes>>20, errMapViewTooLarge)
			}
			instances = append(instances, v)
		}
		mv := spec.TemplateView(instances)
		v := views[id]
		v.Map = mv
		views[id] = v
	}
	return nil
}
