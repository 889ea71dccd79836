package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

func newStore(t *testing.T) *store.Store {
	_, rdb := redistest.New(t)
	return store.New(rdb, time.Hour, nil)
}

// chord: a, b, c in parallel; d depends on all three.
var chordDeps = []store.Dependent{{ID: "d", Inputs: 3}}

func create(t *testing.T, s *store.Store, id string) {
	t.Helper()
	if _, err := s.Create(context.Background(), store.NewWorkflow{ID: id, Name: "chord", Spec: []byte(`{}`), Steps: []string{"a", "b", "c", "d"}}); err != nil {
		t.Fatal(err)
	}
}

func TestCreateIsAtomicAndUnique(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	create(t, s, "wf1")
	_, err := s.Create(ctx, store.NewWorkflow{ID: "wf1", Name: "again", Spec: []byte(`{}`), Steps: []string{"x"}})
	if !errors.Is(err, store.ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
	wf, err := s.Get(ctx, "wf1")
	if err != nil {
		t.Fatal(err)
	}
	if wf.Name != "chord" || wf.State != store.StatePending || len(wf.Steps) != 4 || wf.Steps[0].State != store.StepPending {
		t.Fatalf("workflow = %+v", wf)
	}
	if _, err := s.Get(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}
}

func TestFanInNeverLostAndNotReadyAgainOnceStarted(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	for round := 0; round < 20; round++ {
		id := "wf" + string(rune('A'+round))
		create(t, s, id)
		// every parallel step settles three times (redeliveries), all at once
		var mu sync.Mutex
		readyCount := 0
		var wg sync.WaitGroup
		for _, step := range []string{"a", "b", "c", "a", "b", "c", "a", "b", "c"} {
			wg.Add(1)
			go func(step string) {
				defer wg.Done()
				_, ready, err := settle(ctx, s, id, step, store.Outcome{Done: true, Output: step + "!"}, chordDeps)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				readyCount += len(ready)
				mu.Unlock()
			}(step)
		}
		wg.Wait()
		// "whoever observes readiness enqueues": at least once (never lost);
		// duplicates are absorbed by the deterministic task id, and once d
		// has started nobody sees it ready again.
		if readyCount < 1 {
			t.Fatalf("round %d: fan-in step never became ready", round)
		}
		if _, err := s.Begin(ctx, id, "d", "t-d", 0, time.Minute, []string{"a", "b", "c"}); err != nil {
			t.Fatal(err)
		}
		_, ready, err := settle(ctx, s, id, "a", store.Outcome{Done: true, Output: "a!"}, chordDeps)
		if err != nil || len(ready) != 0 {
			t.Fatalf("round %d: after d started, a late duplicate made %v ready (%v)", round, ready, err)
		}
		state, _, err := settle(ctx, s, id, "d", store.Outcome{Done: true, Output: "done"}, nil)
		if err != nil || state != store.StateCompleted {
			t.Fatalf("round %d: final state %q, %v", round, state, err)
		}
	}
}

func TestNotReadyUntilAllSettled(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	create(t, s, "wf")
	for _, step := range []string{"a", "b"} {
		state, ready, err := settle(ctx, s, "wf", step, store.Outcome{Done: true}, chordDeps)
		if err != nil || len(ready) != 0 || state != store.StateRunning {
			t.Fatalf("after %s: state %q ready %v err %v", step, state, ready, err)
		}
	}
	_, ready, _ := settle(ctx, s, "wf", "c", store.Outcome{Done: true}, chordDeps)
	if len(ready) != 1 || ready[0] != "d" {
		t.Fatalf("after c: ready %v", ready)
	}
}

func TestDeadStepBlocksUnlessOptional(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	create(t, s, "wf")
	settle(ctx, s, "wf", "a", store.Outcome{Done: true}, chordDeps)
	settle(ctx, s, "wf", "b", store.Outcome{Done: true}, chordDeps)
	state, ready, err := settle(ctx, s, "wf", "c", store.Outcome{Done: false, Error: "bad_request: no"}, chordDeps)
	if err != nil || state != store.StateBlocked || len(ready) != 0 {
		t.Fatalf("dead c: state %q ready %v err %v", state, ready, err)
	}
	// the requeued step succeeds: the workflow resumes
	state, ready, _ = settle(ctx, s, "wf", "c", store.Outcome{Done: true}, chordDeps)
	if state != store.StateRunning || len(ready) != 1 {
		t.Fatalf("requeued c: state %q ready %v", state, ready)
	}

	create(t, s, "wf2")
	settle(ctx, s, "wf2", "a", store.Outcome{Done: true}, chordDeps)
	settle(ctx, s, "wf2", "b", store.Outcome{Done: true}, chordDeps)
	state, ready, _ = settle(ctx, s, "wf2", "c", store.Outcome{Done: false, Optional: true, Error: "x"}, chordDeps)
	if state != store.StateRunning || len(ready) != 1 {
		t.Fatalf("optional dead c: state %q ready %v", state, ready)
	}
	wf, _ := s.Get(ctx, "wf2")
	if wf.Steps[2].State != store.StepDead || wf.Steps[2].Error != "x" {
		t.Fatalf("step c = %+v", wf.Steps[2])
	}
}

func TestBeginCountsAttemptsAndCheckpoint(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	create(t, s, "wf")
	for i := 1; i <= 2; i++ {
		a, err := s.Begin(ctx, "wf", "a", "t-a", 0, time.Minute, nil)
		if err != nil || a.Step.Attempts != i || a.Step.State != store.StepRunning || a.WorkflowState != store.StateRunning {
			t.Fatalf("begin %d: %+v %v", i, a, err)
		}
	}
	settle(ctx, s, "wf", "a", store.Outcome{Done: true, Output: "out-a", InputHash: "h1", Target: "p/m"}, chordDeps)
	a, err := s.Begin(ctx, "wf", "a", "t-a", 0, time.Minute, nil)
	if err != nil || a.Step.State != store.StepDone || a.Step.Output != "out-a" || a.Step.InputHash != "h1" || a.Step.Attempts != 2 {
		t.Fatalf("begin after done: %+v %v", a.Step, err)
	}
	settle(ctx, s, "wf", "b", store.Outcome{Done: true, Output: "out-b"}, chordDeps)
	d, err := s.Begin(ctx, "wf", "d", "t-d", 0, time.Minute, []string{"a", "b"})
	if err != nil || d.Deps["a"].Output != "out-a" || d.Deps["a"].State != store.StepDone || d.Deps["b"].Output != "out-b" {
		t.Fatalf("deps = %+v %v", d, err)
	}
}

// A step whose task runs before one of its inputs is settled in the
// record (on a Cluster: a promotion lost the input's settle after the
// dependent's task was enqueued) is not begun: the first open input is
// named, and nothing is written, no attempt counted, no event logged. A
// dead optional input is settled.
func TestAStepBeginsOnlyOnSettledInputs(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	create(t, s, "wf")
	if _, err := s.Begin(ctx, "wf", "a", "t-a", 0, time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	settle(ctx, s, "wf", "a", store.Outcome{Done: true, Output: "out-a"}, chordDeps)
	before, _ := s.Events(ctx, "wf", "", 100)
	var open *store.UnsettledInputError
	for _, c := range []struct {
		inputs []string
		open   string
	}{{[]string{"a", "b", "c"}, "b"}, {[]string{"b", "a"}, "b"}, {[]string{"c", "b"}, "c"}} {
		_, err := s.Begin(ctx, "wf", "d", "t-d", 0, time.Minute, c.inputs)
		if !errors.As(err, &open) || open.Input != c.open || open.State != store.StepPending {
			t.Fatalf("begin d on %v: %+v, want input %s named (the first open one), pending", c.inputs, err, c.open)
		}
	}
	wf, _ := s.Get(ctx, "wf")
	if d := wf.Steps[3]; d.State != store.StepPending || d.Attempts != 0 || d.StartedAt != nil || wf.State != store.StateRunning {
		t.Fatalf("d after begins on open inputs: %+v (want untouched)", d)
	}
	if after, _ := s.Events(ctx, "wf", "", 100); len(after) != len(before) {
		t.Fatalf("events %d → %d: a begin that did not start logged something", len(before), len(after))
	}
	settle(ctx, s, "wf", "b", store.Outcome{Done: true, Output: "out-b"}, chordDeps)
	settle(ctx, s, "wf", "c", store.Outcome{Done: false, Optional: true, Error: "server: gone"}, chordDeps)
	d, err := s.Begin(ctx, "wf", "d", "t-d", 0, time.Minute, []string{"a", "b", "c"})
	if err != nil || d.Step.Attempts != 1 || d.Deps["b"].Output != "out-b" || d.Deps["c"].State != store.StepDead {
		t.Fatalf("begin d on settled inputs (c dead, optional): %+v %v", d, err)
	}
	// an input dead-lettered (not optional: the workflow blocked) is open,
	// and named dead: its dependent's task goes until a requeue settles it
	create(t, s, "wf_dead")
	settle(ctx, s, "wf_dead", "a", store.Outcome{Done: false, Error: "bad_request: no"}, chordDeps)
	if _, err := s.Begin(ctx, "wf_dead", "d", "t-d", 0, time.Minute, []string{"a"}); !errors.As(err, &open) || open.Input != "a" || open.State != store.StepDead {
		t.Fatalf("begin on a dead-lettered input: %+v, want it named, dead", err)
	}
}

func TestLeaseKeepsDuplicatesOut(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	create(t, s, "wf")
	if _, err := s.Begin(ctx, "wf", "a", "task-1", 0, time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	var busy *store.BusyError
	if _, err := s.Begin(ctx, "wf", "a", "task-dup", 0, time.Minute, nil); !errors.As(err, &busy) || time.Until(busy.Until) < 50*time.Second {
		t.Fatalf("duplicate begin: %v, want busy for about a minute", err)
	}
	// the same task coming back (a redelivery after a crash) takes over
	a, err := s.Begin(ctx, "wf", "a", "task-1", 0, time.Minute, nil)
	if err != nil || a.Step.Attempts != 2 {
		t.Fatalf("redelivery: %+v %v", a, err)
	}
	// an expired lease lets anyone in
	if _, err := s.Begin(ctx, "wf", "b", "task-2", 0, time.Millisecond, nil); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 2*time.Second, func() (bool, string) {
		_, err := s.Begin(ctx, "wf", "b", "task-3", 0, time.Minute, nil)
		return err == nil, fmt.Sprintf("expired lease still held: %v", err)
	})
}

func TestCancelAndList(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	create(t, s, "w1")
	create(t, s, "w2")
	if st, err := s.Cancel(ctx, "w1", []string{"a", "b", "c", "d"}); err != nil || st != store.StateCanceled {
		t.Fatalf("cancel: %q %v", st, err)
	}
	if wf, _ := s.Get(ctx, "w1"); wf.Steps[0].State != store.StepCanceled || wf.Steps[3].State != store.StepCanceled {
		t.Fatalf("steps after cancel: %+v", wf.Steps)
	}
	a, _ := s.Begin(ctx, "w1", "a", "t-a", 0, time.Minute, nil)
	if a.WorkflowState != store.StateCanceled || a.Step.Attempts != 0 {
		t.Fatalf("begin on canceled: %+v", a)
	}
	if _, err := s.Cancel(ctx, "nope", nil); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("cancel missing: %v", err)
	}
	all, _ := s.List(ctx, "", 10)
	canceled, _ := s.List(ctx, store.StateCanceled, 10)
	var ids []string
	for _, w := range all {
		ids = append(ids, w.ID)
	}
	sort.Strings(ids)
	if len(ids) != 2 || len(canceled) != 1 || canceled[0].ID != "w1" {
		t.Fatalf("list = %v, canceled = %v", ids, canceled)
	}
}

func TestEverythingHasTTLAndSharesASlot(t *testing.T) {
	_, rdb := redistest.New(t)
	s := store.New(rdb, time.Hour, nil)
	ctx := context.Background()
	create(t, s, "wf")
	settle(ctx, s, "wf", "a", store.Outcome{Done: true}, chordDeps)
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		ttl := rdb.TTL(ctx, k).Val()
		if k == store.Prefix+"workflows" || k == store.Prefix+"open" { // the indexes: trimmed at every create, and by the reconciler
			continue
		}
		if ttl <= 0 || ttl > time.Hour+s.MaxOpenAge() { // an open workflow's: the oldest it gets open, and the retention
			t.Errorf("key %s has TTL %s", k, ttl)
		}
		if !strings.Contains(k, "{wf:wf}") {
			t.Errorf("key %s lacks the workflow hash tag", k)
		}
	}
}

