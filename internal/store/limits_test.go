package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
)

func TestConcurrencyLeases(t *testing.T) {
	_, rdb := redistest.New(t)
	now := time.Now()
	l := store.NewLimits(rdb, func() time.Time { return now })
	ctx := context.Background()
	r1, _, ok1, _ := l.Acquire(ctx, "p", 2, 0, 10*time.Second)
	_, _, ok2, _ := l.Acquire(ctx, "p", 2, 0, 10*time.Second)
	_, wait, ok3, err := l.Acquire(ctx, "p", 2, 0, 10*time.Second)
	if !ok1 || !ok2 || ok3 || err != nil || wait != 10*time.Second {
		t.Fatalf("third lease: ok=%v wait=%s err=%v; want refused until the first lease lapses (10s)", ok3, wait, err)
	}
	r1(ctx)
	if _, _, ok, _ := l.Acquire(ctx, "p", 2, 0, 10*time.Second); !ok {
		t.Fatal("a released lease was not reusable")
	}
	// a worker that died never releases: its leases lapse
	now = now.Add(11 * time.Second)
	for i := 0; i < 2; i++ {
		if _, _, ok, _ := l.Acquire(ctx, "p", 2, 0, 10*time.Second); !ok {
			t.Fatalf("lapsed leases still counted (%d)", i)
		}
	}
}

func TestRequestsPerMinute(t *testing.T) {
	_, rdb := redistest.New(t)
	now := time.Now()
	l := store.NewLimits(rdb, func() time.Time { return now })
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if _, _, ok, _ := l.Acquire(ctx, "p", 0, 3, time.Second); !ok {
			t.Fatalf("request %d refused under the limit", i)
		}
		now = now.Add(10 * time.Second)
	}
	_, wait, ok, _ := l.Acquire(ctx, "p", 0, 3, time.Second)
	if ok || wait != 30*time.Second {
		t.Fatalf("fourth request in the minute: ok=%v wait=%s, want refused for 30s", ok, wait)
	}
	now = now.Add(30 * time.Second)
	if _, _, ok, _ := l.Acquire(ctx, "p", 0, 3, time.Second); !ok {
		t.Fatal("refused once the first request left the minute")
	}
}
