package agentq_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentq/agentq"
	"github.com/agentq/agentq/internal/docstest"
	"github.com/agentq/agentq/internal/gobuild"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/redistest"
)

// docPage is a Markdown page and its code blocks.
type docPage struct {
	file   string
	blocks []docstest.Block
}

// docPages are the pages the docs test reads: docs/*.md and README.md.
func docPages(t *testing.T) []docPage {
	t.Helper()
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "README.md")
	var pages []docPage
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := docstest.Parse(f, data)
		if err != nil {
			t.Error(err)
		}
		pages = append(pages, docPage{file: f, blocks: blocks})
	}
	return pages
}

// notRunnable is the reason a block's docs-test comment gives for not
// running any of it ("" if none does).
func notRunnable(b docstest.Block) string {
	for _, d := range b.Directives {
		if d.Kind == docstest.NotRunnable && len(d.Programs) == 0 {
			return d.Reason
		}
	}
	return ""
}

// repoBinaries are the programs of this repository a doc runs by name,
// and their packages.
var repoBinaries = map[string]string{
	"enqueue":   "./cmd/enqueue",
	"worker":    "./cmd/worker",
	"dashboard": "./cmd/dashboard",
	"chaosllm":  "./cmd/chaosllm",
}

// servers are the binaries that run until stopped: a command that starts
// one runs in the background while the block's later commands run, and
// is stopped (SIGTERM) when the block ends.
var servers = map[string]bool{"worker": true, "dashboard": true, "chaosllm": true}

// runCommand is a command the test runs, as it runs it.
type runCommand struct {
	docstest.Command
	run string // the text sh runs: go run PKG replaced by PKG's binary
}

// runBlock is a shell block with the commands the test runs.
type runBlock struct {
	docstest.Block
	page     *docPage
	commands []runCommand
	setup    string
}

