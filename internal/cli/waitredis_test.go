package cli_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/cli"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/testenv"
)

func TestWorkerWaitsForRedis(t *testing.T) {
	srv := redistest.NewServer(t, "--save", "", "--appendonly", "no")
	cfg := writeFile(t, "agentq.yaml", testenv.ConfigYAML)
	vars := map[string]string{"CHAOS": "http://127.0.0.1:1", "K1": testenv.Keys[0], "K2": testenv.Keys[1],
		"AGENTQ_REDIS_ADDR": srv.Addr(), "AGENTQ_REDIS_DIAL_TIMEOUT": "1s"}

	// without the flag: exit 3 at once, one line naming where
	r := run(t, cli.Worker, vars, "--config", cfg)
	if r.code != 3 || !strings.Contains(r.err, "cannot reach Redis at "+srv.Addr()) {
		t.Fatalf("exit %d, stderr %q", r.code, r.err)
	}
	// with a limit: tries with backoff, then exit 3 saying it gave up
	start := time.Now()
	r = run(t, cli.Worker, vars, "--config", cfg, "--wait-for-redis=3s")
	if r.code != 3 || !strings.Contains(r.err, "gave up after waiting 3s") || time.Since(start) < 3*time.Second {
		t.Fatalf("exit %d after %s, stderr %q", r.code, time.Since(start), r.err)
	}
	if !strings.Contains(r.err, "Redis is not answering yet; trying again") {
		t.Fatalf("no log of the retries: %q", r.err)
	}

	// alone: waits until Redis comes up, then runs
	var out, errOut testenv.Buffer
	env := cli.Env{Out: &out, Err: &errOut, LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }}
	cmd := cli.Worker(env)
	cmd.SetArgs([]string{"--config", cfg, "--wait-for-redis"})
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	poll.Until(t, 10*time.Second, func() (bool, string) {
		return strings.Contains(errOut.String(), "not answering yet"), fmt.Sprintf("the worker did not report waiting: %q", errOut.String())
	})
	srv.Start()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	poll.Until(t, 20*time.Second, func() (bool, string) {
		if rdb.ZCard(ctx, "asynq:servers").Val() > 0 {
			return true, ""
		}
		select {
		case err := <-done:
			t.Fatalf("worker ended: %v\n%s", err, errOut.String())
		default:
		}
		return false, "the worker did not register with asynq within 20s of Redis coming up:\n" + errOut.String()
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("worker: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("worker did not stop")
	}
}
