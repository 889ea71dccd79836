package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/retry"
)

// A programming error inside an SDK call (Item outside a map, Outputs of
// a step that is not a map, arguments that cannot decode) dead-letters the
// step at its first attempt with the reason, instead of retrying with
// backoff what no retry fixes.
func TestSDKMisuseDeadLettersAtOnce(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Steps: map[string]engine.StepFunc{
		"item": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			var v string
			return nil, s.Item(&v)
		},
		"outputs": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			for _, err := range s.Outputs(ctx, "a") {
				if err != nil {
					return nil, fmt.Errorf("reading a: %w", err) // wrapped, as code does
				}
			}
			return nil, nil
		},
		"args": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			var a struct{ N int }
			return nil, s.Args(&a)
		},
		"ok": func(ctx context.Context, s *engine.CodeStep) (any, error) { return 1, nil },
	}})
	id := e.Submit(t, e.Spec(`name: misuse
defaults: { max_retries: 12 }
steps:
  - { id: a, run: ok }
  - { id: item, run: item, optional: true }
  - { id: outputs, run: outputs, depends_on: [a], optional: true }
  - { id: args, run: args, with: { N: "not a number" }, optional: true }
`))
	wf := e.Wait(t, id, 20*time.Second, store.StateCompleted)
	for _, c := range []struct{ step, says string }{
		{"item", "is not a map step's instance"}, {"outputs", `"a" is not a map step among its inputs`}, {"args", "do not fit"}} {
		var s *store.StepRecord
		for i := range wf.Steps {
			if wf.Steps[i].ID == c.step {
				s = &wf.Steps[i]
			}
		}
		if s.State != store.StepDead || s.Attempts != 1 || s.Class != string(retry.Handler) || !strings.Contains(s.Error, c.says) {
			t.Errorf("%s: %s after %d attempts, class %q, error %q; want dead at the first, saying %q", c.step, s.State, s.Attempts, s.Class, s.Error, c.says)
		}
	}
}

// One number type wherever a step sees a value as any: json.Number, exact
// for integers past 2^53, in the workflow's input, an ancestor's parsed
// JSON, a map's item and the arguments; a prompt prints the input's
// numbers as written (1234567, not 1.234567e+06).
func TestOneNumberTypeEverywhere(t *testing.T) {
	saw := make(chan map[string]any, 1)
	e := testenv.Start(t, testenv.Options{Steps: map[string]engine.StepFunc{
		"make": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			return map[string]any{"id": json.Number("9007199254740993")}, nil
		},
		"look": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			v, _ := s.Step("make")
			var args, item any
			if err := s.Args(&args); err != nil {
				return nil, err
			}
			if err := s.Item(&item); err != nil {
				return nil, err
			}
			saw <- map[string]any{"input": s.Input()["big"], "json": v.JSON.(map[string]any)["id"], "args": args.(map[string]any)["n"], "item": item}
			return nil, nil
		},
	}})
	id := e.Submit(t, e.Spec(`name: numbers
input: { big: 9007199254740993, small: 1234567, ids: [9007199254740993] }
steps:
  - { id: make, run: make }
  - { id: look, for_each: "{{ .Input.ids }}", run: look, with: { n: "{{ .Input.small }}", from: "{{ .Steps.make.Output }}" }, depends_on: [make] }
  - { id: say, route: solo, prompt: "count {{ .Input.small }}" }
`))
	wf := e.Wait(t, id, 20*time.Second, store.StateCompleted, store.StateBlocked)
	if wf.State != store.StateCompleted {
		inst, _ := e.Client.Instances(t.Context(), id, "look", 0, 1)
		t.Fatalf("workflow %s: look's instance %+v", wf.State, inst.Instances)
	}
	got := <-saw
	for k, want := range map[string]string{"input": "9007199254740993", "json": "9007199254740993", "item": "9007199254740993", "args": "1234567"} {
		if n, ok := got[k].(json.Number); !ok || n.String() != want {
			t.Errorf("%s: %T %v, want json.Number %s", k, got[k], got[k], want)
		}
	}
	if !strings.Contains(wf.Steps[2].Output, "count 1234567") {
		t.Errorf("the prompt printed the input's number as %q", wf.Steps[2].Output)
	}
}
