package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/retry"
)

// signalSpec waits for payment.succeeded of its order, then ships with
// the signal's data.
const signalSpec = `name: order
input: { order: %q }
steps:
  - id: paid
    wait_for: { signal: payment.succeeded, match: "order-{{ .Input.order }}", timeout: %s }
    optional: %t
  - id: ship
    depends_on: [paid]
    run: ship
    with: { amount: "{{ if not .Steps.paid.Missing }}{{ .Steps.paid.JSON.amount }}{{ end }}", missing: "{{ .Steps.paid.Missing }}" }
`

func signalEnv(t *testing.T, shipped chan map[string]any, o testenv.Options) *testenv.Env {
	o.Steps = map[string]engine.StepFunc{
		"ship": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			var a map[string]any
			if err := s.Args(&a); err != nil {
				return nil, err
			}
			shipped <- a
			return "shipped", nil
		},
		"noop": func(ctx context.Context, s *engine.CodeStep) (any, error) { return "ok", nil },
	}
	return testenv.Start(t, o)
}

func orderSpec(e *testenv.Env, order, timeout string, optional bool) *spec.Spec {
	return e.Spec(fmt.Sprintf(signalSpec, order, timeout, optional))
}

func send(t *testing.T, e *testenv.Env, s producer.Signal) *producer.SignalResult {
	t.Helper()
	res, err := e.Client.Signal(t.Context(), s)
	if err != nil {
		t.Fatalf("signal %+v: %v", s, err)
	}
	return res
}