func TestOlderLayoutIsRefusedNotRerun(t *testing.T) {
	_, rdb := redistest.New(t)
	s := store.New(rdb, time.Hour, nil)
	ctx := context.Background()
	// a record as the one-key-per-step layout wrote it: no counts in the
	// workflow hash, the steps' state elsewhere
	key := store.Prefix + "{wf:old}:wf"
	if err := rdb.HSet(ctx, key, "id", "old", "state", "running", "steps", `["a","d"]`, "nsteps", 2).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Begin(ctx, "old", "a", "t-a", 0, time.Minute, nil); !errors.Is(err, store.ErrOldLayout) {
		t.Fatalf("begin on an old record: %v, want ErrOldLayout", err)
	}
	if _, _, err := settle(ctx, s, "old", "a", store.Outcome{Done: true}, chordDeps); !errors.Is(err, store.ErrOldLayout) {
		t.Fatalf("settle on an old record: %v, want ErrOldLayout", err)
	}
	if n, _ := rdb.HLen(ctx, key).Result(); n != 4 {
		t.Fatalf("the old record was written to: %d fields", n)
	}
}

// settle is Settle with its result spread out, as most tests read it.
func settle(ctx context.Context, s *store.Store, wf, step string, o store.Outcome, deps []store.Dependent) (string, []string, error) {
	r, err := s.Settle(ctx, wf, step, o, deps)
	if r == nil {
		return "", nil, err
	}
	return r.State, r.Ready, err
}

