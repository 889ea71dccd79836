package spec

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
)

// Kind is one kind of step, its spec side: what makes a spec step
// one, how its own fields are checked and prepared, what it needs of the
// worker that runs it and what its dead letter shows was asked. Each kind
// lives in its own file; kinds lists them, and code outside a kind asks
// its kind (KindOf), never which kind a step is. The engine runs a kind
// by its name (its run side), and a step is one task unless it is a map.
type Kind interface {
	// Name names the kind: the engine finds the kind's run side by it.
	Name() string
	// Claims reports whether spec step st is of this kind (its own key is
	// set: run:, approve:, …).
	Claims(st *Step) bool
	// Check reports the problems of the kind's own fields of st, where
	// naming the step in the spec, lim the producer's limits.
	Check(s *Spec, st *Step, where string, lim Limits, bad ProblemFunc)
	// Prepare parses what the kind's fields hold (templates) once the
	// spec is sound.
	Prepare(st *Step) error
	// Need is what a worker must serve to run st: ("route", name) or
	// ("handler", name); need "" for a step no worker serves (a person
	// decides it).
	Need(st *Step, r Resolved) (need, name string)
	// JSONOutput reports whether st's output is JSON (downstream templates
	// read .JSON, and it is checked when stored).
	JSONOutput(st *Step) bool
	// Takes names the fields of kindFields a step of this kind may set,
	// and what names such a step in a refusal ("a code step (run: f)").
	Takes(st *Step) (fields []string, what string)
	// Input is what a reviewer of the step's dead letter sees it was
	// asked: the rendered system text and prompt (or what stands for
	// them), data the step's templates' dot.
	Input(ctx context.Context, st *Step, data TemplateData) (system, prompt string)
}

// The built-in kinds' names.
const (
	KindPrompt   = "prompt"
	KindTools    = "tools"
	KindCode     = "code"
	KindApproval = "approval"
	KindSignal   = "signal"
	KindChild    = "child"
)

// Waiter is a kind whose steps wait for something outside their workflow
// (a person, a signal) while no worker holds them; WaitsFor names what.
type Waiter interface {
	WaitsFor() string
}

// What a waiting step waits for (Waiter.WaitsFor).
const (
	WaitApproval = "approval"
	WaitSignal   = "signal"
	WaitChild    = "child"
)

// WaitsFor is what spec step st waits for while it is "waiting" (empty:
// its kind never waits).
func WaitsFor(st *Step) string {
	if w, ok := KindOf(st).(Waiter); ok {
		return w.WaitsFor()
	}
	return ""
}

// ProblemFunc reports one problem of a spec: the line, the field (as
// "steps[2] (plan).prompt") and the message.
type ProblemFunc = func(line int, where, format string, a ...any)

// kinds are the step kinds, the first that claims a step being its kind;
// prompt steps claim every step the others leave.
var kinds = []Kind{approvalKind{}, signalKind{}, childKind{}, codeKind{}, toolLoopKind{}, promptKind{}}

// kindKeys are the spec keys of the kinds registered beyond the built-in
// ones, and their kinds: a step's field of such a key is kept in
// Step.Kinds for its kind.
var kindKeys = map[string]Kind{}

// RegisterKind adds kind k's spec side (the engine's registerKind adds
// both sides), marked in a step by its own field key (held in
// Step.Kinds[key], not a field Step has), ahead of the built-in kinds: its
// key is explicit, so it decides the step's kind. Kinds are read without
// a lock: register from an init function. A name or a key registered
// already is refused: two kinds would share a run side.
func RegisterKind(key string, k Kind) error {
	for _, o := range kinds {
		if o.Name() == k.Name() {
			return fmt.Errorf("spec: a kind named %q is registered already", k.Name())
		}
	}
	if _, ok := kindKeys[key]; ok || stepKeys[key] {
		return fmt.Errorf("spec: the key %q is a step's field or another kind's already", key)
	}
	kindKeys[key] = k
	kinds = append([]Kind{k}, kinds...)
	return nil
}

// kindFields are the step fields that belong to some kinds only, and the
// steps each is for. A step whose kind does not take a field it sets
// (Kind.Takes) is refused: the field would be ignored. The one table
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
	{"stream", "prompt steps", func(st *Step) bool { return st.Stream }},
	{"tools", "prompt steps", func(st *Step) bool { return len(st.Tools) > 0 }},
	{"max_turns", "steps with tools", func(st *Step) bool { return st.MaxTurns != 0 }},
	{"run", "code steps (run:)", func(st *Step) bool { return st.Run != "" }},
	{"with", "code steps (run:)", func(st *Step) bool { return st.With != nil }},
	{"approve", "approval steps (approve:)", func(st *Step) bool { return st.Approve != nil }},
	{"wait_for", "signal steps (wait_for:)", func(st *Step) bool { return st.WaitFor != nil }},
	{"workflow", "child workflow steps (workflow:)", func(st *Step) bool { return st.Workflow != nil }},
	{"timeout", "steps a worker runs (an approval waits for approve.timeout, a signal step for wait_for.timeout)", func(st *Step) bool { return st.Timeout != 0 }},
}

// checkKindFields refuses the fields of kindFields that st's kind does not
// take, and a registered kind's field on a step of another kind.
func checkKindFields(st *Step, where string, bad ProblemFunc) {
	k := KindOf(st)
	if m, ok := k.(MapKind); ok {
		k = m.Each
	}
	takes, what := k.Takes(st)
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

// KindOf is the kind of spec step st. A map step (for_each) runs its kind
// once per item: its kind is that kind behind the map's own (MapKind).
func KindOf(st *Step) Kind {
	for _, k := range kinds {
		if k.Claims(st) {
			if st.IsMap() {
				return MapKind{Each: k}
			}
			return k
		}
	}
	return promptKind{} // not reached: prompt claims every step
}