// A signal sent while the step waits completes it with the signal's
// data; while it waits, the workflow is waiting and status says for what.
func TestASignalCompletesTheStepThatWaits(t *testing.T) {
	shipped := make(chan map[string]any, 2)
	e := signalEnv(t, shipped, testenv.Options{})
	id := e.Submit(t, orderSpec(e, "42", "1h", false))
	e.Wait(t, id, 20*time.Second, store.StateWaiting)
	wf, err := e.Client.Status(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if s := wf.Steps[0]; s.State != store.StepWaiting || s.WaitsFor != "signal" || s.Output != `waits for signal payment.succeeded matching "order-42"` {
		t.Fatalf("paid step: %s waits for %q: %q", s.State, s.WaitsFor, s.Output)
	}
	if res := send(t, e, producer.Signal{Name: "payment.succeeded", Match: "order-41", Data: json.RawMessage(`{"amount": 1}`)}); !res.Kept || len(res.Delivered) != 0 {
		t.Fatalf("a signal of another order: %+v, want kept", res)
	}
	res := send(t, e, producer.Signal{Name: "payment.succeeded", Match: "order-42", Data: json.RawMessage(`{"amount": 1999}`)})
	if res.Kept || len(res.Delivered) != 1 || res.Delivered[0] != (producer.SignalTarget{Workflow: id, Step: "paid"}) {
		t.Fatalf("send: %+v", res)
	}
	wf2 := e.Wait(t, id, 20*time.Second, store.StateCompleted)
	if a := <-shipped; fmt.Sprint(a["amount"]) != "1999" {
		t.Fatalf("ship saw %v", a)
	}
	if s := wf2.Steps[0]; s.Output != `{"amount":1999}` || s.Target != "signal" {
		t.Fatalf("paid step output %q target %q", s.Output, s.Target)
	}
	// nothing waits now: the next one is kept
	if res := send(t, e, producer.Signal{Name: "payment.succeeded", Match: "order-42"}); !res.Kept {
		t.Fatalf("a second send: %+v, want kept", res)
	}
}

// A signal sent before any step waits is kept, and completes the first
// step that begins waiting on it, one step only.
func TestAKeptSignalCompletesOneStep(t *testing.T) {
	shipped := make(chan map[string]any, 4)
	e := signalEnv(t, shipped, testenv.Options{})
	if res := send(t, e, producer.Signal{Name: "payment.succeeded", Match: "order-7", Data: json.RawMessage(`{"amount": 5}`)}); !res.Kept || res.KeptUntil == nil {
		t.Fatalf("send with nothing waiting: %+v", res)
	}
	first := e.Submit(t, orderSpec(e, "7", "1h", false))
	e.Wait(t, first, 20*time.Second, store.StateCompleted)
	if a := <-shipped; fmt.Sprint(a["amount"]) != "5" {
		t.Fatalf("ship saw %v", a)
	}
	second := e.Submit(t, orderSpec(e, "7", "1h", false))
	e.Wait(t, second, 20*time.Second, store.StateWaiting)
	if kept, waiting, err := e.Store.KeptSignals(t.Context(), "payment.succeeded", "order-7"); err != nil || kept != 0 || waiting != 1 {
		t.Fatalf("kept %d, waiting %d (%v): want the kept signal taken and one waiter", kept, waiting, err)
	}
	if res := send(t, e, producer.Signal{Name: "payment.succeeded", Match: "order-7", Data: json.RawMessage(`{"amount": 6}`)}); len(res.Delivered) != 1 {
		t.Fatalf("send: %+v", res)
	}
	e.Wait(t, second, 20*time.Second, store.StateCompleted)
	if a := <-shipped; fmt.Sprint(a["amount"]) != "6" {
		t.Fatalf("ship saw %v", a)
	}
}

// A second send with the same idempotency key is a no-op: it reaches no
// step waiting since and keeps nothing.
func TestASignalsIdempotencyKeyMakesASecondSendANoOp(t *testing.T) {
	shipped := make(chan map[string]any, 4)
	e := signalEnv(t, shipped, testenv.Options{})
	first := e.Submit(t, orderSpec(e, "9", "1h", false))
	e.Wait(t, first, 20*time.Second, store.StateWaiting)
	s := producer.Signal{Name: "payment.succeeded", Match: "order-9", Data: json.RawMessage(`{"amount": 9}`), IdempotencyKey: "stripe-evt-1"}
	one := send(t, e, s)
	if one.Duplicate || len(one.Delivered) != 1 {
		t.Fatalf("first send: %+v", one)
	}
	e.Wait(t, first, 20*time.Second, store.StateCompleted)
	second := e.Submit(t, orderSpec(e, "9", "1h", false))
	e.Wait(t, second, 20*time.Second, store.StateWaiting)
	two := send(t, e, s)
	if !two.Duplicate || two.ID != one.ID || len(two.Delivered) != 0 || two.Kept {
		t.Fatalf("second send with the key: %+v, want a duplicate of %s", two, one.ID)
	}
	if w, _ := e.Store.Summary(t.Context(), second); w.State != store.StateWaiting {
		t.Fatalf("the duplicate reached workflow %s: %s", second, w.State)
	}
	if kept, _, _ := e.Store.KeptSignals(t.Context(), "payment.succeeded", "order-9"); kept != 0 {
		t.Fatalf("the duplicate was kept (%d)", kept)
	}
	// another key is another signal
	s.IdempotencyKey = "stripe-evt-2"
	if res := send(t, e, s); len(res.Delivered) != 1 {
		t.Fatalf("a send with another key: %+v", res)
	}
	e.Wait(t, second, 20*time.Second, store.StateCompleted)
}

// No signal within the timeout dead-letters the step (class timeout),
// blocking the workflow; requeuing the dead letter waits again, and a
// signal then completes it. An optional step's timeout lets the workflow
// go on without it.
func TestASignalTimeoutDeadLetters(t *testing.T) {
	t.Parallel()
	shipped := make(chan map[string]any, 4)
	e := signalEnv(t, shipped, testenv.Options{})
	id := e.Submit(t, orderSpec(e, "1", "1s", false))
	wf := e.Wait(t, id, 20*time.Second, store.StateBlocked)
	if s := wf.Steps[0]; s.State != store.StepDead || s.Class != string(retry.Timeout) || !strings.Contains(s.Error, "no signal payment.succeeded matching \"order-1\" within 1s") {
		t.Fatalf("paid step: %s %s %q", s.State, s.Class, s.Error)
	}
	var task string
	poll.Until(t, 10*time.Second, func() (bool, string) { // archived once the timeout's task returns
		var err error
		task, err = e.Client.DeadLetterTask(t.Context(), id, "paid")
		return err == nil && task == flow.SignalTimeoutTaskID(id, "paid", 0, 1), fmt.Sprintf("dead letter task %q (%v)", task, err)
	})
	var found bool
	poll.Until(t, 10*time.Second, func() (bool, string) {
		dls, err := e.Client.DeadLetters(t.Context(), string(retry.Timeout))
		for _, d := range dls {
			found = found || (d.Workflow == id && d.Step == "paid" && d.TaskID == task)
		}
		return found, fmt.Sprintf("no dead letter of class timeout for %s/paid: %+v %v", id, dls, err)
	})
	// the timed-out step no longer waits: the signal is kept, and the
	// requeued step, waiting again, takes it
	if res := send(t, e, producer.Signal{Name: "payment.succeeded", Match: "order-1", Data: json.RawMessage(`{"amount": 1}`)}); !res.Kept {
		t.Fatalf("send to a timed-out step: %+v, want kept", res)
	}
	if err := e.Client.Requeue(t.Context(), task); err != nil {
		t.Fatal(err)
	}
	wf = e.Wait(t, id, 20*time.Second, store.StateCompleted)
	if a := <-shipped; fmt.Sprint(a["amount"]) != "1" || wf.Steps[0].Attempts != 2 {
		t.Fatalf("ship saw %v after the requeue; attempts %d", a, wf.Steps[0].Attempts)
	}

	opt := e.Submit(t, orderSpec(e, "2", "1s", true))
	wf = e.Wait(t, opt, 20*time.Second, store.StateCompleted)
	if a := <-shipped; a["missing"] != true {
		t.Fatalf("ship after an optional timeout saw %v", a)
	}
	if s := wf.Steps[0]; s.State != store.StepDead {
		t.Fatalf("the optional step: %s", s.State)
	}
}

// A signal does not complete a step of a canceled workflow, nor an
// earlier run's step after a rerun: the rerun's step waits, and the next
// signal completes it alone.
func TestASignalSkipsCanceledAndEarlierRuns(t *testing.T) {
	shipped := make(chan map[string]any, 4)
	e := signalEnv(t, shipped, testenv.Options{})
	canceled := e.Submit(t, orderSpec(e, "5", "1h", false))
	e.Wait(t, canceled, 20*time.Second, store.StateWaiting)
	if _, err := e.Client.Cancel(t.Context(), canceled); err != nil {
		t.Fatal(err)
	}
	res := send(t, e, producer.Signal{Name: "payment.succeeded", Match: "order-5", Data: json.RawMessage(`{"amount": 1}`)})
	if len(res.Delivered) != 0 || !res.Kept {
		t.Fatalf("a signal to a canceled workflow's step: %+v, want none reached and the signal kept", res)
	}
	if _, waiting, _ := e.Store.KeptSignals(t.Context(), "payment.succeeded", "order-5"); waiting != 0 {
		t.Fatalf("the canceled step is still a waiter (%d)", waiting)
	}

	id := e.Submit(t, orderSpec(e, "6", "1h", false))
	e.Wait(t, id, 20*time.Second, store.StateWaiting)
	if _, err := e.Client.Cancel(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	gen, err := e.Client.Rerun(t.Context(), id, "paid")
	if err != nil || gen != 1 {
		t.Fatalf("rerun: %d %v", gen, err)
	}
	e.Wait(t, id, 20*time.Second, store.StateWaiting)
	poll.Until(t, 10*time.Second, func() (bool, string) {
		_, waiting, err := e.Store.KeptSignals(t.Context(), "payment.succeeded", "order-6")
		return waiting == 2 && err == nil, fmt.Sprintf("want the first run's stale waiter and the rerun's: %d (%v)", waiting, err)
	})
	res = send(t, e, producer.Signal{Name: "payment.succeeded", Match: "order-6", Data: json.RawMessage(`{"amount": 66}`)})
	if len(res.Delivered) != 1 || res.Kept {
		t.Fatalf("send after the rerun: %+v", res)
	}
	e.Wait(t, id, 20*time.Second, store.StateCompleted)
	if a := <-shipped; fmt.Sprint(a["amount"]) != "66" {
		t.Fatalf("ship saw %v", a)
	}
	if _, waiting, _ := e.Store.KeptSignals(t.Context(), "payment.succeeded", "order-6"); waiting != 0 {
		t.Fatalf("%d waiters left", waiting)
	}
}

// 1,000 steps waiting for signals hold no worker slot: a worker of one
// slot still runs other work, and one signal then completes them all.
func TestAThousandSignalWaitsHoldNoSlots(t *testing.T) {
	t.Parallel()
	const n = 1000
	shipped := make(chan map[string]any, n)
	e := signalEnv(t, shipped, testenv.Options{NoWorker: true})
	e.Config.Worker.Concurrency = 1
	e.StartWorker(t)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = e.Submit(t, orderSpec(e, "all", "1h", false))
	}
	poll.Until(t, 2*time.Minute, func() (bool, string) {
		_, waiting, err := e.Store.KeptSignals(t.Context(), "payment.succeeded", "order-all")
		return waiting == n && err == nil, fmt.Sprintf("%d of %d steps wait (%v)", waiting, n, err)
	})
	other := e.Submit(t, e.Spec("name: other\nsteps:\n  - { id: a, run: noop }\n"))
	e.Wait(t, other, 20*time.Second, store.StateCompleted)
	res := send(t, e, producer.Signal{Name: "payment.succeeded", Match: "order-all", Data: json.RawMessage(`{"amount": 1}`)})
	if len(res.Delivered) != n {
		t.Fatalf("one signal completed %d steps, want %d", len(res.Delivered), n)
	}
	for _, id := range ids {
		e.Wait(t, id, time.Minute, store.StateCompleted)
	}
	if len(shipped) != n {
		t.Fatalf("%d shipped, want %d", len(shipped), n)
	}
}

func TestSignalSpecProblems(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	for _, c := range []struct{ spec, want string }{
		{"name: a\nsteps:\n  - { id: p, wait_for: { signal: \"\" } }\n", `steps[0] (p).wait_for.signal: "" is not a signal name`},
		{"name: a\nsteps:\n  - { id: p, wait_for: { signal: \"pay ment\" } }\n", `"pay ment" is not a signal name`},
		{"name: a\nsteps:\n  - { id: p, wait_for: { signal: paid, timeout: 10ms } }\n", "wait_for.timeout: 10ms is under 1s"},
		{"name: a\nsteps:\n  - { id: p, wait_for: { signal: paid, after: 1s } }\n", "wait_for"},
		{"name: a\nsteps:\n  - { id: p, run: x, wait_for: { signal: paid } }\n", "(p).run: is for code steps (run:); a signal step (wait_for:) has none"},
		{"name: a\nsteps:\n  - { id: p, timeout: 1h, wait_for: { signal: paid } }\n", "(p).timeout: is for steps a worker runs"},
		{"name: a\nsteps:\n  - { id: p, for_each: \"{{ .Input.x }}\", wait_for: { signal: paid } }\n", "(p).for_each: is not for a signal step"},
		{"name: a\nsteps:\n  - { id: a, run: x }\n  - { id: p, wait_for: { signal: paid, match: \"{{ .Steps.a.Output }}\" } }\n", "(p).wait_for.match: refers to .Steps.a, which is not a step it depends on"},
	} {
		if _, err := e.Client.Parse("a.yaml", []byte(c.spec)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.spec, err, c.want)
		}
	}
}