// An open workflow's record lives for its open TTL (limits.max_open_age
// and the retention: here an hour each) after its last activity: a settle
// refreshes it when the workflow's state changes or less than three
// quarters of it is left (not at every settle), so a workflow that runs
// or waits longer than the retention keeps its record. Once it ends, its
// record, log and idempotency key live the retention from the end.
func TestSettleRefreshesTheTTL(t *testing.T) {
	_, rdb := redistest.New(t)
	ctx := context.Background()
	s := store.New(rdb, time.Hour, nil)
	s.SetMaxOpenAge(time.Hour)
	s.SetLog(store.LogOptions{Limit: 100})
	create(t, s, "wf")
	key := store.Prefix + "{wf:wf}:wf"
	// a (running → running: no change of state) with 100 minutes of 120 left: kept
	settle(ctx, s, "wf", "d", store.Outcome{Done: true}, nil) // the workflow: pending → running
	rdb.Expire(ctx, key, 100*time.Minute)
	if _, _, err := settle(ctx, s, "wf", "a", store.Outcome{Done: true}, chordDeps); err != nil {
		t.Fatal(err)
	}
	if ttl := rdb.TTL(ctx, key).Val(); ttl > 100*time.Minute {
		t.Fatalf("TTL %s: refreshed with more than three quarters of the open TTL left", ttl)
	}
	rdb.Expire(ctx, key, 80*time.Minute)
	if _, _, err := settle(ctx, s, "wf", "b", store.Outcome{Done: true}, chordDeps); err != nil {
		t.Fatal(err)
	}
	if ttl := rdb.TTL(ctx, key).Val(); ttl <= 119*time.Minute {
		t.Fatalf("TTL %s with 80 minutes left: want it refreshed to the open TTL (2h)", ttl)
	}
	rdb.Expire(ctx, key, 100*time.Minute)
	if st, _, err := settle(ctx, s, "wf", "c", store.Outcome{Done: false}, chordDeps); err != nil || st != store.StateBlocked {
		t.Fatalf("settle dead: %q %v", st, err)
	}
	if ttl := rdb.TTL(ctx, key).Val(); ttl <= 119*time.Minute {
		t.Fatalf("TTL %s after the workflow blocked: want every change of state to refresh it", ttl)
	}
	// blocked → failed: the retention from the end, for the record (its log
	// is in it) and its idempotency key
	if _, err := s.Fail(ctx, "wf"); err != nil {
		t.Fatal(err)
	}
	if ttl := rdb.TTL(ctx, key).Val(); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Fatalf("%s: TTL %s after the workflow failed, want the retention (1h) from its end", key, ttl)
	}
	logIsInTheRecord(t, rdb, "wf")
}

