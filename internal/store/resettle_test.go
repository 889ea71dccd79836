package store_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
)

// clockedStore is a logging store whose clock the test moves.
func clockedStore(t *testing.T) (*store.Store, *time.Time) {
	_, rdb := redistest.New(t)
	now := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	s := store.New(rdb, time.Hour, func() time.Time { return now })
	s.SetLog(store.LogOptions{Limit: 1000})
	return s, &now
}

// call is an llm.call event an attempt made at at, for cost micros.
func call(step string, attempt int, at time.Time, micros int64) store.Event {
	return store.Event{Type: record.EventLLMCall, Step: step, Attempt: attempt, At: at, Provider: "p", Target: "p/m",
		PromptTokens: 3, CompletionTokens: 4, CostUSD: float64(micros) / 1e6}
}

// typesOf is the types of the log's events of step, in order.
func typesOf(t *testing.T, s *store.Store, wf, step string) []string {
	t.Helper()
	evs, err := s.Events(context.Background(), wf, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		if e.Step == step {
			out = append(out, e.Type)
		}
	}
	return out
}

// A settle delivered again (its reply lost, its task redelivered, a
// hand-off's run, the reconciler), of the same attempt or a later one,
// with another output, usage and finishing time, rewrites nothing of a
// done step's record and logs no second step.done; it returns the same
// ready dependents. The calls an attempt paid for are logged once each:
// the same batch settled again is not logged again, a fresh one (the
// provider paid again) is.
func TestASettleDeliveredAgainLeavesADoneStepAsItIs(t *testing.T) {
	s, now := clockedStore(t)
	ctx := context.Background()
	create(t, s, "wf")
	deps := []store.Dependent{{ID: "d", Inputs: 1}}
	if _, err := s.Begin(ctx, "wf", "a", "t-a", 0, time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	finished := *now
	first := store.Outcome{Done: true, Output: "one", ToolCalls: `[{"id":"c1"}]`, Target: "p/m", InputHash: "h1",
		Usage: store.Usage{PromptTokens: 3, CompletionTokens: 4}, CostMicros: 1500, Attempt: 1,
		Events: []store.Event{call("a", 1, finished, 1500)}}
	if _, ready, err := settle(ctx, s, "wf", "a", first, deps); err != nil || !slices.Equal(ready, []string{"d"}) {
		t.Fatalf("first settle: %v %v", ready, err)
	}
	want, err := s.Get(ctx, "wf")
	if err != nil {
		t.Fatal(err)
	}
	again := []store.Outcome{
		first, // the same settle again: its reply was lost, untilStored tries it again
		{Done: true, Output: "two", Target: "q/n", InputHash: "h2", Usage: store.Usage{PromptTokens: 50, CompletionTokens: 70}, CostMicros: 9000,
			Attempt: 1, Events: []store.Event{call("a", 1, finished.Add(time.Minute), 2000)}}, // run again, the provider paid again
		{Done: true, Output: "three", Degraded: true, Error: "primary down", Target: "template", Attempt: 2}, // a later attempt
		{Done: false, Error: "server: 503", Class: "server", Attempt: 2},                                     // and one that failed
	}
	for i, o := range again {
		*now = now.Add(time.Minute)
		_, ready, err := settle(ctx, s, "wf", "a", o, deps)
		if err != nil || !slices.Equal(ready, []string{"d"}) {
			t.Fatalf("settle %d again: ready %v, %v; want d again", i+1, ready, err)
		}
		got, err := s.Get(ctx, "wf")
		if err != nil {
			t.Fatal(err)
		}
		w, g := want.Steps[0], got.Steps[0]
		if g.State != store.StepDone || g.FinishedAt == nil || !g.FinishedAt.Equal(finished) || g.Output != w.Output ||
			g.Usage != w.Usage || g.CostUSD != w.CostUSD || g.Target != w.Target || string(g.ToolCalls) != string(w.ToolCalls) ||
			g.Degraded || g.Error != "" || g.Class != "" {
			t.Fatalf("after settle %d again: %+v, finished at %v; want as first settled: %+v, finished at %v", i+1, g, g.FinishedAt, w, finished)
		}
		if c := got.Counts; got.State != store.StateRunning || c == nil || c.Settled != 1 || c.Dead != 0 {
			t.Fatalf("after settle %d again: workflow %s, counts %+v; want running, a settled", i+1, got.State, c)
		}
	}
	if got, want := typesOf(t, s, "wf", "a"), []string{record.EventStarted, record.EventLLMCall, record.EventDone, record.EventLLMCall}; !slices.Equal(got, want) {
		t.Fatalf("the log of a: %v, want %v (one step.done; each paid call once)", got, want)
	}
	if got, _ := s.Get(ctx, "wf"); got.CostByProvider["p"] != 0.0035 {
		t.Fatalf("spend %v, want the two paid calls' 0.0035", got.CostByProvider)
	}
}

// A dead step settled dead again keeps its first error and finishing time
// and logs one step.dead; a canceled step settled by the attempt that was
// running stays canceled, its output not recorded.
func TestASettleDeliveredAgainLeavesADeadOrCanceledStepAsItIs(t *testing.T) {
	s, now := clockedStore(t)
	ctx := context.Background()
	create(t, s, "wf")
	finished := *now
	if _, _, err := settle(ctx, s, "wf", "b", store.Outcome{Error: "bad_request: no", Class: "bad_request", Output: "rejected"}, nil); err != nil {
		t.Fatal(err)
	}
	*now = now.Add(time.Minute)
	if state, _, err := settle(ctx, s, "wf", "b", store.Outcome{Error: "timeout: late", Class: "timeout"}, nil); err != nil || state != store.StateBlocked {
		t.Fatalf("b dead again: %q %v", state, err)
	}
	wf, _ := s.Get(ctx, "wf")
	if b := wf.Steps[1]; b.State != store.StepDead || b.Error != "bad_request: no" || b.Class != "bad_request" || b.Output != "rejected" ||
		b.FinishedAt == nil || !b.FinishedAt.Equal(finished) || wf.Counts == nil || wf.Counts.Dead != 1 {
		t.Fatalf("b after a second dead settle: %+v (finished %v), counts %+v", b, b.FinishedAt, wf.Counts)
	}
	if got := typesOf(t, s, "wf", "b"); !slices.Equal(got, []string{record.EventDead}) {
		t.Fatalf("the log of b: %v, want one step.dead", got)
	}

	create(t, s, "c")
	if _, err := s.Begin(ctx, "c", "a", "t-a", 0, time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(ctx, "c", []string{"a", "b", "c", "d"}); err != nil {
		t.Fatal(err)
	}
	if state, ready, err := settle(ctx, s, "c", "a", store.Outcome{Done: true, Output: "late", Attempt: 1}, chordDeps); err != nil || state != store.StateCanceled || len(ready) != 0 {
		t.Fatalf("a settled after the cancel: %q %v %v", state, ready, err)
	}
	wf, _ = s.Get(ctx, "c")
	if a := wf.Steps[0]; a.State != store.StepCanceled || a.Output != "" || a.FinishedAt != nil || wf.Counts == nil || wf.Counts.Settled != 0 {
		t.Fatalf("a after a settle of its canceled run: %+v, counts %+v", a, wf.Counts)
	}
	if got := strings.Join(typesOf(t, s, "c", "a"), " "); got != "step.started step.canceled" {
		t.Fatalf("the log of a: %s", got)
	}
}

// The events an attempt carried with an outcome whose settle ended without
// saying whether it landed are logged on their own with LogOnce: once,
// whether the settle landed (it logged them) or not, and whether it lands
// before or after.
func TestEventsOfAnOutcomeNotKnownToHaveLandedAreLoggedOnce(t *testing.T) {
	s, now := clockedStore(t)
	ctx := context.Background()
	create(t, s, "wf")
	evs := func(step string) []store.Event {
		return []store.Event{call(step, 1, *now, 1000), call(step, 1, now.Add(time.Second), 1000)}
	}
	// a's settle landed, its reply lost: LogOnce logs nothing more
	a := evs("a")
	if _, err := s.Settle(ctx, "wf", "a", store.Outcome{Done: true, Events: a}, nil); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := s.LogOnce(ctx, "wf", "a", a...); err != nil {
			t.Fatal(err)
		}
	}
	// b's settle did not land: LogOnce logs its calls, and the settle, if it
	// lands after all, its outcome only
	*now = now.Add(time.Minute)
	b := evs("b")
	for range 2 {
		if err := s.LogOnce(ctx, "wf", "b", b...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Settle(ctx, "wf", "b", store.Outcome{Done: true, Events: b}, nil); err != nil {
		t.Fatal(err)
	}
	for step, want := range map[string]string{"a": "llm.call llm.call step.done", "b": "llm.call llm.call step.done"} {
		if got := strings.Join(typesOf(t, s, "wf", step), " "); got != want {
			t.Errorf("the log of %s: %s, want %s", step, got, want)
		}
	}
	if wf, _ := s.Get(ctx, "wf"); wf.CostByProvider["p"] != 0.004 {
		t.Errorf("spend %v, want the four paid calls' 0.004", wf.CostByProvider)
	}
}

// With the log off, the spend of an attempt's calls is counted once the
// same: a settle delivered again counts nothing, a run that paid again
// counts its calls.
func TestSpendOfASettleDeliveredAgainIsCountedOnceWithTheLogOff(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	create(t, s, "wf")
	at := time.Now()
	first := store.Outcome{Done: true, Output: "one", Events: []store.Event{call("a", 1, at, 1000)}}
	for _, o := range []store.Outcome{first, first, {Done: true, Output: "two", Events: []store.Event{call("a", 1, at.Add(time.Second), 500)}}} {
		if _, err := s.Settle(ctx, "wf", "a", o, nil); err != nil {
			t.Fatal(err)
		}
	}
	if wf, _ := s.Get(ctx, "wf"); wf.CostByProvider["p"] != 0.0015 || wf.Steps[0].Output != "one" {
		t.Fatalf("spend %v, output %q; want 0.0015 (each paid call once), one", wf.CostByProvider, wf.Steps[0].Output)
	}
}
