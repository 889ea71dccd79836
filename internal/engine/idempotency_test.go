package engine_test

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

const keyedSpec = `
name: keyed
input: { who: "Ada" }
steps:
  - { id: greet, route: solo, prompt: "Say hello to {{ .Input.who }}" }
`

// A second submit with the same idempotency key creates nothing (the
// database holds the same keys before and after) and returns the same
// workflow; the same key with another input is refused and creates
// nothing either.
func TestIdempotencyKeySubmitsOnce(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	ctx := t.Context()
	first, err := e.Client.SubmitWorkflow(ctx, e.Spec(keyedSpec), producer.WithIdempotencyKey("order-1234"))
	if err != nil || first.Existing || first.ID != store.IdempotentID("order-1234") {
		t.Fatalf("first submit: %+v %v", first, err)
	}
	before := dbKeys(t, e)
	again, err := e.Client.SubmitWorkflow(ctx, e.Spec(keyedSpec), producer.WithIdempotencyKey("order-1234"))
	if err != nil || !again.Existing || again.ID != first.ID {
		t.Fatalf("second submit: %+v %v (first %s)", again, err, first.ID)
	}
	if after := dbKeys(t, e); after != before {
		t.Fatalf("the second submit changed the database: %d keys before, %d after", before, after)
	}
	other := e.Spec(keyedSpec)
	other.Input["who"] = "Grace"
	_, err = e.Client.SubmitWorkflow(ctx, other, producer.WithIdempotencyKey("order-1234"))
	var ce *producer.ConflictError
	if !errors.Is(err, producer.ErrIdempotencyConflict) || !errors.As(err, &ce) || ce.Workflow != first.ID {
		t.Fatalf("another input with the key: %v", err)
	}
	if after := dbKeys(t, e); after != before {
		t.Fatalf("the refused submit changed the database: %d keys before, %d after", before, after)
	}
	if wfs, _ := e.Client.List(ctx, "", 10); len(wfs) != 1 {
		t.Fatalf("%d workflows, want 1", len(wfs))
	}
	// another key is another workflow; a bad key is refused before Redis
	if s, err := e.Client.SubmitWorkflow(ctx, other, producer.WithIdempotencyKey("order-1235")); err != nil || s.Existing || s.ID == first.ID {
		t.Fatalf("another key: %+v %v", s, err)
	}
	if _, err := e.Client.SubmitWorkflow(ctx, other, producer.WithIdempotencyKey("a\nb")); !errors.Is(err, producer.ErrBadIdempotencyKey) {
		t.Fatalf("a key with a newline: %v", err)
	}
}

// Twenty submits at once with one key create exactly one workflow; every
// one of them gets its id; the workflow then runs once.
func TestIdempotencyKeyUnderConcurrentSubmits(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	const n = 20
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created int
		ids     = map[string]int{}
		errs    []error
	)
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			s, err := e.Client.SubmitWorkflow(t.Context(), e.Spec(keyedSpec), producer.WithIdempotencyKey("burst"))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			ids[s.ID]++
			if !s.Existing {
				created++
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 || created != 1 || len(ids) != 1 || ids[store.IdempotentID("burst")] != n {
		t.Fatalf("created %d, ids %v, errors %v", created, ids, errs)
	}
	wfs, err := e.Client.List(t.Context(), "", 100)
	if err != nil || len(wfs) != 1 {
		t.Fatalf("%d workflows (%v), want 1", len(wfs), err)
	}
	e.StartWorker(t)
	wf := e.Wait(t, store.IdempotentID("burst"), 15*time.Second, store.StateCompleted)
	if wf.Steps[0].Attempts != 1 {
		t.Fatalf("the step ran %d times", wf.Steps[0].Attempts)
	}
}

// A submitter that stopped between creating its workflow and enqueueing
// it (simulated: the record is written, no task is) is finished by the
// next submit with its key: the workflow runs.
func TestIdempotencyKeyFinishesAnInterruptedSubmit(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	id := store.IdempotentID("half-done")
	wspec := e.Spec(keyedSpec)
	hash, err := producer.SpecHash(wspec)
	if err != nil {
		t.Fatal(err)
	}
	specJSON, err := json.Marshal(wspec)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Store.ClaimIdempotency(t.Context(), id, hash); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store.Create(t.Context(), store.NewWorkflow{ID: id, Name: "keyed", Spec: specJSON, Steps: []string{"greet"}}); err != nil {
		t.Fatal(err)
	}
	e.StartWorker(t)
	s, err := e.Client.SubmitWorkflow(t.Context(), e.Spec(keyedSpec), producer.WithIdempotencyKey("half-done"))
	if err != nil || !s.Existing || s.ID != id {
		t.Fatalf("submit: %+v %v", s, err)
	}
	e.Wait(t, id, 15*time.Second, store.StateCompleted)
}

// keys counts the keys of the test's database.
func dbKeys(t *testing.T, e *testenv.Env) int64 {
	t.Helper()
	n, err := e.Redis.DBSize(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A deadline given beside the spec (enqueue --deadline) is part of what
// an idempotency key fingerprints: the same key with another deadline is
// a conflict, not the earlier workflow with its own deadline; with the
// same deadline it is the earlier workflow.
func TestIdempotencyKeyCoversTheDeadline(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	ctx := t.Context()
	first, err := e.Client.SubmitWorkflow(ctx, e.Spec(keyedSpec), producer.WithIdempotencyKey("k-deadline"), producer.WithDeadline(time.Hour))
	if err != nil || first.Existing {
		t.Fatalf("first submit: %+v %v", first, err)
	}
	if again, err := e.Client.SubmitWorkflow(ctx, e.Spec(keyedSpec), producer.WithIdempotencyKey("k-deadline"), producer.WithDeadline(time.Hour)); err != nil || !again.Existing {
		t.Fatalf("the same submit again: %+v %v", again, err)
	}
	for _, opts := range [][]producer.SubmitOption{{producer.WithDeadline(time.Minute)}, nil} {
		_, err := e.Client.SubmitWorkflow(ctx, e.Spec(keyedSpec), append(opts, producer.WithIdempotencyKey("k-deadline"))...)
		if !errors.Is(err, producer.ErrIdempotencyConflict) {
			t.Fatalf("the key with another deadline (%d options): %v, want a conflict", len(opts), err)
		}
	}
}
