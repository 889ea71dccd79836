package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/defaults"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/router"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/llmclient"
	"github.com/agentq/agentq/retry"
)

// A new kind of step is this file's echoKind and the one registration below: it
// is checked at submit, runs, feeds a fan-in, stops at a cancel and runs
// again at a rerun, with nothing else of the engine changed.
func init() {
	if err := registerKind("echo", echoKind{}); err != nil {
		panic(err)
	}
}

// A kind's name or key registered again is refused: the two would share
// a run side, or a step's field.
func TestAKindIsRegisteredOnce(t *testing.T) {
	for _, key := range []string{"echo", "shout", "prompt"} {
		if err := registerKind(key, echoKind{}); err == nil {
			t.Errorf("registering echoKind again under %q was accepted", key)
		}
	}
}

// echoKind answers its text (echo: TEXT), or with echo: { text, hold }
// holds its first run until its context ends.
type echoKind struct{}

func (echoKind) Name() string { return "echo" }

var echoRuns sync.Map // "<workflow>/<step>" → runs

func echoArgs(st *spec.Step) (text string, hold bool, ok bool) {
	switch v := st.Kinds["echo"].(type) {
	case string:
		return v, false, v != ""
	case map[string]any:
		text, _ = v["text"].(string)
		hold, _ = v["hold"].(bool)
		return text, hold, text != ""
	}
	return "", false, false
}

func (echoKind) Claims(st *spec.Step) bool { return st.Kinds["echo"] != nil }

func (echoKind) Check(s *spec.Spec, st *spec.Step, where string, _ spec.Limits, bad spec.ProblemFunc) {
	if _, _, ok := echoArgs(st); !ok {
		bad(s.LineOf(where), where+".echo", "is not a text, or { text, hold }")
	}
}

func (echoKind) Takes(*spec.Step) ([]string, string) { return []string{"timeout"}, "an echo step" }

func (echoKind) Prepare(*spec.Step) error                        { return nil }
func (echoKind) Need(*spec.Step, spec.Resolved) (string, string) { return "", "" }
func (echoKind) JSONOutput(*spec.Step) bool                      { return true }

func (echoKind) run(ctx context.Context, h *Handler, run *stepRun, a *store.Attempt, _ map[string]spec.StepView) error {
	text, hold, _ := echoArgs(run.st)
	v, _ := echoRuns.LoadOrStore(run.p.Workflow+"/"+run.st.ID, new(atomic.Int32))
	if n := v.(*atomic.Int32).Add(1); hold && n == 1 {
		<-ctx.Done()
		return &StepError{Class: retry.Canceled, Err: ctx.Err()}
	}
	out, _ := json.Marshal(text)
	return h.settle(ctx, run, store.Outcome{Done: true, Output: string(out), Target: "echo", Optional: run.st.Optional, Attempt: a.Step.Attempts}, "")
}

func (echoKind) Input(_ context.Context, st *spec.Step, _ spec.TemplateData) (string, string) {
	text, _, _ := echoArgs(st)
	return "", "echo " + text
}

func echoRunsOf(t *testing.T, wf, step string) int {
	t.Helper()
	v, ok := echoRuns.Load(wf + "/" + step)
	if !ok {
		return 0
	}
	return int(v.(*atomic.Int32).Load())
}

// noModel is the router of a worker whose steps call no model.
type noModel struct{}

func (noModel) Chat(context.Context, string, llmclient.Request) (*llmclient.Response, error) {
	return nil, errors.New("no model here")
}
func (noModel) Route(string) (router.Route, bool) { return router.Route{}, false }

