package agentq_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// wiring are the constructors of the running parts (Redis clients, the
// router and its shared state, the providers, metrics, the producer
// client), by import path: the default name the package is used by, then
// the functions.
var wiring = map[string]struct {
	name  string
	funcs []string
}{
	"github.com/redis/go-redis/v9": {"redis", []string{"NewUniversalClient", "NewClient", "NewClusterClient", "NewFailoverClient", "NewFailoverClusterClient", "NewRing"}},
	module + "/llmclient":          {"llmclient", []string{"NewProvider"}},
	module + "/internal/router":    {"router", []string{"NewRouter", "NewKeyPools", "NewBreakers", "NewHealth"}},
	module + "/internal/store":     {"store", []string{"NewKeyState", "NewBreakers", "NewHealthStats", "NewLimits"}},
	module + "/internal/metrics":   {"metrics", []string{"New"}},
	module + "/internal/engine":    {"engine", []string{"NewClient"}},
}

// wiringFree are the packages that may call them: the builder, and the
// packages that define them (a router builds its local defaults).
var wiringFree = map[string]bool{"internal/app": true, "llmclient": true, "internal/router": true, "internal/store": true, "internal/metrics": true, "internal/engine": true}

// The worker, the dashboard, enqueue and the SDK go through the one
// builder (internal/app's Build): no other package they link constructs a
// Redis client, a provider, the router or its shared state, metrics or the
// producer client.
func TestOnlyTheBuilderWiresTheParts(t *testing.T) {
	seen := map[string]bool{}
	queue := []string{"cmd/worker", "cmd/dashboard", "cmd/enqueue", "."}
	for _, q := range queue {
		seen[q] = true
	}
	for len(queue) > 0 {
		dir := queue[0]
		queue = queue[1:]
		for f, paths := range imports(t, dir) {
			for _, path := range paths {
				if rel, ok := strings.CutPrefix(path, module+"/"); ok && !seen[rel] {
					seen[rel] = true
					queue = append(queue, rel)
				}
			}
			if !wiringFree[dir] {
				for _, use := range wiringUses(t, f) {
					t.Errorf("%s: %s builds a running part itself: only internal/app does (app.Build and its parts)", use, filepath.ToSlash(dir))
				}
			}
		}
	}
	for _, must := range []string{"internal/app", "internal/worker", "internal/dashcli", "internal/dashboard"} {
		if !seen[must] {
			t.Errorf("the entry points do not reach %s (the walk is broken)", must)
		}
	}
}

// wiringUses lists "file:line pkg.Func" for each use of a wiring
// constructor in file f.
func wiringUses(t *testing.T, f string) []string {
	t.Helper()
	fset := token.NewFileSet()
	af, err := parser.ParseFile(fset, f, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	banned := map[string]map[string]bool{} // local name → funcs
	for _, im := range af.Imports {
		w, ok := wiring[strings.Trim(im.Path.Value, `"`)]
		if !ok {
			continue
		}
		name := w.name
		if im.Name != nil {
			name = im.Name.Name
		}
		banned[name] = map[string]bool{}
		for _, fn := range w.funcs {
			banned[name][fn] = true
		}
	}
	var out []string
	ast.Inspect(af, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok && banned[x.Name][sel.Sel.Name] {
			out = append(out, fset.Position(sel.Pos()).String()+" "+x.Name+"."+sel.Sel.Name)
		}
		return true
	})
	return out
}
