package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/tasks"
)

func TestThreeLevelDAGPassesOutputsOn(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	id := e.Submit(t, e.Spec(`
name: dag
input: { topic: "tides" }
defaults: { route: main }
steps:
  - { id: a, prompt: "facts about {{ .Input.topic }}" }
  - { id: b, depends_on: [a], prompt: "critique: {{ .Steps.a.Output }}" }
  - { id: c, depends_on: [a], prompt: "summarise: {{ .Steps.a.Output }}" }
  - id: d
    depends_on: [b, c]
    prompt: "A={{ .Steps.a.Output }} B={{ .Steps.b.Output }} C={{ .Steps.c.Output }}"
`))
	wf := e.Wait(t, id, 15*time.Second, store.StateCompleted)
	out := map[string]string{}
	for _, s := range wf.Steps {
		out[s.ID] = s.Output
		if s.Attempts != 1 || s.State != store.StepDone {
			t.Errorf("step %s: %+v", s.ID, s)
		}
	}
	want := map[string]string{"a": chaosllm.Reply("facts about tides\n")}
	want["b"] = chaosllm.Reply("critique: " + want["a"] + "\n")
	want["c"] = chaosllm.Reply("summarise: " + want["a"] + "\n")
	want["d"] = chaosllm.Reply("A=" + want["a"] + " B=" + want["b"] + " C=" + want["c"] + "\n")
	for k, w := range want {
		if out[k] != w {
			t.Errorf("step %s output %q, want %q", k, out[k], w)
		}
	}
	if n := e.Chaos.Snapshot().Count("", "", "ok"); n != 4 {
		t.Errorf("%d LLM calls, want 4", n)
	}
}

func chordSpec(n int) string {
	var b strings.Builder
	b.WriteString("name: chord\ndefaults: { route: solo }\nsteps:\n")
	var ids []string
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("m%02d", i)
		ids = append(ids, id)
		fmt.Fprintf(&b, "  - { id: %s, prompt: \"member %d\" }\n", id, i)
	}
	fmt.Fprintf(&b, "  - id: body\n    depends_on: [%s]\n    prompt: \"join", strings.Join(ids, ", "))
	for _, id := range ids[:3] {
		fmt.Fprintf(&b, " {{ .Steps.%s.Output }}", id)
	}
	b.WriteString("\"\n")
	return b.String()
}

// failOnceAfterSettle runs the real handler, then reports a failure on the
// first delivery of each member step: asynq delivers every member twice.
func failOnceAfterSettle(calls *sync.Map) func(asynq.Handler) asynq.Handler {
	return func(next asynq.Handler) asynq.Handler {
		return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
			err := next.ProcessTask(ctx, t)
			var p tasks.Payload
			_ = json.Unmarshal(t.Payload(), &p)
			id, _ := asynq.GetTaskID(ctx)
			if _, seen := calls.LoadOrStore(id, true); !seen && err == nil && p.Step != "body" {
				return errors.New("injected: lost the ack after settling")
			}
			return err
		})
	}
}

func TestChordBodyRunsOnceWhenEveryMemberIsDeliveredTwice(t *testing.T) {
	var calls sync.Map
	e := testenv.Start(t, testenv.Options{NoWorker: true, Middleware: failOnceAfterSettle(&calls)})
	id := e.Submit(t, e.Spec(chordSpec(50)))
	// and ten members are duplicated by hand on top
	for i := 0; i < 50; i += 5 {
		payload, _ := json.Marshal(tasks.Payload{Workflow: id, Step: fmt.Sprintf("m%02d", i)})
		if _, err := e.Asynq.Enqueue(asynq.NewTask(tasks.TypeStep, payload, asynq.TaskID(fmt.Sprintf("%s:dup:%d", id, i)))); err != nil {
			t.Fatal(err)
		}
	}
	e.StartWorker(t)
	wf := e.Wait(t, id, 60*time.Second, store.StateCompleted)
	waitQueueEmpty(t, e)
	qi, err := asynq.NewInspectorFromRedisClient(e.Redis).GetQueueInfo("default")
	if err != nil || qi.Failed != 60 || qi.Processed != 121 {
		t.Errorf("queue %+v (%v): want 60 injected failures (50 members, 10 duplicates) in 121 deliveries", qi, err)
	}
	deliveries := 0
	calls.Range(func(_, _ any) bool { deliveries++; return true })
	if deliveries < 61 { // 50 members + 10 duplicates + the body, each task id seen
		t.Errorf("only %d task ids delivered; the duplicates did not run", deliveries)
	}
	body := wf.Steps[50]
	if body.ID != "body" || body.Attempts != 1 {
		t.Fatalf("body = %+v, want one attempt", body)
	}
	st := e.Chaos.Snapshot()
	if n := st.Count("openai", "", "ok"); n != 51 {
		t.Fatalf("chaosllm answered %d calls, want 51 (50 members once each + the body once)", n)
	}
}

