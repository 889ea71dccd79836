package engine_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/tasks"
)

// A prompt that is within the nesting limit but would range over 8,000,000
// items is accepted, then stopped at its render budget by the worker: the
// step is dead-lettered as bad_request with the reason, without calling
// the LLM, and the worker goes on.
func TestRenderOverItsBudgetIsDeadLetteredAsBadRequest(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	items := make([]string, 200)
	for i := range items {
		items[i] = "item"
	}
	id := e.Submit(t, e.Spec(`
name: loops
input: { l: [`+strings.Join(items, ", ")+`] }
steps:
  - id: s
    route: solo
    prompt: "{{ range .Input.l }}{{ range $.Input.l }}{{ range $.Input.l }}{{ end }}{{ end }}{{ end }}"
`))
	wf := e.Wait(t, id, 10*time.Second, store.StateBlocked, store.StateCompleted)
	const reason = "template for step s (prompt) stopped: it would take more than 1,000,000 iterations, the limit per render"
	if s := wf.Steps[0]; wf.State != store.StateBlocked || s.State != store.StepDead || s.Attempts != 1 ||
		!strings.HasPrefix(s.Error, "bad_request") || !strings.Contains(s.Error, reason) {
		t.Fatalf("workflow %s, step = %+v; want it dead-lettered as bad_request with %q", wf.State, wf.Steps[0], reason)
	}
	if info := archived(t, e, tasks.TaskID(id, "s")); !strings.Contains(info.LastErr, reason) {
		t.Fatalf("archived with %q", info.LastErr)
	}
	if n := e.Chaos.Snapshot().Total; n != 0 {
		t.Fatalf("%d LLM calls for a prompt that never rendered", n)
	}
	// the worker goes on
	id = e.Submit(t, e.Spec(oneStep))
	e.Wait(t, id, 10*time.Second, store.StateCompleted)
}
