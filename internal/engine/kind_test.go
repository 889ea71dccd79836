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

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/router"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/llmclient"
	"github.com/agentq/agentq/retry"
)

// A new kind of step is this file's echoKind and the one line below: it
// is checked at submit, runs, feeds a fan-in, stops at a cancel and runs
// again at a rerun, with nothing else of the engine changed.
func init() { registerKind("echo", echoKind{}) }

// echoKind answers its text (echo: TEXT), or with echo: { text, hold }
// holds its first run until its context ends.
type echoKind struct{ oneTask }

var echoRuns sync.Map // "<workflow>/<step>" → runs

func echoArgs(st *Step) (text string, hold bool, ok bool) {
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

func (echoKind) claims(st *Step) bool { return st.Kinds["echo"] != nil }

func (echoKind) check(_ *Spec, st *Step, where string, _ Limits, bad problemFunc) {
	if _, _, ok := echoArgs(st); !ok {
		bad(st.line, where+".echo", "is not a text, or { text, hold }")
	}
}

func (echoKind) takes(*Step) ([]string, string) { return []string{"timeout"}, "an echo step" }

func (echoKind) prepare(*Step) error                   { return nil }
func (echoKind) need(*Step, resolved) (string, string) { return "", "" }
func (echoKind) jsonOutput(*Step) bool                 { return true }

func (echoKind) run(ctx context.Context, h *Handler, run stepRun, a *store.Attempt, _ map[string]StepView) error {
	text, hold, _ := echoArgs(run.st)
	v, _ := echoRuns.LoadOrStore(run.p.Workflow+"/"+run.st.ID, new(atomic.Int32))
	if n := v.(*atomic.Int32).Add(1); hold && n == 1 {
		<-ctx.Done()
		return &StepError{Class: retry.Canceled, Err: ctx.Err()}
	}
	out, _ := json.Marshal(text)
	return h.settle(ctx, run, store.Outcome{Done: true, Output: string(out), Target: "echo", Optional: run.st.Optional, Attempt: a.Step.Attempts}, "")
}

func (echoKind) input(_ context.Context, st *Step, _ promptData) (string, string) {
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
	h, err := NewHandler(HandlerOptions{Redis: rdb, Client: aq, Router: noModel{}, Logger: slog.New(slog.DiscardHandler),
		Steps: map[string]StepFunc{"join": func(_ context.Context, s *CodeStep) (any, error) {
			a, _ := s.Step("a")
			b, _ := s.Step("b")
			return fmt.Sprint(a.JSON, " ", b.JSON), nil
		}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := asynq.NewServer(opt, asynq.Config{Concurrency: 4, TaskCheckInterval: 10 * time.Millisecond, Logger: quietAsynq{},
		Queues: map[string]int{DefaultQueue: 1}})
	if err := srv.Start(h); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	c := NewClient(rdb, ClientOptions{SkipWorkerCheck: true})
	wait := func(id string, states ...string) *Workflow {
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
	if _, err := ParseSpec("bad.yaml", []byte("name: bad\nsteps:\n  - { id: a, echo: 7 }\n"), nil, Limits{}); err == nil ||
		!strings.Contains(err.Error(), "steps[0] (a).echo: is not a text") {
		t.Fatalf("a bad echo step: %v", err)
	}
	if _, err := ParseSpec("bad.yaml", []byte("name: bad\nsteps:\n  - { id: a, echo: 7 }\n  - { id: b, echo: hi,\n      ehco: x }\n"), nil, Limits{}); err == nil ||
		!strings.Contains(err.Error(), `bad.yaml:5: unknown field "ehco"`) {
		t.Fatalf("a misspelt field: %v", err)
	}

	// a second kind's key, and a field no kind owns, are refused
	if _, err := ParseSpec("two.yaml", []byte("name: two\nsteps:\n  - { id: a, echo: hi, run: f }\n  - { id: b, prompt: x, route: r, promt: y }\n"), nil, Limits{}); err == nil ||
		!strings.Contains(err.Error(), "two.yaml:4: unknown field \"promt\"") || strings.Contains(err.Error(), "is empty") {
		t.Fatalf("a typo: %v, want the unknown field alone", err)
	}
	if _, err := ParseSpec("two.yaml", []byte("name: two\nsteps:\n  - { id: a, run: f, echo: hi }\n"), nil, Limits{}); err == nil ||
		!strings.Contains(err.Error(), "steps[0] (a).run: is for code steps (run:); an echo step has none") {
		t.Fatalf("echo beside run: %v", err)
	}
	// the kind takes none of the fields that shape a prompt: each is
	// refused, with its line (the one table, kindFields, says so; the
	// kind's file lists none of them)
	perr := func() error {
		_, err := ParseSpec("p.yaml", []byte("name: p\nsteps:\n  - id: a\n    echo: hi\n    route: r\n    prompt: x\n    temperature: 0.5\n"), nil, Limits{})
		return err
	}()
	for _, want := range []string{"p.yaml:5: steps[0] (a).route: is for prompt steps; an echo step has none",
		"p.yaml:6: steps[0] (a).prompt: is for prompt steps", "p.yaml:7: steps[0] (a).temperature: is for prompt steps"} {
		if perr == nil || !strings.Contains(perr.Error(), want) {
			t.Fatalf("prompt fields on an echo step: %v, want %q", perr, want)
		}
	}

	// submit, fan-in, rerun
	spec, err := ParseSpec("echo.yaml", []byte(`name: echoes
steps:
  - { id: a, echo: hello }
  - { id: b, echo: world }
  - { id: c, run: join, depends_on: [a, b] }
`), nil, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	// a stored (or sent) spec parses again as it was written
	stored, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := ParseSpec("stored", stored, nil, Limits{}); err != nil || again.Steps[0].Kinds["echo"] != "hello" {
		t.Fatalf("the stored spec %s: %v", stored, err)
	}
	var read Spec
	if err := json.Unmarshal(stored, &read); err != nil || read.Steps[1].Kinds["echo"] != "world" || read.Steps[2].Kinds != nil {
		t.Fatalf("the stored spec read back: %+v %v", read.Steps, err)
	}
	if needs := spec.Needs(); len(needs) != 1 || needs[0].Name != "join" {
		t.Fatalf("needs %+v: an echo step needs nothing of a worker", needs)
	}
	id, err := c.Submit(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	wf := wait(id, StateCompleted)
	if wf.Steps[2].Output != `"hello world"` || wf.Steps[0].Target != "echo" {
		t.Fatalf("the fan-in over two echo steps: %+v", wf.Steps)
	}
	if _, err := c.Rerun(t.Context(), id, "a"); err != nil {
		t.Fatal(err)
	}
	wf = wait(id, StateCompleted)
	if echoRunsOf(t, id, "a") != 2 || echoRunsOf(t, id, "b") != 1 || wf.Generation != 1 {
		t.Fatalf("after a rerun from a: a ran %d, b %d, generation %d; want 2, 1, 1",
			echoRunsOf(t, id, "a"), echoRunsOf(t, id, "b"), wf.Generation)
	}

	// cancel while one holds, then rerun what the cancel stopped
	spec, err = ParseSpec("hold.yaml", []byte(`name: holds
steps:
  - { id: h, echo: { text: held, hold: true } }
  - { id: c, run: join, depends_on: [h] }
`), nil, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if id, err = c.Submit(t.Context(), spec); err != nil {
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
	if wf = wait(id, StateCanceled); wf.Steps[1].State == store.StepDone {
		t.Fatalf("the fan-in ran after the cancel: %+v", wf.Steps)
	}
	if _, err := c.Rerun(t.Context(), id, "h"); err != nil {
		t.Fatal(err)
	}
	wf = wait(id, StateCompleted)
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

// kindFiles are the files of the step kinds and of the seam: only they
// ask what kind a step is.
var kindFiles = map[string]bool{"kind.go": true, "promptstep.go": true, "toolstep.go": true, "toolspec.go": true,
	"coderun.go": true, "codespec.go": true, "approve.go": true, "mapspec.go": true, "mapstep.go": true, "mapview.go": true, "instances.go": true}

// kindCheck is what asking a step's kind looks like: its kind's own key.
var kindCheck = regexp.MustCompile(`\.IsMap\(\)|\.Approve [!=]= nil|\.Run [!=]= ""|\.ForEach [!=]= ""|\.Prompt [!=]= ""|len\(\w+\.Tools\) [!=>]`)

// The rest of the engine asks a step's kind (kindOf), never which kind
// it is.
func TestOnlyTheKindsAskWhichKindAStepIs(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || kindFiles[f] {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if kindCheck.MatchString(line) {
				t.Errorf("%s:%d asks which kind a step is: %s (ask its kind, kindOf, or move this into the kind's file)", f, i+1, strings.TrimSpace(line))
			}
		}
	}
}
