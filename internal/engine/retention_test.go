package engine_test

import (
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// Retention counts from a workflow's end: with a retention of a minute,
// an approval that waits 70s is still approvable and its workflow
// completes; its records then live about a minute more (their TTLs, set
// at the end, are the retention: counted from the submit they would have
// gone already).
func TestAnApprovalOutlastingTheRetentionIsStillApprovable(t *testing.T) {
	t.Parallel() // waits more than a minute
	e := testenv.Start(t, testenv.Options{Configure: func(c *config.Config) { c.Retention = config.Duration(time.Minute) }})
	ctx := t.Context()
	submitted := time.Now()
	id := e.Submit(t, e.Spec(`name: slow-review
steps:
  - { id: draft, route: solo, prompt: "draft" }
  - { id: review, depends_on: [draft], approve: { message: "ok?", timeout: 10m } }
`))
	e.Wait(t, id, 30*time.Second, store.StateWaiting)
	select {
	case <-time.After(time.Until(submitted.Add(70 * time.Second))):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	if _, err := e.Client.Decide(ctx, id, "review", true, "late but fine", "test"); err != nil {
		t.Fatalf("a decision 70s after the submit, retention 1m: %v", err)
	}
	e.Wait(t, id, 30*time.Second, store.StateCompleted)
	key := "agentq:{wf:" + id + "}:wf"
	ttl, err := e.Redis.PTTL(ctx, key).Result()
	if err != nil || ttl < 50*time.Second || ttl > time.Minute {
		t.Fatalf("%s after the end: TTL %s %v, want the retention (1m) from the end", key, ttl, err)
	}
	// the event log is in the record: it goes with it
	if !e.Redis.HExists(ctx, key, "#log").Val() || e.Redis.Exists(ctx, "agentq:{wf:"+id+"}:events").Val() != 0 {
		t.Fatalf("%s: the event log is not in the record", id)
	}
	t.Logf("decided %s after the submit", time.Since(submitted).Round(time.Second))
}

// A workflow open past limits.max_open_age (here one no worker runs) is
// ended timed_out by the reconciler's sweep, naming
// the limit, with its workflow.ended event; the retention counts from
// then.
func TestAWorkflowOpenPastMaxOpenAgeEndsTimedOut(t *testing.T) {
	t.Parallel()
	e := testenv.Start(t, testenv.Options{NoWorker: true, Configure: func(c *config.Config) {
		c.Limits.MaxWait, c.Limits.MaxOpenAge = config.Duration(time.Second), config.Duration(2*time.Second)
	}})
	ctx := t.Context()
	id := e.Submit(t, e.Spec(step("solo", "")))
	h, err := engine.NewHandler(engine.HandlerOptions{MaxOutputBytes: e.Config.Limits.MaxOutputBytes, MaxMapItems: e.Config.Limits.MaxMapItems,
		Redis: e.Redis, Retention: e.Config.Retention.D(), MaxOpenAge: e.Config.Limits.MaxOpenAge.D(), EventLimit: e.Config.Events.EventLimit(), Client: e.Asynq, Router: neverCalled{t}})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := h.Reconciler(engine.ReconcilerOptions{Inspector: asynq.NewInspectorFromRedisClient(e.Redis), Interval: time.Minute, Owner: "sweeper"})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := rec.Pass(ctx); err != nil || c.TooOld != 0 {
		t.Fatalf("a pass before max_open_age: %+v %v, want nothing ended", c, err)
	}
	poll.Until(t, 20*time.Second, func() (bool, string) {
		c, err := rec.Pass(ctx)
		return err == nil && c.TooOld == 1, "the sweep did not end the workflow open past max_open_age"
	})
	wf, err := e.Store.Get(ctx, id)
	if err != nil || wf.State != store.StateTimedOut || !strings.Contains(wf.Error, "limits.max_open_age (2s)") {
		t.Fatalf("the workflow after the sweep: %+v %v, want timed_out naming limits.max_open_age (2s)", wf, err)
	}
	evs, err := e.Store.Events(ctx, id, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	last := evs[len(evs)-1]
	if last.Type != record.EventEnded || last.State != store.StateTimedOut || !strings.Contains(last.Reason, "limits.max_open_age") {
		t.Fatalf("the last event %+v, want workflow.ended timed_out naming limits.max_open_age", last)
	}
	if ttl, _ := e.Redis.PTTL(ctx, "agentq:{wf:"+id+"}:wf").Result(); ttl <= 0 || ttl > e.Config.Retention.D() {
		t.Fatalf("the timed-out record's TTL %s, want the retention from its end", ttl)
	}
	if c, err := rec.Pass(ctx); err != nil || c.TooOld != 0 {
		t.Fatalf("the next pass: %+v %v, want nothing ended again", c, err)
	}
}
