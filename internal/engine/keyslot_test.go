package engine_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// tenantMap is a map of n prompt steps on route (whose model names the
// tenant at chaosllm), bounded by the tenant's concurrency key.
func tenantMap(tenant, route string, n, limit int) string {
	return fmt.Sprintf(`name: map-%[1]s
input: { tenant: %[1]s, items: [%[4]s] }
concurrency: { key: "tenant-{{ .Input.tenant }}", limit: %[3]d }
steps:
  - id: each
    for_each: "{{ .Input.items }}"
    max_items: %[2]d
    route: %[5]s
    prompt: "item {{ .Item }}"
`, tenant, n, limit, items(n), route)
}

func items(n int) string {
	s := ""
	for i := range n {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprint(i)
	}
	return s
}

// A key never has more than its limit of steps in flight (chaosllm's peak
// per model: one model per tenant), and while tenant A's 2,000-item map
// keeps every A slot busy, tenant B's workflows complete before it does.
func TestAConcurrencyKeyBoundsItsStepsInFlightAndOtherKeysGoOn(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 2,000-item map")
	}
	e := testenv.Start(t, testenv.Options{NoWorker: true, Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Latency: chaosllm.Fixed(5 * time.Millisecond)}}}})
	e.Config.Worker.Concurrency = 20
	e.StartWorker(t)
	const limit = 10
	a := e.Submit(t, e.Spec(tenantMap("a", "solo", 2000, limit)))
	poll.Until(t, 30*time.Second, func() (bool, string) {
		loads, _, _, err := e.Store.KeyLoads(t.Context(), 10)
		for _, l := range loads {
			if l.Key == "tenant-a" && l.InFlight == limit && l.Waiting > 0 {
				return true, ""
			}
		}
		return false, fmt.Sprintf("tenant a's slots are not all busy with steps waiting: %+v %v", loads, err)
	})
	var bs []string
	for range 5 {
		bs = append(bs, e.Submit(t, e.Spec(`name: b
input: { tenant: b }
concurrency: { key: "tenant-{{ .Input.tenant }}", limit: 3 }
steps:
  - { id: one, route: fallback, prompt: "hello" }
`)))
	}
	for _, b := range bs {
		e.Wait(t, b, 60*time.Second, store.StateCompleted)
	}
	if w, _ := e.Store.Summary(t.Context(), a); w.State == store.StateCompleted {
		t.Fatalf("tenant a's map completed before tenant b's workflows")
	}
	wf := e.Wait(t, a, 5*time.Minute, store.StateCompleted)
	if wf.Steps[0].Map == nil || wf.Steps[0].Map.Settled != 2000 {
		t.Fatalf("map: %+v", wf.Steps[0].Map)
	}
	peak := e.Chaos.Snapshot().PeakInFlight
	if peak["model:m-solo"] > limit || peak["model:m-solo"] < 2 || peak["model:m-small"] > 3 {
		t.Fatalf("peak calls in flight per tenant: a %d (limit %d), b %d (limit 3)", peak["model:m-solo"], limit, peak["model:m-small"])
	}
	calls := e.Chaos.Snapshot().Count("openai", "", "ok")
	if calls != 2000+5 {
		t.Fatalf("%d calls, want one a step (2,005)", calls)
	}
	poll.Until(t, 10*time.Second, func() (bool, string) { // given back just after each settle
		loads, inflight, waiting, err := e.Store.KeyLoads(t.Context(), 10)
		return err == nil && inflight == 0 && waiting == 0, fmt.Sprintf("after every step: %+v in flight %d, waiting %d (%v)", loads, inflight, waiting, err)
	})
}

