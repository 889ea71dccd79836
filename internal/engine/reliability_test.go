package engine_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/dashboard"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/tasks"
)

// SIGKILL a worker process while a chord member's LLM call is in flight:
// asynq's recoverer brings the task back, the member runs again (its call
// had not finished, so it is called again), and the body runs exactly once.
func TestSIGKILLMidStepRunsTheStepAgainOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("waits about a minute for asynq to recover the killed worker's task")
	}
	t.Parallel()
	e := testenv.Start(t, testenv.Options{NoWorker: true, Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Name: "the first call hangs", Requests: 1, Fault: &chaosllm.Fault{Kind: chaosllm.KindHang}}, {Name: "fine"}}}})
	wspec := e.Spec(strings.Replace(chordSpec(3), "defaults: { route: solo }", "defaults: { route: solo, timeout: 10s }", 1))
	id := e.Submit(t, wspec)
	p := startWorkerProcess(t, e, 1) // one step at a time: only the hung member is in flight at the kill
	poll.Until(t, 10*time.Second, func() (bool, string) {
		return e.Chaos.Snapshot().Count("openai", "", "hang") > 0, "no call reached chaosllm"
	})
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.done
	killed := time.Now()
	wf, _ := e.Store.Get(context.Background(), id)
	var hung string
	for _, s := range wf.Steps[:3] {
		if s.State == store.StepRunning {
			hung = s.ID
		}
	}
	if hung == "" || wf.Steps[3].State != store.StepPending {
		t.Fatalf("after the kill: %+v (want one member running, the body pending)", wf.Steps)
	}
	e.StartWorker(t)
	wf = e.Wait(t, id, 150*time.Second, store.StateCompleted)
	t.Logf("step %s recovered and the workflow completed %.1fs after the SIGKILL", hung, time.Since(killed).Seconds())
	st := e.Chaos.Snapshot()
	if ok, hang := st.Count("openai", "", "ok"), st.Count("openai", "", "hang")+st.Count("openai", "", "client_gone"); ok != 4 || hang != 1 {
		t.Fatalf("chaosllm: %d answers (want 4: three members and the body), %d hung calls (want 1); %+v", ok, hang, st.Calls)
	}
	for _, s := range wf.Steps {
		want := 1
		if s.ID == hung {
			want = 2
		}
		if s.Attempts != want {
			t.Errorf("step %s ran %d times, want %d", s.ID, s.Attempts, want)
		}
	}

	// the log has what landed: the killed attempt's start and nothing
	// after it (its call never answered, its outcome never settled), then
	// the second attempt's start, call and outcome; every step done once
	evs, err := e.Store.Events(context.Background(), id, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	var ofHung []string
	done, ended := map[string]int{}, 0
	for _, ev := range evs {
		if ev.Step == hung {
			ofHung = append(ofHung, fmt.Sprintf("%s #%d", ev.Type, ev.Attempt))
		}
		switch ev.Type {
		case record.EventDone:
			done[ev.Step]++
		case record.EventEnded:
			ended++
		}
	}
	if want := []string{"step.ready #0", "step.started #1", "step.started #2", "llm.call #2", "step.done #2"}; !slices.Equal(ofHung, want) {
		t.Errorf("the log of %s: %v, want %v", hung, ofHung, want)
	}
	if len(done) != 4 || ended != 1 {
		t.Errorf("step.done by step %v (want each of 4 once), workflow.ended %d times", done, ended)
	}
	for st, n := range done {
		if n != 1 {
			t.Errorf("step %s logged done %d times", st, n)
		}
	}
}

