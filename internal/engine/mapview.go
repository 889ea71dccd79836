package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"

	"github.com/agentq/agentq/internal/store"
)

// MapView is what a step's templates see of a map step (for_each) they
// read, as .Steps.<id>: its instances' outputs in item order.
type MapView struct {
	// Outputs holds each instance's output in item order: its JSON value
	// for a code step or a format: json answer, else its text; nil where
	// the instance is missing.
	Outputs []any
	// Missing lists the indexes of optional instances that were
	// dead-lettered.
	Missing []int
	// Degraded says some instance answered degraded.
	Degraded bool

	// views, when the view was built from its instances' views
	// (MapViewOf), is what CodeStep.Outputs yields for each.
	views []StepView
	// err is why a test's view could not be built (MapViewError):
	// NewTestStep refuses it.
	err error
}

// MapViewError is a map view a test could not build, for the reason
// err: NewTestStep returns err for a step given it.
func MapViewError(err error) *MapView { return &MapView{err: err} }

// MapViewOf is the view of a map step whose instances, in item order,
// have these views (a view with Missing set: an optional instance that
// was dead-lettered). Tests build their fan-in's map ancestors with it.
func MapViewOf(instances ...StepView) *MapView {
	m := &MapView{Outputs: make([]any, 0, len(instances)), views: append([]StepView(nil), instances...)}
	for i, v := range instances {
		switch {
		case v.Missing:
			m.Outputs = append(m.Outputs, nil)
			m.Missing = append(m.Missing, i)
		case v.JSON != nil || v.isJSON: // a JSON null is nil, not the text "null"
			m.Outputs = append(m.Outputs, v.JSON)
		default:
			m.Outputs = append(m.Outputs, v.Output)
		}
		m.Degraded = m.Degraded || v.Degraded
	}
	return m
}

// instanceViews yields the views MapViewOf was given, as a worker's
// CodeStep.Outputs yields its instances' records.
func (m *MapView) instanceViews() iter.Seq2[StepView, error] {
	return func(yield func(StepView, error) bool) {
		for _, v := range m.views {
			if !yield(v, nil) {
				return
			}
		}
	}
}

// Output is the outputs as one JSON array (.Steps.<id>.Output).
func (m *MapView) Output() string {
	b, _ := json.Marshal(m.Outputs)
	return string(b)
}

// JSON is the outputs (.Steps.<id>.JSON).
func (m *MapView) JSON() any { return m.Outputs }

// outputsPage is how many instances one read loads.
const outputsPage = 500

// maxMapViewBytes bounds the outputs one render loads of all the maps it
// reads: past it, reduce in a code step, which reads them a page at a time.
const maxMapViewBytes = 32 << 20

// errMapViewTooLarge marks a render whose map outputs are over
// maxMapViewBytes: the step is dead-lettered (the same outputs would be
// too large again), unlike a failed read, which is retried.
var errMapViewTooLarge = errors.New("more than a template may read")

// mapPages reads a map's instances in item order, a page at a time, as
// views; it stops at the first error or when yield returns false.
func mapPages(ctx context.Context, st *store.Store, wf string, spec *Spec, id string, n int) iter.Seq2[StepView, error] {
	return func(yield func(StepView, error) bool) {
		for from := 0; from < n; from += outputsPage {
			page, err := st.InstanceOutputs(ctx, wf, id, from, min(outputsPage, n-from))
			if err != nil {
				yield(StepView{}, err)
				return
			}
			for _, r := range page {
				if !yield(viewOf(spec, id, r.Output, r.Degraded, r.State != store.StepDone), nil) {
					return
				}
			}
		}
	}
}

// loadMapViews fills in the views of the map steps among a step's inputs
// that its templates read; a code step's function reads the rest itself
// (CodeStep.Outputs).
func (h *Handler) loadMapViews(ctx context.Context, run stepRun, a *store.Attempt, views map[string]StepView) error {
	reads := run.st.templateReads()
	budget := maxMapViewBytes
	for id, d := range a.Deps {
		if !reads[id] {
			continue
		}
		if d.Map == nil {
			if st, ok := run.spec.Step(id); ok && st.IsMap() {
				// a map that never expanded (dead-lettered, optional): no outputs
				v := views[id]
				v.Map = &MapView{Outputs: []any{}}
				views[id] = v
			}
			continue
		}
		instances := make([]StepView, 0, d.Map.Items)
		for v, err := range mapPages(ctx, h.st, run.p.Workflow, run.spec, id, d.Map.Items) {
			if err != nil {
				return fmt.Errorf("read the outputs of map step %s: %w", id, err)
			}
			if budget -= len(v.Output); budget < 0 {
				return fmt.Errorf("the outputs of map step %s are over %d MiB, %w: reduce them in a code step (run:), which reads them a page at a time", id, maxMapViewBytes>>20, errMapViewTooLarge)
			}
			instances = append(instances, v)
		}
		mv := MapViewOf(instances...)
		mv.views = nil // a template reads Outputs; the views need not outlive the render
		v := views[id]
		v.Map = mv
		views[id] = v
	}
	return nil
}

// templateReads is the set of steps the step's templates (prompt, system,
// with:, for_each) read.
func (st *Step) templateReads() map[string]bool {
	out := map[string]bool{}
	ts := st.templates()
	if st.forEachT != nil {
		ts = append(ts, st.forEachT.t)
	}
	for _, t := range ts {
		refs, _ := parsedRefs(t)
		for _, r := range refs {
			out[r.step] = true
		}
	}
	return out
}
