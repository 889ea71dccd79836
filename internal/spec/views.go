package spec

import (
	"encoding/json"
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

// InstanceViews yields the views MapViewOf was given, as a worker's
// CodeStep.Outputs yields its instances' records.
func InstanceViews(m *MapView) []StepView { return m.views }

// TemplateView is the view of a map step whose instances have these
// views, as a worker's templates read it: the outputs only (the views
// need not outlive the render).
func TemplateView(instances []StepView) *MapView {
	m := MapViewOf(instances...)
	m.views = nil
	return m
}

// Output is the outputs as one JSON array (.Steps.<id>.Output).
func (m *MapView) Output() string {
	b, _ := json.Marshal(m.Outputs)
	return string(b)
}

// JSON is the outputs (.Steps.<id>.JSON).
func (m *MapView) JSON() any { return m.Outputs }

// TemplateReads is the set of steps the step's templates (prompt, system,
// with:, for_each) read.
func TemplateReads(st *Step) map[string]bool {
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

// StepView is what a prompt sees of an upstream step as .Steps.<id>.
type StepView struct {
	Output string
	// JSON is Output parsed, for a step with output.format json (maps,
	// lists, strings, json.Number, bools); nil otherwise.
	JSON     any
	Degraded bool
	Missing  bool // an optional step that was dead-lettered
	// Map is set for a map step (for_each) whose outputs the reading
	// step's templates use; a code step reads them with CodeStep.Outputs.
	Map *MapView `json:"map,omitempty"`

	isJSON bool // Output is a JSON answer: JSON holds it, nil for null
}

// JSONView is the view of a step that answered JSON text output, as a
// worker builds it: JSON holds the decoded answer (numbers as
// json.Number), nil for null.
func JSONView(output string) StepView {
	v, err := ParseJSONAnswer(output)
	return StepView{Output: output, JSON: v, isJSON: err == nil}
}

// ViewOf is what a prompt sees of step id's record: for a JSON step that
// answered, .JSON holds the parsed answer (validated when it was stored).
func ViewOf(spec *Spec, id, output string, degraded, missing bool) StepView {
	if st, ok := spec.Step(id); ok && WantsJSON(st) && !missing && !degraded {
		return JSONView(output)
	}
	return StepView{Output: output, Degraded: degraded, Missing: missing}
}

// TemplateData is the template's dot.
type TemplateData struct {
	Input map[string]any
	Steps map[string]any // a StepView, or a *MapView for a map step
	// Item and Index are a map instance's item and its position.
	Item  any
	Index int
}

// DataOf is a template's dot: the workflow's input, the steps it reads
// and, for a map instance, its item.
func DataOf(input map[string]any, steps map[string]StepView, inst *Instance) TemplateData {
	d := TemplateData{Input: input, Steps: make(map[string]any, len(steps))}
	for id, v := range steps {
		if v.Map != nil {
			d.Steps[id] = v.Map
		} else {
			d.Steps[id] = v
		}
	}
	if inst != nil {
		d.Item, d.Index = inst.Item, inst.Index
	}
	return d
}

// MapBuildError is why a test's map view m could not be built
// (MapViewError); nil for a view that was, and for none.
func MapBuildError(m *MapView) error {
	if m == nil {
		return nil
	}
	return m.err
}