// Restart Redis (append-only file, fsync every second; stopped with
// SIGTERM as an orchestrator does) while workflows run: every workflow
// completes once it is back, workers and the dashboard reconnect by
// themselves, nothing is lost.
func TestRedisRestartMidRun(t *testing.T) {
	srv := redistest.NewServer(t, "--save", "", "--appendonly", "yes", "--appendfsync", "everysec")
	srv.Start()
	var logs testenv.Buffer
	e := testenv.Start(t, testenv.Options{RedisAddr: srv.Addr(), LogTo: &logs, Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Latency: chaosllm.Fixed(200 * time.Millisecond)}}}})
	dash, err := dashboard.New(t.Context(), dashboard.Options{Config: e.Config, Redis: e.Redis, AsynqOpt: asynq.RedisClientOpt{Addr: srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer dash.Close()
	hs := httptest.NewServer(dash)
	defer hs.Close()

	const n = 20
	chain := "name: chain\ndefaults: { route: solo }\nsteps:\n  - { id: a, prompt: \"a {{ .Input.n }}\" }\n" +
		"  - { id: b, depends_on: [a], prompt: \"b {{ .Steps.a.Output }}\" }\n  - { id: c, depends_on: [b], prompt: \"c {{ .Steps.b.Output }}\" }\n"
	var ids []string
	for i := 0; i < n; i++ {
		wspec := e.Spec(chain)
		wspec.Input = map[string]any{"n": i}
		ids = append(ids, e.Submit(t, wspec))
	}
	// let some steps finish, then take Redis away for two seconds
	poll.Until(t, 20*time.Second, func() (bool, string) {
		return e.Chaos.Snapshot().Count("openai", "", "ok") >= n, "the workflows did not get going"
	})
	srv.Stop()
	outage := time.NewTimer(2 * time.Second) // the outage's length, not a wait for anything
	<-outage.C
	srv.Start()
	defer func() {
		if t.Failed() {
			t.Logf("redis-server's log:\n%s", srv.Log())
		}
	}()

	completed := 0
	insp := asynq.NewInspectorFromRedisClient(e.Redis)
	defer func() {
		if !t.Failed() {
			return
		}
		for _, id := range ids {
			for _, s := range []string{"a", "b", "c"} {
				info, err := insp.GetTaskInfo("default", tasks.TaskID(id, s))
				if err == nil {
					t.Logf("%s/%s: %s retried %d last error %q", id, s, info.State, info.Retried, info.LastErr)
				}
			}
		}
		t.Logf("worker logs:\n%s", logs.String())
	}()
	for _, id := range ids {
		// usually seconds; up to asynq's recovery (60–120s) for a step whose
		// attempt failed while Redis was away (see docs/operations.md)
		wf := e.Wait(t, id, 150*time.Second, store.StateCompleted)
		if wf.State == store.StateCompleted {
			completed++
		}
	}
	if completed != n {
		t.Fatalf("%d of %d workflows completed", completed, n)
	}
	// every step answered; a call cut off by the outage may have been made
	// again, but never more than the steps in flight at the time (8)
	if ok := e.Chaos.Snapshot().Count("openai", "", "ok"); ok < 3*n || ok > 3*n+8 {
		t.Fatalf("%d answers for %d steps", ok, 3*n)
	}
	// the dashboard reconnected too
	resp, err := http.Get(hs.URL + "/workflows/" + ids[0])
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "completed") {
		t.Fatalf("dashboard after the restart: %d\n%s", resp.StatusCode, body)
	}
}

// Garbage put into the queue by hand is dead-lettered with a reason and
// the worker goes on serving real workflows.
func TestGarbageTasksAreDeadLetteredAndTheWorkerGoesOn(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	garbage := map[string]string{
		"not-json":   "this is not JSON \x00\xff",
		"no-ids":     `{"wf": "", "step": ""}`,
		"wrong-type": `["wf", "step"]`,
		"huge":       `{"wf": "` + strings.Repeat("x", 1<<16) + `"}`,
	}
	for name, payload := range garbage {
		if _, err := e.Asynq.Enqueue(asynq.NewTask(tasks.TypeStep, []byte(payload)), asynq.TaskID("garbage-"+name), asynq.MaxRetry(3)); err != nil {
			t.Fatal(err)
		}
	}
	insp := asynq.NewInspectorFromRedisClient(e.Redis)
	poll.Until(t, 10*time.Second, func() (bool, string) {
		q, err := insp.GetQueueInfo("default")
		return err == nil && q.Archived == len(garbage), fmt.Sprintf("garbage not dead-lettered: %+v %v", q, err)
	})
	for name := range garbage {
		info, err := insp.GetTaskInfo("default", "garbage-"+name)
		if err != nil || info.State != asynq.TaskStateArchived || info.Retried != 0 || !strings.Contains(info.LastErr, "payload") {
			t.Errorf("%s: %+v %v (want archived at once, with the reason)", name, info, err)
		}
	}
	id := e.Submit(t, e.Spec(step("solo", "")))
	e.Wait(t, id, 10*time.Second, store.StateCompleted)
}
