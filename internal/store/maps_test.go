package store_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

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
	a, err := s.Begin(ctx, "wf", store.InstanceID("m", 4), "t", 0, time.Minute, nil)
	if err != nil || a.Item != "40" {
		t.Fatalf("begin instance 4: item %q, %v", a.Item, err)
	}
	released := map[int]bool{}
	for i := range 7 {
		inst := store.InstanceID("m", i)
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
		r, err := s.Settle(ctx, "wf", store.InstanceID("m", i), o, reduceDeps)
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