// A completed workflow's records live the retention from its end, and so
// do a settled step's durable calls; a rerun makes it open again, with the
// open TTL.
func TestTheRetentionCountsFromTheEnd(t *testing.T) {
	_, rdb := redistest.New(t)
	ctx := context.Background()
	s := store.New(rdb, time.Hour, nil)
	s.SetMaxOpenAge(2 * time.Hour)
	s.SetLog(store.LogOptions{Limit: 100})
	create(t, s, "wf")
	key := store.Prefix + "{wf:wf}:wf"
	if ttl := rdb.TTL(ctx, key).Val(); ttl <= 179*time.Minute {
		t.Fatalf("an open workflow's TTL %s, want the open TTL (3h)", ttl)
	}
	if err := s.SaveCall(ctx, "wf", "a", 0, 0, 1, store.Call{Hash: "h", Value: "v"}); err != nil {
		t.Fatal(err)
	}
	calls := store.Prefix + "{wf:wf}:calls:a"
	if ttl := rdb.TTL(ctx, calls).Val(); ttl <= 179*time.Minute {
		t.Fatalf("an open step's durable calls: TTL %s, want the open TTL (3h)", ttl)
	}
	for _, step := range []string{"d", "a", "b", "c"} {
		deps := chordDeps
		if step == "d" {
			deps = nil
		}
		if _, _, err := settle(ctx, s, "wf", step, store.Outcome{Done: true}, deps); err != nil {
			t.Fatal(err)
		}
	}
	if ttl := rdb.TTL(ctx, calls).Val(); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Fatalf("a settled step's durable calls: TTL %s, want the retention (1h)", ttl)
	}
	if wf, err := s.Get(ctx, "wf"); err != nil || wf.State != store.StateCompleted {
		t.Fatalf("%+v %v, want completed", wf, err)
	}
	if ttl := rdb.TTL(ctx, key).Val(); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Fatalf("%s: TTL %s after the workflow completed, want the retention (1h) from its end", key, ttl)
	}
	logIsInTheRecord(t, rdb, "wf")
	if _, _, err := s.Rerun(ctx, "wf", []string{"d"}, map[string][]string{"d": nil}, nil); err != nil {
		t.Fatal(err)
	}
	if ttl := rdb.TTL(ctx, key).Val(); ttl <= 179*time.Minute {
		t.Fatalf("a rerun workflow's TTL %s, want the open TTL (3h) again", ttl)
	}
}

