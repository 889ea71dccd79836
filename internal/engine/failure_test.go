package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/llmclient"
	"github.com/agentq/agentq/tasks"
)

// The testenv worker's backoff: base 1s × jitter 0.5 (its random source
// always returns 0), so every delayed retry is scheduled 0.5s out unless a
// provider asked for longer. asynq keeps retry times in whole seconds
// (rounded down), so what it shows is within a second of that.
const testBackoff = 500 * time.Millisecond

// asynqDelay is the window a delay d shows up in asynq's task info.
func asynqDelay(d time.Duration) (time.Duration, time.Duration) {
	return d.Truncate(time.Second) - time.Second, d.Truncate(time.Second) + time.Second
}

var (
	key1 = chaosllm.KeyID(testenv.Keys[0])
	key2 = chaosllm.KeyID(testenv.Keys[1])
)

func step(route string, extra string) string {
	return fmt.Sprintf("name: one\nsteps:\n  - { id: s, route: %s, prompt: \"hello\"%s }\n", route, extra)
}

// scheduledDelay waits until the step's task sits in the retry set and
// returns how far out asynq scheduled it, and its retry count.
func scheduledDelay(t *testing.T, e *testenv.Env, wf string) (time.Duration, int) {
	t.Helper()
	insp := asynq.NewInspectorFromRedisClient(e.Redis)
	// Not poll.Until: its 20ms period is too coarse here. asynq rounds retry
	// times down to whole seconds, so a 0.5s backoff is often due at once and
	// the task sits in the retry set only until the worker's next forwarding
	// tick (every 100ms), often for just a few milliseconds.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if info, err := insp.GetTaskInfo("default", tasks.TaskID(wf, "s")); err == nil && info.State == asynq.TaskStateRetry {
			return info.NextProcessAt.Sub(info.LastFailedAt), info.Retried
		}
		time.Sleep(2 * time.Millisecond) //nolint: polling a state that lasts milliseconds
	}
	t.Fatal("the step never waited in the retry set")
	return 0, 0
}

func within(t *testing.T, what string, d, lo, hi time.Duration) {
	t.Helper()
	if d < lo || d > hi {
		t.Errorf("%s: %s, want within [%s, %s]", what, d, lo, hi)
	}
}

func archivedReason(t *testing.T, e *testenv.Env, wf string) string {
	t.Helper()
	return archived(t, e, tasks.TaskID(wf, "s")).LastErr
}

// archived waits until the task is in asynq's archive (dead-lettered).
func archived(t *testing.T, e *testenv.Env, taskID string) *asynq.TaskInfo {
	t.Helper()
	insp := asynq.NewInspectorFromRedisClient(e.Redis)
	var info *asynq.TaskInfo
	poll.Until(t, 5*time.Second, func() (bool, string) {
		i, err := insp.GetTaskInfo("default", taskID)
		if err == nil && i.State == asynq.TaskStateArchived {
			info = i
			return true, ""
		}
		return false, fmt.Sprintf("task %s was not archived", taskID)
	})
	return info
}

func TestNetworkFailureWaitsAndRetries(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Name: "down", Duration: chaosllm.Duration(300 * time.Millisecond), Fault: &chaosllm.Fault{Kind: chaosllm.KindRefuse}}, {Name: "up"}}}})
	// wait for the listener to close before submitting
	poll.Until(t, 5*time.Second, func() (bool, string) {
		return e.Chaos.Refusing(), "chaosllm is not refusing connections"
	})
	id := e.Submit(t, e.Spec(step("solo", "")))
	d, _ := scheduledDelay(t, e, id)
	lo, hi := asynqDelay(testBackoff)
	within(t, "delay after a refused connection", d, lo, hi)
	wf := e.Wait(t, id, 10*time.Second, store.StateCompleted)
	// (after three refusals the breaker opens, and a worker's active probe
	// may also reach the recovered primary: at least one answer, then)
	if s := wf.Steps[0]; s.Attempts < 2 || e.Chaos.Snapshot().Count("openai", "", "ok") < 1 {
		t.Fatalf("step %+v, calls %+v", s, e.Chaos.Snapshot().Calls)
	}
}

