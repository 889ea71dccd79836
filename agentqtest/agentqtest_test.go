package agentqtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentq/agentq"
	"github.com/agentq/agentq/agentqtest"
	"github.com/agentq/agentq/internal/engine"
)

// summarize is a step under test: it asks the model twice and runs one
// side effect through Do.
func summarize(ctx context.Context, s *agentq.Step) (any, error) {
	var args struct{ Region string }
	if err := s.Args(&args); err != nil {
		return nil, agentq.DeadLetter(err)
	}
	first, err := s.LLM().Chat(ctx, "report", agentq.Request{Messages: []agentq.Message{{Role: "user", Content: "figures for " + args.Region}}})
	if err != nil {
		return nil, err
	}
	saved, err := agentq.Do(ctx, s, "save", func(context.Context) (int, error) { return len(first.Text), nil })
	if err != nil {
		return nil, err
	}
	second, err := s.LLM().Chat(ctx, "report", agentq.Request{Messages: []agentq.Message{{Role: "user", Content: "summarise: " + first.Text}}})
	if err != nil {
		return nil, err
	}
	return map[string]any{"summary": second.Text, "saved": saved}, nil
}

// The second call fails once: the retry replays the first call and Do,
// and only the failed call reaches the model again.
func TestRetriedStepReplaysDurableCalls(t *testing.T) {
	ctx := context.Background()
	m := agentqtest.NewModel().
		Answer("report", "north grew 25%").
		Fail("report", errors.New("provider down")).
		Answer("report", "North grew fastest.")
	s, err := agentqtest.NewStep(agentqtest.Options{Args: map[string]any{"region": "north"}, Model: m})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(ctx, summarize); err == nil || !strings.Contains(err.Error(), "provider down") {
		t.Fatalf("first attempt: %v, want the provider's failure", err)
	}
	out, err := s.Run(ctx, summarize)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(map[string]any)
	if got["summary"] != "North grew fastest." || got["saved"] != 14 {
		t.Fatalf("second attempt: %v", got)
	}
	if n := len(m.Requests("report")); n != 3 {
		t.Errorf("the model got %d requests, want 3 (the first call once)", n)
	}
	if s.Replayed() != 2 || s.Made() != 4 {
		t.Errorf("replayed %d, made %d; want 2 and 4", s.Replayed(), s.Made())
	}
}

// Bad arguments dead-letter; a panic comes back as an error.
func TestVerdictsAndPanics(t *testing.T) {
	ctx := context.Background()
	s, _ := agentqtest.NewStep(agentqtest.Options{Args: map[string]any{"region": 7}})
	if _, err := s.Run(ctx, summarize); agentqtest.VerdictOf(err).Kind != "dead_letter" || !strings.Contains(err.Error(), "arguments") {
		t.Fatalf("bad arguments: %v (%+v), want a dead letter", err, agentqtest.VerdictOf(err))
	}
	_, err := s.Run(ctx, func(context.Context, *agentq.Step) (any, error) { panic("boom") })
	var pe *engine.PanicError
	if !errors.As(err, &pe) || pe.Value != "boom" {
		t.Fatalf("panic: %v", err)
	}
}

// A durable call whose request carries an output check (a function) is
// hashed and replayed like any other.
func TestDurableCallWithAnOutputCheck(t *testing.T) {
	ctx := context.Background()
	m := agentqtest.NewModel().Answer("report", `{"ok":true}`)
	s, _ := agentqtest.NewStep(agentqtest.Options{Model: m})
	fn := func(ctx context.Context, st *agentq.Step) (any, error) {
		req := agentq.Request{Messages: []agentq.Message{{Role: "user", Content: "json please"}},
			Output: &agentq.Output{Check: func(string) error { return nil }}}
		r, err := st.LLM().Chat(ctx, "report", req)
		if err != nil {
			return nil, err
		}
		if st.Attempt() == 1 {
			return nil, errors.New("fail after the call")
		}
		return r.Text, nil
	}
	if _, err := s.Run(ctx, fn); err == nil || !strings.Contains(err.Error(), "fail after the call") {
		t.Fatalf("first attempt: %v", err)
	}
	if out, err := s.Run(ctx, fn); err != nil || out != `{"ok":true}` || len(m.Requests("report")) != 1 {
		t.Fatalf("second attempt: %v %v, %d requests", out, err, len(m.Requests("report")))
	}
}