// A workflow's finished_at is when it completed: written by the settle
// that completes it, kept when that step is settled again later.
func TestFinishedAtIsTheFirstCompletion(t *testing.T) {
	_, rdb := redistest.New(t)
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	s := store.New(rdb, time.Hour, func() time.Time { return now })
	create(t, s, "wf")
	for _, step := range []string{"a", "b", "c", "d"} {
		deps := chordDeps
		if step == "d" {
			deps = nil
		}
		if _, _, err := settle(ctx, s, "wf", step, store.Outcome{Done: true}, deps); err != nil {
			t.Fatal(err)
		}
		if wf, _ := s.Get(ctx, "wf"); step != "d" && wf.FinishedAt != nil {
			t.Fatalf("finished at %v after %s, before the workflow completed", wf.FinishedAt, step)
		}
	}
	done := now
	now = now.Add(time.Minute)
	if state, _, err := settle(ctx, s, "wf", "d", store.Outcome{Done: true}, nil); err != nil || state != store.StateCompleted {
		t.Fatalf("d settled again: %q %v", state, err)
	}
	wf, err := s.Get(ctx, "wf")
	if err != nil || wf.State != store.StateCompleted || wf.FinishedAt == nil || !wf.FinishedAt.Equal(done) {
		t.Fatalf("workflow %+v (%v), want completed and finished at %v", wf, err, done)
	}
	// run again from d: it finishes again, at the time of its new completion
	if _, _, err := s.Rerun(ctx, "wf", []string{"d"}, map[string][]string{"d": {"a", "b", "c"}}, nil); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	if state, _, err := settle(ctx, s, "wf", "d", store.Outcome{Done: true, Gen: 1}, nil); err != nil || state != store.StateCompleted {
		t.Fatalf("d settled in the rerun: %q %v", state, err)
	}
	if wf, _ := s.Get(ctx, "wf"); wf.FinishedAt == nil || !wf.FinishedAt.Equal(now) {
		t.Fatalf("after the rerun: finished at %v, want %v", wf.FinishedAt, now)
	}
}

