package schedule_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/schedule"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
)

// Slots are the same whoever asks and whenever: "@every D" counts from the
// Unix epoch, cron expressions are wall-clock times in UTC (or their
// CRON_TZ).
func TestNextSlots(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct{ cron, from, want string }{
		{"@every 1s", "2026-03-01T10:00:00.3Z", "2026-03-01T10:00:01Z"},
		{"@every 1s", "2026-03-01T10:00:01Z", "2026-03-01T10:00:02Z"},
		{"@every 90s", "2026-03-01T10:00:00Z", "2026-03-01T10:01:30Z"}, // 10:00 is 19,751,760 slots of 90s after the epoch
		{"@every 1h", "2026-03-01T10:59:59Z", "2026-03-01T11:00:00Z"},
		{"30 2 * * *", "2026-03-01T10:00:00Z", "2026-03-02T02:30:00Z"},
		{"@hourly", "2026-03-01T10:00:00Z", "2026-03-01T11:00:00Z"},
		{"CRON_TZ=Asia/Tokyo 0 9 * * *", "2026-03-01T00:00:00Z", "2026-03-02T00:00:00Z"},
	} {
		when, err := config.ParseCron(c.cron)
		if err != nil {
			t.Fatalf("%s: %v", c.cron, err)
		}
		from := at(c.from)
		if got := schedule.Next(when, from); !got.Equal(at(c.want)) {
			t.Errorf("Next(%q, %s) = %s, want %s", c.cron, c.from, got, c.want)
		}
		// another replica asking a moment later gets the same slot
		if got := schedule.Next(when, from.Add(123*time.Millisecond)); !got.Equal(at(c.want)) {
			t.Errorf("Next(%q, %s + 123ms) = %s, want %s", c.cron, c.from, got, c.want)
		}
	}
	if k := schedule.Key("nightly", at("2026-03-02T02:30:00Z")); k != "schedule:nightly:1772418600" {
		t.Errorf("key %q", k)
	}
}

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []fakeTimer
}

type fakeTimer struct {
	at time.Time
	ch chan time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	c.timers = append(c.timers, fakeTimer{c.now.Add(d), ch})
	return ch
}

// pending is how many After channels have not fired.
func (c *fakeClock) pending() int { c.mu.Lock(); defer c.mu.Unlock(); return len(c.timers) }

// Advance moves the clock once the scheduler waits on it (so no wait is
// asked for after the move and missed), firing what falls due.
func (c *fakeClock) Advance(t *testing.T, d time.Duration) {
	t.Helper()
	poll.Until(t, 5*time.Second, func() (bool, string) { return c.pending() > 0, "the scheduler does not wait on the clock" })
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.timers[:0]
	for _, tm := range c.timers {
		if tm.at.After(c.now) {
			kept = append(kept, tm)
		} else {
			tm.ch <- c.now
		}
	}
	c.timers = kept
}

// A replica that takes a lease over fires the slots missed since the last
// one fired, but only those within CatchUp; then one per slot as its clock
// moves (the clock is injected: no waiting for real time).
func TestTakeOverCatchesUpWithinCatchUp(t *testing.T) {
	_, rdb := redistest.New(t)
	entries := tickEntries(t, rdb)
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	// a replica that died had fired t0
	sch := store.NewSchedules(rdb)
	if ok, err := sch.Lease(t.Context(), "tick", "dead", time.Second); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, err := sch.MarkFired(t.Context(), "tick", "dead", store.Fired{Slot: t0, Workflow: "wf_x", Cron: "@every 1s", Spec: "tick", Next: t0.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if err := sch.Release(t.Context(), "tick", "dead"); err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: t0.Add(10*time.Second + 400*time.Millisecond)}
	f := &fires{}
	s, err := schedule.New(schedule.Options{Entries: entries, Client: producer.NewClient(rdb, producer.ClientOptions{Limits: spec.DefaultLimits(), Retention: time.Hour}),
		Redis: rdb, Holder: "new", CatchUp: 3 * time.Second, Clock: clock, Fired: f.add})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	want := func(n int) {
		t.Helper()
		poll.Until(t, 5*time.Second, func() (bool, string) { return len(f.list()) >= n, fmt.Sprintf("%d fires: %v", len(f.list()), f.list()) })
	}
	want(3) // t0+8, t0+9, t0+10: t0+1 … t0+7 are older than CatchUp
	for i, x := range f.list() {
		if w := t0.Add(time.Duration(8+i) * time.Second); !x.Slot.Equal(w) || x.Existing || x.Holder != "new" {
			t.Fatalf("fire %d: %+v, want slot %s", i, x, w)
		}
	}
	clock.Advance(t, time.Second)
	want(4)
	clock.Advance(t, 2*time.Second)
	want(6)
	if got := f.list(); !got[5].Slot.Equal(t0.Add(13*time.Second)) || len(got) != 6 {
		t.Fatalf("after the clock moved: %v", got)
	}
	last, err := sch.LastFired(t.Context(), "tick")
	if err != nil || !last.Equal(t0.Add(13*time.Second)) {
		t.Fatalf("last slot fired %v %v", last, err)
	}
	states, err := sch.List(t.Context(), t0.Add(14*time.Second))
	if err != nil || len(states) != 1 || states[0].Holder != "new" || states[0].LastWorkflow != store.IdempotentID(schedule.Key("tick", *last)) {
		t.Fatalf("listing: %+v %v", states, err)
	}
}
