package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// Redis goes away while a step's call is in flight and stays away past
// the step's lease (the answer is tried for 25s, until asynq's lease
// lapses): the answer is not thrown away. The worker
// says so (a log line, a "unrecorded" step event, which /metrics counts),
// keeps it in memory, and the step's next attempt records it without
// calling the provider again.
func TestAnswerReceivedWhileRedisIsAwayIsKeptForTheRetry(t *testing.T) {
	if testing.Short() {
		t.Skip("may wait for asynq's recoverer (60-120s) to bring the task back")
	}
	t.Parallel()
	srv := redistest.NewServer(t, "--save", "", "--appendonly", "yes", "--appendfsync", "always")
	srv.Start()
	var logs testenv.Buffer
	e := testenv.Start(t, testenv.Options{RedisAddr: srv.Addr(), LogTo: &logs, Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Latency: chaosllm.Fixed(2 * time.Second)}}}})
	id := e.Submit(t, e.Spec(step("solo", "")))
	poll.Until(t, 10*time.Second, func() (bool, string) {
		wf, err := e.Store.Get(context.Background(), id)
		return err == nil && wf.Steps[0].State == store.StepRunning, "the step never started"
	})
	srv.Stop()
	restarted := false
	defer func() {
		if !restarted {
			srv.Start()
		}
		if t.Failed() {
			t.Logf("worker logs:\n%s", logs.String())
		}
	}()
	timeout := time.After(45 * time.Second)
	for unrecorded := false; !unrecorded; {
		select {
		case ev := <-e.Events:
			unrecorded = ev.State == "unrecorded" && ev.Step == "s"
		case <-timeout:
			t.Fatal("no unrecorded answer reported while Redis was away")
		}
	}
	srv.Start()
	restarted = true
	wf := e.Wait(t, id, 150*time.Second, store.StateCompleted)
	if n := e.Chaos.Snapshot().Count("openai", "", "ok"); n != 1 {
		t.Fatalf("%d answers, want 1: the kept answer should have been recorded, not bought again", n)
	}
	if s := wf.Steps[0]; s.Attempts != 2 || !strings.HasSuffix(s.Output, " to: hello") {
		t.Fatalf("step %+v; want done on its second attempt with the first attempt's answer", s)
	}
	if !strings.Contains(logs.String(), "answer kept in memory") || !strings.Contains(logs.String(), "recording an answer kept in memory") {
		t.Fatal("the kept answer was not logged")
	}
}

// Redis goes away while a step's call is in flight and comes back within
// the step's lease, after the 5s a settle waits: the answer is recorded as
// soon as Redis answers, by the attempt that got it (it used to be kept in
// memory after 5s, and the step asked again wherever asynq handed it once
// the lease lapsed, 30s or more later).
func TestAnswerReceivedWhileRedisIsAwayIsRecordedWhenItComesBack(t *testing.T) {
	t.Parallel()
	srv := redistest.NewServer(t, "--save", "", "--appendonly", "yes", "--appendfsync", "always")
	srv.Start()
	e := testenv.Start(t, testenv.Options{RedisAddr: srv.Addr(), Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Latency: chaosllm.Fixed(time.Second)}}}})
	id := e.Submit(t, e.Spec(step("solo", "")))
	poll.Until(t, 10*time.Second, func() (bool, string) {
		wf, err := e.Store.Get(context.Background(), id)
		return err == nil && wf.Steps[0].State == store.StepRunning, "the step never started"
	})
	srv.Stop()
	poll.Until(t, 10*time.Second, func() (bool, string) {
		return e.Chaos.Snapshot().Count("openai", "", "ok") == 1, "the provider did not answer"
	})
	// the outage outlasts a settle's 5s, not the step's lease
	<-time.After(8 * time.Second)
	srv.Start()
	back := time.Now()
	wf := e.Wait(t, id, 20*time.Second, store.StateCompleted)
	if took := time.Since(back); took > 10*time.Second {
		t.Fatalf("completed %s after Redis came back: the answer waited for the lease to lapse", took)
	}
	if s := wf.Steps[0]; s.Attempts != 1 || e.Chaos.Snapshot().Count("openai", "", "ok") != 1 {
		t.Fatalf("step %+v after %d answers; want done by its first attempt with its one answer", s, e.Chaos.Snapshot().Count("openai", "", "ok"))
	}
	for len(e.Events) > 0 {
		if ev := <-e.Events; ev.State == "unrecorded" {
			t.Fatalf("the answer was reported unrecorded: %+v", ev)
		}
	}
}
