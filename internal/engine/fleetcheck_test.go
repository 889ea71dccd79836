package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/defaults"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/problem"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// refused submits spec with c and wants it refused as ErrInvalidSpec with
// exactly one problem, want, and nothing written.
func refused(t *testing.T, c *producer.Client, src, want string) {
	t.Helper()
	s, err := c.Parse("w.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.Submit(context.Background(), s)
	lines := problem.Lines(err)
	if id != "" || !errors.Is(err, spec.ErrInvalidSpec) || len(lines) != 1 || !strings.Contains(lines[0], want) {
		t.Fatalf("submit: id %q, %q; want ErrInvalidSpec and one line with %q", id, lines, want)
	}
}

// A client with no configuration of its own (no routes) checks a spec
// against what the live workers advertise: a step whose route, code step
// or queue none serves is refused with one line naming it, and nothing is
// written; a tool the spec describes itself passes (it goes to the model).
// Once the last worker stops, every submit is ErrNoWorkers;
// WithoutWorkerCheck and SkipWorkerCheck submit anyway.
func TestSubmitIsCheckedAgainstLiveWorkers(t *testing.T) {
	noop := func(context.Context, *engine.CodeStep) (any, error) { return map[string]int{"rows": 1}, nil }
	e := testenv.Start(t, testenv.Options{Steps: map[string]engine.StepFunc{"fetch": noop, "summarize": noop}})
	var clock atomic.Int64 // the client's clock, in seconds: a submit reuses the fleet it read under a second ago
	clock.Store(time.Now().Unix())
	c := producer.NewClient(e.Redis, producer.ClientOptions{Retention: defaults.Retention, Limits: spec.DefaultLimits(), Now: func() time.Time { return time.Unix(clock.Load(), 0) }})
	ctx := context.Background()

	refused(t, c, "name: r\nsteps:\n  - { id: a, route: main, prompt: hi }\n  - { id: b, route: nope, prompt: hi, depends_on: [a] }\n",
		`line 4: steps[1] (b): no live worker serves route "nope" on queue default (live workers serve: fallback, flaky, hedged, limited, main, scored, solo)`)
	refused(t, c, "name: r\nsteps:\n  - { id: a, route: main, prompt: hi }\n  - { id: b, run: fetch }\n  - { id: per_region, run: run_sql }\n",
		`steps[2] (per_region): no live worker serves handler "run_sql" on queue default (live workers serve: fetch, summarize)`)
	refused(t, c, "name: r\nsteps:\n  - { id: a, route: main, prompt: hi, queue: reports }\n",
		`steps[0] (a): no live worker serves queue "reports" (live workers serve queues: default)`)
	if wfs, _ := c.List(ctx, "", 10); len(wfs) != 0 {
		t.Fatalf("a refused spec was written: %+v", wfs)
	}

	ok, err := c.Parse("ok.yaml", []byte(`name: ok
steps:
  - id: a
    route: solo
    prompt: weather?
    tools: [ { name: get_weather, description: the weather, parameters: { type: object } } ]
  - { id: b, run: fetch, depends_on: [a] }
`))
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.Submit(ctx, ok)
	if err != nil {
		t.Fatalf("a spec the worker serves: %v", err)
	}
	e.Wait(t, id, 10*time.Second, store.StateCompleted)

	e.StopWorker(t)
	// the client read the fleet for the submit above: under a second later
	// it still counts the stopped worker, a second later it reads again
	if _, err := c.Submit(ctx, ok); err != nil {
		t.Fatalf("a submit under a second after the fleet was read: %v, want it checked against that read", err)
	}
	clock.Add(1)
	if _, err := c.Submit(ctx, ok); !errors.Is(err, producer.ErrNoWorkers) || errors.Is(err, spec.ErrInvalidSpec) {
		t.Fatalf("with no worker alive: %v, want ErrNoWorkers", err)
	}
	if _, err := c.Submit(ctx, ok, producer.WithoutWorkerCheck()); err != nil {
		t.Fatalf("WithoutWorkerCheck: %v", err)
	}
	if _, err := producer.NewClient(e.Redis, producer.ClientOptions{Retention: defaults.Retention, Limits: spec.DefaultLimits(), SkipWorkerCheck: true}).Submit(ctx, ok); err != nil {
		t.Fatalf("SkipWorkerCheck: %v", err)
	}
}

// Status says which waiting step no live worker serves (computed when
// read): a step on a queue no worker takes, and every waiting step once no
// worker is alive; a served one says nothing.
func TestStatusShowsUnservedSteps(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	c := producer.NewClient(e.Redis, producer.ClientOptions{Retention: defaults.Retention, Limits: spec.DefaultLimits()})
	ctx := context.Background()
	s, err := c.Parse("w.yaml", []byte("name: u\nsteps:\n  - { id: stuck, route: solo, prompt: hi, queue: reports }\n  - { id: after, route: solo, prompt: hi, depends_on: [stuck] }\n"))
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.Submit(ctx, s, producer.WithoutWorkerCheck())
	if err != nil {
		t.Fatal(err)
	}
	wf, err := c.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got := wf.Steps[0].Unserved; got != `no live worker serves queue "reports" (live workers serve queues: default)` {
		t.Fatalf("stuck: unserved %q", got)
	}
	if got := wf.Steps[1].Unserved; got != "" {
		t.Fatalf("after (served on default): unserved %q", got)
	}
	data, _ := json.Marshal(wf)
	if !strings.Contains(string(data), `"unserved":"no live worker serves queue \"reports\"`) {
		t.Fatalf("workflow JSON %s", data)
	}
	if raw, _ := e.Redis.HGetAll(ctx, "agentq:{wf:"+id+"}:wf").Result(); strings.Contains(strings.Join(mapValues(raw), " "), "no live worker") {
		t.Fatal("unserved was stored")
	}
	e.StopWorker(t)
	wf, err = c.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got := wf.Steps[1].Unserved; got != `no live worker serves queue "default"` {
		t.Fatalf("after, with no worker: unserved %q", got)
	}
}

func mapValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// A client reuses the fleet it read only to accept: a spec the workers it
// remembers do not serve is checked against a fresh read, so a worker that
// started a moment ago is seen at once (the clock is frozen here).
func TestSubmitSeesAWorkerThatJustStarted(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	frozen := time.Now()
	c := producer.NewClient(e.Redis, producer.ClientOptions{Retention: defaults.Retention, Limits: spec.DefaultLimits(), Now: func() time.Time { return frozen }})
	ctx := context.Background()
	served, err := c.Parse("s.yaml", []byte("name: s\nsteps:\n  - { id: a, route: solo, prompt: hi }\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Submit(ctx, served); err != nil {
		t.Fatal(err)
	}
	late, err := c.Parse("l.yaml", []byte("name: l\nsteps:\n  - { id: a, run: late_step }\n"))
	if err != nil {
		t.Fatal(err)
	}
	ad := store.WorkerAd{ID: "late-worker", Queues: map[string]int{"default": 1}, Handlers: []string{"late_step"}, StartedAt: time.Now()}
	if err := store.NewFleet(e.Redis, nil).Advertise(ctx, ad, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Submit(ctx, late); err != nil {
		t.Fatalf("a spec only the worker that just started serves: %v", err)
	}
}
