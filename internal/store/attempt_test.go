package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
)

// A goroutine of attempt 1 that asynq abandoned at its deadline finishes
// after the retry (attempt 2) took the step: its answer, its error and its
// dead letter are all refused, and attempt 2's record stands.
func TestStaleAttemptCannotOverwriteANewerOne(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	create(t, s, "wf")
	for i := 1; i <= 2; i++ {
		if a, err := s.Begin(ctx, "wf", "a", "wf:a", 0, time.Minute, nil); err != nil || a.Step.Attempts != i {
			t.Fatalf("begin %d: %+v %v", i, a, err)
		}
	}
	if err := s.RecordError(ctx, "wf", "a", 0, 2, "server", "server: attempt two failed", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordError(ctx, "wf", "a", 0, 1, "timeout", "timeout: attempt one, late", time.Time{}); !errors.Is(err, store.ErrStaleAttempt) {
		t.Fatalf("stale record error: %v, want ErrStaleAttempt", err)
	}
	for _, o := range []store.Outcome{
		{Done: true, Output: "late answer of attempt 1", InputHash: "h", Attempt: 1},
		{Done: false, Error: "bad_request: attempt 1's dead letter", Attempt: 1},
		{Done: false, OnlyIfOpen: true, Error: "timeout: attempt 1's safety net", Attempt: 1},
	} {
		if _, _, err := settle(ctx, s, "wf", "a", o, chordDeps); !errors.Is(err, store.ErrStaleAttempt) {
			t.Fatalf("stale settle %+v: %v, want ErrStaleAttempt", o, err)
		}
	}
	wf, _ := s.Get(ctx, "wf")
	if a := wf.Steps[0]; a.State != store.StepRunning || a.Output != "" || a.Error != "server: attempt two failed" || a.Attempts != 2 {
		t.Fatalf("after stale writes: %+v (want attempt 2's record untouched)", a)
	}
	if _, _, err := settle(ctx, s, "wf", "a", store.Outcome{Done: true, Output: "answer of attempt 2", InputHash: "h", Attempt: 2}, chordDeps); err != nil {
		t.Fatalf("current attempt's settle: %v", err)
	}
	// a redelivery that finds the checkpoint settles as the same attempt
	if _, _, err := settle(ctx, s, "wf", "a", store.Outcome{Done: true, Output: "answer of attempt 2", InputHash: "h", Attempt: 2}, chordDeps); err != nil {
		t.Fatalf("checkpoint settle: %v", err)
	}
	wf, _ = s.Get(ctx, "wf")
	if a := wf.Steps[0]; a.State != store.StepDone || a.Output != "answer of attempt 2" {
		t.Fatalf("after attempt 2: %+v", a)
	}
}

// The safety net (asynq gave up on attempt 1 on its last retry) settles
// the step dead; the abandoned goroutine's late answer cannot revive it,
// and a requeue (attempt 2) can.
func TestSafetyNetFencesTheAbandonedAttempt(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	create(t, s, "wf")
	if _, err := s.Begin(ctx, "wf", "a", "wf:a", 0, time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	state, _, err := settle(ctx, s, "wf", "a", store.Outcome{OnlyIfOpen: true, Error: "timeout: deadline exceeded", Attempt: 1}, chordDeps)
	if err != nil || state != store.StateBlocked {
		t.Fatalf("safety net: %q %v, want blocked", state, err)
	}
	if _, _, err := settle(ctx, s, "wf", "a", store.Outcome{OnlyIfOpen: true, Error: "again"}, chordDeps); !errors.Is(err, store.ErrAlreadySettled) {
		t.Fatalf("second safety net: %v, want ErrAlreadySettled", err)
	}
	if _, _, err := settle(ctx, s, "wf", "a", store.Outcome{Done: true, Output: "late", Attempt: 1}, chordDeps); !errors.Is(err, store.ErrStaleAttempt) {
		t.Fatalf("abandoned attempt's answer: %v, want ErrStaleAttempt", err)
	}
	wf, _ := s.Get(ctx, "wf")
	if wf.State != store.StateBlocked || wf.Steps[0].State != store.StepDead || wf.Steps[0].Error != "timeout: deadline exceeded" {
		t.Fatalf("after the late answer: %s %+v", wf.State, wf.Steps[0])
	}
	if a, err := s.Begin(ctx, "wf", "a", "wf:a", 0, time.Minute, nil); err != nil || a.Step.Attempts != 2 {
		t.Fatalf("requeued: %+v %v", a, err)
	}
	if state, _, err := settle(ctx, s, "wf", "a", store.Outcome{Done: true, Output: "ok", Attempt: 2}, chordDeps); err != nil || state != store.StateRunning {
		t.Fatalf("requeued attempt: %q %v", state, err)
	}
	// a canceled step is not the safety net's to end
	create(t, s, "c")
	if _, err := s.Cancel(ctx, "c", []string{"a", "b", "c", "d"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := settle(ctx, s, "c", "a", store.Outcome{OnlyIfOpen: true, Error: "canceled"}, chordDeps); !errors.Is(err, store.ErrAlreadySettled) {
		t.Fatalf("safety net on a canceled step: %v", err)
	}
	if wf, _ := s.Get(ctx, "c"); wf.Steps[0].State != store.StepCanceled {
		t.Fatalf("canceled step became %s", wf.Steps[0].State)
	}
}

func TestStoredErrorsAreBounded(t *testing.T) {
	_, rdb := redistest.New(t)
	s := store.New(rdb, time.Hour, nil)
	ctx := context.Background()
	create(t, s, "wf")
	huge := strings.Repeat("é", 100<<10) // 200 KiB, two bytes a rune
	if err := s.RecordError(ctx, "wf", "a", 0, 0, "server", huge, time.Time{}); err != nil {
		t.Fatal(err)
	}
	wf, _ := s.Get(ctx, "wf")
	if e := wf.Steps[0].Error; len(e) > store.MaxReasonBytes || !utf8.ValidString(e) || !strings.HasPrefix(e, "éé") || !strings.Contains(e, "204800 bytes, cut") {
		t.Fatalf("recorded error: %d bytes, valid %v, ends %q", len(e), utf8.ValidString(e), e[max(0, len(e)-40):])
	}
	if _, _, err := settle(ctx, s, "wf", "b", store.Outcome{Error: "panic: " + huge}, chordDeps); err != nil {
		t.Fatal(err)
	}
	wf, _ = s.Get(ctx, "wf")
	if e := wf.Steps[1].Error; len(e) > store.MaxReasonBytes || !strings.HasPrefix(e, "panic: éé") {
		t.Fatalf("settled error: %d bytes", len(e))
	}
	if got := store.Excerpt("short"); got != "short" {
		t.Fatalf("Excerpt(short) = %q", got)
	}
	// a gone workflow is not recreated by a late error
	if err := s.RecordError(ctx, "nope", "a", 0, 1, "server", "x", time.Time{}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("record error on a gone workflow: %v", err)
	}
	if rdb.Exists(ctx, store.Prefix+"{wf:nope}:wf").Val() != 0 {
		t.Fatal("a late error recreated a gone workflow")
	}
}

// After a rerun (generation 1), the earlier run's writes for a step are
// refused, whatever their attempt: its outcome, its error and its durable
// calls; the new run's go through.
func TestAnEarlierRunsWritesAreRefused(t *testing.T) {
	_, rdb := redistest.New(t)
	ctx := context.Background()
	s := store.New(rdb, time.Hour, nil)
	create(t, s, "wf")
	if _, err := s.Begin(ctx, "wf", "a", "task-a", 0, time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, store.Prefix+"{wf:wf}:wf", "gen", 1).Err(); err != nil { // where a rerun leaves it
		t.Fatal(err)
	}
	if _, err := s.Settle(ctx, "wf", "a", store.Outcome{Done: true, Output: "old", Attempt: 1}, nil); !errors.Is(err, store.ErrOtherRun) {
		t.Fatalf("settle of run 0: %v, want ErrOtherRun", err)
	}
	if err := s.RecordError(ctx, "wf", "a", 0, 1, "server", "late", time.Time{}); !errors.Is(err, store.ErrStaleAttempt) {
		t.Fatalf("record error of run 0: %v, want ErrStaleAttempt", err)
	}
	if err := s.SaveCall(ctx, "wf", "a", 0, 1, 0, store.Call{Hash: "h", Value: "old"}); !errors.Is(err, store.ErrStaleAttempt) {
		t.Fatalf("save call of run 0: %v, want ErrStaleAttempt", err)
	}
	if calls, err := s.Calls(ctx, "wf", "a"); err != nil || len(calls) != 0 {
		t.Fatalf("calls after run 0's late save: %v %v", calls, err)
	}
	if err := s.SaveCall(ctx, "wf", "a", 1, 1, 0, store.Call{Hash: "h", Value: "new"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Settle(ctx, "wf", "a", store.Outcome{Done: true, Output: "new", Attempt: 1, Gen: 1}, nil); err != nil {
		t.Fatal(err)
	}
	if w, err := s.Get(ctx, "wf"); err != nil || w.Steps[0].Output != "new" || w.Steps[0].Error != "" {
		t.Fatalf("step a: %+v %v", w.Steps[0], err)
	}
}
