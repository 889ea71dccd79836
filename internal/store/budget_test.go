package store_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
)

// Twenty reservations at once against a limit of ten reservations' worth:
// exactly ten are admitted, whatever the interleaving.
func TestBudgetReservationsNeverPassTheLimitTogether(t *testing.T) {
	_, rdb := redistest.New(t)
	ctx := context.Background()
	for round := 0; round < 5; round++ {
		b := store.NewBudgets(rdb, store.BudgetOptions{})
		key := "round" + string(rune('a'+round))
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			ok    int
			start = make(chan struct{})
		)
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, admitted, _, err := b.Reserve(ctx, key, 100, 10, time.Hour)
				if err != nil {
					t.Error(err)
				}
				if admitted {
					mu.Lock()
					ok++
					mu.Unlock()
				}
			}()
		}
		close(start)
		wg.Wait()
		if ok != 10 {
			t.Fatalf("round %d: %d of 20 reservations of 10 admitted under a limit of 100, want 10", round, ok)
		}
		if used, held, err := b.Spent(ctx, key, time.Hour); err != nil || used != 0 || held != 100 {
			t.Fatalf("spent: used %d held %d err %v; want 0 and 100", used, held, err)
		}
	}
}

// A settle replaces the reservation by what was spent: the difference goes
// back to the budget, and what was spent stays counted.
func TestBudgetSettleRefundsTheDifference(t *testing.T) {
	_, rdb := redistest.New(t)
	ctx := context.Background()
	b := store.NewBudgets(rdb, store.BudgetOptions{})
	id, ok, left, err := b.Reserve(ctx, "k", 100, 60, time.Hour)
	if err != nil || !ok || left != 40 {
		t.Fatalf("first: ok=%v left=%d err=%v", ok, left, err)
	}
	if _, ok, left, _ := b.Reserve(ctx, "k", 100, 50, time.Hour); ok || left != 40 {
		t.Fatalf("50 more with 40 left: ok=%v left=%d, want refused with 40 left", ok, left)
	}
	if err := b.Settle(ctx, "k", id, 20); err != nil {
		t.Fatal(err)
	}
	if _, ok, left, _ := b.Reserve(ctx, "k", 100, 50, time.Hour); !ok || left != 30 {
		t.Fatalf("50 after a settle of 20: ok=%v left=%d, want admitted with 30 left", ok, left)
	}
	if used, held, _ := b.Spent(ctx, "k", time.Hour); used != 20 || held != 50 {
		t.Fatalf("used %d held %d, want 20 and 50", used, held)
	}
	// a release is a settle of 0: everything goes back
	id2, _, _, _ := b.Reserve(ctx, "k", 100, 30, time.Hour)
	if err := b.Settle(ctx, "k", id2, 0); err != nil {
		t.Fatal(err)
	}
	if used, held, _ := b.Spent(ctx, "k", time.Hour); used != 20 || held != 50 {
		t.Fatalf("after a release: used %d held %d, want 20 and 50", used, held)
	}
}

// A reservation never settled (its worker crashed) stops holding the
// budget once its lease lapses; a settle that comes after that still
// charges what was spent.
func TestBudgetUnsettledReservationLapses(t *testing.T) {
	_, rdb := redistest.New(t)
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)
	b := store.NewBudgets(rdb, store.BudgetOptions{Now: func() time.Time { return now }, Lease: 10 * time.Minute})
	id, ok, _, _ := b.Reserve(ctx, "k", 100, 100, 24*time.Hour)
	if !ok {
		t.Fatal("refused under the limit")
	}
	now = now.Add(9 * time.Minute)
	if _, ok, _, _ := b.Reserve(ctx, "k", 100, 1, 24*time.Hour); ok {
		t.Fatal("admitted while a live reservation holds the whole budget")
	}
	now = now.Add(time.Minute)
	id2, ok, left, _ := b.Reserve(ctx, "k", 100, 70, 24*time.Hour)
	if !ok || left != 30 {
		t.Fatalf("after the lease: ok=%v left=%d, want admitted with 30 left", ok, left)
	}
	if err := b.Settle(ctx, "k", id, 40); err != nil { // the crashed worker's, late
		t.Fatal(err)
	}
	if used, held, _ := b.Spent(ctx, "k", 24*time.Hour); used != 40 || held != 70 {
		t.Fatalf("used %d held %d, want 40 (the late settle) and 70", used, held)
	}
	if err := b.Settle(ctx, "k", id2, 70); err != nil {
		t.Fatal(err)
	}
	if _, ok, left, _ := b.Reserve(ctx, "k", 100, 1, 24*time.Hour); ok || left != -10 {
		t.Fatalf("after settles past the limit: ok=%v left=%d, want refused with -10", ok, left)
	}
}

