package spec

import (
	"fmt"
	"strconv"
	"text/template"
	"text/template/parse"
)

// boundTemplate rewrites a freshly parsed template so that its renders
// count their work, without changing what they render or how they fail:
//
//   - {{range PIPE}} becomes {{range WEIGHT | range COMPARED (PIPE)}}: the
//     function range charges the range's items × the operations of its
//     body (WEIGHT, and COMPARED data arguments of eq, ne, lt, le, gt, ge
//     and index keys, which cost an operation per KiB of the longest string
//     in the render's data) and hands PIPE's value on as is. PIPE is
//     evaluated last, as before, so an error in it or a range over
//     something that cannot be ranged reads as it did.
//   - if the template calls templates ({{template}}, which the submit check
//     refuses), every template starts with {{if WEIGHT | template COMPARED}}
//     {{end}}, charging each call as an iteration, so recursion is bounded
//     too.
//
// It reports whether renders need the budget's functions: the template
// ranges, calls templates or calls a function that makes text.
func boundTemplate(t *template.Template) bool {
	bounded, calls := false, false
	for _, x := range t.Templates() {
		if x.Tree == nil || x.Root == nil {
			continue
		}
		walkNodes(x.Root, func(n parse.Node) {
			switch n := n.(type) {
			case *parse.IdentifierNode:
				bounded = bounded || textFuncs[n.Ident]
			case *parse.TemplateNode:
				calls = true
			}
		})
		bounded = bindRanges(x.Tree, x.Root) || bounded
	}
	if !calls {
		return bounded
	}
	for _, x := range t.Templates() {
		if x.Tree == nil || x.Root == nil {
			continue
		}
		pos := x.Root.Position()
		w, compared := weight(x.Root)
		charge := &parse.IfNode{BranchNode: parse.BranchNode{NodeType: parse.NodeIf, Pos: pos,
			Pipe: chargePipe(x.Tree, pos, 1+w, compared, nil, templateFunc),
			List: &parse.ListNode{NodeType: parse.NodeList, Pos: pos}}}
		x.Root.Nodes = append([]parse.Node{charge}, x.Root.Nodes...)
	}
	return true
}

// textFuncs are the builtins that make text, replaced for each render by
// ones that count it (rendertext.go).
var textFuncs = map[string]bool{"print": true, "printf": true, "println": true, "html": true, "js": true, "urlquery": true}

// compareFuncs are the builtins whose work grows with the strings they are
// given, and the first of their arguments that can be such a string (the
// container given to index is not read through, its keys are hashed).
var compareFuncs = map[string]int{"eq": 1, "ne": 1, "lt": 1, "le": 1, "gt": 1, "ge": 1, "index": 2}

// compared counts the arguments of a call to one of compareFuncs that come
// from the data (literals are the template's own text), with the value
// piped into it if final.
func compared(c *parse.CommandNode, final bool) int {
	if len(c.Args) == 0 {
		return 0
	}
	id, ok := c.Args[0].(*parse.IdentifierNode)
	if !ok || compareFuncs[id.Ident] == 0 {
		return 0
	}
	n := 0
	if final {
		n++
	}
	for i, a := range c.Args {
		switch a.(type) {
		case *parse.FieldNode, *parse.VariableNode, *parse.ChainNode, *parse.PipeNode, *parse.DotNode:
			if i >= compareFuncs[id.Ident] {
				n++
			}
		}
	}
	return n
}

// walkNodes calls visit for n and every node under it, parents first.
func walkNodes(n parse.Node, visit func(parse.Node)) {
	switch n := n.(type) {
	case nil:
		return
	case *parse.ListNode:
		if n == nil {
			return
		}
		visit(n)
		for _, c := range n.Nodes {
			walkNodes(c, visit)
		}
		return
	case *parse.PipeNode:
		if n == nil {
			return
		}
		visit(n)
		for _, c := range n.Cmds {
			walkNodes(c, visit)
		}
		return
	}
	visit(n)
	switch n := n.(type) {
	case *parse.ActionNode:
		walkNodes(n.Pipe, visit)
	case *parse.CommandNode:
		for _, a := range n.Args {
			walkNodes(a, visit)
		}
	case *parse.ChainNode:
		walkNodes(n.Node, visit)
	case *parse.IfNode:
		walkBranch(&n.BranchNode, visit)
	case *parse.WithNode:
		walkBranch(&n.BranchNode, visit)
	case *parse.RangeNode:
		walkBranch(&n.BranchNode, visit)
	case *parse.TemplateNode:
		walkNodes(n.Pipe, visit)
	}
}

func walkBranch(b *parse.BranchNode, visit func(parse.Node)) {
	walkNodes(b.Pipe, visit)
	walkNodes(b.List, visit)
	walkNodes(b.ElseList, visit)
}

