package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/retry"
)

// failFirstSettle is a go-redis hook that fails the first settle of a
// step: its reply lost after it landed (landed), or its write failed
// before it did. The caller sees an error it does not retry.
type failFirstSettle struct {
	settled string // the step's settled field: only the settle script's arguments hold it
	landed  bool
	done    atomic.Bool
}

func (h *failFirstSettle) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *failFirstSettle) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *failFirstSettle) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.done.Load() || !slices.Contains(cmd.Args(), any(h.settled)) {
			return next(ctx, cmd)
		}
		if h.landed {
			if err := next(ctx, cmd); err != nil {
				return err // NOSCRIPT: go-redis sends the script itself next
			}
		}
		if !h.done.CompareAndSwap(false, true) {
			return cmd.Err()
		}
		err := errors.New("injected: the settle's reply was lost")
		if !h.landed {
			err = errors.New("injected: the settle's write failed")
		}
		cmd.SetErr(err)
		return err
	}
}

// A step's settle fails (its write, or only its reply: the outcome landed
// and the caller saw an error), the answer is kept in the worker's memory,
// and the worker is replaced before the step's next attempt, which pays
// the provider again: the log has an llm.call for each of the two paid
// calls, and the step's outcome once. When the outcome had landed, the
// next attempt's outcome (its checkpoint did not match: its inputs
// changed) rewrites nothing of the step's record.
func TestEveryPaidCallIsLoggedAfterASettleThatFailed(t *testing.T) {
	for _, landed := range []bool{false, true} {
		t.Run(fmt.Sprintf("landed=%v", landed), func(t *testing.T) {
			t.Parallel()
			e := testenv.Start(t, testenv.Options{NoWorker: true, Middleware: func(next asynq.Handler) asynq.Handler {
				return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
					err := next.ProcessTask(ctx, t)
					var se *engine.StepError
					if errors.As(err, &se) && se.Class == retry.Unrecorded {
						se.Delay = 3 * time.Second // time to replace the worker, which keeps the answer
					}
					return err
				})
			}})
			e.Redis.AddHook(&failFirstSettle{settled: "s.settled", landed: landed})
			e.StartWorker(t)
			ctx := context.Background()
			id := e.Submit(t, e.Spec(step("solo", "")))
			await := func(state string) {
				t.Helper()
				timeout := time.After(30 * time.Second)
				for {
					select {
					case ev := <-e.Events:
						if ev.Step == "s" && ev.State == state {
							return
						}
					case <-timeout:
						t.Fatalf("no %s event of the step", state)
					}
				}
			}
			await("unrecorded")
			first, err := e.Store.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if landed {
				if s := first.Steps[0]; s.State != store.StepDone || s.FinishedAt == nil {
					t.Fatalf("the settle whose reply was lost: %+v, want it landed", s)
				}
				// the step's inputs changed since: its checkpoint no longer matches
				if err := e.Redis.HSet(ctx, store.Prefix+"{wf:"+id+"}:wf", "s.input_hash", "changed").Err(); err != nil {
					t.Fatal(err)
				}
			}
			e.StopWorker(t)
			e.StartWorker(t) // without the answer the first one kept
			await(store.StepDone)
			wf := e.Wait(t, id, 30*time.Second, store.StateCompleted)
			if n := e.Chaos.Snapshot().Count("openai", "", "ok"); n != 2 {
				t.Fatalf("%d answers, want 2: the next attempt was to pay the provider again", n)
			}
			var calls []int
			for _, ev := range eventsOf(t, e, id, "s", record.EventLLMCall) {
				calls = append(calls, ev.Attempt)
			}
			wantCalls := []int{1, 2}
			if landed {
				wantCalls = []int{1, 1} // a done step's run begins no attempt
			}
			if !slices.Equal(calls, wantCalls) {
				t.Errorf("llm.call events of attempts %v, want %v: one for each paid call", calls, wantCalls)
			}
			if n := countEvents(t, e, id, "s", record.EventDone); n != 1 {
				t.Errorf("%d step.done events, want 1", n)
			}
			if landed {
				s, f := wf.Steps[0], first.Steps[0]
				if s.Output != f.Output || s.Target != f.Target || s.Usage != f.Usage || s.FinishedAt == nil || !s.FinishedAt.Equal(*f.FinishedAt) {
					t.Errorf("the record after the step's run again: %+v (finished %v), want the first outcome's: %+v (finished %v)",
						s, s.FinishedAt, f, f.FinishedAt)
				}
			}
		})
	}
}
