package spec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/template/parse"
)

// A map step (for_each) runs once per item of a JSON array known only at
// run time: a field of an ancestor's JSON output, a code step's returned
// array, or the workflow input. Each item runs as an instance of its own
// ("<id>[<n>]": its own asynq task, timeout, retries, checkpoint and
// lease), sees the item as .Item and its position as .Index, and the
// map's dependents see .Steps.<id>.Outputs (in item order) and
// .Steps.<id>.Missing (indexes of optional instances that were
// dead-lettered).

// Defaults and bounds of map steps.
const (
	// DefaultMaxItems is a map step's max_items when it sets none.
	DefaultMaxItems = 1000
	// DefaultMaxParallel is how many instances of one map are in flight
	// at once when the step sets no max_parallel: a wide map neither
	// floods a provider nor fills the queue ahead of other workflows.
	DefaultMaxParallel = 100
)

// IsMap says whether the step is a map step.
func (st *Step) IsMap() bool { return st.ForEach != "" }

// readProblem is what is wrong with a template that reads field (JSON,
// Outputs) of step dep (id), "" if nothing: .JSON is a JSON step's answer
// or a map's outputs, .Outputs a map's alone.
func readProblem(dep *Step, id, field string) string {
	switch {
	case field == "JSON" && !WantsJSON(dep) && !dep.IsMap():
		return fmt.Sprintf("reads .Steps.%s.JSON, but step %s has no output.format json", id, id)
	case field == "Outputs" && !dep.IsMap():
		return fmt.Sprintf("reads .Steps.%s.Outputs, but step %s is not a map step (for_each)", id, id)
	}
	return ""
}

// hasItem reports whether st's field (prompt, system, with, for_each) has
// an item (.Item, .Index) to read: a map instance's own fields, not the
// for_each that makes the items.
func hasItem(st *Step, field string) bool { return st.IsMap() && field != "for_each" }

// MaxItems is the step's bound on its array.
func MaxItems(st *Step) int {
	if st.MaxItems > 0 {
		return st.MaxItems
	}
	return DefaultMaxItems
}

// MaxParallel is the step's window of instances in flight.
func MaxParallel(st *Step) int {
	if st.MaxParallel > 0 {
		return st.MaxParallel
	}
	return DefaultMaxParallel
}

// checkMap checks a step's for_each, max_items and max_parallel.
func checkMap(st *Step, where string, lim Limits, bad func(int, string, string, ...any)) {
	if !st.IsMap() {
		if st.MaxItems != 0 {
			bad(st.line, where+".max_items", "is only for map steps (for_each)")
		}
		if st.MaxParallel != 0 {
			bad(st.line, where+".max_parallel", "is only for map steps (for_each)")
		}
		return
	}
	if !strings.Contains(st.ForEach, "{{") {
		bad(st.line, where+".for_each", "%q is not a template (want e.g. \"{{ .Steps.plan.JSON.items }}\" or \"{{ .Input.items }}\")", st.ForEach)
	}
	switch {
	case st.MaxItems < 0:
		bad(st.line, where+".max_items", "is negative")
	case st.MaxItems > lim.MaxMapItems:
		bad(st.line, where+".max_items", "%d is over limits.max_map_items (%d)", st.MaxItems, lim.MaxMapItems)
	case st.MaxItems == 0 && DefaultMaxItems > lim.MaxMapItems:
		bad(st.line, where+".max_items", "is unset and its default %d is over limits.max_map_items (%d): set it", DefaultMaxItems, lim.MaxMapItems)
	}
	if st.MaxParallel < 0 {
		bad(st.line, where+".max_parallel", "is negative")
	}
}

// itemFields are what a map step's templates read of their instance.
var itemFields = map[string]bool{"Item": true, "Index": true}

// readsItem says whether a template reads .Item or .Index.
func readsItem(t *Template) bool {
	found := false
	if t == nil {
		return false
	}
	for _, tmpl := range t.Templates() {
		if tmpl.Tree == nil {
			continue
		}
		walkAll(tmpl.Tree.Root, func(n parse.Node) {
			if f, ok := n.(*parse.FieldNode); ok && len(f.Ident) > 0 && itemFields[f.Ident[0]] {
				found = true
			}
		})
	}
	return found
}

// prepareMap parses a map step's for_each and works out what its
// instances read: only the steps their own templates name (not what
// for_each read to size the map), so that an instance does not load a
// large plan it never looks at.
func (st *Step) prepareMap() error {
	st.forEachT, st.itemInputs = nil, nil
	if !st.IsMap() {
		return nil
	}
	var err error
	if st.forEachT, err = parseWithString(st.ID+".for_each", st.ForEach); err != nil {
		return fmt.Errorf("steps (%s).for_each: %w", st.ID, err)
	}
	refs, _ := parsedRefs(st.forEachT.t)
	for _, r := range refs {
		st.inputs = appendNew(st.inputs, r.step)
	}
	for _, t := range st.templates() {
		refs, _ := parsedRefs(t)
		for _, r := range refs {
			st.itemInputs = appendNew(st.itemInputs, r.step)
		}
	}
	return nil
}

