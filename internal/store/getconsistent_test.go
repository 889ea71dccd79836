package store_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
)

// changeBetweenReads changes a workflow's record (its state and a step's,
// in one HSET, as a script does) right after Get's first read.
type changeBetweenReads struct {
	rdb  *redis.Client
	set  []any // field, value, …
	done atomic.Bool
}

func (*changeBetweenReads) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *changeBetweenReads) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if cmd.Name() == "hmget" && len(cmd.Args()) > 2 && cmd.Args()[2] == "id" && c.done.CompareAndSwap(false, true) {
			if herr := c.rdb.HSet(ctx, cmd.Args()[1].(string), c.set...).Err(); herr != nil {
				return herr
			}
		}
		return err
	}
}
func (*changeBetweenReads) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A workflow and its steps read by Get are one moment's record: a change
// to both landing between Get's two reads is seen whole, never a step
// that waits in a workflow still shown as before.
func TestGetReadsTheWorkflowAndItsStepsAtOneMoment(t *testing.T) {
	wf := getWithAChangeBetweenReads(t, "state", store.StateWaiting, "a.state", store.StepWaiting)
	if wf.State != store.StateWaiting || wf.Steps[0].State != store.StepWaiting {
		t.Fatalf("workflow %s with step a %s: want both as changed (waiting, waiting)", wf.State, wf.Steps[0].State)
	}
}

// A record written again under the id between Get's two reads, with
// another step list, is read again with its own list: never the first
// record's steps paired with the second's fields.
func TestGetReadsAgainARecordWrittenAgainBetweenItsReads(t *testing.T) {
	wf := getWithAChangeBetweenReads(t, "name", "other", "steps", `["x"]`, "nsteps", 1, "x.state", store.StepDone)
	if wf.Name != "other" || len(wf.Steps) != 1 || wf.Steps[0].ID != "x" || wf.Steps[0].State != store.StepDone {
		t.Fatalf("workflow %s with steps %+v: want the second record whole (other, x done)", wf.Name, wf.Steps)
	}
}

// getWithAChangeBetweenReads creates workflow wf1, then Gets it through a
// client that sets the fields set (field, value, …) right after Get's
// first read.
func getWithAChangeBetweenReads(t *testing.T, set ...any) *store.Workflow {
	t.Helper()
	_, rdb := redistest.New(t)
	create(t, store.New(rdb, time.Hour, nil), "wf1")
	hooked := redis.NewClient(rdb.Options())
	t.Cleanup(func() { _ = hooked.Close() })
	hook := &changeBetweenReads{rdb: rdb, set: set}
	hooked.AddHook(hook)
	wf, err := store.New(hooked, time.Hour, nil).Get(t.Context(), "wf1")
	if err != nil {
		t.Fatal(err)
	}
	if !hook.done.Load() {
		t.Fatal("nothing changed between the reads: the test proves nothing")
	}
	return wf
}

// countCommands counts the reads of a hash a client sends.
type countCommands struct{ n atomic.Int64 }

func (*countCommands) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *countCommands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); n == "hmget" || n == "hget" || n == "hgetall" {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (*countCommands) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// GetWithSpec reads the spec in Get's second read: the workflow, its
// steps and its spec of one moment, in Get's two round trips; a record
// written again between the reads is read again whole, spec included.
func TestGetWithSpecReadsTheSpecWithItsSteps(t *testing.T) {
	_, rdb := redistest.New(t)
	s := store.New(rdb, time.Hour, nil)
	if _, err := s.Create(t.Context(), store.NewWorkflow{ID: "wf1", Name: "chord", Spec: []byte(`{"name":"chord"}`), Steps: []string{"a", "b"}}); err != nil {
		t.Fatal(err)
	}
	counted := redis.NewClient(rdb.Options())
	t.Cleanup(func() { _ = counted.Close() })
	n := &countCommands{}
	counted.AddHook(n)
	wf, raw, err := store.New(counted, time.Hour, nil).GetWithSpec(t.Context(), "wf1")
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) != `{"name":"chord"}` || wf.Name != "chord" || len(wf.Steps) != 2 || n.n.Load() != 2 {
		t.Fatalf("read %s with %d steps and spec %s in %d reads; want chord, 2 steps, its spec, 2 reads", wf.Name, len(wf.Steps), raw, n.n.Load())
	}

	hooked := redis.NewClient(rdb.Options())
	t.Cleanup(func() { _ = hooked.Close() })
	hook := &changeBetweenReads{rdb: rdb, set: []any{"name", "other", "steps", `["x"]`, "nsteps", 1, "x.state", store.StepDone, "spec", `{"name":"other"}`}}
	hooked.AddHook(hook)
	wf, raw, err = store.New(hooked, time.Hour, nil).GetWithSpec(t.Context(), "wf1")
	if err != nil {
		t.Fatal(err)
	}
	if !hook.done.Load() {
		t.Fatal("nothing changed between the reads: the test proves nothing")
	}
	if wf.Name != "other" || len(wf.Steps) != 1 || string(raw) != `{"name":"other"}` {
		t.Fatalf("read %s with %d steps and spec %s; want the second record whole (other, x, its spec)", wf.Name, len(wf.Steps), raw)
	}
}
