package agentq_test

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var updateAPI = flag.Bool("update-api", false, "rewrite api/*.txt from the code (go test . -run TestPublicAPI -update-api)")

// maxOutsideRoot bounds the names the public packages other than the root
// export (exported top-level names, plus exported methods of exported
// types): the user's surface is the root package and agentqtest, the rest
// is kept deliberate and small. Raise it only with the reason in the
// commit.
const maxOutsideRoot = 150

// TestPublicAPI compares every public package's exported surface with its
// listing in api/ (one line per exported name, field and method, as Go's
// own api/ files): a change of the public surface is a deliberate diff of
// api/. Regenerate with go test . -run TestPublicAPI -update-api.
func TestPublicAPI(t *testing.T) {
	pkgs := publicPackages(t)
	outside := 0
	want := map[string]bool{}
	for _, dir := range pkgs {
		lines, counted := apiOf(t, dir)
		if dir != "." {
			outside += counted
		}
		name := "agentq"
		if dir != "." {
			name = strings.ReplaceAll(dir, "/", "-")
		}
		file := filepath.Join("api", name+".txt")
		want[file] = true
		got := strings.Join(lines, "\n") + "\n"
		if *updateAPI {
			if err := os.MkdirAll("api", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		old, err := os.ReadFile(file)
		if err != nil {
			t.Errorf("package %s has no listing %s (go test . -run TestPublicAPI -update-api writes it): %v", dir, file, err)
			continue
		}
		if added, removed := diffLines(string(old), got); len(added)+len(removed) > 0 {
			t.Errorf("package %s's public surface differs from %s (update it with -update-api if the change is meant):\n+ %s\n- %s",
				dir, file, strings.Join(added, "\n+ "), strings.Join(removed, "\n- "))
		}
	}
	listed, _ := filepath.Glob(filepath.Join("api", "*.txt"))
	for _, f := range listed {
		if !want[f] {
			if *updateAPI {
				_ = os.Remove(f)
			} else {
				t.Errorf("%s lists a package that is not public any more: remove it", f)
			}
		}
	}
	t.Logf("public packages other than the root export %d names", outside)
	if outside > maxOutsideRoot {
		t.Errorf("the public packages other than the root export %d names, over %d: move what users need to the root package and the rest under internal/", outside, maxOutsideRoot)
	}
}

// publicPackages are the module's directories with non-test Go files,
// leaving out internal/, cmd/, bench/, examples/ and testdata.
func publicPackages(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			base := d.Name()
			if path != "." && (base == "internal" || base == "cmd" || base == "bench" || base == "examples" || base == "testdata" || base == "api" ||
				strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			if dir := filepath.ToSlash(filepath.Dir(path)); !slices.Contains(out, dir) {
				out = append(out, dir)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// apiOf lists the exported surface of the package in dir, sorted, and
// counts its names: exported top-level names and exported methods of
// exported types (fields and interface methods are listed, not counted).
func apiOf(t *testing.T, dir string) (lines []string, counted int) {
	t.Helper()
	fset := token.NewFileSet()
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	pkg := ""
	expr := func(n ast.Node) string {
		var b bytes.Buffer
		_ = printer.Fprint(&b, fset, n)
		return strings.Join(strings.Fields(b.String()), " ")
	}
	add := func(count bool, format string, args ...any) {
		lines = append(lines, fmt.Sprintf("pkg %s, ", pkg)+fmt.Sprintf(format, args...))
		if count {
			counted++
		}
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		pkg = af.Name.Name
		imported := importsOf(af)
		for _, decl := range af.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					add(true, "func %s%s", d.Name.Name, strings.TrimPrefix(expr(d.Type), "func"))
					continue
				}
				recv := expr(d.Recv.List[0].Type)
				if !ast.IsExported(strings.TrimLeft(strings.SplitN(recv, "[", 2)[0], "*")) {
					continue
				}
				add(true, "method (%s) %s%s", recv, d.Name.Name, strings.TrimPrefix(expr(d.Type), "func"))
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						typeLines(s, expr, add)
						// an alias of a module type: its fields and methods
						// are this package's surface too
						if sel, ok := s.Type.(*ast.SelectorExpr); ok && s.Assign.IsValid() {
							if dir, ok := imported[expr(sel.X)]; ok {
								for _, m := range members(t, dir, sel.Sel.Name, 0) {
									add(false, "type %s = %s, %s", s.Name.Name, expr(sel), m)
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								add(true, "%s %s", d.Tok, n.Name)
							}
						}
					}
				}
			}
		}
	}
	slices.Sort(lines)
	return lines, counted
}

// typeLines lists a type, and its exported fields or interface methods.
func typeLines(s *ast.TypeSpec, expr func(ast.Node) string, add func(bool, string, ...any)) {
	name := s.Name.Name
	if s.TypeParams != nil {
		name += expr(s.TypeParams)
	}
	switch ty := s.Type.(type) {
	case *ast.StructType:
		add(true, "type %s struct", name)
		for _, f := range ty.Fields.List {
			for _, n := range f.Names {
				if n.IsExported() {
					add(false, "type %s struct, %s %s", s.Name.Name, n.Name, expr(f.Type))
				}
			}
			if len(f.Names) == 0 { // embedded
				add(false, "type %s struct, embedded %s", s.Name.Name, expr(f.Type))
			}
		}
	case *ast.InterfaceType:
		add(true, "type %s interface", name)
		for _, m := range ty.Methods.List {
			for _, n := range m.Names {
				if n.IsExported() {
					add(false, "type %s interface, %s%s", s.Name.Name, n.Name, strings.TrimPrefix(expr(m.Type), "func"))
				}
			}
			if len(m.Names) == 0 {
				add(false, "type %s interface, embedded %s", s.Name.Name, expr(m.Type))
			}
		}
	default:
		if s.Assign.IsValid() {
			add(true, "type %s = %s", name, expr(s.Type))
		} else {
			add(true, "type %s %s", name, expr(s.Type))
		}
	}
}

// diffLines is what b has that a lacks, and what a has that b lacks.
func diffLines(a, b string) (added, removed []string) {
	as, bs := map[string]bool{}, map[string]bool{}
	for _, l := range strings.Split(a, "\n") {
		as[l] = true
	}
	for _, l := range strings.Split(b, "\n") {
		bs[l] = true
	}
	for l := range bs {
		if !as[l] {
			added = append(added, l)
		}
	}
	for l := range as {
		if !bs[l] {
			removed = append(removed, l)
		}
	}
	slices.Sort(added)
	slices.Sort(removed)
	return added, removed
}

// importsOf maps a file's import names to the module directories they
// name (module packages only).
func importsOf(af *ast.File) map[string]string {
	out := map[string]string{}
	for _, im := range af.Imports {
		path := strings.Trim(im.Path.Value, `"`)
		rel, ok := strings.CutPrefix(path, module+"/")
		if !ok {
			continue
		}
		name := filepath.Base(rel)
		if im.Name != nil {
			name = im.Name.Name
		}
		out[name] = rel
	}
	return out
}

// members lists the exported fields and methods of type name in the
// package in dir, following aliases of module types.
func members(t *testing.T, dir, name string, depth int) []string {
	t.Helper()
	if depth > 4 {
		return nil
	}
	fset := token.NewFileSet()
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	expr := func(n ast.Node) string {
		var b bytes.Buffer
		_ = printer.Fprint(&b, fset, n)
		return strings.Join(strings.Fields(b.String()), " ")
	}
	var out []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range af.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil || !d.Name.IsExported() {
					continue
				}
				if recv := expr(d.Recv.List[0].Type); strings.TrimLeft(recv, "*") == name {
					out = append(out, fmt.Sprintf("method (%s) %s%s", strings.TrimSuffix(recv, name), d.Name.Name, strings.TrimPrefix(expr(d.Type), "func")))
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					s, ok := spec.(*ast.TypeSpec)
					if !ok || s.Name.Name != name {
						continue
					}
					switch ty := s.Type.(type) {
					case *ast.StructType:
						for _, fl := range ty.Fields.List {
							for _, n := range fl.Names {
								if n.IsExported() {
									out = append(out, fmt.Sprintf("field %s %s", n.Name, expr(fl.Type)))
								}
							}
							if len(fl.Names) == 0 {
								out = append(out, "embedded "+expr(fl.Type))
							}
						}
					case *ast.SelectorExpr:
						if d, ok := importsOf(af)[expr(ty.X)]; ok && s.Assign.IsValid() {
							out = append(out, members(t, d, ty.Sel.Name, depth+1)...)
						}
					}
				}
			}
		}
	}
	return out
}