func TestTimeoutWaitsAndRetries(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Requests: 1, Fault: &chaosllm.Fault{Kind: chaosllm.KindHang}}, {}}}})
	id := e.Submit(t, e.Spec(step("solo", ", timeout: 2s")))
	d, _ := scheduledDelay(t, e, id)
	lo, hi := asynqDelay(testBackoff)
	within(t, "delay after a timeout", d, lo, hi)
	wf := e.Wait(t, id, 10*time.Second, store.StateCompleted)
	st := e.Chaos.Snapshot()
	if wf.Steps[0].Attempts != 2 || st.Count("openai", "", "hang") != 1 || st.Count("openai", "", "ok") != 1 {
		t.Fatalf("step %+v, calls %+v", wf.Steps[0], st.Calls)
	}
}

func TestServerErrorsRetryWithBackoff(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Requests: 1, Fault: &chaosllm.Fault{Status: 529}}, {}}}})
	id := e.Submit(t, e.Spec(step("solo", "")))
	d, _ := scheduledDelay(t, e, id)
	lo, hi := asynqDelay(testBackoff)
	within(t, "delay after a 529", d, lo, hi)
	e.Wait(t, id, 10*time.Second, store.StateCompleted)
}

func TestAllKeysRateLimitedWaitForTheCooldownWithoutUsingARetry(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Requests: 2, Fault: &chaosllm.Fault{Status: 429, RetryAfter: chaosllm.Duration(2 * time.Second)}}, {}}}})
	id := e.Submit(t, e.Spec(step("solo", "")))
	d, retried := scheduledDelay(t, e, id)
	// the cooldown (2s) plus the second that keeps asynq's rounding from
	// bringing the retry back before the keys are usable
	lo, hi := asynqDelay(3 * time.Second)
	within(t, "delay while both keys cool", d, lo+time.Second, hi)
	if retried != 0 {
		t.Errorf("a rate-limit wait used a retry (retried=%d)", retried)
	}
	wf := e.Wait(t, id, 10*time.Second, store.StateCompleted)
	st := e.Chaos.Snapshot()
	if st.Count("openai", key1, "status_429") != 1 || st.Count("openai", key2, "status_429") != 1 || st.Count("openai", "", "ok") != 1 || wf.Steps[0].Attempts != 2 {
		t.Fatalf("want one 429 per key, then one answer on attempt 2: %+v %+v", wf.Steps[0], st.Calls)
	}
}

func TestQuotaDisablesTheKeyForEveryone(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Timelines: []chaosllm.Timeline{
		{Key: testenv.Keys[0], Phases: []chaosllm.Phase{{Fault: &chaosllm.Fault{Status: 429, Code: "insufficient_quota"}}}}}}})
	for i := 0; i < 3; i++ {
		id := e.Submit(t, e.Spec(step("solo", "")))
		if wf := e.Wait(t, id, 10*time.Second, store.StateCompleted); wf.Steps[0].Attempts != 1 {
			t.Fatalf("workflow %d: %+v", i, wf.Steps[0])
		}
	}
	st := e.Chaos.Snapshot()
	if st.Count("openai", key1, "") != 1 || st.Count("openai", key2, "ok") != 3 {
		t.Fatalf("the exhausted key was called again: %+v", st.Calls)
	}
	ks, err := store.NewKeyState(e.Redis, nil).Load(context.Background(), []string{"oa"})
	if err != nil || !strings.HasPrefix(ks["oa"][llmclient.KeyID(testenv.Keys[0])].Disabled, "quota:") {
		t.Fatalf("shared key state: %+v %v", ks, err)
	}
}

