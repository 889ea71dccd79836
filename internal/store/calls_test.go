package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/store"
)

// A step's durable sub-calls are stored per sequence number with the hash
// of what was asked; an attempt a later one replaced cannot write one, and
// a gone workflow takes none.
func TestDurableCallsAreFencedByAttempt(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	create(t, s, "wf")
	if _, err := s.Begin(ctx, "wf", "a", "wf:a", 0, time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveCall(ctx, "wf", "a", 0, 1, 0, store.Call{Hash: "h0", Value: "first\nanswer"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Begin(ctx, "wf", "a", "wf:a", 0, time.Minute, nil); err != nil { // attempt 2 takes over
		t.Fatal(err)
	}
	if err := s.SaveCall(ctx, "wf", "a", 0, 1, 1, store.Call{Hash: "h1", Value: "late"}); !errors.Is(err, store.ErrStaleAttempt) {
		t.Fatalf("attempt 1 after attempt 2 began: %v, want ErrStaleAttempt", err)
	}
	if err := s.SaveCall(ctx, "wf", "a", 0, 2, 1, store.Call{Hash: "h1", Value: "second"}); err != nil {
		t.Fatal(err)
	}
	calls, err := s.Calls(ctx, "wf", "a")
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 2 || calls[0] != (store.Call{Hash: "h0", Value: "first\nanswer"}) || calls[1] != (store.Call{Hash: "h1", Value: "second"}) {
		t.Fatalf("calls = %+v", calls)
	}
	if other, _ := s.Calls(ctx, "wf", "b"); len(other) != 0 {
		t.Fatalf("another step sees %+v", other)
	}
	if err := s.SaveCall(ctx, "gone", "a", 0, 1, 0, store.Call{Hash: "h", Value: "v"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a gone workflow: %v, want ErrNotFound", err)
	}
}
