package agentq_test

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/testenv"
)

// configFor is the test configuration on the Redis at addr (its provider
// is never called).
func configFor(t *testing.T, addr string) agentq.Config {
	t.Helper()
	vars := map[string]string{"CHAOS": "http://127.0.0.1:1", "K1": testenv.Keys[0], "K2": testenv.Keys[1], "AGENTQ_REDIS_ADDR": addr, "AGENTQ_REDIS_DB": strconv.Itoa(0)}
	cfg, err := agentq.ParseConfigWith("testenv.yaml", []byte(testenv.ConfigYAML), func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// A worker started before its Redis (a pod whose Redis is still coming
// up) waits for it with WithWaitForRedis, then serves: a workflow
// submitted once Redis is up runs on it.
func TestTheWorkerWaitsForRedis(t *testing.T) {
	srv := redistest.NewServer(t) // its port chosen, not started yet
	cfg := configFor(t, srv.Addr())
	var logs testenv.Buffer
	ready := make(chan struct{})
	w, err := agentq.NewWorker(cfg, agentq.WithWaitForRedis(time.Minute), agentq.WithReady(func() { close(ready) }),
		agentq.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	w.HandleStep("double", func(ctx context.Context, s *agentq.Step) (any, error) {
		var args struct{ N int }
		if err := s.Args(&args); err != nil {
			return nil, err
		}
		return 2 * args.N, nil
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	poll.Until(t, 10*time.Second, func() (bool, string) {
		select {
		case err := <-done:
			t.Fatalf("Run returned while Redis was down: %v", err)
		default:
		}
		return strings.Contains(logs.String(), "Redis is not answering yet"), "the worker has not logged a failed try: " + logs.String()
	})
	srv.Start()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Run: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatalf("the worker did not start within 30s of Redis; its log:\n%s", logs.String())
	}
	c, err := agentq.NewClient(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sp, err := c.Parse("double.yaml", []byte("name: double\nsteps:\n  - { id: d, run: double, with: { n: 21 } }\n"))
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.Submit(ctx, sp)
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	wf, err := c.Wait(wctx, id, 0)
	if err != nil || wf.State != agentq.StateCompleted || wf.Steps[0].Output != "42" {
		t.Fatalf("the workflow: %+v, %v", wf, err)
	}
}

// Without the option a worker whose Redis does not answer fails at once;
// with a short wait it tries for that long, then gives up saying so.
func TestTheWorkerGivesUpOnRedis(t *testing.T) {
	srv := redistest.NewServer(t) // never started
	for _, c := range []struct {
		opts []agentq.WorkerOption
		want string
		min  time.Duration
	}{
		{nil, "", 0},
		{[]agentq.WorkerOption{agentq.WithWaitForRedis(1500 * time.Millisecond)}, "gave up after waiting 1.5s", 1500 * time.Millisecond},
	} {
		w, err := agentq.NewWorker(configFor(t, srv.Addr()), c.opts...)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err = w.Run(t.Context())
		took := time.Since(start)
		if err == nil || !strings.Contains(err.Error(), srv.Addr()) || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("Run: %v, want an error naming %s and saying %q", err, srv.Addr(), c.want)
		}
		if took < c.min || took > c.min+10*time.Second {
			t.Fatalf("Run returned after %s, want about %s", took, c.min)
		}
	}
}