// The slots a SIGKILLed worker's steps held free within the key's lease:
// a step of the key that waited runs while the killed steps' own tasks
// still wait for asynq to recover them.
func TestAKilledWorkersKeySlotsFreeWithinTheLease(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a worker process, then waits about a minute for asynq to recover its tasks")
	}
	t.Parallel()
	e := testenv.Start(t, testenv.Options{NoWorker: true, Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Name: "the first two calls hang", Requests: 2, Fault: &chaosllm.Fault{Kind: chaosllm.KindHang}}, {Name: "fine"}}}})
	one := `name: one
input: { tenant: t }
concurrency: { key: "{{ .Input.tenant }}", limit: 2 }
steps:
  - { id: s, route: solo, prompt: "hello", timeout: 20s }
`
	p := startWorkerProcess(t, e, 4, workerEnv+"_KEY_LEASE=3s")
	hung := []string{e.Submit(t, e.Spec(one)), e.Submit(t, e.Spec(one))}
	poll.Until(t, 10*time.Second, func() (bool, string) {
		n := e.Chaos.Snapshot().Count("openai", "", "hang")
		return n == 2, fmt.Sprintf("%d calls hang, want 2", n)
	})
	third := e.Submit(t, e.Spec(one))
	poll.Until(t, 10*time.Second, func() (bool, string) {
		wf, err := e.Store.Get(t.Context(), third)
		return err == nil && wf.Steps[0].State == store.StepThrottled, fmt.Sprintf("the third step is not throttled: %+v %v", wf, err)
	})
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.done
	e.Config.Worker.KeyLease = 3 * 1e9
	e.StartWorker(t)
	e.Wait(t, third, 30*time.Second, store.StateCompleted)
	for _, id := range hung {
		if w, _ := e.Store.Get(t.Context(), id); w.Steps[0].State != store.StepRunning {
			t.Fatalf("a killed step is %s: the third ran only once asynq recovered it", w.Steps[0].State)
		}
	}
	for _, id := range hung { // asynq recovers them after its own lease; each takes a slot again
		e.Wait(t, id, 150*time.Second, store.StateCompleted)
	}
	// a step's slot is given back just after its settle: soon after its
	// workflow is seen completed
	poll.Until(t, 10*time.Second, func() (bool, string) {
		_, inflight, waiting, err := e.Store.KeyLoads(t.Context(), 10)
		return err == nil && inflight == 0 && waiting == 0, fmt.Sprintf("after every step: in flight %d, waiting %d (%v)", inflight, waiting, err)
	})
}

// A step that waits for its key's slot is throttled (its workflow pending
// or running, never waiting: nothing outside it is waited for); canceled while it waits, it never runs, and its turn passes to
// the next waiter: the key's slots all come back.
func TestAThrottledStepCanceledPassesItsTurnOn(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true, Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Name: "the first call hangs", Requests: 1, Fault: &chaosllm.Fault{Kind: chaosllm.KindHang}}, {Name: "fine"}}}})
	e.StartWorker(t)
	one := oneKeyedStep("t")
	first := submitHanging(t, e, one)
	second, third := e.Submit(t, e.Spec(one)), e.Submit(t, e.Spec(one))
	for _, id := range []string{second, third} {
		poll.Until(t, 10*time.Second, func() (bool, string) {
			wf, err := e.Client.Status(t.Context(), id)
			return err == nil && (wf.State == store.StatePending || wf.State == store.StateRunning) && wf.Steps[0].State == store.StepThrottled &&
				wf.Steps[0].Output == `waits for a slot of concurrency key "t" (limit 1)`, fmt.Sprintf("not throttled: %+v %v", wf, err)
		})
	}
	if _, err := e.Client.Cancel(t.Context(), second); err != nil {
		t.Fatal(err)
	}
	e.Wait(t, first, 30*time.Second, store.StateBlocked) // its hung call timed out: dead, no retries
	wf := e.Wait(t, third, 30*time.Second, store.StateCompleted)
	if s, _ := e.Store.Get(t.Context(), second); s.Steps[0].State != store.StepCanceled || s.Steps[0].Attempts != 0 {
		t.Fatalf("the canceled step: %s, %d attempts", s.Steps[0].State, s.Steps[0].Attempts)
	}
	if wf.Steps[0].Attempts != 1 {
		t.Fatalf("the third step ran %d attempts", wf.Steps[0].Attempts)
	}
	poll.Until(t, 10*time.Second, func() (bool, string) {
		_, inflight, waiting, err := e.Store.KeyLoads(t.Context(), 10)
		return err == nil && inflight == 0 && waiting == 0, fmt.Sprintf("in flight %d, waiting %d (%v)", inflight, waiting, err)
	})
}