// chargePipe is the pipeline `W | fn COMPARED` or, with inner,
// `W | fn COMPARED (inner)`: inner is evaluated last.
func chargePipe(tree *parse.Tree, pos parse.Pos, w, compared int, inner *parse.PipeNode, fn string) *parse.PipeNode {
	number := func(n int) *parse.NumberNode {
		return &parse.NumberNode{NodeType: parse.NodeNumber, Pos: pos, IsInt: true, Int64: int64(n), Text: strconv.Itoa(n)}
	}
	args := []parse.Node{parse.NewIdentifier(fn).SetTree(tree).SetPos(pos), number(compared)}
	if inner != nil {
		args = append(args, inner)
	}
	return &parse.PipeNode{NodeType: parse.NodePipe, Pos: pos, Cmds: []*parse.CommandNode{
		{NodeType: parse.NodeCommand, Pos: pos, Args: []parse.Node{number(w)}},
		{NodeType: parse.NodeCommand, Pos: pos, Args: args},
	}}
}

// bindRanges rewrites every range in n (see boundTemplate) and reports
// whether there was one.
func bindRanges(tree *parse.Tree, n parse.Node) bool {
	found := false
	switch n := n.(type) {
	case *parse.ListNode:
		if n != nil {
			for _, c := range n.Nodes {
				found = bindRanges(tree, c) || found
			}
		}
	case *parse.IfNode:
		found = bindRanges(tree, n.List) || found
		found = bindRanges(tree, n.ElseList) || found
	case *parse.WithNode:
		found = bindRanges(tree, n.List) || found
		found = bindRanges(tree, n.ElseList) || found
	case *parse.RangeNode:
		p := n.Pipe
		inner := &parse.PipeNode{NodeType: parse.NodePipe, Pos: p.Pos, Line: p.Line, Cmds: p.Cmds}
		w, compared := weight(n.List)
		charged := chargePipe(tree, p.Pos, 1+w, compared, inner, rangeFunc)
		p.Cmds = charged.Cmds // the declarations ($i, $v :=) stay
		bindRanges(tree, n.List)
		bindRanges(tree, n.ElseList)
		found = true
	}
	return found
}

// weight counts the operations one pass over n does at most, and the data
// arguments of compareFuncs it evaluates, leaving out the bodies of nested
// ranges (they charge for themselves when they run). Every node counts one;
// a field or map lookup two; printing three; a function call seven.
func weight(n parse.Node) (w, compares int) {
	var count func(parse.Node)
	count = func(n parse.Node) {
		switch n := n.(type) {
		case nil:
			return
		case *parse.ListNode:
			if n == nil {
				return
			}
			for _, c := range n.Nodes {
				count(c)
			}
		case *parse.ActionNode: // printing
			w += 2
			count(n.Pipe)
		case *parse.PipeNode:
			if n == nil {
				return
			}
			w += len(n.Decl)
			for i, c := range n.Cmds {
				compares += compared(c, i > 0)
				count(c)
			}
		case *parse.CommandNode:
			for _, a := range n.Args {
				count(a)
			}
		case *parse.IfNode:
			count(n.Pipe)
			count(n.List)
			count(n.ElseList)
		case *parse.WithNode:
			count(n.Pipe)
			count(n.List)
			count(n.ElseList)
		case *parse.RangeNode:
			count(n.Pipe)
			count(n.ElseList)
		case *parse.TemplateNode:
			count(n.Pipe)
		case *parse.FieldNode: // each field or map lookup
			w += 2*len(n.Ident) - 1
		case *parse.VariableNode:
			w += 2*len(n.Ident) - 2
		case *parse.ChainNode:
			count(n.Node)
			w += 2 * len(n.Field)
		case *parse.IdentifierNode: // a function call, through reflect
			w += 6
		}
		w++
	}
	count(n)
	return w, compares
}

// checkRangeDepth refuses a template whose ranges nest deeper than
// maxRangeDepth (else branches run once and do not count), naming the
// deepest range.
func checkRangeDepth(t *template.Template) error {
	if t == nil || t.Tree == nil {
		return nil
	}
	var deepest *parse.RangeNode
	most := 0
	var walk func(parse.Node, int)
	walk = func(n parse.Node, depth int) {
		switch n := n.(type) {
		case *parse.ListNode:
			if n != nil {
				for _, c := range n.Nodes {
					walk(c, depth)
				}
			}
		case *parse.IfNode:
			walk(n.List, depth)
			walk(n.ElseList, depth)
		case *parse.WithNode:
			walk(n.List, depth)
			walk(n.ElseList, depth)
		case *parse.RangeNode:
			if depth+1 > most {
				most, deepest = depth+1, n
			}
			walk(n.List, depth+1)
			walk(n.ElseList, depth)
		}
	}
	walk(t.Root, 0)
	if most <= maxRangeDepth {
		return nil
	}
	loc, _ := t.ErrorContext(deepest)
	return fmt.Errorf("template: %s: range nested %d deep, over the limit of %d (loops multiply: 50 items 6 deep is 15,625,000,000 iterations)", loc, most, maxRangeDepth)
}
