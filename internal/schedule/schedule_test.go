package schedule_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/defaults"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/schedule"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

const tickSpec = `
name: tick
steps:
  - { id: s, route: solo, prompt: "tick" }
`

// fires collects what the schedulers fired.
type fires struct {
	mu  sync.Mutex
	all []schedule.Fire
}

func (f *fires) add(x schedule.Fire) { f.mu.Lock(); defer f.mu.Unlock(); f.all = append(f.all, x) }

func (f *fires) list() []schedule.Fire {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]schedule.Fire(nil), f.all...)
}

// replica is one scheduler with its own Redis connection, so killing it
// can drop the connection first: its lease is not released, as when a
// process dies.
type replica struct {
	rdb    *redis.Client
	cancel context.CancelFunc
	done   chan struct{}
}

func startReplica(t *testing.T, db redistest.DB, holder string, entries []schedule.Entry, f *fires) *replica {
	t.Helper()
	rdb := redis.NewClient(db.Options())
	cl := producer.NewClient(rdb, producer.ClientOptions{Limits: spec.DefaultLimits(), Retention: time.Hour})
	s, err := schedule.New(schedule.Options{Entries: entries, Client: cl, Redis: rdb, Holder: holder,
		LeaseTTL: time.Second, Fired: f.add})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{rdb: rdb, cancel: cancel, done: make(chan struct{})}
	go func() { defer close(r.done); _ = s.Run(ctx) }()
	t.Cleanup(func() { r.stop() })
	return r
}

func (r *replica) stop() {
	r.cancel()
	<-r.done
	r.rdb.Close()
}

// kill stops the replica as a crash would: its connection goes first, so
// it cannot give its lease up; the lease has to expire.
func (r *replica) kill() {
	r.rdb.Close()
	r.cancel()
	<-r.done
}

func tickEntries(t *testing.T, rdb redis.UniversalClient) []schedule.Entry {
	t.Helper()
	wspec, err := producer.NewClient(rdb, producer.ClientOptions{Retention: defaults.Retention, Limits: spec.DefaultLimits()}).Parse("tick.yaml", []byte(tickSpec))
	if err != nil {
		t.Fatal(err)
	}
	when, err := config.ParseCron("@every 1s")
	if err != nil {
		t.Fatal(err)
	}
	return []schedule.Entry{{Name: "tick", Cron: "@every 1s", When: when, Spec: wspec}}
}

// Three replicas with one "@every 1s" schedule, for about ten seconds, on
// one real Redis: each slot's workflow is created exactly once (counted by
// the ids its idempotency key names, and by the workflows Redis holds).
// Halfway the lease holder is killed (its lease not given up); another
// replica takes the lease when it expires and catches the slots up: the
// slot sequence has no gap and no slot is doubled.
func TestThreeReplicasFireEachSlotOnceThroughAFailover(t *testing.T) {
	db, rdb := redistest.New(t)
	if db.Kind == "miniredis" {
		t.Skip("a killed holder's lease that lapses in real time needs a real redis-server (miniredis expires keys only when told to)")
	}
	entries := tickEntries(t, rdb)
	f := &fires{}
	replicas := map[string]*replica{}
	for _, h := range []string{"r1", "r2", "r3"} {
		replicas[h] = startReplica(t, db, h, entries, f)
	}
	began := time.Now()
	poll.Until(t, 10*time.Second, func() (bool, string) {
		return len(f.list()) >= 5, fmt.Sprintf("%d slots fired", len(f.list()))
	})
	before := f.list()
	victim := before[len(before)-1].Holder
	replicas[victim].kill()
	killedAt := time.Now()
	poll.Until(t, 15*time.Second, func() (bool, string) {
		n := 0
		for _, x := range f.list() {
			if x.Holder != victim && x.Slot.After(killedAt.Add(time.Second)) {
				n++
			}
		}
		return n >= 3 && time.Since(began) >= 10*time.Second, fmt.Sprintf("%d slots fired after the kill by another replica", n)
	})
	for h, r := range replicas {
		if h != victim {
			r.stop()
		}
	}

	all := f.list()
	created := map[time.Time]int{}
	holders := map[string]bool{}
	for _, x := range all {
		if x.Workflow != store.IdempotentID(schedule.Key("tick", x.Slot)) {
			t.Fatalf("slot %s: workflow %s is not the one its key names", x.Slot, x.Workflow)
		}
		if !x.Existing {
			created[x.Slot]++
		}
		holders[x.Holder] = true
		if x.Holder == victim && x.Slot.After(killedAt) {
			t.Fatalf("the killed replica fired slot %s after it died", x.Slot)
		}
		if x.Slot.UnixNano()%int64(time.Second) != 0 {
			t.Fatalf("slot %s is not on a second", x.Slot)
		}
	}
	var slots []time.Time
	for s, n := range created {
		if n != 1 {
			t.Errorf("slot %s created %d times", s, n)
		}
		slots = append(slots, s)
	}
	sort.Slice(slots, func(i, j int) bool { return slots[i].Before(slots[j]) })
	for i := 1; i < len(slots); i++ {
		if d := slots[i].Sub(slots[i-1]); d != time.Second {
			t.Errorf("a gap of %s between slots %s and %s", d, slots[i-1], slots[i])
		}
	}
	wfs, err := producer.NewClient(rdb, producer.ClientOptions{Retention: defaults.Retention, Limits: spec.DefaultLimits()}).List(t.Context(), "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(wfs) != len(slots) || len(slots) < 9 {
		t.Fatalf("%d workflows in Redis for %d slots (want one per slot, at least 9 in ten seconds)", len(wfs), len(slots))
	}
	if len(holders) < 2 {
		t.Fatalf("fired by %v only: no replica took over", holders)
	}
	t.Logf("%d slots in %s, each created once; holders %v; %d fires in all (%d found their workflow made)",
		len(slots), slots[len(slots)-1].Sub(slots[0])+time.Second, holders, len(all), len(all)-len(slots))
}

// A schedule is listed from the moment a replica holds it, before its
// first slot fires: a nightly schedule shows its cron, spec, holder and
// next slot, and no last slot.
func TestAScheduleIsListedBeforeItsFirstSlot(t *testing.T) {
	db, rdb := redistest.New(t)
	wspec, err := producer.NewClient(rdb, producer.ClientOptions{Retention: defaults.Retention, Limits: spec.DefaultLimits()}).Parse("tick.yaml", []byte(tickSpec))
	if err != nil {
		t.Fatal(err)
	}
	when, err := config.ParseCron("30 2 * * *")
	if err != nil {
		t.Fatal(err)
	}
	startReplica(t, db, "r1", []schedule.Entry{{Name: "nightly", Cron: "30 2 * * *", When: when, Spec: wspec}}, &fires{})
	cl := producer.NewClient(rdb, producer.ClientOptions{Retention: defaults.Retention, Limits: spec.DefaultLimits()})
	var got []producer.ScheduleInfo
	poll.Until(t, 10*time.Second, func() (bool, string) {
		got, err = cl.Schedules(t.Context())
		return err == nil && len(got) == 1 && got[0].Holder == "r1", fmt.Sprintf("schedules: %+v %v", got, err)
	})
	s := got[0]
	if s.Name != "nightly" || s.Cron != "30 2 * * *" || s.Workflow != "tick" || s.LastSlot != nil || s.NextSlot == nil ||
		s.NextSlot.UTC().Hour() != 2 || s.NextSlot.UTC().Minute() != 30 || !s.NextSlot.After(time.Now()) {
		t.Fatalf("the nightly schedule before its first slot: %+v (next %v)", s, s.NextSlot)
	}
}