func TestAuthFailureDisablesTheKey(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Keys: testenv.Keys[1:]}})
	for i := 0; i < 2; i++ {
		id := e.Submit(t, e.Spec(step("solo", "")))
		e.Wait(t, id, 10*time.Second, store.StateCompleted)
	}
	st := e.Chaos.Snapshot()
	if st.Count("openai", key1, "unauthorized") != 1 || st.Count("openai", key2, "ok") != 2 {
		t.Fatalf("calls: %+v", st.Calls)
	}
}

func TestEmptyServerErrorIsProbedForAuth(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Keys: testenv.Keys[1:], HideAuthFailures: true}})
	id := e.Submit(t, e.Spec(step("solo", "")))
	e.Wait(t, id, 10*time.Second, store.StateCompleted)
	st := e.Chaos.Snapshot()
	if st.Count("openai", key1, "empty_500") != 1 || st.Count("models", key1, "unauthorized") != 1 || st.Count("openai", key2, "ok") != 1 {
		t.Fatalf("want one hidden auth failure, one probe, then the backup key: %+v", st.Calls)
	}
	ks, _ := store.NewKeyState(e.Redis, nil).Load(context.Background(), []string{"oa"})
	if !strings.Contains(ks["oa"][llmclient.KeyID(testenv.Keys[0])].Disabled, "auth probe") {
		t.Fatalf("key not disabled as auth: %+v", ks)
	}
}

func TestEmptyServerErrorWithAGoodKeyIsAServerError(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Requests: 1, Fault: &chaosllm.Fault{Kind: chaosllm.KindEmpty}}, {}}}})
	id := e.Submit(t, e.Spec(step("solo", "")))
	wf := e.Wait(t, id, 10*time.Second, store.StateCompleted)
	st := e.Chaos.Snapshot()
	if wf.Steps[0].Attempts != 2 || st.Count("models", key1, "ok") != 1 || st.Count("openai", key2, "") != 0 {
		t.Fatalf("want a probe that clears the key, then a delayed retry on it: %+v %+v", wf.Steps[0], st.Calls)
	}
}

func TestContextLengthAndContentFallbacks(t *testing.T) {
	for _, c := range []struct {
		name   string
		fault  chaosllm.Fault
		target string
	}{
		{"context length", chaosllm.Fault{Status: 400, Code: "context_length_exceeded", Message: "maximum context length is 8192 tokens"}, "an/m-long"},
		{"content filter", chaosllm.Fault{Status: 400, Code: "content_filter", Message: "rejected by our safety system"}, "an/m-safe"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := c.fault
			e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Timelines: []chaosllm.Timeline{
				{Endpoint: "openai", Phases: []chaosllm.Phase{{Fault: &f}}}}}})
			id := e.Submit(t, e.Spec(step("fallback", "")))
			wf := e.Wait(t, id, 10*time.Second, store.StateCompleted)
			st := e.Chaos.Snapshot()
			if s := wf.Steps[0]; s.Target != c.target || s.Attempts != 1 || st.Count("openai", "", "status_400") != 1 || st.Count("anthropic", "", "ok") != 1 {
				t.Fatalf("step %+v calls %+v", s, st.Calls)
			}
		})
	}
	// without a fallback the step is dead-lettered at once
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Fault: &chaosllm.Fault{Status: 400, Code: "context_length_exceeded"}}}}})
	id := e.Submit(t, e.Spec(step("solo", "")))
	e.Wait(t, id, 10*time.Second, store.StateBlocked)
	if r := archivedReason(t, e, id); !strings.HasPrefix(r, "context_length:") {
		t.Fatalf("archived with %q", r)
	}
}

func TestNotFoundMovesToTheNextTarget(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Timelines: []chaosllm.Timeline{
		{Endpoint: "openai", Phases: []chaosllm.Phase{{Fault: &chaosllm.Fault{Status: 404}}}}}}})
	id := e.Submit(t, e.Spec(step("main", "")))
	wf := e.Wait(t, id, 10*time.Second, store.StateCompleted)
	if s := wf.Steps[0]; s.Target != "an/m-an" || s.Attempts != 1 {
		t.Fatalf("step %+v", s)
	}
}

