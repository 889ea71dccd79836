package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
)

// The open index hands the reconciler workflows a page at a time, the ones
// it looked at longest ago first; a revisited workflow goes to the back,
// a forgotten one is gone, and Revisit never brings a forgotten one back.
func TestOpenIndexPagesOldestFirst(t *testing.T) {
	_, rdb := redistest.New(t)
	now := time.UnixMilli(1_700_000_000_000)
	clock := func() time.Time { return now }
	s := store.New(rdb, time.Hour, clock)
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		create(t, s, fmt.Sprintf("w%d", i))
		now = now.Add(time.Second)
	}
	due, err := s.DueWorkflows(ctx, now, 2)
	if err != nil || fmt.Sprint(due) != "[w0 w1]" {
		t.Fatalf("first page: %v %v", due, err)
	}
	if err := s.Revisit(ctx, "w0", now); err != nil {
		t.Fatal(err)
	}
	if err := s.Forget(ctx, "w1"); err != nil {
		t.Fatal(err)
	}
	if due, _ = s.DueWorkflows(ctx, now, 10); fmt.Sprint(due) != "[w2 w3 w4 w0]" {
		t.Fatalf("after revisit and forget: %v", due)
	}
	// only those looked at before the cutoff are due
	if due, _ = s.DueWorkflows(ctx, now.Add(-2500*time.Millisecond), 10); fmt.Sprint(due) != "[w2]" {
		t.Fatalf("due before the cutoff: %v", due)
	}
	if err := s.Revisit(ctx, "w1", now); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.OpenCount(ctx); n != 4 {
		t.Fatalf("open count %d after Revisit of a forgotten workflow, want 4", n)
	}
	if err := s.Watch(ctx, "w1"); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.OpenCount(ctx); n != 5 {
		t.Fatalf("open count %d after Watch, want 5", n)
	}
}

func TestProgressReadsStatesAttemptsAndLeases(t *testing.T) {
	_, rdb := redistest.New(t)
	now := time.UnixMilli(1_700_000_000_000)
	s := store.New(rdb, time.Hour, func() time.Time { return now })
	ctx := context.Background()
	create(t, s, "wf")
	if _, err := s.Begin(ctx, "wf", "a", "wf:a", 0, 10*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := settle(ctx, s, "wf", "b", store.Outcome{Done: true}, chordDeps); err != nil {
		t.Fatal(err)
	}
	p, err := s.Progress(ctx, "wf")
	if err != nil {
		t.Fatal(err)
	}
	if p.State != store.StateRunning || !p.CreatedAt.Equal(now) || len(p.Steps) != 4 {
		t.Fatalf("progress = %+v", p)
	}
	a, b, c := p.Steps[0], p.Steps[1], p.Steps[2]
	if a.State != store.StepRunning || a.Attempts != 1 || a.LeaseUntil == nil || !a.LeaseUntil.Equal(now.Add(10*time.Second)) {
		t.Fatalf("a = %+v", a)
	}
	if b.State != store.StepDone || b.LeaseUntil != nil || c.State != store.StepPending || c.Attempts != 0 {
		t.Fatalf("b = %+v, c = %+v", b, c)
	}
	if _, err := s.Progress(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("progress of a missing workflow: %v", err)
	}
}

// One worker at a time holds a chore; it renews its own lease, and another
// takes over only once the holder stopped renewing.
func TestLeadElectsOneHolder(t *testing.T) {
	db, rdb := redistest.New(t)
	if db.Kind == "miniredis" {
		t.Skip("a lease that lapses in real time needs a real redis-server (miniredis expires keys only when told to)")
	}
	s := store.New(rdb, time.Hour, nil)
	ctx := context.Background()
	if ok, err := s.Lead(ctx, "chore", "w1", 300*time.Millisecond); !ok || err != nil {
		t.Fatalf("w1 lead: %v %v", ok, err)
	}
	if ok, _ := s.Lead(ctx, "chore", "w2", 300*time.Millisecond); ok {
		t.Fatal("w2 took a lock w1 holds")
	}
	if ok, _ := s.Lead(ctx, "chore", "w1", 300*time.Millisecond); !ok {
		t.Fatal("w1 could not renew its own lock")
	}
	poll.Until(t, 3*time.Second, func() (bool, string) {
		ok, err := s.Lead(ctx, "chore", "w2", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return ok, "w2 never took over the lapsed lock"
	})
	if ok, _ := s.Lead(ctx, "chore", "w1", time.Minute); ok {
		t.Fatal("w1 took the lock back from w2")
	}
}
