package client_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docs/handlers.md lists the SDK client's methods (agentq.Client, which
// wraps this package's Client): each exported method it has is named there,
// and each name the list gives is a method it has.
func TestHandlersDocListsTheSDKClientsMethods(t *testing.T) {
	names, err := filepath.Glob("../../*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if f.Name.Name == "agentq" {
			files = append(files, f)
		}
	}
	methods := map[string]bool{}
	for _, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || !fn.Name.IsExported() {
				continue
			}
			if star, ok := fn.Recv.List[0].Type.(*ast.StarExpr); ok {
				if id, ok := star.X.(*ast.Ident); ok && id.Name == "Client" {
					methods[fn.Name.Name] = true
				}
			}
		}
	}
	if len(methods) < 10 {
		t.Fatalf("found only %d methods of agentq.Client", len(methods))
	}
	data, err := os.ReadFile("../../docs/handlers.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Join(strings.Fields(string(data)), " ")
	for m := range methods {
		if !strings.Contains(doc, "`"+m+"`") {
			t.Errorf("docs/handlers.md does not name agentq.Client's method %s", m)
		}
	}
	// the list: from "Both have the same methods" to "These are the"
	_, list, ok := strings.Cut(doc, "Both have the same methods")
	if !ok {
		t.Fatal(`docs/handlers.md has no list of the client's methods ("Both have the same methods")`)
	}
	list, _, _ = strings.Cut(list, "These are the")
	for _, part := range strings.Split(list, "`")[1:] {
		name := strings.TrimSuffix(part, "(")
		if name == "" || strings.ContainsAny(name, " ,.()/:") || strings.HasPrefix(name, "With") {
			continue // text between names, or a submit option
		}
		if !methods[name] {
			t.Errorf("docs/handlers.md lists %s, which agentq.Client does not have", name)
		}
	}
}
