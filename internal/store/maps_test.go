package store_test

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
)

// newMapWorkflow writes a workflow plan → m (a map) → reduce.
func newMapWorkflow(t *testing.T, s *store.Store, id string) {
	t.Helper()
	if _, err := s.Create(context.Background(), store.NewWorkflow{ID: id, Name: "map", Steps: []string{"plan", "m", "reduce"}}); err != nil {
		t.Fatal(err)
	}
}

func items(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = strconv.Itoa(i * 10)
	}
	return out
}

var reduceDeps = []store.Dependent{{ID: "reduce", Inputs: 1}}

func TestMapWindowReleasesOneInstancePerSettleAndCompletesOnce(t *testing.T) {
	_, rdb := redistest.New(t)
	s := store.New(rdb, time.Hour, nil)
	ctx := context.Background()
	newMapWorkflow(t, s, "wf")
	e, err := s.Expand(ctx, "wf", "m", items(7), 3)
	if err != nil || e.Items != 7 || e.Next != 3 {
		t.Fatalf("expand: %+v %v, want 7 items, 3 released", e, err)
	}
	// expanding again (a redelivered map task) changes nothing
	if e2, err := s.Expand(ctx, "wf", "m", items(9), 5); err != nil || *e2 != *e {
		t.Fatalf("second expand: %+v %v, want %+v", e2, err, e)
	}
	a, err := s.Begin(ctx, "wf", record.InstanceID("m", 4), "t", 0, time.Minute, nil)
	if err != nil || a.Item != "40" {
		t.Fatalf("begin instance 4: item %q, %v", a.Item, err)
	}
	released := map[int]bool{}
	for i := range 7 {
		inst := record.InstanceID("m", i)
		o := store.Outcome{Done: true, Output: "out" + strconv.Itoa(i), Map: "m"}
		r, err := s.Settle(ctx, "wf", inst, o, reduceDeps)
		if err != nil {
			t.Fatal(err)
		}
		// delivered twice: the same release, nothing counted twice
		r2, err := s.Settle(ctx, "wf", inst, o, reduceDeps)
		if err != nil || r2.Release != r.Release {
			t.Fatalf("instance %d settled again: release %d (first %d), %v", i, r2.Release, r.Release, err)
		}
		if r.Release >= 0 {
			if released[r.Release] || r.Release < 3 {
				t.Fatalf("instance %d released %d twice or from the first window", i, r.Release)
			}
			released[r.Release] = true
		}
		wantReady := i == 6
		if got := len(r.Ready) == 1; got != wantReady || len(r2.Ready) != len(r.Ready) {
			t.Fatalf("after instance %d: ready %v / %v", i, r.Ready, r2.Ready)
		}
	}
	if len(released) != 4 {
		t.Fatalf("released %v, want instances 3..6 once each", released)
	}
	w, err := s.Get(ctx, "wf")
	if err != nil {
		t.Fatal(err)
	}
	m := w.Steps[1]
	if m.State != store.StepDone || m.Map == nil || *m.Map != (store.MapCounts{Items: 7, Started: 7, Settled: 7}) {
		t.Fatalf("map step %+v counts %+v", m, m.Map)
	}
	outs, err := s.InstanceOutputs(ctx, "wf", "m", 5, 2)
	if err != nil || len(outs) != 2 || outs[0].Output != "out5" || outs[1].Output != "out6" {
		t.Fatalf("outputs page: %+v %v", outs, err)
	}
	if nin, _ := rdb.HGet(ctx, store.Prefix+"{wf:wf}:wf", "reduce.nin").Int(); nin != 1 {
		t.Fatalf("reduce counted %d inputs, want the map once", nin)
	}
}

