package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

const approveSpec = `name: publish
input: { title: "Q3 report" }
steps:
  - { id: draft, run: draft }
  - id: review
    depends_on: [draft]
    approve: { message: "Publish {{ .Input.title }}? Draft: {{ .Steps.draft.JSON }}", timeout: %s }
  - id: publish
    depends_on: [review]
    run: publish
    with: { approved: "{{ .Steps.review.JSON.approved }}", comment: "{{ .Steps.review.JSON.comment }}" }
`

func approveEnv(t *testing.T, published chan map[string]any) *testenv.Env {
	return testenv.Start(t, testenv.Options{Steps: map[string]engine.StepFunc{
		"draft": func(ctx context.Context, s *engine.CodeStep) (any, error) { return "the draft", nil },
		"publish": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			var a map[string]any
			if err := s.Args(&a); err != nil {
				return nil, err
			}
			published <- a
			return a["approved"], nil
		}}})
}

// An approval step parks the workflow as waiting, showing its message,
// until a person decides; the decision (and comment) is its output, and a
// second decision is refused.
func TestApprovalWaitsForAPersonsDecision(t *testing.T) {
	published := make(chan map[string]any, 2)
	e := approveEnv(t, published)
	id := e.Submit(t, e.Spec(strings.Replace(approveSpec, "%s", "1h", 1)))
	wf := e.Wait(t, id, 20*time.Second, store.StateWaiting)
	review := wf.Steps[1]
	if review.State != store.StepWaiting || !strings.Contains(review.Output, `Publish Q3 report? Draft: the draft`) {
		t.Fatalf("review step %s %q", review.State, review.Output)
	}
	if wf.Steps[2].State != store.StepPending {
		t.Fatalf("publish ran before the decision: %s", wf.Steps[2].State)
	}
	state, err := e.Client.Decide(t.Context(), id, "review", true, "ship it", "cli")
	if err != nil || (state != store.StateRunning && state != store.StateCompleted) {
		t.Fatalf("decide: %s %v", state, err)
	}
	if _, err := e.Client.Decide(t.Context(), id, "review", false, "too late", "cli"); !errors.Is(err, flow.ErrNotWaiting) {
		t.Fatalf("a second decision: %v, want ErrNotWaiting", err)
	}
	wf = e.Wait(t, id, 20*time.Second, store.StateCompleted)
	if a := <-published; a["approved"] != true || a["comment"] != "ship it" {
		t.Fatalf("publish saw %v", a)
	}
	if out := wf.Steps[1].Output; !strings.Contains(out, `"approved":true`) || !strings.Contains(out, `"by":"cli"`) {
		t.Errorf("decision output %s", out)
	}
}

// No decision within the timeout is a rejection; the workflow goes on
// with it.
func TestApprovalTimeoutRejects(t *testing.T) {
	published := make(chan map[string]any, 2)
	e := approveEnv(t, published)
	id := e.Submit(t, e.Spec(strings.Replace(approveSpec, "%s", "1s", 1)))
	wf := e.Wait(t, id, 20*time.Second, store.StateCompleted)
	if a := <-published; a["approved"] != false || !strings.Contains(a["comment"].(string), "no decision within 1s") {
		t.Fatalf("publish saw %v", a)
	}
	if out := wf.Steps[1].Output; !strings.Contains(out, `"by":"timeout"`) {
		t.Errorf("decision output %s", out)
	}
}

func TestApprovalSpecProblems(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	for _, c := range []struct{ spec, want string }{
		{"name: a\nsteps:\n  - { id: r, approve: { message: \"\" } }\n", "steps[0] (r).approve.message: is empty"},
		{"name: a\nsteps:\n  - { id: r, run: x, approve: { message: ok } }\n", "steps[0] (r).run: is for code steps (run:); an approval step (approve:) has none"},
		{"name: a\nsteps:\n  - { id: r, approve: { message: ok, timeout: 10ms } }\n", "approve.timeout: 10ms is under 1s"},
		{"name: a\nsteps:\n  - { id: r, timeout: 1h, approve: { message: ok } }\n", "steps[0] (r).timeout: is for steps a worker runs (an approval waits for approve.timeout"},
	} {
		if _, err := e.Client.Parse("a.yaml", []byte(c.spec)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.spec, err, c.want)
		}
	}
}

// An approval's timeout never fires before it is due: asynq keeps due
// times in whole seconds, rounded down, so a 1.5s timeout fired up to a
// second early.
func TestApprovalTimeoutNeverFiresEarly(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	for range 3 {
		id := e.Submit(t, e.Spec("name: gate\nsteps:\n  - { id: gate, approve: { message: \"ok?\", timeout: 1500ms } }\n"))
		wf := e.Wait(t, id, 20*time.Second, store.StateCompleted)
		var d spec.Decision
		if err := json.Unmarshal([]byte(wf.Steps[0].Output), &d); err != nil || d.By != "timeout" {
			t.Fatalf("decision %s: %v", wf.Steps[0].Output, err)
		}
		if waited := d.At.Sub(*wf.Steps[0].StartedAt); waited < 1500*time.Millisecond {
			t.Fatalf("the 1.5s timeout rejected the step %s after it began waiting", waited)
		}
	}
}