func TestANewStepKind(t *testing.T) {
	db, rdb := redistest.New(t)
	opt := asynq.RedisClientOpt{Addr: db.Addr, DB: db.DB}
	aq := asynq.NewClient(opt)
	t.Cleanup(func() { aq.Close() })
	h, err := NewHandler(HandlerOptions{Retention: defaults.Retention, MaxOutputBytes: defaults.MaxOutputBytes, MaxMapItems: defaults.MaxMapItems, Redis: rdb, Client: aq, Router: noModel{}, Logger: slog.New(slog.DiscardHandler),
		Steps: map[string]StepFunc{"join": func(_ context.Context, s *CodeStep) (any, error) {
			a, _ := s.Step("a")
			b, _ := s.Step("b")
			return fmt.Sprint(a.JSON, " ", b.JSON), nil
		}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := asynq.NewServer(opt, asynq.Config{Concurrency: 4, TaskCheckInterval: 10 * time.Millisecond, Logger: quietAsynq{},
		Queues: map[string]int{spec.DefaultQueue: 1}})
	if err := srv.Start(h); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	c := producer.NewClient(rdb, producer.ClientOptions{Retention: defaults.Retention, Limits: spec.DefaultLimits(), SkipWorkerCheck: true})
	wait := func(id string, states ...string) *producer.Workflow {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		for {
			wf, err := c.Status(ctx, id)
			if err == nil && strings.Contains(strings.Join(states, " "), wf.State) {
				return wf
			}
			select {
			case <-ctx.Done():
				t.Fatalf("workflow %s: %+v %v, want %v", id, wf, err, states)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}

	// the spec checker asks the kind
	if _, err := spec.ParseSpec("bad.yaml", []byte("name: bad\nsteps:\n  - { id: a, echo: 7 }\n"), nil, spec.DefaultLimits()); err == nil ||
		!strings.Contains(err.Error(), "steps[0] (a).echo: is not a text") {
		t.Fatalf("a bad echo step: %v", err)
	}
	if _, err := spec.ParseSpec("bad.yaml", []byte("name: bad\nsteps:\n  - { id: a, echo: 7 }\n  - { id: b, echo: hi,\n      ehco: x }\n"), nil, spec.DefaultLimits()); err == nil ||
		!strings.Contains(err.Error(), `bad.yaml:5: unknown field "ehco"`) {
		t.Fatalf("a misspelt field: %v", err)
	}

	// a second kind's key, and a field no kind owns, are refused
	if _, err := spec.ParseSpec("two.yaml", []byte("name: two\nsteps:\n  - { id: a, echo: hi, run: f }\n  - { id: b, prompt: x, route: r, promt: y }\n"), nil, spec.DefaultLimits()); err == nil ||
		!strings.Contains(err.Error(), "two.yaml:4: unknown field \"promt\"") || strings.Contains(err.Error(), "is empty") {
		t.Fatalf("a typo: %v, want the unknown field alone", err)
	}
	if _, err := spec.ParseSpec("two.yaml", []byte("name: two\nsteps:\n  - { id: a, run: f, echo: hi }\n"), nil, spec.DefaultLimits()); err == nil ||
		!strings.Contains(err.Error(), "steps[0] (a).run: is for code steps (run:); an echo step has none") {
		t.Fatalf("echo beside run: %v", err)
	}
	// the kind takes none of the fields that shape a prompt: each is
	// refused, with its line (the one table, kindFields, says so; the
	// kind's file lists none of them)
	perr := func() error {
		_, err := spec.ParseSpec("p.yaml", []byte("name: p\nsteps:\n  - id: a\n    echo: hi\n    route: r\n    prompt: x\n    temperature: 0.5\n"), nil, spec.DefaultLimits())
		return err
	}()
	for _, want := range []string{"p.yaml:5: steps[0] (a).route: is for prompt steps; an echo step has none",
		"p.yaml:6: steps[0] (a).prompt: is for prompt steps", "p.yaml:7: steps[0] (a).temperature: is for prompt steps"} {
		if perr == nil || !strings.Contains(perr.Error(), want) {
			t.Fatalf("prompt fields on an echo step: %v, want %q", perr, want)
		}
	}

	// submit, fan-in, rerun
	wspec, err := spec.ParseSpec("echo.yaml", []byte(`name: echoes
steps:
  - { id: a, echo: hello }
  - { id: b, echo: world }
  - { id: c, run: join, depends_on: [a, b] }
`), nil, spec.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	// a stored (or sent) spec parses again as it was written
	stored, err := json.Marshal(wspec)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := spec.ParseSpec("stored", stored, nil, spec.DefaultLimits()); err != nil || again.Steps[0].Kinds["echo"] != "hello" {
		t.Fatalf("the stored spec %s: %v", stored, err)
	}
	var read spec.Spec
	if err := json.Unmarshal(stored, &read); err != nil || read.Steps[1].Kinds["echo"] != "world" || read.Steps[2].Kinds != nil {
		t.Fatalf("the stored spec read back: %+v %v", read.Steps, err)
	}
	if needs := wspec.Needs(); len(needs) != 1 || needs[0].Name != "join" {
		t.Fatalf("needs %+v: an echo step needs nothing of a worker", needs)
	}
	id, err := c.Submit(t.Context(), wspec)
	if err != nil {
		t.Fatal(err)
	}
	wf := wait(id, record.StateCompleted)
	if wf.Steps[2].Output != `"hello world"` || wf.Steps[0].Target != "echo" {
		t.Fatalf("the fan-in over two echo steps: %+v", wf.Steps)
	}
	if _, err := c.Rerun(t.Context(), id, "a"); err != nil {
		t.Fatal(err)
	}
	wf = wait(id, record.StateCompleted)
	if echoRunsOf(t, id, "a") != 2 || echoRunsOf(t, id, "b") != 1 || wf.Generation != 1 {
		t.Fatalf("after a rerun from a: a ran %d, b %d, generation %d; want 2, 1, 1",
			echoRunsOf(t, id, "a"), echoRunsOf(t, id, "b"), wf.Generation)
	}

	// cancel while one holds, then rerun what the cancel stopped
	wspec, err = spec.ParseSpec("hold.yaml", []byte(`name: holds
steps:
  - { id: h, echo: { text: held, hold: true } }
  - { id: c, run: join, depends_on: [h] }
`), nil, spec.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if id, err = c.Submit(t.Context(), wspec); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for echoRunsOf(t, id, "h") == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("the holding step did not start")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if _, err := c.Cancel(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if wf = wait(id, record.StateCanceled); wf.Steps[1].State == store.StepDone {
		t.Fatalf("the fan-in ran after the cancel: %+v", wf.Steps)
	}
	if _, err := c.Rerun(t.Context(), id, "h"); err != nil {
		t.Fatal(err)
	}
	wf = wait(id, record.StateCompleted)
	if echoRunsOf(t, id, "h") != 2 || wf.Steps[0].Output != `"held"` {
		t.Fatalf("after the rerun: h ran %d times, steps %+v", echoRunsOf(t, id, "h"), wf.Steps)
	}
}

// quietAsynq discards asynq's own log.
type quietAsynq struct{}

func (quietAsynq) Debug(...any) {}
func (quietAsynq) Info(...any)  {}
func (quietAsynq) Warn(...any)  {}
func (quietAsynq) Error(...any) {}
func (quietAsynq) Fatal(...any) {}

// kindFiles are the files of the step kinds and of the seam, by package
// (their spec side, their run side, a map's instances, an approval's
// decision and a signal's delivery): only they ask what kind a step is.
var kindFiles = map[string]bool{
	"spec/kind.go": true, "spec/approvespec.go": true, "spec/codespec.go": true, "spec/mapspec.go": true, "spec/toolspec.go": true,
	"spec/signalspec.go": true, "engine/approve.go": true, "engine/coderun.go": true, "engine/mapload.go": true, "engine/signalstep.go": true,
	"flow/mapinstances.go": true, "flow/signal.go": true, "producer/decide.go": true, "producer/instances.go": true,
}

// kindCheck is what asking a step's kind looks like: its kind's own key.
var kindCheck = regexp.MustCompile(`\.IsMap\(\)|\.Approve [!=]= nil|\.WaitFor [!=]= nil|\.Run [!=]= ""|\.ForEach [!=]= ""|\.Prompt [!=]= ""|len\(\w+\.Tools\) [!=>]`)

// The engine, the spec and the producer ask a step's kind (KindOf),
// never which kind it is.
func TestOnlyTheKindsAskWhichKindAStepIs(t *testing.T) {
	var files []string
	for _, pkg := range []string{"spec", "engine", "flow", "producer"} {
		fs, _ := filepath.Glob(filepath.Join("..", pkg, "*.go"))
		files = append(files, fs...)
	}
	if len(files) == 0 {
		t.Fatal("no files found")
	}
	for _, path := range files {
		f := filepath.Join(filepath.Base(filepath.Dir(path)), filepath.Base(path))
		if strings.HasSuffix(f, "_test.go") || kindFiles[f] {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if kindCheck.MatchString(line) {
				t.Errorf("%s:%d asks which kind a step is: %s (ask its kind, KindOf, or move this into the kind's file)", f, i+1, strings.TrimSpace(line))
			}
		}
	}
}
