package cli_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/cli"
	"github.com/agentq/agentq/internal/dashboard"
	"github.com/agentq/agentq/internal/dashcli"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/tasks"
)

// enqueue --server drives the same workflow through a dashboard's HTTP API,
// without reaching Redis itself.
func TestEnqueueThroughTheDashboardAPI(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Requests: 1, Fault: &chaosllm.Fault{Status: 400}}, {}}}})
	srv, err := dashboard.New(t.Context(), dashboard.Options{Config: e.Config, Redis: e.Redis, Token: "api-token",
		AsynqOpt: asynq.RedisClientOpt{Addr: e.DB.Addr, DB: e.DB.DB}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer func() { hs.Close(); srv.Close() }()
	// Redis is unreachable for the command itself: only the server is used
	vars := map[string]string{"AGENTQ_SERVER": hs.URL, "AGENTQ_REDIS_ADDR": "127.0.0.1:1", "AGENTQ_DASHBOARD_TOKEN": "api-token"}
	spec := writeFile(t, "h.yaml", hello)

	r := run(t, cli.Enqueue, vars, spec, "--input", "who=Ada", "--wait")
	if r.code != 1 || !strings.Contains(r.out, "blocked") {
		t.Fatalf("first run (the 400): exit %d %q %q", r.code, r.out, r.err)
	}
	id := strings.Fields(r.out)[1]
	task := tasks.TaskID(id, "greet")
	// the step is settled dead first (what --wait returned on), its task
	// archived by asynq just after
	poll.Until(t, 10*time.Second, func() (bool, string) {
		r = run(t, cli.Enqueue, vars, "dlq", "show", task)
		return r.code == 0 && strings.Contains(r.out, "Say hello to Ada"), fmt.Sprintf("dlq show: %d %q %q", r.code, r.out, r.err)
	})
	noToken := map[string]string{"AGENTQ_SERVER": hs.URL}
	if r = run(t, cli.Enqueue, noToken, "dlq", "requeue", task); r.code != 2 || !strings.Contains(r.err, "401") {
		t.Fatalf("requeue without the token: %d %q", r.code, r.err)
	}
	if r = run(t, cli.Enqueue, vars, "dlq", "requeue", task); r.code != 0 {
		t.Fatalf("requeue: %d %q", r.code, r.err)
	}
	if r = run(t, cli.Enqueue, vars, spec, "--wait"); r.code != 0 || !strings.Contains(r.out, "completed") {
		t.Fatalf("second run: %d %q %q", r.code, r.out, r.err)
	}
	if r = run(t, cli.Enqueue, vars, "result", id); r.code != 0 || !strings.HasPrefix(r.out, "chaosllm answer") {
		t.Fatalf("result of the requeued workflow: %d %q %q", r.code, r.out, r.err)
	}
	if r = run(t, cli.Enqueue, vars, "status", "wf_nope"); r.code != 2 || !strings.Contains(r.err, "not found") {
		t.Fatalf("status of a missing workflow: %d %q", r.code, r.err)
	}
	// a spec the server refuses is refused on the submitter's own file and
	// line (the server's request body is not that file)
	bad := writeFile(t, "bad.yaml", strings.Replace(hello, "route: solo", "route: nope", 1))
	if r = run(t, cli.Enqueue, map[string]string{"AGENTQ_SERVER": hs.URL, "AGENTQ_DASHBOARD_TOKEN": "api-token"}, bad); r.code != 2 ||
		!strings.Contains(r.err, bad+`:4: steps[0] (greet).route: unknown route "nope"`) || strings.Contains(r.err, "request body") {
		t.Fatalf("a spec the server refuses: %d %q", r.code, r.err)
	}
	unserved := writeFile(t, "unserved.yaml", "name: code\nsteps:\n  - { id: a, route: solo, prompt: hi }\n  - { id: b, run: nobody, depends_on: [a] }\n")
	if r = run(t, cli.Enqueue, vars, unserved); r.code != 2 || !strings.Contains(r.err, unserved+`:4: steps[1] (b)`) {
		t.Fatalf("a step no live worker serves, through the server: %d %q", r.code, r.err)
	}
	// --deadline reaches the server
	if r = run(t, cli.Enqueue, vars, spec, "--deadline", "1h", "--json"); r.code != 0 || !strings.Contains(r.out, `"deadline_at"`) {
		t.Fatalf("--deadline through the server: %d %q %q", r.code, r.out, r.err)
	}
	if r = run(t, cli.Enqueue, map[string]string{"AGENTQ_SERVER": "http://127.0.0.1:1"}, "status", id); r.code != 3 {
		t.Fatalf("unreachable server: %d %q", r.code, r.err)
	}
}

// Without a token the dashboard listens on loopback only, and says so.
func TestDashboardWithoutATokenBindsLoopback(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	vars, cfgPath := envFor(t, e)
	var out, errOut testenv.Buffer
	env := cli.Env{Out: &out, Err: &errOut, LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }}
	cmd := dashcli.Command(env)
	cmd.SetArgs([]string{"--config", cfgPath, "--addr", "0.0.0.0:0"})
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	defer cancel() // also when the wait below fails
	poll.Until(t, 10*time.Second, func() (bool, string) {
		return strings.Contains(out.String(), "dashboard on http://"), fmt.Sprintf("no address printed: %q %q", out.String(), errOut.String())
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "dashboard on http://127.0.0.1:") || !strings.Contains(errOut.String(), "AGENTQ_DASHBOARD_TOKEN is not set: listening on 127.0.0.1:0 (loopback) only") {
		t.Fatalf("out %q err %q", out.String(), errOut.String())
	}
}
