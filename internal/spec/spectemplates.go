package spec

import (
	"fmt"
	"strings"
	"text/template/parse"
)

// What a spec's templates read: the .Steps.<id> references checked at
// submit and the inputs a step waits for.

// stepRef is one .Steps.<step>[.<field>[.<path>…]] a template reads (path:
// what it reads inside .JSON).
type stepRef struct {
	step, field string
	path        []string
}

// stepFields are the fields of a StepView.
var stepFields = map[string]bool{"Output": true, "JSON": true, "Degraded": true, "Missing": true, "Outputs": true}

// templateRefs parses a prompt template and returns the steps it reads
// through .Steps.<id>. Only .Input and .Steps are allowed at the top level,
// and ranges may nest at most maxRangeDepth deep.
func templateRefs(name, text string) ([]stepRef, error) {
	t, err := parseTemplate(name, text)
	if err != nil {
		return nil, fmt.Errorf("template: %s", strings.TrimPrefix(err.Error(), "template: "))
	}
	if t == nil {
		return nil, nil
	}
	if err := checkRangeDepth(t.Template); err != nil {
		return nil, err
	}
	return parsedRefs(t)
}

// parsedRefs walks a parsed template (nil has none) for .Steps.<id>.
func parsedRefs(t *Template) ([]stepRef, error) {
	if t == nil {
		return nil, nil
	}
	var refs []stepRef
	var problem error
	top := func(ident []string) {
		switch {
		case len(ident) >= 1 && (ident[0] == "Input" || itemFields[ident[0]]):
		case len(ident) >= 2 && ident[0] == "Steps":
			r := stepRef{step: ident[1]}
			if len(ident) >= 3 {
				r.field = ident[2]
				if r.field == "JSON" && len(ident) > 3 {
					r.path = ident[3:]
				}
				if !stepFields[r.field] {
					problem = fmt.Errorf("template: .Steps.%s.%s is not available (a step has .Output, .JSON, .Degraded and .Missing; a map step .Outputs too)", r.step, r.field)
				}
			}
			refs = append(refs, r)
		default:
			problem = fmt.Errorf("template: .%s is not available (use .Input.<key>, .Steps.<id>.Output or .Steps.<id>.JSON.<field>)", strings.Join(ident, "."))
		}
	}
	walkTopFields(t.Root, func(ident []string) {
		if problem == nil {
			top(ident)
		}
	}, func(parse.Node) { problem = fmt.Errorf("template: {{template}} is not allowed") })
	return refs, problem
}

// walkTopFields calls top with every field path the template tree n reads
// from the top level: .A.B outside a range or with body (inside one, dot
// is its element) and $.A.B anywhere; and tmpl (if not nil) at each
// {{template}} node.
func walkTopFields(n parse.Node, top func(ident []string), tmpl func(parse.Node)) {
	inner := 0
	var walk func(parse.Node)
	walk = func(n parse.Node) {
		switch n := n.(type) {
		case *parse.ListNode:
			if n != nil {
				for _, c := range n.Nodes {
					walk(c)
				}
			}
		case *parse.ActionNode:
			walk(n.Pipe)
		case *parse.PipeNode:
			if n != nil {
				for _, c := range n.Cmds {
					walk(c)
				}
			}
		case *parse.CommandNode:
			for _, a := range n.Args {
				walk(a)
			}
		case *parse.IfNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.RangeNode:
			walk(n.Pipe)
			inner++
			walk(n.List)
			inner--
			walk(n.ElseList)
		case *parse.WithNode:
			walk(n.Pipe)
			inner++
			walk(n.List)
			inner--
			walk(n.ElseList)
		case *parse.VariableNode:
			if len(n.Ident) > 1 && n.Ident[0] == "$" {
				top(n.Ident[1:])
			}
		case *parse.FieldNode:
			if inner == 0 {
				top(n.Ident)
			}
		case *parse.TemplateNode:
			if tmpl != nil {
				tmpl(n)
			}
		}
	}
	walk(n)
}