func TestMapOptionalInstanceDeadIsMissingAndAFailedOneBlocks(t *testing.T) {
	_, rdb := redistest.New(t)
	s := store.New(rdb, time.Hour, nil)
	ctx := context.Background()
	newMapWorkflow(t, s, "wf")
	if _, err := s.Expand(ctx, "wf", "m", items(3), 0); err != nil {
		t.Fatal(err)
	}
	settleInst := func(i int, o store.Outcome) *store.Settled {
		t.Helper()
		o.Map = "m"
		r, err := s.Settle(ctx, "wf", record.InstanceID("m", i), o, reduceDeps)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	settleInst(0, store.Outcome{Done: true})
	if r := settleInst(1, store.Outcome{Error: "bad"}); r.State != store.StateBlocked || len(r.Ready) != 0 {
		t.Fatalf("a dead instance that is not optional: %+v, want blocked", r)
	}
	// requeued and done: unblocked
	if r := settleInst(1, store.Outcome{Done: true}); r.State != store.StateRunning {
		t.Fatalf("instance requeued and done: %+v", r)
	}
	r := settleInst(2, store.Outcome{Error: "gone", Optional: true})
	if len(r.Ready) != 1 {
		t.Fatalf("the last instance, dead but optional: %+v, want the reduce ready", r)
	}
	w, _ := s.Get(ctx, "wf")
	if c := w.Steps[1].Map; c == nil || c.Missing != 1 || c.Settled != 3 {
		t.Fatalf("counts %+v, want one missing of three settled", c)
	}
}

func TestEmptyCanceledAndSettledMapsDoNotExpand(t *testing.T) {
	_, rdb := redistest.New(t)
	s := store.New(rdb, time.Hour, nil)
	ctx := context.Background()
	newMapWorkflow(t, s, "c")
	if _, err := s.Cancel(ctx, "c", []string{"plan", "m", "reduce"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Expand(ctx, "c", "m", items(3), 0); !errors.Is(err, store.ErrCanceled) {
		t.Fatalf("expand in a canceled workflow: %v", err)
	}
	newMapWorkflow(t, s, "d")
	if _, err := s.Settle(ctx, "d", "m", store.Outcome{Error: "over max_items"}, reduceDeps); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Expand(ctx, "d", "m", items(3), 0); !errors.Is(err, store.ErrAlreadySettled) {
		t.Fatalf("expand of a dead map: %v", err)
	}
	if n, _ := rdb.HExists(ctx, store.Prefix+"{wf:d}:wf", "m[0].item").Result(); n {
		t.Fatal("a dead map wrote items")
	}
}

// An instance's outcome reaching a record without its map's expansion (a
// failover promoted a replica the expansion had not reached, while the
// instance ran on the old primary) is refused as stale and counts
// nothing: counted, it settled the map on the one instance that reported
// (the lagging-replica drill's map of 10 completed with 9 never run).
// Expanded again, the map counts its instances as ever.
func TestAnInstanceOfAMapWithoutItsExpansionCountsNothing(t *testing.T) {
	_, rdb := redistest.New(t)
	s := store.New(rdb, time.Hour, nil)
	ctx := context.Background()
	newMapWorkflow(t, s, "lost")
	o := store.Outcome{Done: true, Output: "out0", Map: "m"}
	if _, err := s.Settle(ctx, "lost", record.InstanceID("m", 0), o, reduceDeps); !errors.Is(err, store.ErrStaleAttempt) {
		t.Fatalf("an instance of a map not expanded: %v, want ErrStaleAttempt", err)
	}
	w, err := s.Get(ctx, "lost")
	if err != nil {
		t.Fatal(err)
	}
	if m := w.Steps[1]; m.State == store.StepDone || w.Steps[2].State != store.StepPending {
		t.Fatalf("after the refused instance: m %s, reduce %s", m.State, w.Steps[2].State)
	}
	if n, _ := rdb.HExists(ctx, store.Prefix+"{wf:lost}:wf", "m[0].state").Result(); n {
		t.Fatal("the refused instance wrote its record")
	}
	if _, err := s.Expand(ctx, "lost", "m", items(3), 0); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		r, err := s.Settle(ctx, "lost", record.InstanceID("m", i), store.Outcome{Done: true, Output: "out" + strconv.Itoa(i), Map: "m"}, reduceDeps)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := len(r.Ready) == 1, i == 2; got != want {
			t.Fatalf("after instance %d: ready %v", i, r.Ready)
		}
	}
}

func TestEarlierLayoutIsMigratedToCounters(t *testing.T) {
	_, rdb := redistest.New(t)
	s := store.New(rdb, time.Hour, nil)
	ctx := context.Background()
	if _, err := s.Create(ctx, store.NewWorkflow{ID: "wf", Steps: []string{"a", "b", "c", "d"}}); err != nil {
		t.Fatal(err)
	}
	key := store.Prefix + "{wf:wf}:wf"
	// as the previous agentq left it: flags only, a and b settled
	rdb.HDel(ctx, key, "fanin")
	rdb.HSet(ctx, key, "a.settled", "1", "b.settled", "1", "a.state", "done", "b.state", "done", "nsettled", 2)
	if _, err := s.Settle(ctx, "wf", "c", store.Outcome{Done: true}, chordDeps); !errors.Is(err, store.ErrOldLayout) {
		t.Fatalf("settle before migrating: %v, want ErrOldLayout", err)
	}
	deps := map[string][]string{"d": {"a", "b", "c"}}
	for range 2 { // idempotent
		if err := s.MigrateFanIn(ctx, "wf", deps); err != nil {
			t.Fatal(err)
		}
	}
	state, ready, err := settle(ctx, s, "wf", "c", store.Outcome{Done: true}, chordDeps)
	if err != nil || len(ready) != 1 || state != store.StateRunning {
		t.Fatalf("settle after migrating: %s %v %v, want d ready", state, ready, err)
	}
}

// commandCalls is how often the server ran each command since its
// statistics were last reset (a script's inner commands counted too).
func commandCalls(t *testing.T, rdb *redis.Client) map[string]int {
	out := map[string]int{}
	for name, c := range commandStats(t, rdb) {
		if name != "config|resetstat" {
			out[name] = c.calls
		}
	}
	return out
}

// A map instance's settle costs the same Redis commands whatever the
// map's width: the settle that releases (and enqueues) the next instance
// of the window and the last one, which makes the reduce ready, run exactly the same
// commands (by name and count) in a 10,000-item map as in a 10-item one,
// and none that reads a whole hash, set or list. The 10,000-item map
// settles completely, its reduce made ready once, its outputs in order.
func TestMapSettleCostsTheSameAtAnyWidth(t *testing.T) {
	srv := redistest.NewServer(t, "--save", "", "--appendonly", "no")
	srv.Start() // a server of its own: nothing else moves its statistics
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	s := store.New(rdb, time.Hour, nil)
	ctx := context.Background()
	const window = 5
	// the task of the instance a settle releases, enqueued by the settle
	// as a worker's is
	probe := func(wf string) *store.Task {
		id := record.InstanceID("m", store.ReleaseProbe)
		return &store.Task{ID: wf + ":" + id, Queue: "default", Type: "agentq:step", Payload: []byte(`{"wf":"` + wf + `","step":"` + id + `"}`)}
	}
	// settleAll settles the instances of a map of width n in item order
	// and returns the commands of the first settle and of the last
	settleAll := func(id string, n int) (first, last map[string]int) {
		newMapWorkflow(t, s, id)
		if e, err := s.Expand(ctx, id, "m", items(n), window); err != nil || e.Items != n || e.Next != window {
			t.Fatalf("%s: expand %+v %v", id, e, err)
		}
		ready := 0
		for i := range n {
			measured := i == 0 || i == n-1
			if measured {
				if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
					t.Fatal(err)
				}
			}
			r, err := s.Settle(ctx, id, record.InstanceID("m", i), store.Outcome{Done: true, Output: "out" + strconv.Itoa(i), Map: "m", Release: probe(id)}, reduceDeps)
			if err != nil {
				t.Fatal(err)
			}
			if want := i + window; (want < n) != (r.Release == want && r.ReleaseEnqueued) {
				t.Fatalf("%s: instance %d's settle released %d (enqueued %v), want %d", id, i, r.Release, r.ReleaseEnqueued, want)
			}
			ready += len(r.Ready)
			if measured {
				if i == 0 {
					first = commandCalls(t, rdb)
				} else {
					last = commandCalls(t, rdb)
				}
			}
		}
		if ready != 1 {
			t.Fatalf("%s: the reduce was made ready %d times, want once", id, ready)
		}
		w, err := s.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if m := w.Steps[1].Map; m == nil || *m != (store.MapCounts{Items: n, Started: n, Settled: n}) || w.Steps[1].State != store.StepDone {
			t.Fatalf("%s: map step %+v counts %+v", id, w.Steps[1], m)
		}
		outs, err := s.InstanceOutputs(ctx, id, "m", n-2, 2)
		if err != nil || len(outs) != 2 || outs[0].Output != "out"+strconv.Itoa(n-2) || outs[1].Output != "out"+strconv.Itoa(n-1) {
			t.Fatalf("%s: the last outputs %+v %v", id, outs, err)
		}
		return first, last
	}
	settleAll("warm", window+1) // the scripts loaded: no EVAL after a NOSCRIPT in what is measured
	narrowFirst, narrowLast := settleAll("narrow", 10)
	wideFirst, wideLast := settleAll("wide", 10_000)
	for _, c := range []struct {
		which        string
		narrow, wide map[string]int
	}{{"first (releases the next instance)", narrowFirst, wideFirst}, {"last (makes the reduce ready)", narrowLast, wideLast}} {
		if !maps.Equal(c.narrow, c.wide) {
			t.Errorf("the %s settle: %v in a 10-item map, %v in a 10,000-item one", c.which, c.narrow, c.wide)
		}
		for name := range c.wide {
			switch name {
			case "hgetall", "hkeys", "hvals", "hscan", "smembers", "sscan", "lrange", "zrange", "zrangebyscore", "keys", "scan":
				t.Errorf("the %s settle reads a whole collection (%s): %v", c.which, name, c.wide)
			}
		}
		if len(c.wide) == 0 {
			t.Fatalf("the %s settle ran no command: the statistics measure nothing", c.which)
		}
	}
}
