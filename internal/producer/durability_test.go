package producer_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/defaults"
	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
)

const durableSpec = `
name: durable
steps:
  - id: greet
    route: default
    prompt: "hello"
`

func durableClient(t *testing.T, addr string) *producer.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	return producer.NewClient(rdb, producer.ClientOptions{Retention: defaults.Retention, Limits: spec.DefaultLimits(),
		Routes: []string{"default"}, SkipWorkerCheck: true,
		Durability: store.Durability{Replicas: 1, Timeout: time.Second}}) // an in-sync replica confirms well within it on a loaded machine
}

// A submit the replica did not confirm is told so, with the key it was
// given; when a promotion then loses it, submitting again with that key
// creates it once, and once only.
func TestASubmitNotConfirmedIsRetriedSafelyWithItsKey(t *testing.T) {
	primary, replicas := redistest.Replicated(t, 1)
	replica := replicas[0]
	ctx := t.Context()
	c := durableClient(t, primary.Addr())
	wspec, err := c.Parse("durable.yaml", []byte(durableSpec))
	if err != nil {
		t.Fatal(err)
	}

	sub, err := c.SubmitWorkflow(ctx, wspec)
	if err != nil {
		t.Fatalf("submit with the replica in sync: %v", err)
	}
	if sub.IdempotencyKey == "" || sub.ID != store.IdempotentID(sub.IdempotencyKey) {
		t.Fatalf("a submit without a key got %+v: want a generated key naming its id", sub)
	}
	wf, err := c.Status(ctx, sub.ID)
	if err != nil || wf.IdempotencyKey != sub.IdempotencyKey {
		t.Fatalf("status shows key %q (%v), want %q", wf.IdempotencyKey, err, sub.IdempotencyKey)
	}

	// the replica is cut off from the primary and promoted (a partition:
	// SIGSTOP would not do, the stream would wait in its socket)
	replica.Promote()
	lost, err := c.SubmitWorkflow(ctx, wspec)
	var se *producer.SubmitError
	if !errors.Is(err, producer.ErrNotConfirmed) || !errors.As(err, &se) || se.Key == "" || se.Key != lost.IdempotencyKey {
		t.Fatalf("submit with the replica cut off: %v (%+v), want ErrNotConfirmed naming the submit's key", err, lost)
	}
	if !strings.Contains(err.Error(), se.Key) || !strings.Contains(err.Error(), "may not survive a failover") {
		t.Fatalf("the error does not say what happened and which key retries it: %v", err)
	}

	primary.Kill()
	after := durableClient(t, replica.Addr())
	if _, err := after.Status(ctx, sub.ID); err != nil {
		t.Fatalf("the confirmed submit after the promotion: %v", err)
	}
	if _, err := after.Status(ctx, store.IdempotentID(se.Key)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the unconfirmed submit after the promotion: %v, want it lost here", err)
	}
	// the replica has no replica of its own: confirmation is impossible, so
	// this test asks for none on the promoted server
	plain := producer.NewClient(redis.NewClient(&redis.Options{Addr: replica.Addr()}), producer.ClientOptions{Retention: defaults.Retention,
		Limits: spec.DefaultLimits(), Routes: []string{"default"}, SkipWorkerCheck: true})
	again, err := plain.SubmitWorkflow(ctx, wspec, producer.WithIdempotencyKey(se.Key))
	if err != nil || again.Existing || again.ID != se.Workflow {
		t.Fatalf("resubmit with the key: %+v, %v; want workflow %s created now", again, err, se.Workflow)
	}
	third, err := plain.SubmitWorkflow(ctx, wspec, producer.WithIdempotencyKey(se.Key))
	if err != nil || !third.Existing || third.ID != se.Workflow {
		t.Fatalf("a third submit with the key: %+v, %v; want the same workflow, existing", third, err)
	}
}

// A submit whose write landed but was not confirmed, submitted again with
// its key, is the same workflow: never two.
func TestASubmitNotConfirmedThatLandedIsNotCreatedTwice(t *testing.T) {
	primary, replicas := redistest.Replicated(t, 1)
	ctx := t.Context()
	c := durableClient(t, primary.Addr())
	wspec, err := c.Parse("durable.yaml", []byte(durableSpec))
	if err != nil {
		t.Fatal(err)
	}
	replicas[0].Freeze()
	_, err = c.SubmitWorkflow(ctx, wspec)
	var se *producer.SubmitError
	if !errors.As(err, &se) || !errors.Is(err, producer.ErrNotConfirmed) {
		t.Fatalf("submit with the replica frozen: %v, want a SubmitError, ErrNotConfirmed", err)
	}
	// found on the primary, still not on the replica: not done yet, even
	// once it has moved on (no roots left to enqueue, whose confirmation
	// would tell): canceled here, as a running one would be
	if _, err := c.Cancel(ctx, se.Workflow); !errors.Is(err, producer.ErrNotConfirmed) {
		t.Fatalf("cancel with the replica frozen: %v, want ErrNotConfirmed", err)
	}
	still, err := c.SubmitWorkflow(ctx, wspec, producer.WithIdempotencyKey(se.Key))
	if !errors.Is(err, producer.ErrNotConfirmed) || still.ID != se.Workflow {
		t.Fatalf("resubmit with the key, the replica still frozen: %+v, %v; want ErrNotConfirmed for workflow %s", still, err, se.Workflow)
	}
	replicas[0].Thaw()
	again, err := c.SubmitWorkflow(ctx, wspec, producer.WithIdempotencyKey(se.Key))
	if err != nil || !again.Existing || again.ID != se.Workflow {
		t.Fatalf("resubmit with the key: %+v, %v; want the existing workflow %s, confirmed", again, err, se.Workflow)
	}
}

// A submit cut short between its workflow's record and its roots' tasks
// (as one on a Cluster can be, where they are written apart) leaves the
// workflow pending with nothing queued: submitting again with its key
// finds it and enqueues its roots.
func TestAResubmitWithTheKeyEnqueuesTheRootsOfACutShortSubmit(t *testing.T) {
	_, rdb := redistest.New(t)
	ctx := t.Context()
	c := producer.NewClient(rdb, producer.ClientOptions{Retention: defaults.Retention, Limits: spec.DefaultLimits(),
		Routes: []string{"default"}, SkipWorkerCheck: true})
	wspec, err := c.Parse("durable.yaml", []byte(durableSpec))
	if err != nil {
		t.Fatal(err)
	}
	const key = "order-7"
	id := store.IdempotentID(key)
	data, _ := json.Marshal(wspec)
	// the first submit's record, without its root's task
	if _, err := store.New(rdb, defaults.Retention, nil).Create(ctx, store.NewWorkflow{ID: id, Name: wspec.Name, Spec: data,
		Steps: []string{"greet"}, Ready: []string{"greet"}, IdempotencyKey: key}); err != nil {
		t.Fatal(err)
	}
	insp := asynq.NewInspectorFromRedisClient(rdb)
	if _, err := insp.GetTaskInfo("default", flow.StepTaskID(id, "greet", 0)); err == nil {
		t.Fatal("the cut-short submit's root is queued already")
	}
	sub, err := c.SubmitWorkflow(ctx, wspec, producer.WithIdempotencyKey(key))
	if err != nil || !sub.Existing || sub.ID != id {
		t.Fatalf("resubmit: %+v, %v; want the existing workflow %s", sub, err, id)
	}
	if _, err := insp.GetTaskInfo("default", flow.StepTaskID(id, "greet", 0)); err != nil {
		t.Fatalf("the root's task after the resubmit: %v, want it queued", err)
	}
}
