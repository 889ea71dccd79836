package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/cli"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// What docs/concurrency.md's "Seeing it" says of a map whose instances
// wait for their key's slot: status shows the map's counters, not the
// wait; the instance pages (result --json --all, Client.Instances) show
// each throttled instance with its text and waits_for: key.
func TestAThrottledMapInstanceIsSeenWhereTheDocSays(t *testing.T) {
	gate := make(chan struct{})
	e := testenv.Start(t, testenv.Options{Steps: map[string]engine.StepFunc{
		"hold": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			select {
			case <-gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return "ok", nil
		}}})
	t.Cleanup(func() { close(gate) }) // before the worker stops (cleanups run last first)
	id := e.Submit(t, e.Spec(`name: held
input: { items: [1, 2] }
concurrency: { key: "acme", limit: 1 }
steps:
  - { id: answer, for_each: "{{ .Input.items }}", run: hold }
`))
	const text = `waits for a slot of concurrency key "acme" (limit 1)`
	poll.Until(t, 10*time.Second, func() (bool, string) {
		page, err := e.NewClient().Instances(t.Context(), id, "answer", 0, 2)
		if err != nil {
			return false, err.Error()
		}
		for _, s := range page.Instances {
			if s.State == store.StepThrottled {
				if s.Output != text || s.WaitsFor != record.WaitsForKey {
					t.Fatalf("throttled instance %s: output %q, waits_for %q; want %q and %q", s.ID, s.Output, s.WaitsFor, text, record.WaitsForKey)
				}
				return true, ""
			}
		}
		return false, fmt.Sprintf("no instance throttled: %+v", page.Instances)
	})
	vars, cfg := envFor(t, e)

	r := run(t, cli.Enqueue, vars, "status", id, "--config", cfg)
	if r.code != 0 || !strings.Contains(r.out, "mapped (0/2 items settled)") || strings.Contains(r.out, "waits for a slot") {
		t.Fatalf("status (exit %d): want the map's counters and no wait:\n%s", r.code, r.out)
	}
	r = run(t, cli.Enqueue, vars, "result", id, "--json", "--all", "--config", cfg)
	var got struct {
		Steps []struct {
			Instances []struct {
				State    string `json:"state"`
				Output   string `json:"output"`
				WaitsFor string `json:"waits_for"`
			} `json:"instances"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(r.out), &got); err != nil || len(got.Steps) != 1 {
		t.Fatalf("result --json --all: %v\n%s", err, r.out)
	}
	seen := false
	for _, in := range got.Steps[0].Instances {
		seen = seen || (in.State == "throttled" && in.Output == text && in.WaitsFor == "key")
	}
	if !seen {
		t.Fatalf("result --json --all has no throttled instance with its text and waits_for key:\n%s", r.out)
	}

	doc, err := os.ReadFile("../../docs/concurrency.md")
	if err != nil {
		t.Fatal(err)
	}
	said := strings.Join(strings.Fields(string(doc)), " ")
	for _, want := range []string{
		"A map's instances are not in the status: its row shows the map's counters only",
		"`enqueue result ID --json --all`, `Client.Instances`",
		"`\"waits_for\": \"key\"`",
	} {
		if !strings.Contains(said, want) {
			t.Errorf("docs/concurrency.md does not say %q", want)
		}
	}
}
