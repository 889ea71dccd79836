package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// A map instance that waited for its concurrency key's slot, then ran and
// was dead-lettered, says why it died, not what it once waited for: its
// throttled text is gone once it begins.
func TestADeadThrottledInstanceSaysWhyItDied(t *testing.T) {
	gate := make(chan struct{})
	e := testenv.Start(t, testenv.Options{Steps: map[string]engine.StepFunc{
		"refuse": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			select {
			case <-gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return nil, engine.ToDeadLetter(errors.New("the item is refused"))
		}}})
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(open) // before the worker stops, should the test end early
	id := e.Submit(t, e.Spec(`name: refused
input: { items: [1, 2] }
concurrency: { key: "one-at-a-time", limit: 1 }
steps:
  - { id: each, for_each: "{{ .Input.items }}", run: refuse, optional: true }
`))
	// one instance holds the slot (at the gate), the other waits for it
	poll.Until(t, 10*time.Second, func() (bool, string) {
		page, err := e.Store.Instances(t.Context(), id, "each", 0, 2)
		if err != nil {
			return false, err.Error()
		}
		for _, s := range page {
			if s.State == store.StepThrottled && strings.Contains(s.Output, "waits for a slot") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("no instance throttled: %+v", page)
	})
	open()
	e.Wait(t, id, 20*time.Second, store.StateCompleted, store.StateFailed, store.StateBlocked)
	page, err := e.Store.Instances(t.Context(), id, "each", 0, 2)
	if err != nil || len(page) != 2 {
		t.Fatalf("instances %+v, %v", page, err)
	}
	for _, s := range page {
		if s.State != store.StepDead || !strings.Contains(s.Error, "the item is refused") {
			t.Errorf("instance %s: %s, error %q; want dead, saying why", s.ID, s.State, s.Error)
		}
		if strings.Contains(s.Output, "waits for a slot") {
			t.Errorf("instance %s is %s and still says %q", s.ID, s.State, s.Output)
		}
	}
}