// A signal that cannot be sent is refused, naming what is wrong.
func TestBadSignalsAreRefused(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	for _, c := range []struct {
		s    producer.Signal
		want string
	}{
		{producer.Signal{Name: ""}, `name "" is not a signal name`},
		{producer.Signal{Name: "a b"}, `name "a b" is not a signal name`},
		{producer.Signal{Name: "paid", Match: strings.Repeat("x", 1025)}, "match is 1025 bytes, over 1024"},
		{producer.Signal{Name: "paid", Data: json.RawMessage(`{"a":`)}, "data is not JSON"},
		{producer.Signal{Name: "paid", Data: json.RawMessage(`"` + strings.Repeat("x", 64<<10) + `"`)}, "data is 65538 bytes, over limits.max_signal_bytes (65536)"},
		{producer.Signal{Name: "paid", IdempotencyKey: "a\nb"}, "control character"},
	} {
		if _, err := e.Client.Signal(t.Context(), c.s); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.60q: %v, want %q", c.s.Name+"/"+c.s.Match+"/"+string(c.s.Data), err, c.want)
		}
	}
}

// A kept signal a step took is its claim until the step is completed: a
// worker that died between taking it and completing the step loses
// nothing (the step's next try finds the same claim), and a claim whose
// step stopped waiting goes to a step that waits now.
func TestAKeptSignalIsClaimedUntilItsStepCompletes(t *testing.T) {
	shipped := make(chan map[string]any, 4)
	e := signalEnv(t, shipped, testenv.Options{NoWorker: true})
	send(t, e, producer.Signal{Name: "payment.succeeded", Match: "order-3", Data: json.RawMessage(`{"amount": 3}`)})
	// a worker that took the signal for a step and died before completing it
	dead := store.Waiter{Workflow: "wf_gone", Step: "paid", Attempt: 1}
	got, err := e.Store.AwaitSignal(t.Context(), "payment.succeeded", "order-3", dead, time.Hour)
	if err != nil || got == nil {
		t.Fatalf("take: %+v %v", got, err)
	}
	again, err := e.Store.AwaitSignal(t.Context(), "payment.succeeded", "order-3", dead, time.Hour)
	if err != nil || again == nil || again.ID != got.ID {
		t.Fatalf("the same waiter's next try: %+v %v, want its claim %s", again, err, got.ID)
	}
	if kept, _, _ := e.Store.KeptSignals(t.Context(), "payment.succeeded", "order-3"); kept != 0 {
		t.Fatalf("a claimed signal is still kept (%d): another step could take it too", kept)
	}
	// the claim's step is gone: handing it on reaches the step that waits now
	id := e.Submit(t, orderSpec(e, "3", "1h", false))
	e.StartWorker(t)
	e.Wait(t, id, 20*time.Second, store.StateWaiting)
	// the step parks (the workflow waiting) before it waits on the name
	poll.Until(t, 10*time.Second, func() (bool, string) {
		_, waiting, err := e.Store.KeptSignals(t.Context(), "payment.succeeded", "order-3")
		return err == nil && waiting == 1, fmt.Sprintf("waiters: %d (%v)", waiting, err)
	})
	delivered, kept, err := flow.DeliverSignal(t.Context(), e.Store, e.Asynq, e.Client.Spec, flow.SignalSend{Name: "payment.succeeded", Match: "order-3", ID: got.ID, Data: got.Data},
		[]store.Waiter{dead}, time.Minute, time.Now())
	if err != nil || len(delivered) != 1 || delivered[0].Workflow != id || kept != nil {
		t.Fatalf("the claim handed on: %+v kept %v (%v)", delivered, kept, err)
	}
	e.Wait(t, id, 20*time.Second, store.StateCompleted)
}