// A map instance's function is tested with its item and index; outside a
// map, Item is the dead-letter error a worker acts on.
func TestAMapInstance(t *testing.T) {
	fn := func(ctx context.Context, s *agentq.Step) (any, error) {
		var city struct {
			Name string
			Pop  any
		}
		if err := s.Item(&city); err != nil {
			return nil, err
		}
		return map[string]any{"n": s.Index(), "name": strings.ToUpper(city.Name), "pop": city.Pop}, nil
	}
	s, err := agentqtest.NewStep(agentqtest.Options{Item: map[string]any{"name": "oslo", "pop": 709037}, Index: 3})
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Run(t.Context(), fn)
	m, _ := out.(map[string]any)
	if err != nil || m["n"] != 3 || m["name"] != "OSLO" || m["pop"] != json.Number("709037") {
		t.Fatalf("instance: %#v %v", out, err)
	}
	plain, err := agentqtest.NewStep(agentqtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Run(t.Context(), fn); err == nil || !strings.Contains(err.Error(), "is not a map step's instance") {
		t.Fatalf("Item outside a map: %v", err)
	}
}

// A fan-in over a map reads its instances a page at a time with Outputs,
// as in a worker: text answers, JSON values (numbers as json.Number) and
// a missing instance in item order; the map's view has them too. An id
// that is not a map among the step's inputs is the worker's dead letter.
func TestAFanInOverAMap(t *testing.T) {
	reduce := func(ctx context.Context, s *agentq.Step) (any, error) {
		var got []string
		for v, err := range s.Outputs(ctx, "research") {
			if err != nil {
				return nil, err
			}
			switch {
			case v.Missing:
				got = append(got, "missing")
			case v.JSON != nil:
				b, _ := json.Marshal(v.JSON)
				got = append(got, fmt.Sprintf("json %s %T", b, v.JSON.(map[string]any)["n"]))
			default:
				got = append(got, "text "+v.Output)
			}
		}
		return map[string]any{"items": s.Items("research"), "got": got}, nil
	}
	s, err := agentqtest.NewStep(agentqtest.Options{Steps: map[string]agentq.StepView{
		"research": agentqtest.Map(agentqtest.Text("oslo is cold"), agentqtest.Missing, map[string]any{"n": 3})}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Run(t.Context(), reduce)
	want := map[string]any{"items": 3, "got": []string{"text oslo is cold", "missing", `json {"n":3} json.Number`}}
	if err != nil || fmt.Sprint(out) != fmt.Sprint(want) {
		t.Fatalf("reduce: %v %v, want %v", out, err, want)
	}
	// as on a worker, Step gives the map's own record, not its outputs
	view, _ := s.Run(t.Context(), func(_ context.Context, st *agentq.Step) (any, error) { v, _ := st.Step("research"); return v, nil })
	if v, ok := view.(agentq.StepView); !ok || v.Map != nil || v.Output != "" {
		t.Fatalf("the map's own view: %+v", view)
	}
	// an optional map dead-lettered before it expanded: the step reads it
	// as missing, with no instance
	gone, _ := agentqtest.NewStep(agentqtest.Options{Steps: map[string]agentq.StepView{"research": agentqtest.MissingMap()}})
	out, err = gone.Run(t.Context(), reduce)
	if want := map[string]any{"items": 0, "got": []string(nil)}; err != nil || fmt.Sprint(out) != fmt.Sprint(want) {
		t.Fatalf("a map that never expanded: %v %v, want %v", out, err, want)
	}
	if v, _ := gone.Run(t.Context(), func(_ context.Context, st *agentq.Step) (any, error) { v, _ := st.Step("research"); return v, nil }); !v.(agentq.StepView).Missing {
		t.Fatalf("the map's own view: %+v, want missing", v)
	}
	// a code instance's string is JSON, as a worker reads it
	words, _ := agentqtest.NewStep(agentqtest.Options{Steps: map[string]agentq.StepView{"m": agentqtest.Map("two")}})
	out, err = words.Run(t.Context(), func(ctx context.Context, st *agentq.Step) (any, error) {
		for v, err := range st.Outputs(ctx, "m") {
			return []any{v.Output, v.JSON}, err
		}
		return nil, nil
	})
	if fmt.Sprint(out) != `["two" two]` || err != nil {
		t.Fatalf("a code instance's string: %v %v", out, err)
	}
	_, err = s.Run(t.Context(), func(ctx context.Context, st *agentq.Step) (any, error) {
		for _, err := range st.Outputs(ctx, "plan") {
			return nil, err
		}
		return nil, nil
	})
	if agentqtest.VerdictOf(err).Kind != "dead_letter" || !strings.Contains(err.Error(), `"plan" is not a map step`) {
		t.Fatalf("Outputs of a step that is not a map: %v", err)
	}
}

// A map output that does not encode as JSON is the test's mistake:
// NewStep names it.
func TestAMapOutputThatIsNotJSON(t *testing.T) {
	_, err := agentqtest.NewStep(agentqtest.Options{Steps: map[string]agentq.StepView{"research": agentqtest.Map("ok", make(chan int))}})
	if err == nil || !strings.Contains(err.Error(), "step research") || !strings.Contains(err.Error(), "output 1 does not encode as JSON") {
		t.Fatalf("NewStep: %v, want the map's output named", err)
	}
}
