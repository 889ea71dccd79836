package spec

import (
	"context"
	"encoding/json"
	"fmt"
)

// ChildSpec makes a step a child workflow step (workflow:): the step
// starts a workflow of a stored spec (enqueue spec put NAME, a worker's
// RegisterSpec) with Input, and waits for it, holding no worker slot. The
// child's output (its final step's, or an object keyed by step id when it
// has several) is the step's output; its failure is the step's.
type ChildSpec struct {
	// Spec names the stored spec; the child runs its latest version when
	// it starts, and keeps it.
	Spec string `yaml:"spec" json:"spec"`
	// Input is the child's input, over its spec's: any value, strings in
	// it templates over .Input, .Steps (and .Item in a map), as a code
	// step's with: (a string that is exactly one action keeps the JSON
	// value it yields).
	Input any `yaml:"input" json:"input,omitempty"`
}

// childKind is a step that runs a child workflow (workflow:).
type childKind struct{}

func (childKind) Name() string { return KindChild }

func (childKind) Claims(st *Step) bool { return st.Workflow != nil }

func (childKind) Takes(*Step) ([]string, string) {
	return []string{"workflow"}, "a child workflow step (workflow:)"
}

func (childKind) Check(_ *Spec, st *Step, where string, _ Limits, bad ProblemFunc) {
	line := lineOr(st.fieldLines["workflow"], st.line)
	if !ValidSpecName(st.Workflow.Spec) {
		bad(line, where+".workflow.spec", "%q is not a stored spec's name (a letter, then letters, digits, _, . or -, at most 64)", st.Workflow.Spec)
	}
	if err := checkWithValue(st.Workflow.Input, "workflow.input"); err != nil {
		bad(line, where+"."+err.path, "%s", err.msg)
	}
	if st.Workflow.Input != nil {
		if _, ok := st.Workflow.Input.(map[string]any); !ok {
			bad(line, where+".workflow.input", "is a %T: a child's input is a mapping (its keys are the child's .Input)", st.Workflow.Input)
		}
	}
}

func (childKind) Prepare(st *Step) (err error) {
	st.withT, err = parseWith(st.Workflow.Input)
	return err
}

func (childKind) Need(*Step, Resolved) (string, string) { return "", "" } // a stored spec, not a worker's function

func (childKind) JSONOutput(*Step) bool { return true } // the child's outputs, as JSON

func (childKind) WaitsFor() string { return WaitChild }

func (childKind) Input(ctx context.Context, st *Step, data TemplateData) (system, prompt string) {
	in, err := ChildInput(ctx, st, data)
	if err != nil {
		return "", "(cannot render the child's input: " + err.Error() + ")"
	}
	return "", fmt.Sprintf("runs child workflow %s with input %s", st.Workflow.Spec, in)
}

// ChildInput renders a child workflow step's input over data.
func ChildInput(ctx context.Context, st *Step, data TemplateData) (map[string]any, error) {
	b, err := renderTemplated(ctx, st, st.Workflow.Input, data)
	if err != nil {
		return nil, err
	}
	var in map[string]any
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, fmt.Errorf("step %s: workflow.input: %w", st.ID, err)
	}
	return in, nil
}

// childInputText is a child step's templated input as one text, for the
// submit's check of what templates read ("" for other steps).
func childInputText(st *Step) string {
	if st.Workflow == nil {
		return ""
	}
	return withText(st.Workflow.Input)
}

// ChildSpecName is the stored spec a child workflow step runs ("" for
// other steps): a submit checks it exists.
func ChildSpecName(st *Step) string {
	if st.Workflow == nil {
		return ""
	}
	return st.Workflow.Spec
}
