package spec

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"
)

// A code step's with: is any YAML/JSON value; every string in it that holds
// a template action is a template over the same data as a prompt (.Input,
// .Steps). A string that is exactly one action keeps the JSON value the
// action yields ("{{ .Steps.plan.JSON.regions }}" stays an array, a number
// a number); any other string renders as text.

// withTemplate is one templated string of a with: value.
type withTemplate struct {
	t     *Template
	value bool // exactly one action: keep its JSON value
}

// jsonFunc is the function a one-action template's pipeline is wrapped in.
const jsonFunc = "agentqJSON"

// parseWith finds and parses the templated strings of a with: value, by
// their path ("with.region", "with.items[2]").
func parseWith(v any) (map[string]*withTemplate, error) {
	out := map[string]*withTemplate{}
	var walk func(path string, v any) error
	walk = func(path string, v any) error {
		switch x := v.(type) {
		case string:
			if !strings.Contains(x, "{{") {
				return nil
			}
			wt, err := parseWithString(path, x)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			out[path] = wt
		case map[string]any:
			for _, k := range sortedKeys(x) {
				if err := walk(path+"."+k, x[k]); err != nil {
					return err
				}
			}
		case []any:
			for i, e := range x {
				if err := walk(path+"["+strconv.Itoa(i)+"]", e); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return out, walk("with", v)
}

func parseWithString(name, text string) (*withTemplate, error) {
	t, err := template.New(name).Option("missingkey=zero").Funcs(template.FuncMap{jsonFunc: toJSON}).Parse(text)
	if err != nil {
		return nil, err
	}
	if a, ok := singleAction(t.Tree); ok {
		// render the pipeline's value as JSON instead of as text
		t, err = template.New(name).Option("missingkey=zero").Funcs(template.FuncMap{jsonFunc: toJSON}).
			Parse("{{ " + jsonFunc + " (" + a.Pipe.String() + ") }}")
		if err != nil {
			return nil, err
		}
		return &withTemplate{t: &Template{Template: t, bounded: boundTemplate(t)}, value: true}, nil
	}
	return &withTemplate{t: &Template{Template: t, bounded: boundTemplate(t)}}, nil
}

// singleAction returns the tree's only node when it is one action that
// declares no variables.
func singleAction(tree *parse.Tree) (*parse.ActionNode, bool) {
	if tree == nil || tree.Root == nil || len(tree.Root.Nodes) != 1 {
		return nil, false
	}
	a, ok := tree.Root.Nodes[0].(*parse.ActionNode)
	if !ok || len(a.Pipe.Decl) > 0 {
		return nil, false
	}
	return a, true
}

func toJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// RenderWith renders a code step's with: into its JSON arguments,
// over the template dot data (DataOf).
func RenderWith(ctx context.Context, st *Step, data TemplateData) (json.RawMessage, error) {
	return renderTemplated(ctx, st, st.With, data)
}

// renderTemplated renders root, a with:-like value whose templates are
// st's (parseWith), into JSON.
func renderTemplated(ctx context.Context, st *Step, root any, data TemplateData) (json.RawMessage, error) {
	var walk func(path string, v any) (any, error)
	walk = func(path string, v any) (any, error) {
		switch x := v.(type) {
		case string:
			wt, ok := st.withT[path]
			if !ok {
				return x, nil
			}
			s, err := RenderData(ctx, wt.t, data)
			if err != nil {
				return nil, fmt.Errorf("step %s: %s: %w", st.ID, path, err)
			}
			if wt.value {
				return json.RawMessage(s), nil
			}
			return s, nil
		case map[string]any:
			out := make(map[string]any, len(x))
			for k, e := range x {
				r, err := walk(path+"."+k, e)
				if err != nil {
					return nil, err
				}
				out[k] = r
			}
			return out, nil
		case []any:
			out := make([]any, len(x))
			for i, e := range x {
				r, err := walk(path+"["+strconv.Itoa(i)+"]", e)
				if err != nil {
					return nil, err
				}
				out[i] = r
			}
			return out, nil
		}
		return v, nil
	}
	v, err := walk("with", root)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("step %s: with: %w", st.ID, err)
	}
	return b, nil
}

func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
