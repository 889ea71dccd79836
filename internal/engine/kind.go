package engine

import (
	"context"
	"maps"
	"reflect"
	"slices"

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
	// naming the step in the spec, lim the producer's limits.
	check(s *Spec, st *Step, where string, lim Limits, bad problemFunc)
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
	// takes names the fields of kindFields a step of this kind may set,
	// and what names such a step in a refusal ("a code step (run: f)").
	takes(st *Step) (fields []string, what string)
	// run runs one attempt of st that Begin let through; views are its
	// inputs.
	run(ctx context.Context, h *Handler, run stepRun, a *store.Attempt, views map[string]StepView) error
	// instanceTasks are the tasks of st's instances still in flight, in
	// run gen (rec: its record), which a cancel stops besides the step's
	// own: a map's; none for a step that is one task.
	instanceTasks(ctx context.Context, rec *store.Store, wf string, st *Step, r *StepRecord, gen int, queue string) []stepTask
	// items is how many instances st has, for a rerun to close them; ok
	// false for a step that has none.
	items(ctx context.Context, rec *store.Store, wf string, st *Step) (n int, ok bool)
	// input is what a reviewer of the step's dead letter sees it was
	// asked: the rendered system text and prompt (or what stands for
	// them), data the step's templates' dot.
	input(ctx context.Context, st *Step, data promptData) (system, prompt string)
}

// oneTask is what a kind whose step is one task does at a cancel and a
// rerun (no instances); such kinds embed it.
type oneTask struct{}

func (oneTask) instanceTasks(context.Context, *store.Store, string, *Step, *StepRecord, int, string) []stepTask {
	return nil
}

func (oneTask) items(context.Context, *store.Store, string, *Step) (int, bool) { return 0, false }

// problemFunc reports one problem of a spec: the line, the field (as
// "steps[2] (plan).prompt") and the message.
type problemFunc = func(line int, where, format string, a ...any)

// kinds are the step kinds, the first that claims a step being its kind;
// prompt steps claim every step the others leave.
var kinds = []stepKind{approvalKind{}, codeKind{}, toolLoopKind{}, promptKind{}}

// kindKeys are the spec keys of the kinds registered beyond the built-in
// ones, and their kinds: a step's field of such a key is kept in
// Step.Kinds for its kind.
var kindKeys = map[string]stepKind{}

// registerKind adds kind k, marked in a step by its own field key (held
// in Step.Kinds[key], not a field Step has), ahead of the built-in kinds:
// its key is explicit, so it decides the step's kind. Kinds are read
// without a lock: register from an init function.
func registerKind(key string, k stepKind) {
	kindKeys[key] = k
	kinds = append([]stepKind{k}, kinds...)
}

// kindFields are the step fields that belong to some kinds only, and the
// steps each is for. A step whose kind does not take a field it sets
// (stepKind.takes) is refused: the field would be ignored. The one table
// of them: a kind names what it takes, never the fields it does not.
var kindFields = []struct {
	name, isFor string
	set         func(st *Step) bool
}{
	{"route", "prompt steps", func(st *Step) bool { return st.Route != "" }},
	{"system", "prompt steps", func(st *Step) bool { return st.System != "" }},
	{"prompt", "prompt steps", func(st *Step) bool { return st.Prompt != "" }},
	{"degrade", "prompt steps", func(st *Step) bool { return st.Degrade != "" }},
	{"max_tokens", "prompt steps", func(st *Step) bool { return st.MaxTokens != 0 }},
	{"temperature", "prompt steps", func(st *Step) bool { return st.Temperature != nil }},
	{"output", "prompt steps", func(st *Step) bool { return st.Output != nil }},
	{"tools", "prompt steps", func(st *Step) bool { return len(st.Tools) > 0 }},
	{"max_turns", "steps with tools", func(st *Step) bool { return st.MaxTurns != 0 }},
	{"run", "code steps (run:)", func(st *Step) bool { return st.Run != "" }},
	{"with", "code steps (run:)", func(st *Step) bool { return st.With != nil }},
	{"approve", "approval steps (approve:)", func(st *Step) bool { return st.Approve != nil }},
	{"timeout", "steps a worker runs (an approval waits for approve.timeout)", func(st *Step) bool { return st.Timeout != 0 }},
}

// checkKindFields refuses the fields of kindFields that st's kind does not
// take, and a registered kind's field on a step of another kind.
func checkKindFields(st *Step, where string, bad problemFunc) {
	k := kindOf(st)
	if m, ok := k.(mapKind); ok {
		k = m.each
	}
	takes, what := k.takes(st)
	for _, f := range kindFields {
		if f.set(st) && !slices.Contains(takes, f.name) {
			bad(lineOr(st.fieldLines[f.name], st.line), where+"."+f.name, "is for %s; %s has none", f.isFor, what)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(st.Kinds)) {
		if reflect.TypeOf(kindKeys[key]) != reflect.TypeOf(k) { // types: a kind's value may not be comparable
			bad(lineOr(st.fieldLines[key], st.line), where+"."+key, "is another kind's field: a step is of one kind")
		}
	}
}

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
