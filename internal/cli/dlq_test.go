package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq"
	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/cli"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/tasks"
)

func TestDeadLetterReviewRequeueAndDiscard(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Requests: 2, Fault: &chaosllm.Fault{Status: 400, Message: "unsupported parameter: top_k"}}, {}}}})
	vars, cfg := envFor(t, e)
	spec := writeFile(t, "h.yaml", hello)
	var ids []string
	for i := 0; i < 2; i++ {
		r := run(t, cli.Enqueue, vars, spec, "--config", cfg, "--input", "who=Lin", "--wait")
		if r.code != 1 || !strings.Contains(r.out, "blocked") {
			t.Fatalf("submit %d: exit %d %q %q", i, r.code, r.out, r.err)
		}
		ids = append(ids, strings.Fields(r.out)[1])
	}
	task := tasks.TaskID(ids[0], "greet")

	var dls []agentq.ParkedStep
	poll.Until(t, 5*time.Second, func() (bool, string) {
		r := run(t, cli.Enqueue, vars, "dlq", "list", "--config", cfg, "--json")
		if err := json.Unmarshal([]byte(r.out), &dls); err != nil {
			t.Fatalf("dlq list --json: %v %q %q", err, r.out, r.err)
		}
		return len(dls) >= 2, fmt.Sprintf("dead letters: %+v", dls)
	})
	if len(dls) != 2 || dls[0].Class != "bad_request" || dls[0].Attempts != 1 || !strings.Contains(dls[0].Reason, "unsupported parameter: top_k") {
		t.Fatalf("dead letters: %+v", dls)
	}
	r := run(t, cli.Enqueue, vars, "dlq", "list", "--config", cfg, "--class", "server")
	if r.code != 0 || strings.Contains(r.out, ids[0]) {
		t.Fatalf("class filter: %q", r.out)
	}
	r = run(t, cli.Enqueue, vars, "dlq", "list", "--config", cfg, "--class", "servr")
	if r.code != cli.ExitUsage || !strings.Contains(r.err, `unknown class "servr"`) || strings.Count(strings.TrimSpace(r.err), "\n") != 0 {
		t.Fatalf("a class that is not one: exit %d, %q; want one line and exit %d", r.code, r.err, cli.ExitUsage)
	}
	r = run(t, cli.Enqueue, vars, "dlq", "show", task, "--config", cfg)
	for _, want := range []string{"class     bad_request", "route solo", "Say hello to Lin", "unsupported parameter: top_k", "status 400"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("dlq show lacks %q:\n%s", want, r.out)
		}
	}
	// the cause is gone (the scenario's 400s are used up): requeue resumes the workflow
	r = run(t, cli.Enqueue, vars, "dlq", "requeue", task, "--config", cfg)
	if r.code != 0 {
		t.Fatalf("requeue: %d %q", r.code, r.err)
	}
	e.Wait(t, ids[0], 10*time.Second, store.StateCompleted)
	// discard ends the other workflow as failed
	r = run(t, cli.Enqueue, vars, "dlq", "discard", tasks.TaskID(ids[1], "greet"), "--config", cfg)
	if r.code != 0 {
		t.Fatalf("discard: %d %q", r.code, r.err)
	}
	if wf, _ := e.Store.Get(context.Background(), ids[1]); wf.State != store.StateFailed {
		t.Fatalf("after discard the workflow is %s", wf.State)
	}
	r = run(t, cli.Enqueue, vars, "dlq", "list", "--config", cfg, "--json")
	if strings.TrimSpace(r.out) != "[]" {
		t.Fatalf("dead letters left: %s", r.out)
	}
	r = run(t, cli.Enqueue, vars, "dlq", "requeue", "wf_nope:x", "--config", cfg)
	if r.code != 2 || !strings.Contains(r.err, "no such dead letter") {
		t.Fatalf("requeue of a missing task: %d %q", r.code, r.err)
	}
	r = run(t, cli.Enqueue, vars, "dlq", "requeue", "--config", cfg)
	if r.code != 2 {
		t.Fatalf("requeue without a task: %d %q", r.code, r.err)
	}
}

func TestKeysListAndEnable(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Timelines: []chaosllm.Timeline{
		{Key: testenv.Keys[0], Phases: []chaosllm.Phase{{Requests: 1, Fault: &chaosllm.Fault{Status: 429, Code: "insufficient_quota"}}, {}}}}}})
	vars, cfg := envFor(t, e)
	spec := writeFile(t, "h.yaml", hello)
	if r := run(t, cli.Enqueue, vars, spec, "--config", cfg, "--wait"); r.code != 0 {
		t.Fatalf("submit: %d %q", r.code, r.err)
	}
	r := run(t, cli.Enqueue, vars, "keys", "list", "--config", cfg)
	if !strings.Contains(r.out, "oa#1") || !strings.Contains(r.out, "disabled: quota") || strings.Contains(r.out, testenv.Keys[0]) {
		t.Fatalf("keys list:\n%s", r.out)
	}
	r = run(t, cli.Enqueue, vars, "keys", "enable", "oa#1", "--config", cfg)
	if r.code != 0 || !strings.Contains(r.out, "enabled oa#1") {
		t.Fatalf("keys enable: %d %q %q", r.code, r.out, r.err)
	}
	if r := run(t, cli.Enqueue, vars, "keys", "list", "--config", cfg); strings.Contains(r.out, "disabled") {
		t.Fatalf("still disabled:\n%s", r.out)
	}
	// within a second (the workers' refresh) the key is used again
	used := func() bool { return e.Chaos.Snapshot().Count("openai", chaosllm.KeyID(testenv.Keys[0]), "ok") > 0 }
	poll.Until(t, 5*time.Second, func() (bool, string) {
		if used() {
			return true, ""
		}
		run(t, cli.Enqueue, vars, spec, "--config", cfg, "--wait")
		return used(), fmt.Sprintf("the re-enabled key was not used: %+v", e.Chaos.Snapshot().Calls)
	})
	if r := run(t, cli.Enqueue, vars, "keys", "enable", "oa#9", "--config", cfg); r.code != 2 || !strings.Contains(r.err, "no key #9") {
		t.Fatalf("unknown key: %d %q", r.code, r.err)
	}
}