// plan sorts the docs' shell commands: each either runs (a program of
// this repository, by name or by go run), is a helm command that
// deploy's TestDocsHelmCommands renders (docs/deploy.md's), or is marked
// not runnable with a reason. Anything else is an error naming file:line,
// as is a docs-test comment that is about nothing in its block.
func plan(t *testing.T, pages []docPage) (blocks []runBlock, skipped []string, pkgs map[string]string) {
	t.Helper()
	pkgs = map[string]string{} // binary name → package
	for pi := range pages {
		p := &pages[pi]
		for _, b := range p.blocks {
			if b.Lang == "" || b.Lang == "text" {
				for i, l := range b.Body {
					if strings.HasPrefix(l, "$ ") {
						t.Errorf("%s:%d: a shell prompt in a %q block: make it a console block (the docs test runs it)", b.File, b.BodyLine(i), b.Lang)
					}
				}
			}
			for _, d := range b.Directives {
				switch d.Kind {
				case docstest.Setup:
					if _, ok := setups[d.Name]; !ok {
						t.Errorf("%s:%d: no setup %q (docs_setup_test.go has %v)", b.File, d.Line, d.Name, slices.Sorted(mapsKeys(setups)))
					}
					if !b.Shell() {
						t.Errorf("%s:%d: a setup before a %s block", b.File, d.Line, b.Lang)
					}
				case docstest.Go:
					if b.Lang != "go" {
						t.Errorf("%s:%d: Go declarations before a %s block", b.File, d.Line, b.Lang)
					}
				case docstest.File, docstest.Append:
					if b.Shell() || b.Lang == "go" {
						t.Errorf("%s:%d: a %s block written as a file", b.File, d.Line, b.Lang)
					}
				}
			}
			if !b.Shell() {
				continue
			}
			cmds, err := docstest.Commands(b)
			if err != nil {
				t.Error(err)
			}
			if reason := notRunnable(b); reason != "" {
				skipped = append(skipped, fmt.Sprintf("%s: %s", b.Where(), reason))
				for _, c := range cmds {
					checkFlags(t, b, c)
				}
				continue
			}
			rb := runBlock{Block: b, page: p}
			used := map[int]bool{}
			for _, c := range cmds {
				skip := false
				for di, d := range b.Directives {
					if d.Kind != docstest.NotRunnable {
						continue
					}
					for _, prog := range c.Programs {
						for _, dp := range d.Programs {
							if prog == dp || strings.HasPrefix(prog, dp+" ") {
								skip, used[di] = true, true
							}
						}
					}
				}
				if skip {
					checkFlags(t, b, c)
					continue
				}
				run, helm, bad := c.Text, false, []string{}
				for _, prog := range c.Programs {
					switch {
					case repoBinaries[prog] != "":
						pkgs[prog] = repoBinaries[prog]
					case strings.HasPrefix(prog, "go run ./") || strings.HasPrefix(prog, "go run "+module+"/"):
						pkg := strings.TrimPrefix(prog, "go run ")
						name := filepath.Base(pkg)
						if other, ok := pkgs[name]; ok && other != pkg && repoBinaries[name] != pkg {
							t.Errorf("%s:%d: %s and %s are both %s", b.File, c.Line, pkg, other, name)
						}
						pkgs[name] = pkg
						run = strings.ReplaceAll(run, prog, name)
					case prog == "helm":
						helm = true
					default:
						bad = append(bad, prog)
					}
				}
				switch {
				case len(bad) > 0:
					t.Errorf("%s:%d: %s runs %s, which the docs test cannot run: mark the block <!-- docs-test: not runnable (%s): REASON --> (CONTRIBUTING.md)",
						b.File, c.Line, c.Text, strings.Join(bad, ", "), strings.Join(bad, ", "))
				case helm && b.File != "docs/deploy.md":
					t.Errorf("%s:%d: %s: deploy's TestDocsHelmCommands renders the helm commands of docs/deploy.md only: show it there, or mark it not runnable", b.File, c.Line, c.Text)
				case helm && len(c.Programs) > 1:
					t.Errorf("%s:%d: %s: a helm command with others on its line: deploy's TestDocsHelmCommands renders helm commands alone", b.File, c.Line, c.Text)
				case helm:
					// rendered by deploy's TestDocsHelmCommands
				default:
					rb.commands = append(rb.commands, runCommand{Command: c, run: run})
				}
			}
			for di, d := range b.Directives {
				switch {
				case d.Kind == docstest.NotRunnable && !used[di]:
					t.Errorf("%s:%d: not runnable (%s): no command of the block runs it", b.File, d.Line, strings.Join(d.Programs, ", "))
				case d.Kind == docstest.NotRunnable:
					skipped = append(skipped, fmt.Sprintf("%s: (%s) %s", b.Where(), strings.Join(d.Programs, ", "), d.Reason))
				case d.Kind == docstest.Setup:
					rb.setup = d.Name
				}
			}
			if len(rb.commands) > 0 {
				blocks = append(blocks, rb)
			} else if rb.setup != "" {
				t.Errorf("%s: a setup for a block with nothing to run", b.Where())
			}
		}
	}
	return blocks, skipped, pkgs
}

// checkFlags checks a command the test does not run as far as it can
// without running it: each flag it gives a go run of this repository's
// packages (a benchmark, a drill) is one the package defines.
func checkFlags(t *testing.T, b docstest.Block, c docstest.Command) {
	t.Helper()
	parts, err := docstest.Parts(c.Text)
	if err != nil {
		return // Commands said so
	}
	for _, words := range parts {
		if len(words) < 3 || words[0] != "go" || words[1] != "run" || !strings.HasPrefix(words[2], "./") {
			continue
		}
		defined := flagsOf(t, words[2])
		for _, w := range words[3:] {
			name, ok := strings.CutPrefix(w, "-")
			if !ok {
				continue
			}
			name, _, _ = strings.Cut(strings.TrimPrefix(name, "-"), "=")
			if !defined[name] && name != "h" && name != "help" {
				t.Errorf("%s:%d: %s: %s defines no flag -%s", b.File, c.Line, c.Text, words[2], name)
			}
		}
	}
}

