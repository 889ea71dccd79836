package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
)

// A submit never trims the workflow index: a producer with a short
// retention no longer hides the workflows others submitted (each entry
// goes when its own record has expired, by the reconciler's sweep).
func TestASubmitNeverTrimsTheIndex(t *testing.T) {
	_, rdb := redistest.New(t)
	ctx := context.Background()
	long := store.New(rdb, time.Hour, nil)
	create(t, long, "old")
	later := time.Now().Add(2 * time.Minute)
	short := store.New(rdb, time.Minute, func() time.Time { return later })
	create(t, short, "new")
	ws, err := long.List(ctx, "", 10)
	if err != nil || len(ws) != 2 {
		t.Fatalf("listed %d workflows (%v), want both: a submit with a retention of 1m trimmed the other's", len(ws), err)
	}
}

// The sweep drops the index entries whose records expired and hands back
// the open workflows older than limits.max_open_age; the rest stay.
func TestTheSweepDropsExpiredEntriesAndFindsTooOldOnes(t *testing.T) {
	_, rdb := redistest.New(t)
	ctx := context.Background()
	now := time.Now()
	s := store.New(rdb, time.Minute, func() time.Time { return now })
	s.SetMaxOpenAge(time.Hour)
	for _, id := range []string{"gone", "open", "done"} {
		create(t, s, id)
	}
	settleAll(t, s, "done")
	rdb.Del(ctx, store.Prefix+"{wf:gone}:wf") // expired
	now = now.Add(time.Hour + 30*time.Second) // past max_open_age, within the records' horizon (max_open_age and the retention)
	sw, err := s.SweepIndex(ctx, 0, 100)
	if err != nil || sw.Dropped != 1 || len(sw.TooOld) != 1 || sw.TooOld[0] != "open" || sw.Next != 0 {
		t.Fatalf("sweep: %+v %v, want gone dropped, open too old, the end reached", sw, err)
	}
	if ws, _ := s.List(ctx, "", 10); len(ws) != 2 {
		t.Fatalf("listed %d after the sweep, want open and done", len(ws))
	}
	// past the horizon no record is left: a sweep from the oldest drops
	// every entry in one command, whatever it points at
	now = now.Add(time.Hour)
	if _, err := s.SweepIndex(ctx, 0, 100); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.ZCard(ctx, store.Prefix+"workflows").Result(); n != 0 {
		t.Fatalf("%d index entries past the horizon, want none", n)
	}
}

func settleAll(t *testing.T, s *store.Store, id string) {
	t.Helper()
	for _, step := range []string{"d", "a", "b", "c"} {
		deps := chordDeps
		if step == "d" {
			deps = nil
		}
		if _, _, err := settle(context.Background(), s, id, step, store.Outcome{Done: true}, deps); err != nil {
			t.Fatal(err)
		}
	}
}
