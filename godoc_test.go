package agentq_test

import (
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// definedTypes are the types whose methods users call (a step's function
// on its Step and LLM, a producer on its Client, …): each is a type of
// the package, never an alias of an internal one, so that go doc lists its
// methods, each with its doc comment.
var definedTypes = map[string][]string{
	".":          {"Step", "StepFunc", "LLM", "ToolFunc", "Client", "Worker", "Config", "Router"},
	"agentqtest": {"Step", "Model", "Options"},
}

// selfExplaining are the methods an alias's doc comment need not name:
// what errors, encoders and printers call.
var selfExplaining = []string{"Error", "Unwrap", "MarshalJSON", "UnmarshalJSON", "String"}

// The SDK documents itself: go doc shows, for every exported name of the
// root package and agentqtest, its doc comment; a type users call methods
// on is a type of the package (go doc lists its methods); an alias of an
// internal type (go doc shows only the alias's own comment, never the
// internal type's fields or methods) names every method of it in its
// comment.
func TestTheSDKDocumentsItself(t *testing.T) {
	for dir, defined := range definedTypes {
		fset := token.NewFileSet()
		files, pkg := parseDir(t, fset, dir)
		dp, err := doc.NewFromFiles(fset, files, module+"/"+dir)
		if err != nil {
			t.Fatal(err)
		}
		var aliases = map[string]*ast.TypeSpec{}
		imported := map[string]string{}
		for _, f := range files {
			for k, v := range importsOf(f) {
				imported[k] = v
			}
			for _, d := range f.Decls {
				if g, ok := d.(*ast.GenDecl); ok {
					for _, s := range g.Specs {
						if ts, ok := s.(*ast.TypeSpec); ok && ts.Assign.IsValid() {
							aliases[ts.Name.Name] = ts
						}
					}
				}
			}
		}
		undocumented := func(kind, name, text string) {
			if strings.TrimSpace(text) == "" {
				t.Errorf("%s: %s %s has no doc comment (go doc %s.%s shows nothing)", pkg, kind, name, pkg, name)
			}
		}
		for _, f := range dp.Funcs {
			undocumented("func", f.Name, f.Doc)
		}
		for _, v := range append(slices.Clone(dp.Vars), dp.Consts...) {
			for _, n := range v.Names {
				if ast.IsExported(n) && strings.TrimSpace(v.Doc) == "" && !specDocumented(v.Decl, n) {
					t.Errorf("%s: %s has no doc comment (nor its group)", pkg, n)
				}
			}
		}
		for _, ty := range dp.Types {
			undocumented("type", ty.Name, ty.Doc)
			for _, f := range ty.Funcs {
				undocumented("func", f.Name, f.Doc)
			}
			for _, m := range ty.Methods {
				undocumented("method", ty.Name+"."+m.Name, m.Doc)
			}
			for _, v := range append(slices.Clone(ty.Vars), ty.Consts...) {
				for _, n := range v.Names {
					if ast.IsExported(n) && strings.TrimSpace(v.Doc) == "" && !specDocumented(v.Decl, n) {
						t.Errorf("%s: %s has no doc comment (nor its group)", pkg, n)
					}
				}
			}
			ts, alias := aliases[ty.Name]
			if slices.Contains(defined, ty.Name) && alias {
				t.Errorf("%s: %s is an alias (go doc lists none of its methods): make it a type of the package", pkg, ty.Name)
			}
			if !alias {
				continue
			}
			sel, ok := ts.Type.(*ast.SelectorExpr)
			if !ok {
				continue
			}
			target, ok := imported[sel.X.(*ast.Ident).Name]
			if !ok || !strings.HasPrefix(target, "internal/") {
				continue
			}
			for _, m := range members(t, target, sel.Sel.Name, 0) {
				name, ok := methodName(m)
				if !ok || slices.Contains(selfExplaining, name) {
					continue
				}
				if !regexp.MustCompile(`\b` + name + `\b`).MatchString(ty.Doc) {
					t.Errorf("%s: %s, an alias of %s.%s, does not name its method %s in its doc comment (go doc shows only the comment)", pkg, ty.Name, sel.X.(*ast.Ident).Name, sel.Sel.Name, name)
				}
			}
		}
		for _, want := range defined {
			if !slices.ContainsFunc(dp.Types, func(ty *doc.Type) bool { return ty.Name == want }) {
				t.Errorf("%s: no type %s (definedTypes names a type that moved)", pkg, want)
			}
		}
	}
}

// parseDir parses the package's non-test files with their comments.
func parseDir(t *testing.T, fset *token.FileSet, dir string) ([]*ast.File, string) {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	var files []*ast.File
	name := ""
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		name = f.Name.Name
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatalf("%s: no Go files", dir)
	}
	return files, name
}

