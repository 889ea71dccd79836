package cli_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/cli"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// enqueue --wait keeps waiting while Redis restarts (the workflow goes on
// and completes: exit 0), and exits 3, not 1, when Redis stays away past
// --wait-outage: it never reports a workflow failed that it could not read.
func TestWaitKeepsWaitingThroughARedisOutage(t *testing.T) {
	srv := redistest.NewServer(t, "--save", "", "--appendonly", "yes")
	srv.Start()
	e := testenv.Start(t, testenv.Options{NoWorker: true, RedisAddr: srv.Addr()})
	vars, cfg := envFor(t, e)
	vars["AGENTQ_REDIS_DIAL_TIMEOUT"] = "500ms"
	spec := writeFile(t, "hello.yaml", hello)

	wait := func(args ...string) (chan int, *testenv.Buffer) {
		var out, errOut testenv.Buffer
		env := cli.Env{Out: &out, Err: &errOut, LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }}
		code := make(chan int, 1)
		go func() {
			code <- cli.Run(cli.Enqueue(env), env, append([]string{spec, "--config", cfg, "--no-check", "--input", "who=Ada", "--wait"}, args...))
		}()
		return code, &errOut
	}

	// a short outage: still waiting when Redis is back, then done
	code, errOut := wait()
	poll.Until(t, 10*time.Second, func() (bool, string) {
		ws, err := e.Store.List(t.Context(), "", 10)
		return err == nil && len(ws) == 1, "the workflow was not submitted"
	})
	srv.Stop()
	poll.Until(t, 10*time.Second, func() (bool, string) {
		return strings.Contains(errOut.String(), "still waiting"), fmt.Sprintf("no word of the outage: %q", errOut.String())
	})
	select {
	case c := <-code:
		t.Fatalf("enqueue --wait exited %d while Redis was away: %s", c, errOut.String())
	default:
	}
	srv.Start()
	e.StartWorker(t)
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("exit %d after the outage, stderr %s", c, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("enqueue --wait did not end after Redis came back: %s", errOut.String())
	}
	ws, err := e.Store.List(t.Context(), store.StateCompleted, 10)
	if err != nil || len(ws) != 1 {
		t.Fatalf("completed workflows %v %v", ws, err)
	}

	// an outage past --wait-outage: exit 3 saying so
	e.StopWorker(t)
	code, errOut = wait("--wait-outage", "2s")
	poll.Until(t, 10*time.Second, func() (bool, string) {
		ws, err := e.Store.List(t.Context(), "", 10)
		return err == nil && len(ws) == 2, "the second workflow was not submitted"
	})
	srv.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	select {
	case c := <-code:
		if c != 3 || !strings.Contains(errOut.String(), "--wait-outage") {
			t.Fatalf("exit %d, stderr %q; want 3 naming --wait-outage", c, errOut.String())
		}
	case <-ctx.Done():
		t.Fatal("enqueue --wait did not give up past --wait-outage")
	}
}
