package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/tasks"
)

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) != "" {
		workerChild()
		return
	}
	os.Exit(redistest.Main(m))
}

const oneStep = `
name: hello
steps:
  - id: greet
    route: solo
    prompt: "Say hello to {{ .Input.who }}"
input: { who: "Ada" }
`

func TestSingleStepEndToEnd(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	id := e.Submit(t, e.Spec(oneStep))
	wf := e.Wait(t, id, 10*time.Second, store.StateCompleted)
	s := wf.Steps[0]
	if want := chaosllm.Reply("Say hello to Ada\n"); s.Output != want {
		t.Fatalf("output %q, want %q", s.Output, want)
	}
	if s.Target != "oa/m-solo" || s.Attempts != 1 || s.Usage.PromptTokens != 4 || wf.FinishedAt == nil {
		t.Fatalf("step = %+v", s)
	}
}

func TestChordFanInRunsExactlyOnceDespiteDuplicates(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	wspec := e.Spec(`
name: chord
defaults: { route: main }
steps:
  - { id: a, prompt: "part a" }
  - { id: b, prompt: "part b" }
  - { id: c, prompt: "part c" }
  - { id: d, prompt: "part d" }
  - id: join
    depends_on: [a, b, c, d]
    prompt: "join {{ .Steps.a.Output }} | {{ .Steps.b.Output }} | {{ .Steps.c.Output }} | {{ .Steps.d.Output }}"
`)
	id := e.Submit(t, wspec)
	// at-least-once delivery: every parallel step is delivered three times
	for _, s := range []string{"a", "b", "c", "d"} {
		for dup := 1; dup <= 2; dup++ {
			payload, _ := json.Marshal(tasks.Payload{Workflow: id, Step: s})
			if _, err := e.Asynq.Enqueue(asynq.NewTask(tasks.TypeStep, payload, asynq.TaskID(fmt.Sprintf("%s:%s:dup%d", id, s, dup)))); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.StartWorker(t)
	wf := e.Wait(t, id, 15*time.Second, store.StateCompleted)
	// let any straggling duplicate finish before counting
	waitQueueEmpty(t, e)
	st := e.Chaos.Snapshot()
	if n := st.Count("openai", "", "ok"); n != 5 {
		t.Fatalf("chaosllm answered %d calls, want 5 (4 parts + 1 join): %+v", n, st.Calls)
	}
	join := wf.Steps[4]
	if join.Attempts != 1 || !strings.Contains(join.Output, "chaosllm answer") {
		t.Fatalf("join = %+v", join)
	}
}

func waitQueueEmpty(t *testing.T, e *testenv.Env) {
	t.Helper()
	insp := asynq.NewInspectorFromRedisClient(e.Redis)
	poll.Until(t, 10*time.Second, func() (bool, string) {
		q, err := insp.GetQueueInfo("default")
		return err == nil && q.Pending == 0 && q.Active == 0 && q.Scheduled == 0 && q.Retry == 0, "queue did not drain within 10s"
	})
}

func TestRedeliveredStepUsesCheckpoint(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	id := e.Submit(t, e.Spec(oneStep))
	e.Wait(t, id, 10*time.Second, store.StateCompleted)
	before := e.Chaos.Snapshot().Total
	payload, _ := json.Marshal(tasks.Payload{Workflow: id, Step: "greet"})
	if _, err := e.Asynq.Enqueue(asynq.NewTask(tasks.TypeStep, payload, asynq.TaskID(id+":greet:again"))); err != nil {
		t.Fatal(err)
	}
	waitQueueEmpty(t, e)
	if after := e.Chaos.Snapshot().Total; after != before {
		t.Fatalf("redelivery called the LLM again: %d calls before, %d after", before, after)
	}
	wf, _ := e.Store.Get(context.Background(), id)
	if wf.State != store.StateCompleted || wf.Steps[0].Attempts != 1 {
		t.Fatalf("workflow after redelivery: %+v", wf)
	}
}

func TestServerErrorsRetryThenSucceed(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Name: "down", Requests: 2, Fault: &chaosllm.Fault{Status: 503}}, {Name: "up"}}}})
	id := e.Submit(t, e.Spec(oneStep))
	wf := e.Wait(t, id, 15*time.Second, store.StateCompleted)
	if s := wf.Steps[0]; s.Attempts != 3 || s.State != store.StepDone {
		t.Fatalf("step = %+v, want done after 3 attempts", s)
	}
}

func TestFailoverToNextTargetWithinOneAttempt(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Endpoint: "openai", Fault: &chaosllm.Fault{Status: 500}}}}})
	id := e.Submit(t, e.Spec(strings.Replace(oneStep, "route: solo", "route: main", 1)))
	wf := e.Wait(t, id, 10*time.Second, store.StateCompleted)
	if s := wf.Steps[0]; s.Attempts != 1 || s.Target != "an/m-an" {
		t.Fatalf("step = %+v, want answered by the second target on attempt 1", s)
	}
}

