package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
)

// asynqTaskOf is the asynq client's task for t.
func asynqTaskOf(t store.Task) *asynq.Task {
	opts := []asynq.Option{asynq.TaskID(t.ID), asynq.Queue(t.Queue), asynq.MaxRetry(t.MaxRetry), asynq.Retention(t.Retention)}
	if t.Timeout != 0 {
		opts = append(opts, asynq.Timeout(t.Timeout))
	}
	return asynq.NewTask(t.Type, t.Payload, opts...)
}

// asynqState is what asynq keeps of a queue's pending tasks: the pending
// list, and each task's hash without pending_since (a time).
func asynqState(t *testing.T, rdb *redis.Client, queues ...string) string {
	t.Helper()
	ctx := context.Background()
	var b bytes.Buffer
	qs, _ := rdb.SMembers(ctx, "asynq:queues").Result()
	slices.Sort(qs)
	fmt.Fprintf(&b, "queues %q\n", qs)
	for _, q := range queues {
		ids, _ := rdb.LRange(ctx, "asynq:{"+q+"}:pending", 0, -1).Result()
		fmt.Fprintf(&b, "%s pending %q\n", q, ids)
		for _, id := range ids {
			h, _ := rdb.HGetAll(ctx, "asynq:{"+q+"}:t:"+id).Result()
			if h["pending_since"] == "" {
				t.Errorf("task %s has no pending_since", id)
			}
			delete(h, "pending_since")
			fmt.Fprintf(&b, "  %s %q\n", id, h)
		}
	}
	return b.String()
}

// asynqAndStore gives a test two databases on a real redis-server: one
// that asynq's client writes, one that the store writes, to compare.
func asynqAndStore(t *testing.T) (viaAsynq, viaStore *redis.Client) {
	t.Helper()
	db, viaAsynq := redistest.New(t)
	_, viaStore = redistest.New(t)
	if db.Kind == "miniredis" {
		t.Skip("asynq's scripts need a real redis-server")
	}
	return viaAsynq, viaStore
}

var queuedTasks = []store.Task{
	{ID: "wf1:a", Queue: "default", Type: "agentq:step", Payload: []byte(`{"wf":"wf1","step":"a"}`), MaxRetry: 8, Timeout: 5 * time.Minute, Retention: 24 * time.Hour},
	{ID: "wf1:b@2", Queue: "critical", Type: "agentq:step", Payload: []byte(`{"wf":"wf1","step":"b","gen":2}`), MaxRetry: 0, Timeout: 90 * time.Second},
	{ID: "wf1:c", Queue: "default", Type: "agentq:step", Payload: []byte(`{"wf":"wf1","step":"c – é"}`), MaxRetry: 25},
	{ID: "wf1:d", Queue: "default", Type: "agentq:step", Payload: bytes.Repeat([]byte("x"), 300), MaxRetry: -1, Timeout: 1500 * time.Millisecond, Retention: time.Hour},
}

