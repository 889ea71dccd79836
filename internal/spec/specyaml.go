package spec

// Reading a spec's YAML: its nesting bound, the lines of its steps' fields
// and yaml.v3's errors as SpecErrors.

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"
)

type depthError struct{ Line int }

func (e *depthError) Error() string { return "too deep" }

func checkDepth(n *yaml.Node, d int) *depthError {
	if d > 32 {
		return &depthError{Line: n.Line}
	}
	for _, c := range n.Content {
		if err := checkDepth(c, d+1); err != nil {
			return err
		}
	}
	return nil
}

func stepNodes(doc *yaml.Node) []*yaml.Node {
	if doc.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(doc.Content); i += 2 {
		if doc.Content[i].Value == "steps" && doc.Content[i+1].Kind == yaml.SequenceNode {
			return doc.Content[i+1].Content
		}
	}
	return nil
}

// keyLines is the line of every key of a mapping node.
func keyLines(n *yaml.Node) map[string]int {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	out := make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		out[n.Content[i].Value] = n.Content[i].Line
	}
	return out
}

// mappingNode is the mapping under key in mapping n (an alias followed),
// or an empty node.
func mappingNode(n *yaml.Node, key string) *yaml.Node {
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if v := n.Content[i+1]; n.Content[i].Value == key {
				if v.Kind == yaml.AliasNode && v.Alias != nil {
					v = v.Alias
				}
				return v
			}
		}
	}
	return &yaml.Node{}
}

// keyLine is the line of key in a mapping node (0 if absent).
func keyLine(n *yaml.Node, key string) int {
	if n.Kind != yaml.MappingNode {
		return 0
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i].Line
		}
	}
	return 0
}

func yamlErr(source string, err error) error {
	var te *yaml.TypeError
	msgs := []string{err.Error()}
	if errors.As(err, &te) {
		msgs = te.Errors
	}
	var out []error
	for _, m := range msgs {
		se := &SpecError{Source: source, Msg: strings.TrimPrefix(m, "yaml: ")}
		if p := lineMsg.FindStringSubmatch(m); p != nil {
			fmt.Sscan(p[1], &se.Line)
			se.Msg = p[2]
		}
		if u := unknownField.FindStringSubmatch(se.Msg); u != nil {
			se.Msg = fmt.Sprintf("unknown field %q", u[1])
			if b, ok := blocks[strings.TrimPrefix(u[2], "spec.")]; ok {
				se.Msg += fmt.Sprintf(" in %s (its fields: %s)", b.name, strings.Join(yamlFields(b.t), ", "))
			}
		}
		out = append(out, se)
	}
	return errors.Join(out...)
}

// stepKeys are the keys a step's YAML may have of its own (Step's
// fields); a registered kind adds its key (kindKeys).
var stepKeys = func() map[string]bool {
	out := map[string]bool{}
	for _, name := range yamlFields(reflect.TypeFor[Step]()) {
		out[name] = true
	}
	return out
}()

// unknownStepFields reports, in the order they appear, the keys of the
// spec's steps that are neither a step's field nor a registered kind's,
// with their lines, as yaml reports a field no struct has (a merge key's
// mapping is read as the step's own keys). Each node is read once, however
// many aliases name it, and at most maxProblems are reported: the work is
// bounded by the spec's size, whatever its aliases.
func unknownStepFields(source string, doc *yaml.Node) []error {
	var out []error
	seen := map[*yaml.Node]bool{}
	var scan func(n *yaml.Node, depth int)
	scan = func(n *yaml.Node, depth int) {
		if depth > 32 || seen[n] || len(out) >= maxProblems {
			return
		}
		seen[n] = true
		switch n.Kind {
		case yaml.AliasNode:
			if n.Alias != nil {
				scan(n.Alias, depth+1)
			}
		case yaml.SequenceNode:
			for _, c := range n.Content {
				scan(c, depth+1)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i]
				switch {
				case k.Value == "<<" && k.Tag == "!!merge":
					scan(n.Content[i+1], depth+1)
				case !stepKeys[k.Value] && kindKeys[k.Value] == nil && len(out) < maxProblems:
					out = append(out, &SpecError{Source: source, Line: k.Line, Msg: fmt.Sprintf("unknown field %q", k.Value)})
				}
			}
		}
	}
	for _, st := range stepNodes(doc) {
		scan(st, 0)
	}
	return out
}

// blocks are the spec's mappings inside a step or the spec whose fields
// the YAML decoder checks, by type: an unknown field in one is named with
// the block and the fields it has.
var blocks = map[string]struct {
	name string
	t    reflect.Type
}{
	"ApproveSpec":     {"approve", reflect.TypeFor[ApproveSpec]()},
	"WaitForSpec":     {"wait_for", reflect.TypeFor[WaitForSpec]()},
	"ChildSpec":       {"workflow", reflect.TypeFor[ChildSpec]()},
	"ConcurrencySpec": {"concurrency", reflect.TypeFor[ConcurrencySpec]()},
	"OutputSpec":      {"output", reflect.TypeFor[OutputSpec]()},
	"StepDefaults":    {"defaults", reflect.TypeFor[StepDefaults]()},
	"BudgetSpec":      {"budget", reflect.TypeFor[BudgetSpec]()},
}

// yamlFields are the YAML keys of struct type t.
func yamlFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}