// templates are the step's own templates: prompt, system and with:.
func (st *Step) templates() []*Template {
	out := []*Template{st.promptT, st.systemT}
	for _, wt := range st.withT {
		out = append(out, wt.t)
	}
	return out
}

func appendNew(list []string, v string) []string {
	for _, x := range list {
		if x == v {
			return list
		}
	}
	return append(list, v)
}

// parseInstance splits "<id>[<n>]" into the map step's id and n.
func parseInstance(id string) (string, int, bool) {
	base, rest, ok := strings.Cut(id, "[")
	if !ok || !strings.HasSuffix(rest, "]") {
		return "", 0, false
	}
	n, err := strconv.Atoi(strings.TrimSuffix(rest, "]"))
	if err != nil || n < 0 || strconv.Itoa(n) != strings.TrimSuffix(rest, "]") {
		return "", 0, false
	}
	return base, n, true
}

// StepOf finds the step a task's payload names: a step of the spec, or an
// instance of one of its map steps.
func StepOf(spec *Spec, id string) (*Step, *Instance, bool) {
	if st, ok := spec.Step(id); ok {
		return st, nil, true
	}
	base, n, ok := parseInstance(id)
	if !ok {
		return nil, nil, false
	}
	st, ok := spec.Step(base)
	if !ok || !st.IsMap() || n >= MaxItems(st) {
		return nil, nil, false
	}
	return st, &Instance{Index: n}, true
}

// InputsOf is what Begin loads for a step: a map instance reads only what
// its own templates name.
func InputsOf(st *Step, inst *Instance) []string {
	if inst != nil {
		return st.itemInputs
	}
	return st.inputs
}

// DecodeItem decodes an instance's stored item.
func DecodeItem(raw string) (any, error) {
	if raw == "" {
		return nil, errors.New("the instance has no item (its map was not expanded)")
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("the instance's item is not JSON: %w", err)
	}
	return v, nil
}

// MapKind is a map step (for_each): its own attempt expands the items
// into instances, and each instance runs as a step of its kind (Each).
type MapKind struct{ Each Kind }

func (MapKind) Name() string { return "map" }

func (m MapKind) Claims(st *Step) bool { return st.IsMap() && m.Each.Claims(st) }

func (m MapKind) Check(s *Spec, st *Step, where string, lim Limits, bad ProblemFunc) {
	m.Each.Check(s, st, where, lim, bad)
}

func (m MapKind) Prepare(st *Step) error { return m.Each.Prepare(st) }

func (m MapKind) Takes(st *Step) ([]string, string) { return m.Each.Takes(st) }

func (m MapKind) Need(st *Step, r Resolved) (string, string) { return m.Each.Need(st, r) }

func (m MapKind) JSONOutput(st *Step) bool { return m.Each.JSONOutput(st) }

func (m MapKind) Input(ctx context.Context, st *Step, data TemplateData) (string, string) {
	return m.Each.Input(ctx, st, data)
}

// Instance is one item of a map step.
type Instance struct {
	Index int
	Item  any // the item, decoded from its JSON
}

// checkMapInput sizes a map step whose for_each reads the input alone:
// its list is known at submit, and one over the step's max_items or
// limits.max_map_items is refused then, not dead-lettered when it runs.
func checkMapInput(ctx context.Context, s *Spec, st *Step, where string, lim Limits) error {
	if !st.IsMap() {
		return nil
	}
	var t *Template
	if st.forEachT != nil {
		t = st.forEachT.t
	} else if wt, err := parseWithString(st.ID+".for_each", st.ForEach); err == nil {
		t = wt.t
	}
	if t == nil {
		return nil
	}
	raw, err := renderInputOnly(ctx, s, t, st.ID+".for_each", st.ForEach, where+".for_each")
	if err != nil || raw == "" {
		return err
	}
	var items []json.RawMessage
	if err := json.Unmarshal([]byte(raw), &items); err != nil || !strings.HasPrefix(strings.TrimSpace(raw), "[") {
		if why := missingInput(t, s.Input, noValue); raw == "null" && !strings.HasPrefix(why, "renders") {
			return &SpecError{Where: where + ".for_each", Msg: why} // a one-action for_each makes null of a missing field
		}
		return &SpecError{Where: where + ".for_each", Msg: fmt.Sprintf("yields %s over the input, not a list", clip(raw, 80))}
	}
	switch n := len(items); {
	case n > MaxItems(st):
		return &SpecError{Where: where + ".for_each", Msg: fmt.Sprintf("yields %d items over the input, over the step's max_items of %d", n, MaxItems(st))}
	case lim.MaxMapItems > 0 && n > lim.MaxMapItems:
		return &SpecError{Where: where + ".for_each", Msg: fmt.Sprintf("yields %d items over the input, over limits.max_map_items of %d", n, lim.MaxMapItems)}
	}
	return nil
}
