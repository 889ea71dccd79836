package docstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/scanner"
	"go/token"
	"go/types"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"

	"github.com/agentq/agentq/internal/gobuild"
)

// GoImports are the packages a Go block uses without importing them, by
// the name it uses.
var GoImports = map[string]string{
	"agentq":     "github.com/agentq/agentq",
	"agentqtest": "github.com/agentq/agentq/agentqtest",
	"llmclient":  "github.com/agentq/agentq/llmclient",
	"context":    "context",
	"errors":     "errors",
	"fmt":        "fmt",
	"http":       "net/http",
	"json":       "encoding/json",
	"log":        "log",
	"os":         "os",
	"slog":       "log/slog",
	"strings":    "strings",
	"time":       "time",
}

// GoPrelude declares the names every Go block may use without declaring
// them; a block's "docs-test: go" comment declares more.
const GoPrelude = `var (
	ctx    context.Context
	c      *agentq.Client // a producer: agentq.NewClient
	client *agentq.Client
	w      *agentq.Worker // agentq.NewWorker
	logger *slog.Logger
	spec   *agentq.Spec // client.Parse
	id     string       // a workflow's id
)`

// segment maps lines of a generated file back to the Markdown file.
type segment struct {
	from, n int // lines [from, from+n) of the generated file (1-based)
	line    int // the file's line of its first line
	exact   bool
}

// goSource is a Go block as the file it is checked as: a block that
// starts with package is a file; one that parses as declarations (funcs,
// types…) is put at the top level; any other is statements, put in a
// function that returns an error (a block may return err). The block
// gets GoImports, GoPrelude and its own declarations.
type goSource struct {
	src      string
	segments []segment
	snippet  bool // not a whole file: unused variables and imports are allowed
}

func newGoSource(b Block) goSource {
	body := b.Text()
	if first := firstCode(b.Body); strings.HasPrefix(first, "package ") {
		return goSource{src: body, segments: []segment{{from: 1, n: len(b.Body), line: b.BodyLine(0), exact: true}}}
	}
	var g goSource
	g.snippet = true
	var sb strings.Builder
	lines := 0
	add := func(text string, line int, exact bool) {
		n := strings.Count(text, "\n")
		if line > 0 {
			g.segments = append(g.segments, segment{from: lines + 1, n: n, line: line, exact: exact})
		}
		sb.WriteString(text)
		lines += n
	}
	var head strings.Builder
	head.WriteString("package snippet\n\nimport (\n")
	for _, name := range slices.Sorted(maps.Keys(GoImports)) {
		fmt.Fprintf(&head, "\t%s %q\n", name, GoImports[name])
	}
	head.WriteString(")\n\n" + GoPrelude + "\n\n")
	add(head.String(), 0, false)
	for _, d := range b.Directives {
		if d.Kind == Go && d.Decls != "" {
			add(d.Decls+"\n\n", d.Line, false)
		}
	}
	_, err := parser.ParseFile(token.NewFileSet(), "", sb.String()+body, parser.SkipObjectResolution)
	first := firstCode(b.Body)
	if err == nil || strings.HasPrefix(first, "func ") || strings.HasPrefix(first, "type ") || strings.HasPrefix(first, "import ") {
		add(body, b.BodyLine(0), true)
		g.src = sb.String()
		return g
	}
	add("func _() error {\n", 0, false)
	add(body, b.BodyLine(0), true)
	add("\treturn nil\n}\n", 0, false)
	g.src = sb.String()
	return g
}

// firstCode is the first line that is neither blank nor a comment.
func firstCode(lines []string) string {
	for _, l := range lines {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "//") {
			return t
		}
	}
	return ""
}

// where maps a position of the generated file to file:line.
func (g goSource) where(file string, pos token.Position) string {
	for _, s := range g.segments {
		if pos.Line >= s.from && pos.Line < s.from+s.n {
			if s.exact {
				return fmt.Sprintf("%s:%d", file, s.line+pos.Line-s.from)
			}
			return fmt.Sprintf("%s:%d (its docs-test: go comment)", file, s.line)
		}
	}
	return fmt.Sprintf("%s (the code the docs test wraps it in, line %d)", file, pos.Line)
}

// ExportData builds the packages Go blocks import, with their
// dependencies, and returns where the compiler's export data of each is
// (go list -export, run in dir, the module's root).
func ExportData(ctx context.Context, dir string) (map[string]string, error) {
	args := []string{"list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}"}
	for _, name := range slices.Sorted(maps.Keys(GoImports)) {
		args = append(args, GoImports[name])
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir, cmd.Env = dir, gobuild.Env()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -export: %w: %s", err, stderr.String())
	}
	export := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, file, _ := strings.Cut(l, "\t")
		if file != "" {
			export[path] = file
		}
	}
	return export, nil
}

// GoChecker type-checks Go blocks against export data (ExportData); it
// is not safe for concurrent use.
type GoChecker struct {
	fset *token.FileSet
	imp  types.Importer
}

// NewGoChecker reads the packages from export.
func NewGoChecker(export map[string]string) *GoChecker {
	fset := token.NewFileSet()
	lookup := func(path string) (io.ReadCloser, error) {
		f, ok := export[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s (not a dependency of GoImports' packages)", path)
		}
		return os.Open(f)
	}
	return &GoChecker{fset: fset, imp: importer.ForCompiler(fset, "gc", lookup)}
}

// Check compiles a Go block (parse and type-check, as the compiler's
// front end does) and returns its errors, each naming file:line. In a
// snippet (not a whole file) a variable or import left unused is no
// error: the snippet is part of a function that goes on.
func (c *GoChecker) Check(b Block) []string {
	g := newGoSource(b)
	name := strings.NewReplacer("/", "_", ".", "_").Replace(b.Where())
	f, err := parser.ParseFile(c.fset, name+".go", g.src, parser.SkipObjectResolution)
	if err != nil {
		var list scanner.ErrorList
		if !errors.As(err, &list) {
			return []string{fmt.Sprintf("%s: does not parse: %v", b.Where(), err)}
		}
		// the first: what follows it is often the parser's confusion
		return []string{fmt.Sprintf("%s: does not parse: %s", g.where(b.File, list[0].Pos), list[0].Msg)}
	}
	var errs []string
	conf := types.Config{
		Importer: c.imp,
		Error: func(err error) {
			te, ok := err.(types.Error)
			if !ok {
				errs = append(errs, fmt.Sprintf("%s: %v", b.Where(), err))
				return
			}
			if g.snippet && (strings.Contains(te.Msg, "declared and not used") || strings.Contains(te.Msg, "imported and not used") || strings.Contains(te.Msg, "imported as")) {
				return
			}
			errs = append(errs, fmt.Sprintf("%s: %s", g.where(b.File, c.fset.Position(te.Pos)), te.Msg))
		},
	}
	_, _ = conf.Check("snippet", c.fset, []*ast.File{f}, nil)
	return errs
}
