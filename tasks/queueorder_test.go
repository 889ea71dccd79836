package tasks_test

import (
	"slices"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/internal/worker"
)

// A fan-in step made ready by a settle goes to the head of its queue; a
// chain's next link to the tail. With one slot: a chord's body runs right
// after its last member, before the roots of workflows submitted after the
// chord (a FIFO queue would run those first, so that a burst of submits
// held every body back behind every later chord's members); a chain's
// second step waits behind those roots like any new step.
func TestAFanInRunsBeforeLaterRootsAndAChainLinkAfterThem(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	if !e.Store.EnqueuesTasks() {
		t.Skip("the store does not enqueue tasks on this Redis")
	}
	chord := e.Submit(t, e.Spec(`
name: chord
defaults: { route: solo }
steps:
  - { id: a, prompt: "part a" }
  - { id: b, prompt: "part b" }
  - { id: j, prompt: "join {{ .Steps.a.Output }} {{ .Steps.b.Output }}", depends_on: [a, b] }
`))
	chain := e.Submit(t, e.Spec(`
name: chain
defaults: { route: solo }
steps:
  - { id: c1, prompt: "first" }
  - { id: c2, prompt: "then {{ .Steps.c1.Output }}", depends_on: [c1] }
`))
	single := e.Spec(`
name: single
steps:
  - { id: x, route: solo, prompt: "alone" }
`)
	later := map[string]bool{}
	for range 3 {
		later[e.Submit(t, single)] = true
	}
	runWorker(t, e, nil, func(o *worker.Options) { o.Config.Worker.Concurrency = 1 })

	want := []string{"a", "b", "j", "c1", "later", "later", "later", "c2"}
	var order []string
	deadline := time.After(30 * time.Second)
	for len(order) < len(want) {
		select {
		case ev := <-e.Events:
			if ev.State != store.StepDone {
				continue
			}
			switch {
			case ev.Workflow == chord || ev.Workflow == chain:
				order = append(order, ev.Step)
			case later[ev.Workflow]:
				order = append(order, "later")
			}
		case <-deadline:
			t.Fatalf("steps done after 30s: %q", order)
		}
	}
	if !slices.Equal(order, want) {
		t.Fatalf("steps ran in the order %q, want %q", order, want)
	}
}