// flagsOf are the flags a main package defines with the flag package
// (flag.Int("name", …), flag.IntVar(&v, "name", …) …), read from its
// source.
func flagsOf(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: no Go files (%v)", dir, err)
	}
	defined := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !regexp.MustCompile(`^(Bool|Int|Int64|Uint|Uint64|String|Float64|Duration|Text|Func|BoolFunc)(Var)?$|^Var$`).MatchString(sel.Sel.Name) {
				return true
			}
			i := 0
			if strings.HasSuffix(sel.Sel.Name, "Var") {
				i = 1
			}
			if i < len(call.Args) {
				if lit, ok := call.Args[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if name, err := strconv.Unquote(lit.Value); err == nil {
						defined[name] = true
					}
				}
			}
			return true
		})
	}
	return defined
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// The docs' shell commands are true: each command of docs/*.md and
// README.md that runs only this repository's programs (enqueue, worker,
// dashboard, chaosllm, go run of one of its packages) runs, against a
// Redis database of its block's own, in a directory of its own (the
// repository's examples/, deploy/, bench/ and docs/ in it, with the
// files docs_setup_test.go writes and its page's "docs-test: file"
// blocks), and exits 0; a worker, dashboard or chaosllm it starts runs
// in the background until the block ends, once it answers /readyz (or
// /healthz). helm commands are deploy's TestDocsHelmCommands' (rendered
// with Helm's Go library); every other command is marked not runnable,
// with the reason, or this test fails naming it. How to mark and set up
// a block: CONTRIBUTING.md.
func TestDocsCommands(t *testing.T) {
	pages := docPages(t)
	blocks, skipped, pkgs := plan(t, pages)
	for _, s := range skipped {
		t.Logf("not runnable: %s", s)
	}
	if t.Failed() {
		return
	}
	if db, _ := redistest.New(t); db.Kind == "miniredis" {
		// the commands are processes of their own; asynq and agentq's
		// scripts need more of Redis than miniredis has
		t.Skip("the docs' commands need a real redis-server (or AGENTQ_TEST_REDIS)")
	}
	for name, pkg := range repoBinaries {
		pkgs[name] = pkg // the setups use them
	}
	start := time.Now()
	bin := buildBinaries(t, pkgs)
	t.Logf("built %d binaries in %s", len(pkgs), time.Since(start).Round(time.Millisecond))
	start = time.Now()
	defer func() { t.Logf("ran %d blocks in %s", len(blocks), time.Since(start).Round(time.Millisecond)) }()
	env := newDocsEnv(t, bin)
	// the blocks run at once, each in its own database and directory
	// (most of their time is waiting on a worker), a few at a time
	sem := make(chan struct{}, 6)
	var wg sync.WaitGroup
	for _, b := range blocks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			t.Run(strings.NewReplacer("/", "_", ".md", "").Replace(b.Where()), func(t *testing.T) {
				runDocBlock(t, env, b)
			})
		}()
	}
	wg.Wait()
}

// buildBinaries builds each package's binary once and returns a
// directory with each, by name. go run builds it (go caches what go run
// links, so a later run only looks it up) and runs cp to copy it there
// (the tree may change under a long test run: a binary is copied from
// whatever go run linked, never looked up again).
func buildBinaries(t *testing.T, pkgs map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for name, pkg := range pkgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var stderr bytes.Buffer
			// without DWARF: a third less to link
			cmd := exec.CommandContext(t.Context(), "go", "run", "-ldflags=-s -w", "-exec", "cp", pkg, filepath.Join(dir, name))
			cmd.Stdout, cmd.Stderr, cmd.Env = &stderr, &stderr, gobuild.Env()
			if err := cmd.Run(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("go run -exec cp %s: %w: %s", pkg, err, stderr.String()))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return dir
}

// docsEnv is what every block shares: the binaries, the repository, the
// fake providers.
type docsEnv struct {
	bin, repo string
	chaos     string // a chaosllm that answers every request
	failing   string // a chaosllm that answers 500 to every request
}

// sandbox is one block's directory, database and processes.
type sandbox struct {
	t     *testing.T
	env   *docsEnv
	dir   string
	db    redistest.DB
	vars  []string          // the environment of every command
	subs  map[string]string // a placeholder of the doc → what the test runs
	ports map[string]string // a port the doc names → a free one
	procs []*bgProc
	sdk   *agentq.Client
}