func TestSIGKILLDuringFanInStillRunsTheBodyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("waits about a minute for asynq to recover the crashed worker's task")
	}
	t.Parallel() // the minute's wait overlaps the other crash drill's
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	id := e.Submit(t, e.Spec(chordSpec(5)))
	// a worker process SIGKILLed the moment the last member settled,
	// before it enqueues the body
	out, err := workerCmd(e, 8, workerEnv+"_CRASH_BEFORE_ENQUEUE=1").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("crash worker: %v (want killed by SIGKILL)\n%s", err, out)
	}
	wf, _ := e.Store.Get(context.Background(), id)
	if wf.Steps[5].State != store.StepQueued {
		t.Fatalf("after the crash the body is %q, want queued (marked ready, never enqueued)", wf.Steps[5].State)
	}
	start := time.Now()
	e.StartWorker(t)
	wf = e.Wait(t, id, 150*time.Second, store.StateCompleted)
	t.Logf("recovered %.1fs after the restart (asynq: 30s lease + recoverer every minute)", time.Since(start).Seconds())
	if n := e.Chaos.Snapshot().Count("openai", "", "ok"); n != 6 {
		t.Fatalf("chaosllm answered %d calls, want 6 (5 members + the body; the crashed member's checkpoint answered its redelivery)", n)
	}
	if body := wf.Steps[5]; body.Attempts != 1 {
		t.Fatalf("body = %+v", body)
	}
}

func TestRequeuedDeadStepUnblocksItsWorkflow(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Requests: 1, Fault: &chaosllm.Fault{Status: 400}}, {}}}})
	id := e.Submit(t, e.Spec(`
name: chain
defaults: { route: solo }
steps:
  - { id: first, prompt: "one" }
  - { id: second, depends_on: [first], prompt: "two {{ .Steps.first.Output }}" }
`))
	wf := e.Wait(t, id, 10*time.Second, store.StateBlocked)
	if wf.Steps[0].State != store.StepDead || wf.Steps[1].State != store.StepPending {
		t.Fatalf("blocked workflow: %+v", wf.Steps)
	}
	insp := asynq.NewInspectorFromRedisClient(e.Redis)
	poll.Until(t, 5*time.Second, func() (bool, string) {
		err := insp.RunTask("default", tasks.TaskID(id, "first"))
		return err == nil, fmt.Sprintf("requeue the archived step: %v", err)
	})
	wf = e.Wait(t, id, 10*time.Second, store.StateCompleted)
	if wf.Steps[0].Attempts != 2 || wf.Steps[1].Attempts != 1 {
		t.Fatalf("after requeue: %+v", wf.Steps)
	}
	if st := e.Chaos.Snapshot(); st.Count("", "", "ok") != 2 || st.Count("", "", "status_400") != 1 {
		t.Fatalf("calls: %+v", st.Calls)
	}
}

func TestCancelStopsARunningWorkflow(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Latency: chaosllm.Fixed(3 * time.Second)}}}})
	id := e.Submit(t, e.Spec(`
name: chain
defaults: { route: solo }
steps:
  - { id: slow, prompt: "one" }
  - { id: queued, prompt: "parallel" }
  - { id: after, depends_on: [slow], prompt: "two" }
`))
	// wait until both roots are running and their calls have reached the
	// provider (a step is marked running before its request is sent)
	poll.Until(t, 10*time.Second, func() (bool, string) {
		wf, _ := e.Store.Get(context.Background(), id)
		return wf.Steps[0].State == store.StepRunning && wf.Steps[1].State == store.StepRunning &&
			e.Chaos.Snapshot().PeakInFlight["openai"] >= 2, fmt.Sprintf("steps never ran: %+v", wf.Steps)
	})
	state, err := e.Client.Cancel(context.Background(), id)
	if err != nil || state != store.StateCanceled {
		t.Fatalf("cancel: %q %v", state, err)
	}
	waitQueueEmpty(t, e)
	wf, _ := e.Store.Get(context.Background(), id)
	for _, s := range wf.Steps {
		if s.State != store.StepCanceled {
			t.Errorf("step %s is %s, want canceled", s.ID, s.State)
		}
	}
	// chaosllm counts a call abandoned once it notices the client gone,
	// which may be after the worker moved on
	poll.Until(t, 10*time.Second, func() (bool, string) {
		st := e.Chaos.Snapshot()
		return st.Count("", "", "client_gone") == 2, fmt.Sprintf("want the two in-flight calls abandoned: %+v", st.Calls)
	})
	if st := e.Chaos.Snapshot(); st.Count("", "", "ok") != 0 || st.Count("", "", "client_gone") != 2 {
		t.Fatalf("want the two in-flight calls abandoned and nothing answered: %+v", st.Calls)
	}
	// canceling again reports the state and changes nothing
	if state, err := e.Client.Cancel(context.Background(), id); err != nil || state != store.StateCanceled {
		t.Fatalf("second cancel: %q %v", state, err)
	}
}
