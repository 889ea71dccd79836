package mcpserve

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// A wait ends at its bound, when the server stops, when a step is
// dead-lettered, or at once when MaxWaiting calls wait already; each
// returns the workflow as it is then and says so.
func TestWaitEnds(t *testing.T) {
	req := &mcp.CallToolRequest{} // no progress token
	t.Run("bound", func(t *testing.T) {
		e := testenv.Start(t, testenv.Options{NoWorker: true})
		id := e.Submit(t, e.Spec("name: p\nsteps:\n  - { id: s, route: solo, prompt: hi }\n"))
		tl := &tools{b: e.Client, o: Options{Stop: context.Background()}, waiting: make(chan struct{}, 1)}
		start := time.Now()
		wf, how, note, err := tl.wait(t.Context(), req, id, 300*time.Millisecond)
		if err != nil || how != waitedTimeout || wf.State != "pending" || !strings.Contains(note, "still pending after 300ms") {
			t.Fatalf("wait: %v %q %q %+v", err, how, note, wf)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("a 300ms wait took %s", took)
		}
	})
	t.Run("stopped", func(t *testing.T) {
		e := testenv.Start(t, testenv.Options{NoWorker: true})
		id := e.Submit(t, e.Spec("name: p\nsteps:\n  - { id: s, route: solo, prompt: hi }\n"))
		stop, cancel := context.WithCancel(context.Background())
		cancel()
		tl := &tools{b: e.Client, o: Options{Stop: stop}, waiting: make(chan struct{}, 1)}
		if _, how, note, err := tl.wait(t.Context(), req, id, time.Minute); err != nil || how != waitedStopped || !strings.Contains(note, "shutting down") {
			t.Fatalf("wait: %v %q %q", err, how, note)
		}
	})
	t.Run("busy", func(t *testing.T) {
		e := testenv.Start(t, testenv.Options{NoWorker: true})
		id := e.Submit(t, e.Spec("name: p\nsteps:\n  - { id: s, route: solo, prompt: hi }\n"))
		tl := &tools{b: e.Client, o: Options{Stop: context.Background()}, waiting: make(chan struct{}, 1)}
		tl.waiting <- struct{}{} // one call waits already
		if wf, how, note, err := tl.wait(t.Context(), req, id, time.Minute); err != nil || how != waitedBusy || wf.ID != id || !strings.Contains(note, "1 waits in progress") {
			t.Fatalf("wait: %v %q %q", err, how, note)
		}
	})
	t.Run("blocked", func(t *testing.T) {
		e := testenv.Start(t, testenv.Options{})
		id := e.Submit(t, e.Spec("name: f\nsteps:\n  - { id: s, route: flaky, prompt: hi, max_retries: 0 }\n"))
		tl := &tools{b: e.Client, o: Options{Stop: context.Background()}, waiting: make(chan struct{}, 1)}
		if wf, how, note, err := tl.wait(t.Context(), req, id, 30*time.Second); err != nil || how != waitedBlocked || wf.State != "blocked" || !strings.Contains(note, "dead-lettered") {
			t.Fatalf("wait: %v %q %q", err, how, note)
		}
	})
}
