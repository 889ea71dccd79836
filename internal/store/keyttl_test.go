package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
)

// An idempotency key's record lives the retention (and a margin) from its
// workflow's end: one claimed before the workflow was created, and one
// claimed after (a generated key submitted again). A workflow whose key
// keeps no record gets none at its end.
func TestTheKeyRecordLivesTheRetentionFromTheEnd(t *testing.T) {
	_, rdb := redistest.New(t)
	ctx := context.Background()
	s := store.New(rdb, time.Hour, nil)
	s.SetMaxOpenAge(2 * time.Hour)
	end := func(id string) {
		t.Helper()
		r, err := s.Settle(ctx, id, "a", store.Outcome{Done: true, NoDurableCalls: true}, nil)
		if err != nil || r.State != store.StateCompleted {
			t.Fatalf("settle %s: %+v %v", id, r, err)
		}
	}
	for _, c := range []struct {
		id           string
		claimBefore  bool
		claimAfter   bool
		wantKeyAlive bool
	}{{"wf_before", true, false, true}, {"wf_after", false, true, true}, {"wf_none", false, false, false}} {
		if c.claimBefore {
			if err := s.ClaimIdempotency(ctx, c.id, "h"); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Create(ctx, store.NewWorkflow{ID: c.id, Name: "k", Spec: []byte(`{}`), Steps: []string{"a"}, IdempotencyKey: "k-" + c.id,
			KeyRecord: c.claimBefore}); err != nil {
			t.Fatal(err)
		}
		if c.claimAfter {
			if err := s.ClaimIdempotency(ctx, c.id, "h"); err != nil {
				t.Fatal(err)
			}
		}
		end(c.id)
		key := store.Prefix + "{wf:" + c.id + "}:idem"
		ttl := rdb.TTL(ctx, key).Val()
		switch {
		case c.wantKeyAlive && (ttl <= 60*time.Minute || ttl > 61*time.Minute):
			t.Errorf("%s: the key's record has TTL %s after the end, want the retention and a minute", c.id, ttl)
		case !c.wantKeyAlive && rdb.Exists(ctx, key).Val() != 0:
			t.Errorf("%s: a key record appeared at the end", c.id)
		}
		if n := rdb.Exists(ctx, store.Prefix+"{wf:"+c.id+"}:calls:a").Val(); n != 0 {
			t.Errorf("%s: a calls key appeared", c.id)
		}
	}
}