// A dead step says which class of error ended it; once it is retried from
// the dead-letter queue and done, it says none.
func TestClassIsADeadStepsOnly(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	create(t, s, "wf")
	if _, err := s.Begin(ctx, "wf", "a", "wf:a", 0, time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := settle(ctx, s, "wf", "a", store.Outcome{Error: "bad_request: no such model", Class: "bad_request", Attempt: 1}, nil); err != nil {
		t.Fatal(err)
	}
	if wf, _ := s.Get(ctx, "wf"); wf.Steps[0].State != store.StepDead || wf.Steps[0].Class != "bad_request" {
		t.Fatalf("dead step: %+v", wf.Steps[0])
	}
	if _, err := s.Begin(ctx, "wf", "a", "wf:a", 0, time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := settle(ctx, s, "wf", "a", store.Outcome{Done: true, Output: "ok", Attempt: 2}, nil); err != nil {
		t.Fatal(err)
	}
	if wf, _ := s.Get(ctx, "wf"); wf.Steps[0].State != store.StepDone || wf.Steps[0].Class != "" || wf.Steps[0].Error != "" {
		t.Fatalf("done after its retry: %+v", wf.Steps[0])
	}
}

// A failed workflow (its dead step discarded) stays failed: a step still
// running settles without turning it back to blocked or making its
// dependents ready, and nothing begins after it.
func TestFailedIsFinal(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	create(t, s, "wf")
	if state, _, err := settle(ctx, s, "wf", "a", store.Outcome{Error: "bad_request: no", Class: "bad_request"}, chordDeps); err != nil || state != store.StateBlocked {
		t.Fatalf("a dead: %q %v", state, err)
	}
	if state, err := s.Fail(ctx, "wf"); err != nil || state != store.StateFailed {
		t.Fatalf("fail: %q %v", state, err)
	}
	for _, step := range []string{"b", "c"} {
		state, ready, err := settle(ctx, s, "wf", step, store.Outcome{Done: true, Optional: true}, chordDeps)
		if err != nil || state != store.StateFailed || len(ready) != 0 {
			t.Fatalf("%s settled after the workflow failed: state %q, ready %v, %v", step, state, ready, err)
		}
	}
	a, err := s.Begin(ctx, "wf", "d", "wf:d", 0, time.Minute, []string{"a", "b", "c"})
	if err != nil || a.WorkflowState != store.StateFailed || a.Step.State == store.StepRunning {
		t.Fatalf("begin after the workflow failed: %+v %v", a, err)
	}
	if wf, _ := s.Get(ctx, "wf"); wf.State != store.StateFailed {
		t.Fatalf("workflow %s, want failed", wf.State)
	}
}

// Of two callers ending a workflow at its deadline (a running step and
// the deadline's own task), one ends it: TimeOut says which.
func TestTimeOutSaysWhichCallEndedIt(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	if _, err := s.Create(ctx, store.NewWorkflow{ID: "wf", Name: "d", Spec: []byte(`{}`), Steps: []string{"a"}, DeadlineAt: time.Now().Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false} {
		state, ended, err := s.TimeOut(ctx, "wf", []string{"a"})
		if err != nil || state != store.StateTimedOut || ended != want {
			t.Fatalf("call %d: %q ended %v %v, want timed_out and ended %v", i+1, state, ended, err, want)
		}
	}
	if _, _, err := s.TimeOut(ctx, "nope", nil); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a workflow that is gone: %v", err)
	}
}
