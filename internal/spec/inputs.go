package spec

import (
	"sort"
	"text/template/parse"
)

// InputKeys says which keys of .Input the spec's templates read (prompts,
// system prompts, code steps' with:, child workflows' input, approval
// messages, signal matches, for_each, concurrency keys). all is true when
// a template reads .Input as a whole (ranges over it, prints it, passes it
// on), so any key may matter.
func (s *Spec) InputKeys() (keys []string, all bool) {
	seen := map[string]bool{}
	visit := func(n parse.Node) {
		f, ok := n.(*parse.FieldNode)
		if !ok || len(f.Ident) == 0 || f.Ident[0] != "Input" {
			return
		}
		if len(f.Ident) == 1 {
			all = true
			return
		}
		seen[f.Ident[1]] = true
	}
	keyT := func(c *ConcurrencySpec) *Template {
		if c == nil {
			return nil
		}
		return c.keyT
	}
	for i := range s.Steps {
		st := &s.Steps[i]
		ts := []*Template{st.promptT, st.systemT, st.messageT, st.matchT, ForEachTemplate(st), keyT(st.Concurrency)}
		if i == 0 {
			ts = append(ts, keyT(s.Concurrency))
		}
		for _, wt := range st.withT {
			ts = append(ts, wt.t)
		}
		for _, t := range ts {
			if t == nil || t.Tree == nil {
				continue
			}
			for _, tmpl := range t.Templates() {
				if tmpl.Tree != nil {
					walkAll(tmpl.Tree.Root, visit)
				}
			}
		}
	}
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys, all
}

// walkAll visits every node of a template tree.
func walkAll(n parse.Node, visit func(parse.Node)) {
	if n == nil {
		return
	}
	visit(n)
	switch n := n.(type) {
	case *parse.ListNode:
		if n != nil {
			for _, c := range n.Nodes {
				walkAll(c, visit)
			}
		}
	case *parse.ActionNode:
		walkAll(n.Pipe, visit)
	case *parse.PipeNode:
		if n != nil {
			for _, c := range n.Cmds {
				walkAll(c, visit)
			}
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			walkAll(a, visit)
		}
	case *parse.IfNode:
		walkAll(n.Pipe, visit)
		walkAll(n.List, visit)
		walkAll(n.ElseList, visit)
	case *parse.RangeNode:
		walkAll(n.Pipe, visit)
		walkAll(n.List, visit)
		walkAll(n.ElseList, visit)
	case *parse.WithNode:
		walkAll(n.Pipe, visit)
		walkAll(n.List, visit)
		walkAll(n.ElseList, visit)
	}
}
