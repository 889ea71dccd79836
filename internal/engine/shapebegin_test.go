package engine_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// specReads counts the commands that read a workflow's spec on its own
// (HGET <record> spec).
type specReads struct{ n atomic.Int64 }

func (h *specReads) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *specReads) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *specReads) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); len(a) == 3 && strings.EqualFold(fmt.Sprint(a[0]), "hget") && a[2] == "spec" {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

// A worker that ran a workflow of a spec begins the next workflows of
// the same spec (another input) without reading their specs first: the
// begin reads it (the step tasks name the spec's shape). Each step still
// sees its own workflow's input; a step bound by a concurrency key whose
// template reads the input reads the spec first, as before.
func TestAKnownSpecShapeBeginsWithoutReadingTheSpec(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	reads := &specReads{}
	e.Redis.(*redis.Client).AddHook(reads)
	submit := func(yaml string, from, n int) []string {
		t.Helper()
		var ids []string
		for i := from; i < from+n; i++ {
			s := e.Spec(yaml)
			s.Input = map[string]any{"n": i}
			ids = append(ids, e.Submit(t, s))
		}
		return ids
	}
	wait := func(from int, ids []string) {
		t.Helper()
		for i, id := range ids {
			wf := e.Wait(t, id, 30*time.Second, store.StateCompleted)
			if want := fmt.Sprintf("item %d", from+i); !strings.HasSuffix(wf.Steps[0].Output, want) {
				t.Errorf("workflow %s (input %d) answered %q, want the answer to %q", id, from+i, wf.Steps[0].Output, want)
			}
		}
	}
	run := func(yaml string, from, n int) { t.Helper(); wait(from, submit(yaml, from, n)) }
	const plain = "name: one\ndefaults: { route: solo }\nsteps:\n  - { id: s0, prompt: \"item {{ .Input.n }}\" }\n"
	first := submit(plain, 0, 1) // submitted before the worker starts: its spec is read
	e.StartWorker(t)
	wait(0, first)
	run(plain, 1, 1)
	before := reads.n.Load()
	run(plain, 2, 10)
	if got := reads.n.Load() - before; got != 0 {
		t.Errorf("%d spec reads for 10 workflows of a spec the worker knows, want 0", got)
	}
	const keyed = "name: keyed\ndefaults: { route: solo }\nconcurrency: { key: \"k-{{ .Input.n }}\", limit: 5 }\nsteps:\n  - { id: s0, prompt: \"item {{ .Input.n }}\" }\n"
	run(keyed, 20, 1)
	before = reads.n.Load()
	run(keyed, 21, 3)
	if got := reads.n.Load() - before; got != 3 {
		t.Errorf("%d spec reads for 3 workflows whose key reads the input, want 3", got)
	}
}