// Windows are the period's multiples since the Unix epoch: a new window
// starts with the whole budget; a reservation made in the old one is
// settled there; each window's hash expires after its end, a lease and a
// minute.
func TestBudgetWindows(t *testing.T) {
	_, rdb := redistest.New(t)
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 10, 59, 0, 0, time.UTC)
	b := store.NewBudgets(rdb, store.BudgetOptions{Now: func() time.Time { return now }})
	id, ok, _, _ := b.Reserve(ctx, "w", 10, 10, time.Hour)
	if !ok {
		t.Fatal("refused")
	}
	ttl := rdb.PTTL(ctx, "agentq:{budget:w}:"+strconv.FormatInt(time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC).UnixMilli(), 10)+":1h0m0s").Val()
	if want := time.Minute + 10*time.Minute + time.Minute; ttl <= want-time.Second || ttl > want {
		t.Fatalf("window hash TTL %s, want about %s (to its end, plus the lease and a minute)", ttl, want)
	}
	now = now.Add(time.Minute) // 11:00: a new window
	if _, ok, left, _ := b.Reserve(ctx, "w", 10, 10, time.Hour); !ok || left != 0 {
		t.Fatalf("new window: ok=%v left=%d", ok, left)
	}
	if err := b.Settle(ctx, "w", id, 3); err != nil {
		t.Fatal(err)
	}
	if used, held, _ := b.Spent(ctx, "w", time.Hour); used != 0 || held != 10 {
		t.Fatalf("the new window: used %d held %d; the old window's settle landed in it", used, held)
	}
	// period 0: one window for the key's life, kept Keep after its last use
	b0 := store.NewBudgets(rdb, store.BudgetOptions{Keep: time.Hour})
	id0, ok, _, _ := b0.Reserve(ctx, "wf:1", 10, 4, 0)
	if !ok || b0.Settle(ctx, "wf:1", id0, 4) != nil {
		t.Fatal("period 0 reserve or settle failed")
	}
	if ttl := rdb.PTTL(ctx, "agentq:{budget:wf:1}").Val(); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Fatalf("period-0 hash TTL %s, want about 1h", ttl)
	}
	if _, _, _, err := b0.Reserve(ctx, "a{b}", 10, 1, 0); !errors.Is(err, store.ErrBadBudgetKey) {
		t.Fatalf("a key with braces: %v", err)
	}
}

// A window's hash lost while the window is live (a Redis promotion that
// did not have it) is made again by the next settle, with its charge and
// the window's expiry, so the window cannot overspend by the calls it had
// taken; once the window is long over, a settle makes nothing.
func TestBudgetSettleRemakesALostLiveWindow(t *testing.T) {
	_, rdb := redistest.New(t)
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 10, 30, 0, 0, time.UTC)
	b := store.NewBudgets(rdb, store.BudgetOptions{Now: func() time.Time { return now }})
	key := "agentq:{budget:lost}:" + strconv.FormatInt(time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC).UnixMilli(), 10) + ":1h0m0s"
	id, ok, _, err := b.Reserve(ctx, "lost", 100, 60, time.Hour)
	if err != nil || !ok {
		t.Fatalf("reserve: %v %v", ok, err)
	}
	rdb.Del(ctx, key) // the promotion
	if err := b.Settle(ctx, "lost", id, 60); err != nil {
		t.Fatal(err)
	}
	if used, _, _ := b.Spent(ctx, "lost", time.Hour); used != 60 {
		t.Fatalf("used %d after the lost window's settle, want 60", used)
	}
	if _, ok, left, _ := b.Reserve(ctx, "lost", 100, 60, time.Hour); ok || left != 40 {
		t.Fatalf("a second 60 of 100: admitted %v, left %d; want refused with 40 left", ok, left)
	}
	if ttl, want := rdb.PTTL(ctx, key).Val(), 30*time.Minute+10*time.Minute+time.Minute; ttl <= want-time.Second || ttl > want {
		t.Fatalf("the remade hash's TTL %s, want about %s", ttl, want)
	}
	// long after the window: its hash expired, and a late settle makes none
	id2, _, _, _ := b.Reserve(ctx, "lost", 100, 10, time.Hour)
	rdb.Del(ctx, key)
	now = now.Add(2 * time.Hour)
	if err := b.Settle(ctx, "lost", id2, 10); err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, key).Val(); n != 0 {
		t.Fatal("a settle long after its window made the window's hash again")
	}
	// period 0: the key's one window is live for Keep after its last use
	b0 := store.NewBudgets(rdb, store.BudgetOptions{Keep: time.Hour})
	id0, _, _, _ := b0.Reserve(ctx, "wf:lost", 10, 4, 0)
	rdb.Del(ctx, "agentq:{budget:wf:lost}")
	if err := b0.Settle(ctx, "wf:lost", id0, 4); err != nil {
		t.Fatal(err)
	}
	if used, _, _ := b0.Spent(ctx, "wf:lost", 0); used != 4 {
		t.Fatalf("period 0: used %d after the lost hash's settle, want 4", used)
	}
}

// One call's reservation and settle, with 50 other calls' reservations
// live in the window (what a busy budget's hash holds).
func BenchmarkBudgetReserveSettle(b *testing.B) {
	_, rdb := redistest.New(b)
	ctx := context.Background()
	bu := store.NewBudgets(rdb, store.BudgetOptions{})
	for range 50 {
		if _, ok, _, err := bu.Reserve(ctx, "bench", 1<<40, 1000, time.Hour); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
	b.ResetTimer()
	for range b.N {
		id, ok, _, err := bu.Reserve(ctx, "bench", 1<<40, 1000, time.Hour)
		if !ok || err != nil {
			b.Fatal(ok, err)
		}
		if err := bu.Settle(ctx, "bench", id, 10); err != nil {
			b.Fatal(err)
		}
	}
}
