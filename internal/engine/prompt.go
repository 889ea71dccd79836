package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"text/template"
)

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

// viewOf is what a prompt sees of step id's record: for a JSON step that
// answered, .JSON holds the parsed answer (validated when it was stored).
func viewOf(spec *Spec, id, output string, degraded, missing bool) StepView {
	if st, ok := spec.Step(id); ok && st.wantsJSON() && !missing && !degraded {
		return JSONView(output)
	}
	return StepView{Output: output, Degraded: degraded, Missing: missing}
}

// promptData is the template's dot.
type promptData struct {
	Input map[string]any
	Steps map[string]any // a StepView, or a *MapView for a map step
	// Item and Index are a map instance's item and its position.
	Item  any
	Index int
}

// dataOf is a template's dot: the workflow's input, the steps it reads
// and, for a map instance, its item.
func dataOf(input map[string]any, steps map[string]StepView, inst *instance) promptData {
	d := promptData{Input: input, Steps: make(map[string]any, len(steps))}
	for id, v := range steps {
		if v.Map != nil {
			d.Steps[id] = v.Map
		} else {
			d.Steps[id] = v
		}
	}
	if inst != nil {
		d.Item, d.Index = inst.item, inst.index
	}
	return d
}

// maxRenderedBytes bounds a rendered prompt.
const maxRenderedBytes = 4 << 20

// promptTemplate is a parsed prompt template, rewritten so that its
// renders count their work (boundTemplate). bounded says whether a render
// needs the budget's functions: a template without ranges and without
// functions that make text does work in proportion to its own size.
type promptTemplate struct {
	*template.Template
	bounded bool
}

// parseTemplate parses a prompt template (nil for an empty one).
func parseTemplate(name, text string) (*promptTemplate, error) {
	if text == "" {
		return nil, nil
	}
	t, err := template.New(name).Option("missingkey=zero").Parse(text)
	if err != nil {
		return nil, err
	}
	return &promptTemplate{Template: t, bounded: boundTemplate(t)}, nil
}

// renderContext executes a parsed prompt template (nil renders as ""),
// checked at submit time to read only .Input and the step's ancestors. It
// stops once ctx is done (checked when a range starts and at each function
// that makes text) and at its budget (renderbudget.go) with a
// *RenderBudgetError.
func renderContext(ctx context.Context, t *promptTemplate, input map[string]any, steps map[string]StepView) (string, error) {
	return renderData(ctx, t, dataOf(input, steps, nil))
}

// renderData is renderContext over a dot already built.
func renderData(ctx context.Context, t *promptTemplate, data promptData) (string, error) {
	if t == nil {
		return "", nil
	}
	b := &renderBudget{ctx: ctx, name: t.Name(), data: data}
	if err := b.check(); err != nil {
		return "", err
	}
	run := t.Template
	if t.bounded {
		// the budget's functions are bound to this render; the parsed
		// trees are shared, not copied
		var err error
		if run, err = t.Clone(); err != nil {
			return "", fmt.Errorf("template %s: %w", t.Name(), err)
		}
		run.Funcs(b.funcs())
	}
	var out limitedBuilder
	err := run.Execute(&out, data)
	if b.err != nil {
		return "", b.err
	}
	if err != nil {
		return "", fmt.Errorf("template %s: %w", t.Name(), err)
	}
	return out.String(), nil
}

// inputHash identifies what a step was asked: its checkpoint is valid only
// for the same rendered input.
func inputHash(route, system, prompt string) string {
	h := sha256.New()
	for _, s := range []string{route, system, prompt} {
		fmt.Fprintf(h, "%d:%s", len(s), s)
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

type limitedBuilder struct{ strings.Builder }

func (b *limitedBuilder) Write(p []byte) (int, error) {
	if b.Len()+len(p) > maxRenderedBytes {
		return 0, fmt.Errorf("rendered prompt is over %d bytes", maxRenderedBytes)
	}
	return b.Builder.Write(p)
}