// bgProc is a server a block runs in the background.
type bgProc struct {
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error
	// reported: its failure is already the test's
	reported bool
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var (
	docPort    = regexp.MustCompile(`\b(?:127\.0\.0\.1|localhost):(\d{4,5})\b`)
	workflowID = regexp.MustCompile(`\bwf_[a-z0-9]{6,}\b`)
)

// runDocBlock runs a block's commands in order, in a sandbox of its own.
func runDocBlock(t *testing.T, env *docsEnv, b runBlock) {
	s := newSandbox(t, env, b)
	var st setup
	if b.setup != "" {
		st = setups[b.setup]
	}
	if st.block != nil {
		st.block(s)
	}
	last := "" // the last workflow id a command printed: the doc's wf_…
	for _, c := range b.commands {
		if st.each != nil {
			st.each(s)
		}
		run := s.rewrite(c.run)
		if last != "" {
			run = strings.ReplaceAll(run, "wf_…", last)
		}
		if strings.Contains(run, "wf_…") {
			t.Fatalf("%s:%d: %s: no earlier command printed a workflow id for wf_…", b.File, c.Line, c.Text)
		}
		where := fmt.Sprintf("%s:%d: %s", b.File, c.Line, c.Text)
		if run != c.Text {
			where += " (run as: " + run + ")"
		}
		if first := c.Programs[0]; servers[strings.TrimPrefix(filepath.Base(first), "go run ")] && len(c.Programs) == 1 && !strings.Contains(run, "--help") {
			s.start(where, filepath.Base(strings.TrimPrefix(first, "go run ")), run)
			continue
		}
		out, err := s.sh(run, 60*time.Second)
		if err != nil {
			t.Fatalf("%s: %v\n%s", where, err, out)
		}
		t.Logf("%s:\n%s", where, out)
		if line := docstest.OutputMismatch(c.Output, out); line != "" {
			t.Errorf("%s: the block shows it print\n\t%s\nwhich it did not:\n%s", where, line, out)
		}
		if ids := workflowID.FindAllString(out, -1); len(ids) > 0 {
			last = ids[len(ids)-1]
		}
		if st.check != nil {
			st.check(s, c, out)
		}
	}
}

func newSandbox(t *testing.T, env *docsEnv, b runBlock) *sandbox {
	t.Helper()
	db, _ := redistest.New(t)
	s := &sandbox{t: t, env: env, dir: t.TempDir(), db: db, subs: map[string]string{}, ports: map[string]string{}}
	for _, d := range []string{"examples", "deploy", "bench", "docs"} {
		if err := os.Symlink(filepath.Join(env.repo, d), filepath.Join(s.dir, d)); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range fixtureFiles(env) {
		s.write(name, content)
	}
	// the page's file blocks
	for _, pb := range b.page.blocks {
		for _, d := range pb.Directives {
			switch d.Kind {
			case docstest.File:
				s.write(d.Name, pb.Text())
			case docstest.Append:
				old, _ := os.ReadFile(filepath.Join(s.dir, d.Name))
				s.write(d.Name, string(old)+"\n"+pb.Text())
			}
		}
	}
	// every port the block names gets a free one, the same in each command
	for _, c := range b.commands {
		for _, m := range docPort.FindAllStringSubmatch(c.run, -1) {
			if _, ok := s.ports[m[1]]; !ok {
				s.ports[m[1]] = strconv.Itoa(freeTCPPort(t))
			}
		}
	}
	chaos := env.chaos
	if p, ok := s.ports["8081"]; ok {
		chaos = "http://127.0.0.1:" + p // the chaosllm the block starts
	}
	// the caller's own AGENTQ_* settings (a config, a server) stay out
	base := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "AGENTQ_") || strings.HasPrefix(kv, "REDIS_ADDR=") || strings.HasPrefix(kv, "CHAOSLLM_URL=")
	})
	s.vars = append(base,
		"PATH="+env.bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HOME="+s.dir,
		"AGENTQ_REDIS_URL="+db.URL(),
		"REDIS_ADDR="+db.Addr, // examples/local.yaml's
		"CHAOSLLM_URL="+chaos,
		"AGENTQ_LOG_LEVEL=warn",
	)
	t.Cleanup(s.stop)
	return s
}

