package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq"
	"github.com/agentq/agentq/internal/cli"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// result --json --all carries every instance of a map, more than one page
// of them, in item order, under its map step; --json alone does not.
func TestResultJSONAllHasEveryInstance(t *testing.T) {
	const n = agentq.MaxInstancesPage + 3
	e := testenv.Start(t, testenv.Options{Steps: map[string]engine.StepFunc{"double": func(ctx context.Context, s *engine.CodeStep) (any, error) {
		var v int
		if err := s.Item(&v); err != nil {
			return nil, err
		}
		return 2 * v, nil
	}}})
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprint(i)
	}
	id := e.Submit(t, e.Spec(`name: wide
input: { items: [`+strings.Join(items, ",")+`] }
steps:
  - { id: each, for_each: "{{ .Input.items }}", max_items: `+fmt.Sprint(n)+`, run: double }
`))
	e.Wait(t, id, 60*time.Second, store.StateCompleted)
	vars, cfg := envFor(t, e)

	type doc struct {
		ID    string `json:"id"`
		Steps []struct {
			ID        string               `json:"id"`
			Map       *struct{ Items int } `json:"map"`
			Instances []struct {
				ID     string `json:"id"`
				State  string `json:"state"`
				Output string `json:"output"`
			} `json:"instances"`
		} `json:"steps"`
	}
	r := run(t, cli.Enqueue, vars, "result", id, "--json", "--all", "--config", cfg)
	var got doc
	if r.code != 0 || json.Unmarshal([]byte(r.out), &got) != nil || got.ID != id || len(got.Steps) != 1 {
		t.Fatalf("result --json --all: exit %d, %s\n%.2000s", r.code, r.err, r.out)
	}
	s := got.Steps[0]
	if s.Map == nil || s.Map.Items != n || len(s.Instances) != n {
		t.Fatalf("map step %s: %d instances of %+v, want %d", s.ID, len(s.Instances), s.Map, n)
	}
	for i, in := range s.Instances {
		if in.ID != fmt.Sprintf("each[%d]", i) || in.State != store.StepDone || in.Output != fmt.Sprint(2*i) {
			t.Fatalf("instance %d: %+v, want each[%d] done with %d", i, in, i, 2*i)
		}
	}

	r = run(t, cli.Enqueue, vars, "result", id, "--json", "--config", cfg)
	got = doc{}
	if r.code != 0 || json.Unmarshal([]byte(r.out), &got) != nil || len(got.Steps) != 1 || got.Steps[0].Instances != nil {
		t.Fatalf("result --json: exit %d, want the workflow without instances:\n%.500s", r.code, r.out)
	}
}