// A requeued signal step that waits again makes its workflow waiting, not
// blocked; a signal after the workflow's deadline completes nothing.
func TestARequeuedWaitAndALateSignal(t *testing.T) {
	t.Parallel()
	shipped := make(chan map[string]any, 4)
	e := signalEnv(t, shipped, testenv.Options{})
	id := e.Submit(t, e.Spec(`name: order
steps:
  - { id: paid, wait_for: { signal: paid, match: "a", timeout: 1s } }
`))
	e.Wait(t, id, 20*time.Second, store.StateBlocked)
	poll.Until(t, 10*time.Second, func() (bool, string) { // archived once the timeout's task returns
		task, err := e.Client.DeadLetterTask(t.Context(), id, "paid")
		if err == nil {
			err = e.Client.Requeue(t.Context(), task)
		}
		return err == nil, fmt.Sprintf("requeue %s: %v", task, err)
	})
	var (
		wf  *store.Workflow
		err error
	)
	poll.Until(t, 10*time.Second, func() (bool, string) {
		wf, err = e.Store.Get(t.Context(), id)
		return err == nil && wf.Steps[0].State == store.StepWaiting, fmt.Sprintf("the requeued step does not wait: %+v %v", wf, err)
	})
	if wf.State != store.StateWaiting || wf.Steps[0].Attempts != 2 {
		t.Fatalf("after the requeue: workflow %s, step %s (attempt %d): want waiting", wf.State, wf.Steps[0].State, wf.Steps[0].Attempts)
	}
	e.Wait(t, id, 20*time.Second, store.StateBlocked) // its own timeout again

	late := e.Submit(t, e.Spec(`name: late
deadline: 1s
steps:
  - { id: paid, wait_for: { signal: paid, match: "late" } }
`))
	e.Wait(t, late, 20*time.Second, store.StateTimedOut)
	if res := send(t, e, producer.Signal{Name: "paid", Match: "late"}); len(res.Delivered) != 0 || !res.Kept {
		t.Fatalf("a signal after the deadline: %+v, want none reached and kept", res)
	}
}