// A step running under a grant (its first task ended throttled) is
// stopped by its workflow's cancel like any other, and gives its slot back;
// a signal step waits, and times out, holding no slot of the workflow's
// key even when the key is full.
func TestAGrantedStepIsCanceledAndWaitsHoldNoSlot(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true, Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Name: "the first two calls hang", Requests: 2, Fault: &chaosllm.Fault{Kind: chaosllm.KindHang}}, {Name: "fine"}}}})
	e.StartWorker(t)
	spec := func(timeout string) string {
		return `name: one
input: { tenant: t }
concurrency: { key: "{{ .Input.tenant }}", limit: 1 }
steps:
  - { id: s, route: solo, prompt: "hello", timeout: ` + timeout + `, max_retries: 0 }
`
	}
	first := e.Submit(t, e.Spec(spec("2s")))
	poll.Until(t, 10*time.Second, func() (bool, string) {
		return e.Chaos.Snapshot().Count("openai", "", "hang") == 1, "the first call does not hang"
	})
	second := e.Submit(t, e.Spec(spec("60s")))
	waits := e.Submit(t, e.Spec(`name: waits
input: { tenant: t }
concurrency: { key: "{{ .Input.tenant }}", limit: 1 }
steps:
  - { id: paid, wait_for: { signal: paid, match: x, timeout: 1s } }
`))
	if wf := e.Wait(t, waits, 20*time.Second, store.StateBlocked); wf.Steps[0].Class != "timeout" {
		t.Fatalf("the signal step behind a full key: %+v", wf.Steps[0])
	}
	e.Wait(t, first, 30*time.Second, store.StateBlocked) // its hung call timed out: its slot goes to the second
	poll.Until(t, 20*time.Second, func() (bool, string) {
		wf, err := e.Store.Get(t.Context(), second)
		return err == nil && wf.Steps[0].State == store.StepRunning && e.Chaos.Snapshot().Count("openai", "", "hang") == 2,
			fmt.Sprintf("the second step does not run under its grant: %+v %v", wf, err)
	})
	if _, err := e.Client.Cancel(t.Context(), second); err != nil {
		t.Fatal(err)
	}
	// the slot comes back only when the step's task ends (its lease, 30s,
	// is far off): the cancel stopped the task that runs under the grant
	poll.Until(t, 20*time.Second, func() (bool, string) {
		_, inflight, _, err := e.Store.KeyLoads(t.Context(), 10)
		return err == nil && inflight == 0, fmt.Sprintf("after the cancel: %d in flight (%v)", inflight, err)
	})
}

// A throttled step whose place in its key's line is lost (a promotion of
// the primary of the keys' slot that did not have it) would wait for
// ever: nothing holds a task of it, and the release hands the slot to
// nobody. The reconciler finds it out of line and enqueues its task
// again, which waits in line or takes the slot, and the step runs once.
func TestAThrottledStepThatLostItsPlaceInLineIsEnqueuedAgain(t *testing.T) {
	e := testenv.Start(t, testenv.Options{ReconcileInterval: 200 * time.Millisecond, Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Name: "the first call hangs", Requests: 1, Fault: &chaosllm.Fault{Kind: chaosllm.KindHang}}, {Name: "fine"}}}})
	one := oneKeyedStep("lost")
	first := submitHanging(t, e, one)
	second := e.Submit(t, e.Spec(one))
	poll.Until(t, 10*time.Second, func() (bool, string) {
		wf, err := e.Client.Status(t.Context(), second)
		return err == nil && wf.Steps[0].State == store.StepThrottled, fmt.Sprintf("not throttled: %+v %v", wf, err)
	})
	// the promotion: the waiter's entries are gone from the keys' slot
	member := second + "\x00s\x000"
	pipe := e.Redis.TxPipeline()
	pipe.Del(t.Context(), "agentq:{cc}:q:lost")
	pipe.HDel(t.Context(), "agentq:{cc}:qm", member)
	pipe.ZRem(t.Context(), "agentq:{cc}:waiting", "lost")
	if _, err := pipe.Exec(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.Wait(t, first, 30*time.Second, store.StateBlocked) // its hung call timed out: dead, no retries
	wf := e.Wait(t, second, 30*time.Second, store.StateCompleted)
	if wf.Steps[0].Attempts != 1 {
		t.Fatalf("the step that lost its place ran %d attempts, want 1", wf.Steps[0].Attempts)
	}
	if n := e.Chaos.Snapshot().Count("openai", "", "ok"); n != 1 {
		t.Fatalf("%d answers, want 1: the second step's", n)
	}
	poll.Until(t, 10*time.Second, func() (bool, string) {
		_, inflight, waiting, err := e.Store.KeyLoads(t.Context(), 10)
		return err == nil && inflight == 0 && waiting == 0, fmt.Sprintf("in flight %d, waiting %d (%v)", inflight, waiting, err)
	})
}

// oneKeyedStep is a workflow of one step under tenant's one slot, 3s
// long at most and never retried.
func oneKeyedStep(tenant string) string {
	return `name: one
input: { tenant: ` + tenant + ` }
concurrency: { key: "{{ .Input.tenant }}", limit: 1 }
steps:
  - { id: s, route: solo, prompt: "hello", timeout: 3s, max_retries: 0 }
`
}

// submitHanging submits wf and waits until its call, e's first, hangs
// (a scenario whose first call hangs).
func submitHanging(t *testing.T, e *testenv.Env, wf string) string {
	t.Helper()
	id := e.Submit(t, e.Spec(wf))
	poll.Until(t, 10*time.Second, func() (bool, string) {
		return e.Chaos.Snapshot().Count("openai", "", "hang") == 1, "the first call does not hang"
	})
	return id
}