func TestBadRequestArchivedWithItsReason(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Fault: &chaosllm.Fault{Status: 422, Message: "messages: field required"}}}}})
	id := e.Submit(t, e.Spec(step("main", "")))
	e.Wait(t, id, 10*time.Second, store.StateBlocked)
	r := archivedReason(t, e, id)
	if !strings.HasPrefix(r, "bad_request:") || !strings.Contains(r, "messages: field required") {
		t.Fatalf("archived with %q", r)
	}
	// a bad request is the request's fault: no other target is tried
	if n := e.Chaos.Snapshot().Total; n != 1 {
		t.Fatalf("%d calls, want 1", n)
	}
}

func TestNoRetryLayerMultipliesAnother(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Fault: &chaosllm.Fault{Status: 503}}}}})
	id := e.Submit(t, e.Spec(step("main", ", max_retries: 2")))
	wf := e.Wait(t, id, 15*time.Second, store.StateBlocked)
	// 3 attempts × 2 targets, one call each: no SDK retry, no key retry on a 5xx
	if st := e.Chaos.Snapshot(); st.Total != 6 || st.Count("openai", "", "status_503") != 3 || st.Count("anthropic", "", "status_503") != 3 || wf.Steps[0].Attempts != 3 {
		t.Fatalf("step %+v calls %+v", wf.Steps[0], st.Calls)
	}
	if r := archivedReason(t, e, id); !strings.HasPrefix(r, "server:") {
		t.Fatalf("archived with %q", r)
	}
}

func TestShutdownMidCallUsesNoRetry(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true, Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Requests: 1, Fault: &chaosllm.Fault{Kind: chaosllm.KindHang}}, {}}}})
	e.Config.Worker.ShutdownTimeout = config.Duration(100 * time.Millisecond)
	e.StartWorker(t)
	id := e.Submit(t, e.Spec(step("solo", "")))
	poll.Until(t, 5*time.Second, func() (bool, string) {
		return e.Chaos.Snapshot().Count("", "", "hang") > 0, "the call never started"
	})
	e.StopWorker(t)
	info, err := asynq.NewInspectorFromRedisClient(e.Redis).GetTaskInfo("default", tasks.TaskID(id, "s"))
	if err != nil || info.Retried != 0 || (info.State != asynq.TaskStatePending && info.State != asynq.TaskStateRetry) {
		t.Fatalf("after shutdown: %+v %v; want the step back in the queue with no retry used", info, err)
	}
	e.StartWorker(t)
	e.Wait(t, id, 10*time.Second, store.StateCompleted)
}

func TestTwoWorkersShareAKeyCooldown(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Timelines: []chaosllm.Timeline{
		{Key: testenv.Keys[0], Phases: []chaosllm.Phase{
			{Requests: 1, Fault: &chaosllm.Fault{Status: 429, RetryAfter: chaosllm.Duration(3 * time.Second)}}, {}}}}}})
	e.StartAnotherWorker(t) // a second replica on the same Redis

	start := time.Now()
	first := e.Submit(t, e.Spec(step("solo", "")))
	e.Wait(t, first, 10*time.Second, store.StateCompleted)
	var ids []string
	for i := 0; i < 10; i++ {
		ids = append(ids, e.Submit(t, e.Spec(step("solo", ""))))
	}
	for _, id := range ids {
		e.Wait(t, id, 10*time.Second, store.StateCompleted)
	}
	if time.Since(start) > 2500*time.Millisecond {
		t.Skip("too slow to finish inside the cooldown; the count below would not prove anything")
	}
	st := e.Chaos.Snapshot()
	if st.Count("openai", key1, "") != 1 || st.Count("openai", key2, "ok") != 11 {
		t.Fatalf("want the cooling key called once across both workers: %+v", st.Calls)
	}
}