// An idempotent send cut short after it found no waiting step (its
// sender died before keeping it) is finished by the next send of its key:
// kept, with the first send's data, for the step that waits next.
func TestACutShortIdempotentSendIsFinishedByItsRetry(t *testing.T) {
	shipped := make(chan map[string]any, 4)
	e := signalEnv(t, shipped, testenv.Options{})
	if _, err := e.Store.SendSignal(t.Context(), "payment.succeeded", "order-8", "sig_first", `{"amount": 8}`, "evt-8", time.Hour, 0); err != nil {
		t.Fatal(err)
	} // ... and the sender died here (a claim of no lease: lapsed at once)
	res := send(t, e, producer.Signal{Name: "payment.succeeded", Match: "order-8", Data: json.RawMessage(`{"amount": 99}`), IdempotencyKey: "evt-8"})
	if !res.Duplicate || res.ID != "sig_first" || !res.Kept {
		t.Fatalf("the retry: %+v, want the first send finished (kept)", res)
	}
	if again := send(t, e, producer.Signal{Name: "payment.succeeded", Match: "order-8", IdempotencyKey: "evt-8"}); !again.Duplicate || again.Kept {
		t.Fatalf("a third send: %+v, want a finished duplicate", again)
	}
	id := e.Submit(t, orderSpec(e, "8", "1h", false))
	e.Wait(t, id, 20*time.Second, store.StateCompleted)
	if a := <-shipped; fmt.Sprint(a["amount"]) != "8" {
		t.Fatalf("ship saw %v: want the first send's data", a)
	}
}