func (s *sandbox) write(name, content string) {
	s.t.Helper()
	p := filepath.Join(s.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

// rewrite puts the block's free ports and the setup's values in place of
// the doc's.
func (s *sandbox) rewrite(cmd string) string {
	cmd = docPort.ReplaceAllStringFunc(cmd, func(m string) string {
		host, port, _ := strings.Cut(m, ":")
		return host + ":" + s.ports[port]
	})
	for from, to := range s.subs {
		cmd = strings.ReplaceAll(cmd, from, to)
	}
	return cmd
}

// sh runs a command line as sh does, in the sandbox, within limit.
func (s *sandbox) sh(line string, limit time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(s.t.Context(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", line)
	cmd.Dir, cmd.Env = s.dir, s.vars
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("still running after %s (%w)", limit, err)
	}
	return string(out), err
}

// enqueue runs the enqueue binary with args (for setups and checks).
func (s *sandbox) enqueue(args ...string) string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(s.env.bin, "enqueue"), args...)
	cmd.Dir, cmd.Env = s.dir, s.vars
	out, err := cmd.CombinedOutput()
	if err != nil {
		s.t.Fatalf("setup: enqueue %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// start runs a server command in the background and waits until it
// answers: a worker its /readyz (on a metrics address the test gives
// it), a dashboard its /readyz, chaosllm its /healthz, at their --addr.
func (s *sandbox) start(where, name, line string) *bgProc {
	s.t.Helper()
	vars := s.vars
	var probe string
	switch name {
	case "worker":
		addr := "127.0.0.1:" + strconv.Itoa(freeTCPPort(s.t))
		vars = append(slices.Clone(vars), "AGENTQ_METRICS_ADDR="+addr)
		probe = "http://" + addr + "/readyz"
	case "dashboard", "chaosllm":
		m := regexp.MustCompile(`--addr[ =](\S+)`).FindStringSubmatch(line)
		if m == nil {
			s.t.Fatalf("%s: the docs test starts a %s with an --addr only", where, name)
		}
		addr := m[1]
		if strings.HasPrefix(addr, ":") {
			addr = "127.0.0.1" + addr
		}
		probe = "http://" + addr + map[string]string{"dashboard": "/readyz", "chaosllm": "/healthz"}[name]
	}
	// exec replaces sh, so the signal at the end reaches the server
	cmd := exec.Command("sh", "-c", "exec "+line)
	cmd.Dir, cmd.Env = s.dir, vars
	dieWithTest(cmd)
	p := &bgProc{name: where, cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("%s: %v", where, err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	s.procs = append(s.procs, p)
	poll.Until(s.t, 30*time.Second, func() (bool, string) {
		select {
		case <-p.done:
			p.reported = true
			s.t.Fatalf("%s: exited (%v) before it answered %s:\n%s", where, p.err, probe, p.out.String())
		default:
		}
		resp, err := http.Get(probe)
		if err != nil {
			return false, fmt.Sprintf("%s: %s: %v", where, probe, err)
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Sprintf("%s: %s: %s\n%s", where, probe, resp.Status, p.out.String())
	})
	return p
}

// stop ends the block's servers (SIGTERM, as Ctrl-C or Kubernetes stops
// them): each exits 0 within 15s.
func (s *sandbox) stop() {
	for _, p := range slices.Backward(s.procs) {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range s.procs {
		select {
		case <-p.done:
			if p.err != nil && !p.reported {
				s.t.Errorf("%s: stopped with SIGTERM, it exited %v:\n%s", p.name, p.err, p.out.String())
			}
		case <-time.After(15 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
			s.t.Errorf("%s: still running 15s after SIGTERM:\n%s", p.name, p.out.String())
		}
	}
}

// freeTCPPort is a loopback port nothing listens on now.
func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
