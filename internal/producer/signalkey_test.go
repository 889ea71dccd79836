package producer_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// waiterSpec is a workflow of one step that waits for signal "paid"
// matching match.
func waiterSpec(e *testenv.Env, match string) *spec.Spec {
	return e.Spec(fmt.Sprintf(`name: waiter
input: { match: %q }
steps:
  - { id: paid, wait_for: { signal: paid, match: "{{ .Input.match }}", timeout: 1h } }
`, match))
}

// waitForWaiters polls until n steps wait on signal "paid" matching
// match (the workflow is waiting before its step waits on the name).
func waitForWaiters(t *testing.T, e *testenv.Env, match string, n int64) {
	t.Helper()
	poll.Until(t, 30*time.Second, func() (bool, string) {
		_, waiting, err := e.Store.KeptSignals(t.Context(), "paid", match)
		return err == nil && waiting == n, fmt.Sprintf("%s: %d steps wait, want %d (%v)", match, waiting, n, err)
	})
}

// sendAtOnce sends s from n goroutines released together, and returns
// their results.
func sendAtOnce(t *testing.T, c *producer.Client, s producer.Signal, n int) []*producer.SignalResult {
	t.Helper()
	var (
		start = make(chan struct{})
		wg    sync.WaitGroup
		res   = make([]*producer.SignalResult, n)
		errs  = make([]error, n)
	)
	for i := range n {
		wg.Go(func() {
			<-start
			res[i], errs[i] = c.Signal(t.Context(), s)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("caller %d of %s: %v", i, s.Match, err)
		}
	}
	return res
}

// Twenty concurrent sends of one idempotency key, while two steps wait,
// are delivered once: one send completes both steps, the other nineteen
// are duplicates of it that deliver and keep nothing, so no copy is left
// for a workflow that begins waiting later. Repeated over many keys.
func TestConcurrentSendsOfOneIdempotencyKeyAreDeliveredOnce(t *testing.T) {
	const keys, callers = 30, 20
	e := testenv.Start(t, testenv.Options{})
	waiting := make(map[string][]string, keys)
	for k := range keys {
		match := fmt.Sprintf("order-%d", k)
		waiting[match] = []string{e.Submit(t, waiterSpec(e, match)), e.Submit(t, waiterSpec(e, match))}
	}
	for match := range waiting {
		waitForWaiters(t, e, match, 2)
	}
	for match, ids := range waiting {
		s := producer.Signal{Name: "paid", Match: match, Data: json.RawMessage(`{"amount": 1}`), IdempotencyKey: "evt-" + match}
		res := sendAtOnce(t, e.Client, s, callers)
		var firsts, delivered int
		for _, r := range res {
			if r.ID != res[0].ID {
				t.Fatalf("%s: ids %s and %s for one key", match, r.ID, res[0].ID)
			}
			if !r.Duplicate {
				firsts++
			}
			if r.Kept {
				t.Errorf("%s: a send kept a copy while steps waited: %+v", match, r)
			}
			delivered += len(r.Delivered)
		}
		if firsts != 1 || delivered != 2 {
			t.Fatalf("%s: %d of %d sends were not duplicates, %d deliveries: want 1 send, 2 steps completed", match, firsts, callers, delivered)
		}
		if kept, _, err := e.Store.KeptSignals(t.Context(), "paid", match); err != nil || kept != 0 {
			t.Fatalf("%s: %d copies kept (%v): want none, the signal was delivered", match, kept, err)
		}
		for _, id := range ids {
			e.Wait(t, id, 20*time.Second, store.StateCompleted)
		}
	}
	// a workflow that waits later finds no copy to take: it waits
	later := make(map[string]string, keys)
	for match := range waiting {
		later[match] = e.Submit(t, waiterSpec(e, match))
	}
	for match, id := range later {
		poll.Until(t, 30*time.Second, func() (bool, string) {
			wf, err := e.Store.Get(t.Context(), id)
			if err == nil && wf.State == store.StateCompleted {
				t.Fatalf("%s: workflow %s, begun after the signal, took a copy of it", match, id)
			}
			_, waiting, err2 := e.Store.KeptSignals(t.Context(), "paid", match)
			return err == nil && err2 == nil && wf.State == store.StateWaiting && waiting == 1,
				fmt.Sprintf("%s: the later workflow is %v, %d waiters (%v %v)", match, wf, waiting, err, err2)
		})
	}
}

// Twenty concurrent sends of one idempotency key while no step waits keep
// one copy: the first workflow to wait takes it, the second waits.
func TestConcurrentSendsOfOneIdempotencyKeyKeepOneCopy(t *testing.T) {
	const keys, callers = 10, 20
	e := testenv.Start(t, testenv.Options{})
	for k := range keys {
		match := fmt.Sprintf("kept-%d", k)
		s := producer.Signal{Name: "paid", Match: match, Data: json.RawMessage(`{"amount": 2}`), IdempotencyKey: "evt-" + match}
		res := sendAtOnce(t, e.Client, s, callers)
		var firsts int
		for _, r := range res {
			if !r.Duplicate {
				firsts++
				if !r.Kept {
					t.Fatalf("%s: the first send: %+v, want kept", match, r)
				}
			}
		}
		if firsts != 1 {
			t.Fatalf("%s: %d of %d sends were not duplicates", match, firsts, callers)
		}
		if kept, _, err := e.Store.KeptSignals(t.Context(), "paid", match); err != nil || kept != 1 {
			t.Fatalf("%s: %d copies kept (%v), want 1", match, kept, err)
		}
		first := e.Submit(t, waiterSpec(e, match))
		e.Wait(t, first, 20*time.Second, store.StateCompleted)
		second := e.Submit(t, waiterSpec(e, match))
		e.Wait(t, second, 20*time.Second, store.StateWaiting)
		waitForWaiters(t, e, match, 1)
	}
}

// A send of an idempotency key whose first sender holds its claim is a
// duplicate that sends nothing; once the claim lapsed (the first sender
// died after taking the waiting steps), the next send finishes the first
// one, with its id and data, and twenty at once finish it once.
func TestAnIdempotentSendCutShortIsFinishedOnceItsClaimLapses(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	later := producer.NewClient(e.Redis, producer.ClientOptions{Retention: e.Config.Retention.D(), SkipWorkerCheck: true,
		Now: func() time.Time { return time.Now().Add(2 * time.Minute) }}) // past the claim's lease
	for _, c := range []struct {
		match   string
		callers int
	}{{"crash-1", 1}, {"crash-20", 20}} {
		id := e.Submit(t, waiterSpec(e, c.match))
		waitForWaiters(t, e, c.match, 1)
		if _, err := e.Store.SendSignal(t.Context(), "paid", c.match, "sig_first", `{"amount":3}`, "evt-"+c.match, time.Hour, time.Minute); err != nil {
			t.Fatal(err)
		} // ... and the sender died here, its claim held
		s := producer.Signal{Name: "paid", Match: c.match, Data: json.RawMessage(`{"amount": 4}`), IdempotencyKey: "evt-" + c.match}
		for _, r := range sendAtOnce(t, e.Client, s, c.callers) {
			if !r.Duplicate || r.ID != "sig_first" || len(r.Delivered) != 0 || r.Kept {
				t.Fatalf("%s: a send while the claim holds: %+v, want a duplicate of sig_first that sends nothing", c.match, r)
			}
		}
		if wf, err := e.Store.Summary(t.Context(), id); err != nil || wf.State != store.StateWaiting {
			t.Fatalf("%s: the duplicate reached workflow %s: %+v %v", c.match, id, wf, err)
		}
		var delivered []producer.SignalTarget
		for _, r := range sendAtOnce(t, later, s, c.callers) {
			if !r.Duplicate || r.ID != "sig_first" || r.Kept {
				t.Fatalf("%s: a send once the claim lapsed: %+v, want the first send finished", c.match, r)
			}
			delivered = append(delivered, r.Delivered...)
		}
		if len(delivered) != 1 || delivered[0] != (producer.SignalTarget{Workflow: id, Step: "paid"}) {
			t.Fatalf("%s: the first send finished to %+v, want %s once", c.match, delivered, id)
		}
		if wf := e.Wait(t, id, 20*time.Second, store.StateCompleted); wf.Steps[0].Output != `{"amount":3}` {
			t.Fatalf("%s: the step's output %q, want the first send's data", c.match, wf.Steps[0].Output)
		}
		if kept, waiting, err := e.Store.KeptSignals(t.Context(), "paid", c.match); err != nil || kept != 0 || waiting != 0 {
			t.Fatalf("%s: %d kept, %d waiting (%v): want none", c.match, kept, waiting, err)
		}
		if r, err := later.Signal(t.Context(), s); err != nil || !r.Duplicate || len(r.Delivered) != 0 || r.Kept {
			t.Fatalf("%s: a send after it was finished: %+v %v, want a duplicate", c.match, r, err)
		}
	}
}