// specDocumented says whether name's own spec in decl has a doc or line
// comment.
func specDocumented(decl *ast.GenDecl, name string) bool {
	for _, s := range decl.Specs {
		vs, ok := s.(*ast.ValueSpec)
		if !ok || !slices.ContainsFunc(vs.Names, func(n *ast.Ident) bool { return n.Name == name }) {
			continue
		}
		return vs.Doc.Text() != "" || vs.Comment.Text() != ""
	}
	return false
}

// methodName is the name of a members line's method.
func methodName(member string) (string, bool) {
	rest, ok := strings.CutPrefix(member, "method (")
	if !ok {
		return "", false
	}
	_, rest, _ = strings.Cut(rest, ") ")
	name, _, _ := strings.Cut(rest, "(")
	return name, true
}

// docNames are the names the docs give in the SDK's packages:
// agentq.Client, agentqtest.NewStep, … (a regular expression's matches).
var docNames = regexp.MustCompile(`\b(agentq|agentqtest)\.([A-Z][A-Za-z0-9_]*)`)

// Every agentq.X and agentqtest.X the docs (docs/*.md, README.md) name is
// a name of the package, and go doc shows what they say of it: a type the
// docs name that is an alias of another package's type of this module
// (llmclient's, an internal one's) names each method of it in its doc
// comment, since go doc shows only that comment.
func TestDocsNameWhatTheSDKHas(t *testing.T) {
	files, _ := filepath.Glob("docs/*.md")
	files = append(files, "README.md")
	named := map[string]map[string]string{"agentq": {}, "agentqtest": {}} // package → name → where
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			for _, m := range docNames.FindAllStringSubmatch(line, -1) {
				if _, ok := named[m[1]][m[2]]; !ok {
					named[m[1]][m[2]] = fmt.Sprintf("%s:%d", f, i+1)
				}
			}
		}
	}
	for pkg, dir := range map[string]string{"agentq": ".", "agentqtest": "agentqtest"} {
		fset := token.NewFileSet()
		files, _ := parseDir(t, fset, dir)
		dp, err := doc.NewFromFiles(fset, files, module+"/"+dir)
		if err != nil {
			t.Fatal(err)
		}
		has := map[string]*doc.Type{}
		values := func(vs []*doc.Value) {
			for _, v := range vs {
				for _, n := range v.Names {
					has[n] = nil
				}
			}
		}
		values(dp.Consts)
		values(dp.Vars)
		for _, f := range dp.Funcs {
			has[f.Name] = nil
		}
		for _, ty := range dp.Types {
			has[ty.Name] = ty
			values(ty.Consts)
			values(ty.Vars)
			for _, f := range ty.Funcs {
				has[f.Name] = nil
			}
		}
		aliases := map[string]*ast.SelectorExpr{}
		imported := map[string]string{}
		for _, f := range files {
			for k, v := range importsOf(f) {
				imported[k] = v
			}
			for _, d := range f.Decls {
				if g, ok := d.(*ast.GenDecl); ok {
					for _, s := range g.Specs {
						if ts, ok := s.(*ast.TypeSpec); ok && ts.Assign.IsValid() {
							if sel, ok := ts.Type.(*ast.SelectorExpr); ok {
								aliases[ts.Name.Name] = sel
							}
						}
					}
				}
			}
		}
		for _, name := range slices.Sorted(maps.Keys(named[pkg])) {
			where := named[pkg][name]
			ty, ok := has[name]
			if !ok {
				t.Errorf("%s: %s.%s: package %s has no such name", where, pkg, name, pkg)
				continue
			}
			sel, alias := aliases[name]
			if ty == nil || !alias {
				continue // a func, value or defined type: go doc shows its methods
			}
			target, ok := imported[sel.X.(*ast.Ident).Name]
			if !ok {
				continue // another module's type
			}
			for _, m := range members(t, target, sel.Sel.Name, 0) {
				method, ok := methodName(m)
				if !ok || slices.Contains(selfExplaining, method) {
					continue
				}
				if !regexp.MustCompile(`\b` + method + `\b`).MatchString(ty.Doc) {
					t.Errorf("%s: %s.%s, an alias of %s.%s, does not name its method %s in its doc comment (go doc %s.%s shows only the comment)",
						where, pkg, name, sel.X.(*ast.Ident).Name, sel.Sel.Name, method, pkg, name)
				}
			}
		}
	}
}