func TestRateLimitedKeyRotatesToBackupKey(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Requests: 1, Fault: &chaosllm.Fault{Status: 429, RetryAfter: chaosllm.Duration(30 * time.Second)}}, {}}}})
	id := e.Submit(t, e.Spec(oneStep))
	wf := e.Wait(t, id, 10*time.Second, store.StateCompleted)
	st := e.Chaos.Snapshot()
	if wf.Steps[0].Attempts != 1 || st.Count("openai", chaosllm.KeyID(testenv.Keys[0]), "status_429") != 1 ||
		st.Count("openai", chaosllm.KeyID(testenv.Keys[1]), "ok") != 1 {
		t.Fatalf("want one 429 on the primary key and success on the backup in one attempt: %+v, %+v", wf.Steps[0], st.Calls)
	}
}

func TestBadRequestIsDeadLetteredAtOnce(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Fault: &chaosllm.Fault{Status: 400}}}}})
	id := e.Submit(t, e.Spec(oneStep))
	wf := e.Wait(t, id, 10*time.Second, store.StateBlocked)
	s := wf.Steps[0]
	if s.State != store.StepDead || s.Attempts != 1 || !strings.HasPrefix(s.Error, "bad_request") {
		t.Fatalf("step = %+v", s)
	}
	if info := archived(t, e, tasks.TaskID(id, "greet")); !strings.Contains(info.LastErr, "bad_request") {
		t.Fatalf("archived with %q", info.LastErr)
	}
}

func TestOptionalDeadStepLetsDependentsRunAndDegradeAnswers(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	id := e.Submit(t, e.Spec(`
name: opt
defaults: { route: solo, max_retries: 0 }
steps:
  - { id: news, route: flaky, prompt: "headlines", optional: true }
  - { id: soft, route: flaky, prompt: "headlines", degrade: template }
  - id: report
    depends_on: [news, soft]
    prompt: "news missing={{ .Steps.news.Missing }} soft={{ .Steps.soft.Output }} degraded={{ .Steps.soft.Degraded }}"
`))
	wf := e.Wait(t, id, 15*time.Second, store.StateCompleted)
	news, soft, report := wf.Steps[0], wf.Steps[1], wf.Steps[2]
	if news.State != store.StepDead || !strings.HasPrefix(news.Error, "network") {
		t.Errorf("news = %+v", news)
	}
	if soft.State != store.StepDone || !soft.Degraded || soft.Output != "fallback answer" {
		t.Errorf("soft = %+v", soft)
	}
	if want := chaosllm.Reply("news missing=true soft=fallback answer degraded=true\n"); report.Output != want {
		t.Errorf("report output %q, want %q", report.Output, want)
	}
}

func TestStepTimeoutIsATimeout(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Latency: chaosllm.Fixed(5 * time.Second)}}}})
	id := e.Submit(t, e.Spec(`
name: slow
steps:
  - { id: s, route: solo, prompt: "slow", timeout: 1s, max_retries: 0 }
`))
	wf := e.Wait(t, id, 10*time.Second, store.StateBlocked)
	if s := wf.Steps[0]; !strings.HasPrefix(s.Error, "timeout") {
		t.Fatalf("step = %+v, want a timeout", s)
	}
}

func TestCanceledWorkflowDoesNotRun(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	id := e.Submit(t, e.Spec(oneStep))
	if _, err := e.Client.Cancel(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	e.StartWorker(t)
	waitQueueEmpty(t, e)
	if n := e.Chaos.Snapshot().Total; n != 0 {
		t.Fatalf("canceled workflow made %d calls", n)
	}
	wf, _ := e.Store.Get(context.Background(), id)
	if wf.State != store.StateCanceled {
		t.Fatalf("state = %s", wf.State)
	}
}

func TestGarbagePayloadIsDeadLettered(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	info, err := e.Asynq.Enqueue(asynq.NewTask(tasks.TypeStep, []byte("{not json")))
	if err != nil {
		t.Fatal(err)
	}
	if got := archived(t, e, info.ID); !strings.Contains(got.LastErr, "payload") {
		t.Fatalf("garbage payload archived with %q", got.LastErr)
	}
	// the worker keeps working
	id := e.Submit(t, e.Spec(oneStep))
	e.Wait(t, id, 10*time.Second, store.StateCompleted)
}

// waitDeadLetters returns the dead letters (of class, if not empty) once
// there is at least one: a workflow is blocked as soon as its step settles
// dead, and asynq archives the task a moment later.
func waitDeadLetters(t *testing.T, e *testenv.Env, class string) []producer.DeadLetter {
	t.Helper()
	var dls []producer.DeadLetter
	poll.Until(t, 10*time.Second, func() (bool, string) {
		var err error
		dls, err = e.Client.DeadLetters(t.Context(), class)
		if err != nil {
			t.Fatal(err)
		}
		return len(dls) > 0, fmt.Sprintf("no dead letter of class %q within 10s", class)
	})
	return dls
}