// The store writes a task exactly as asynq v0.26's client does: the same
// message bytes, hash fields, pending list and set of queues, an existing
// id left alone; asynq's Inspector reads it back and a server runs it.
func TestStoreEnqueuesTasksAsAsynqDoes(t *testing.T) {
	ctx := context.Background()
	viaAsynq, viaStore := asynqAndStore(t)
	client := asynq.NewClientFromRedisClient(viaAsynq)
	for _, qt := range queuedTasks {
		if _, err := client.EnqueueContext(ctx, asynqTaskOf(qt)); err != nil {
			t.Fatal(err)
		}
	}
	s := store.New(viaStore, time.Hour, nil)
	if !s.EnqueuesTasks() {
		t.Fatal("a store on a standalone Redis does not enqueue tasks itself")
	}
	if _, err := s.Create(ctx, store.NewWorkflow{ID: "wf1", Name: "w", Spec: []byte(`{}`), Steps: []string{"a", "b", "c", "d"}, Roots: queuedTasks}); err != nil {
		t.Fatal(err)
	}
	want, got := asynqState(t, viaAsynq, "default", "critical"), asynqState(t, viaStore, "default", "critical")
	if got != want {
		t.Fatalf("the store's tasks:\n%s\nasynq's:\n%s", got, want)
	}

	// an id that exists is left alone, as asynq's client leaves it
	if _, err := s.Create(ctx, store.NewWorkflow{ID: "wf2", Name: "w", Spec: []byte(`{}`), Steps: []string{"a"},
		Roots: []store.Task{{ID: "wf1:a", Queue: "default", Type: "other", Payload: []byte("x")}}}); err != nil {
		t.Fatal(err)
	}
	if got := asynqState(t, viaStore, "default", "critical"); got != want {
		t.Fatalf("after enqueueing an existing id again:\n%s\nwant:\n%s", got, want)
	}

	info, err := asynq.NewInspectorFromRedisClient(viaStore).GetTaskInfo("critical", "wf1:b@2")
	if err != nil {
		t.Fatal(err)
	}
	if info.State != asynq.TaskStatePending || info.MaxRetry != 0 || info.Timeout != 90*time.Second || string(info.Payload) != string(queuedTasks[1].Payload) {
		t.Fatalf("asynq reads the store's task as %+v", info)
	}

	// a server runs them
	var mu sync.Mutex
	var ran []string
	srv := asynq.NewServerFromRedisClient(viaStore, asynq.Config{Concurrency: 2, Queues: map[string]int{"default": 1, "critical": 1},
		TaskCheckInterval: 20 * time.Millisecond, LogLevel: asynq.FatalLevel})
	if err := srv.Start(asynq.HandlerFunc(func(ctx context.Context, task *asynq.Task) error {
		id, _ := asynq.GetTaskID(ctx)
		mu.Lock()
		ran = append(ran, id)
		mu.Unlock()
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	poll.Until(t, 10*time.Second, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(ran) == len(queuedTasks), fmt.Sprintf("asynq ran %q", ran)
	})
}

// Settle enqueues the dependent it makes ready in the same script, once
// however often the settle is delivered; a dependent's task built for
// another generation than the workflow's is left to the caller.
func TestSettleEnqueuesTheReadyDependent(t *testing.T) {
	ctx := context.Background()
	db, rdb := redistest.New(t)
	if db.Kind == "miniredis" {
		t.Skip("needs a real redis-server")
	}
	s := store.New(rdb, time.Hour, nil)
	create(t, s, "wf1")
	body := store.Task{ID: "wf1:d", Queue: "default", Type: "agentq:step", Payload: []byte(`{"wf":"wf1","step":"d"}`), MaxRetry: 3, Timeout: time.Minute}
	deps := []store.Dependent{{ID: "d", Inputs: 3, Task: &body}}
	pending := func() []string {
		ids, err := rdb.LRange(ctx, "asynq:{default}:pending", 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	for _, step := range []string{"a", "b"} {
		res, err := s.Settle(ctx, "wf1", step, store.Outcome{Done: true, Output: step}, deps)
		if err != nil || len(res.Ready) != 0 {
			t.Fatalf("settle %s: %+v, %v", step, res, err)
		}
	}
	if p := pending(); len(p) != 0 {
		t.Fatalf("pending before the last input settled: %q", p)
	}
	for range 2 { // the last input, delivered twice
		res, err := s.Settle(ctx, "wf1", "c", store.Outcome{Done: true, Output: "c"}, deps)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.Ready, []string{"d"}) || !slices.Equal(res.Enqueued, []bool{true}) {
			t.Fatalf("settle c: ready %q enqueued %v", res.Ready, res.Enqueued)
		}
		if p := pending(); !slices.Equal(p, []string{"wf1:d"}) {
			t.Fatalf("pending after settling c: %q", p)
		}
	}

	// an outcome of run 1 while the workflow is at run 0: refused whole
	create(t, s, "wf2")
	other := body
	other.ID = "wf2:d@1"
	for _, step := range []string{"a", "b", "c"} {
		if _, err := s.Settle(ctx, "wf2", step, store.Outcome{Done: true, Gen: 1}, []store.Dependent{{ID: "d", Inputs: 3, Task: &other}}); !errors.Is(err, store.ErrOtherRun) {
			t.Fatalf("settle %s of another run: %v, want ErrOtherRun", step, err)
		}
	}
	if p := pending(); !slices.Equal(p, []string{"wf1:d"}) {
		t.Fatalf("pending after another generation's settle: %q", p)
	}
}

// A map instance's settle enqueues the instance it releases in its own
// script, written exactly as asynq's client writes the same task (an id
// and a payload past 127 bytes, so their lengths take two bytes, and a
// two-digit index); the settle delivered again enqueues nothing more, and
// an outcome of another run than the workflow's is refused whole.
func TestSettleEnqueuesTheReleasedInstanceAsAsynqDoes(t *testing.T) {
	ctx := context.Background()
	viaAsynq, viaStore := asynqAndStore(t)
	wf := "wf-" + strings.Repeat("x", 130)
	instance := func(n int) store.Task {
		id := record.InstanceID("m", n)
		return store.Task{ID: wf + ":" + id, Queue: "maps", Type: "agentq:step", Payload: []byte(fmt.Sprintf(`{"wf":%q,"step":%q}`, wf, id)),
			MaxRetry: 5, Timeout: 2 * time.Minute, Retention: 24 * time.Hour}
	}
	s := store.New(viaStore, time.Hour, nil)
	newMapWorkflow(t, s, wf)
	if _, err := s.Expand(ctx, wf, "m", items(20), 11); err != nil { // instances 0..10 released
		t.Fatal(err)
	}
	probe := instance(store.ReleaseProbe)
	for range 2 { // delivered twice: the same release, enqueued once
		r, err := s.Settle(ctx, wf, record.InstanceID("m", 0), store.Outcome{Done: true, Map: "m", Release: &probe}, reduceDeps)
		if err != nil || r.Release != 11 || !r.ReleaseEnqueued {
			t.Fatalf("settle of instance 0: %+v %v, want instance 11 released and enqueued", r, err)
		}
	}
	if _, err := asynq.NewClientFromRedisClient(viaAsynq).EnqueueContext(ctx, asynqTaskOf(instance(11))); err != nil {
		t.Fatal(err)
	}
	want, got := asynqState(t, viaAsynq, "maps"), asynqState(t, viaStore, "maps")
	if got != want {
		t.Fatalf("the store's released instance:\n%s\nasynq's:\n%s", got, want)
	}
	info, err := asynq.NewInspectorFromRedisClient(viaStore).GetTaskInfo("maps", instance(11).ID)
	if err != nil || info.State != asynq.TaskStatePending || string(info.Payload) != string(instance(11).Payload) || info.Timeout != 2*time.Minute {
		t.Fatalf("asynq reads the released instance as %+v (%v)", info, err)
	}

	// an instance of run 1 while the workflow is at run 0: refused, nothing released
	if _, err := s.Settle(ctx, wf, record.InstanceID("m", 1), store.Outcome{Done: true, Map: "m", Release: &probe, Gen: 1}, reduceDeps); !errors.Is(err, store.ErrOtherRun) {
		t.Fatalf("settle of another run: %v, want ErrOtherRun", err)
	}
	if got := asynqState(t, viaStore, "maps"); got != want {
		t.Fatalf("after another generation's settle:\n%s\nwant:\n%s", got, want)
	}
}

// In a later run of the workflow (a rerun's generation 1), the released
// instance's task carries the generation in its id and payload, as the
// worker builds it, and is still written as asynq's client writes it.
func TestSettleEnqueuesTheReleasedInstanceOfALaterRun(t *testing.T) {
	ctx := context.Background()
	viaAsynq, viaStore := asynqAndStore(t)
	instance := func(n int) store.Task {
		id := record.InstanceID("m", n)
		return store.Task{ID: "wf1:" + id + "@1", Queue: "default", Type: "agentq:step", Payload: []byte(`{"wf":"wf1","step":"` + id + `","gen":1}`), MaxRetry: 3}
	}
	s := store.New(viaStore, time.Hour, nil)
	newMapWorkflow(t, s, "wf1")
	if err := viaStore.HSet(ctx, store.Prefix+"{wf:wf1}:wf", "gen", 1).Err(); err != nil { // where a rerun leaves it
		t.Fatal(err)
	}
	if _, err := s.Expand(ctx, "wf1", "m", items(3), 1); err != nil {
		t.Fatal(err)
	}
	probe := instance(store.ReleaseProbe)
	r, err := s.Settle(ctx, "wf1", record.InstanceID("m", 0), store.Outcome{Done: true, Map: "m", Release: &probe, Gen: 1}, reduceDeps)
	if err != nil || r.Release != 1 || !r.ReleaseEnqueued || r.Gen != 1 {
		t.Fatalf("settle: %+v %v, want instance 1 of generation 1 released and enqueued", r, err)
	}
	if _, err := asynq.NewClientFromRedisClient(viaAsynq).EnqueueContext(ctx, asynqTaskOf(instance(1))); err != nil {
		t.Fatal(err)
	}
	if want, got := asynqState(t, viaAsynq, "default"), asynqState(t, viaStore, "default"); got != want {
		t.Fatalf("the store's released instance:\n%s\nasynq's:\n%s", got, want)
	}
}

// A server in cluster mode reached through a plain client (a one-shard
// managed cluster) refuses scripts whose keys span slots: the store
// finds out at the first one, writes without the tasks and leaves them
// to the caller from then on.
func TestClusterModeThroughAPlainClientLeavesTasksToTheCaller(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.ClusterNode(t)
	s := store.New(rdb, time.Hour, nil)
	if !s.EnqueuesTasks() {
		t.Fatal("a plain client looks like a standalone Redis until the server says otherwise")
	}
	enqueued, err := s.Create(ctx, store.NewWorkflow{ID: "wf1", Name: "chord", Spec: []byte(`{}`), Steps: []string{"a", "b", "c", "d"},
		Roots: []store.Task{{ID: "wf1:a", Queue: "default", Type: "agentq:step", Payload: []byte(`{}`)}}})
	if err != nil || enqueued {
		t.Fatalf("create: enqueued %v, %v; want the record written and the roots left to the caller", enqueued, err)
	}
	if s.EnqueuesTasks() {
		t.Fatal("still enqueueing tasks after CROSSSLOT")
	}
	if wf, err := s.Get(ctx, "wf1"); err != nil || wf.State != store.StatePending {
		t.Fatalf("record: %+v, %v", wf, err)
	}

	// a store that has not met the refusal yet finds it out at a settle
	s2 := store.New(rdb, time.Hour, nil)
	body := store.Task{ID: "wf1:d", Queue: "default", Type: "agentq:step", Payload: []byte(`{}`)}
	var res *store.Settled
	for _, step := range []string{"a", "b", "c"} {
		if res, err = s2.Settle(ctx, "wf1", step, store.Outcome{Done: true}, []store.Dependent{{ID: "d", Inputs: 3, Task: &body}}); err != nil {
			t.Fatalf("settle %s: %v", step, err)
		}
	}
	if !slices.Equal(res.Ready, []string{"d"}) || !slices.Equal(res.Enqueued, []bool{false}) || s2.EnqueuesTasks() {
		t.Fatalf("last settle: ready %q enqueued %v, store enqueues %v", res.Ready, res.Enqueued, s2.EnqueuesTasks())
	}
	if n, _ := rdb.Exists(ctx, "asynq:{default}:t:wf1:a", "asynq:{default}:t:wf1:d").Result(); n != 0 {
		t.Fatalf("%d task(s) written by the store", n)
	}

	// and at a map instance's settle that releases the next instance
	s3 := store.New(rdb, time.Hour, nil)
	newMapWorkflow(t, s3, "wf2")
	if _, err := s3.Expand(ctx, "wf2", "m", items(3), 1); err != nil {
		t.Fatal(err)
	}
	probe := store.Task{ID: "wf2:" + record.InstanceID("m", store.ReleaseProbe), Queue: "default", Type: "agentq:step",
		Payload: []byte(`{"step":"` + record.InstanceID("m", store.ReleaseProbe) + `"}`)}
	r, err := s3.Settle(ctx, "wf2", record.InstanceID("m", 0), store.Outcome{Done: true, Map: "m", Release: &probe}, reduceDeps)
	if err != nil || r.Release != 1 || r.ReleaseEnqueued || s3.EnqueuesTasks() {
		t.Fatalf("instance settle: %+v %v (store enqueues %v); want instance 1 released and left to the caller", r, err, s3.EnqueuesTasks())
	}
	if n, _ := rdb.Exists(ctx, "asynq:{default}:t:wf2:m[1]").Result(); n != 0 {
		t.Fatal("the released instance's task was written by the store")
	}
}
