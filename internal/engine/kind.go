package engine

import (
	"context"

	"github.com/agentq/agentq/internal/store"
)

// stepKind is one kind of step: what makes a spec step one, how its own
// fields are checked and prepared, what it needs of the worker that runs
// it, and how one attempt runs. Each kind lives in its own file; kinds
// lists them, and code outside a kind asks its kind (kindOf), never which
// kind a step is.
type stepKind interface {
	// claims reports whether spec step st is of this kind (its own key is
	// set: run:, approve:, …).
	claims(st *Step) bool
	// check reports the problems of the kind's own fields of st, where
	// naming the step in the spec.
	check(s *Spec, st *Step, where string, bad problemFunc)
	// prepare parses what the kind's fields hold (templates) once the
	// spec is sound.
	prepare(st *Step) error
	// need is what a worker must serve to run st: ("route", name) or
	// ("handler", name); need "" for a step no worker serves (a person
	// decides it).
	need(st *Step, r resolved) (need, name string)
	// jsonOutput reports whether st's output is JSON (downstream templates
	// read .JSON, and it is checked when stored).
	jsonOutput(st *Step) bool
	// run runs one attempt of st that Begin let through; views are its
	// inputs.
	run(ctx context.Context, h *Handler, run stepRun, a *store.Attempt, views map[string]StepView) error
	// input is what a reviewer of the step's dead letter sees it was
	// asked: the rendered system text and prompt (or what stands for
	// them), data the step's templates' dot.
	input(ctx context.Context, st *Step, data promptData) (system, prompt string)
}

// problemFunc reports one problem of a spec: the line, the field (as
// "steps[2] (plan).prompt") and the message.
type problemFunc = func(line int, where, format string, a ...any)

// kinds are the step kinds, the first that claims a step being its kind;
// prompt steps claim every step the others leave.
var kinds = []stepKind{approvalKind{}, codeKind{}, toolLoopKind{}, promptKind{}}

// kindOf is the kind of spec step st. A map step (for_each) runs its kind
// once per item: its kind is that kind behind the map's own (mapKind).
func kindOf(st *Step) stepKind {
	for _, k := range kinds {
		if k.claims(st) {
			if st.IsMap() {
				return mapKind{each: k}
			}
			return k
		}
	}
	return promptKind{} // not reached: prompt claims every step
}
