package engine_test

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/internal/worker"
)

// workerEnv makes this test binary run as a worker process (see TestMain).
const workerEnv = "AGENTQ_TEST_WORKER"

// workerChild runs a real worker until SIGTERM, then exits 0. With
// _CRASH_BEFORE_ENQUEUE it SIGKILLs itself between a settle that made a
// step ready and that step's enqueue: the worst moment of a fan-in.
func workerChild() {
	var db redistest.DB
	db.Addr = os.Getenv(workerEnv + "_REDIS")
	db.DB, _ = strconv.Atoi(os.Getenv(workerEnv + "_DB"))
	cfg, err := testenv.Config(os.Getenv(workerEnv+"_CHAOS"), db)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cfg.Worker.Concurrency, _ = strconv.Atoi(os.Getenv(workerEnv + "_CONCURRENCY"))
	cfg.MCPServers = childMCPServers()
	if os.Getenv(workerEnv+"_CLUSTER") != "" {
		cfg.Redis.Cluster = []string{db.Addr}
	}
	if n, err := strconv.Atoi(os.Getenv(workerEnv + "_SHARDS")); err == nil {
		cfg.Queues = map[string]config.Queue{"default": {Shards: n}}
	}
	if l, err := time.ParseDuration(os.Getenv(workerEnv + "_PROVIDER_TIMEOUT")); err == nil {
		for i := range cfg.Providers {
			cfg.Providers[i].Timeout = config.Duration(l)
		}
	}
	if l, err := time.ParseDuration(os.Getenv(workerEnv + "_KEY_LEASE")); err == nil {
		cfg.Worker.KeyLease = config.Duration(l)
	}
	poll, err := time.ParseDuration(cmp.Or(os.Getenv(workerEnv+"_POLL"), "50ms"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	o := worker.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler), Random: func() float64 { return 0 },
		TaskCheckInterval: poll, DelayedTaskCheckInterval: 100 * time.Millisecond,
		Ready: func() { fmt.Println("ready") }}
	if os.Getenv(workerEnv+"_TOOLS") != "" {
		o.Tools = childTools()
	}
	if os.Getenv(workerEnv+"_CRASH_AFTER_CHILD") != "" {
		o.AfterChild = func(_, _, _ string) {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL) // the child exists; the parent step's task has not ended
			select {}
		}
	}
	if os.Getenv(workerEnv+"_TOOLS") == "" && os.Getenv(workerEnv+"_CHILD_STEPS") != "" {
		o.Steps = childSteps()
	}
	if os.Getenv(workerEnv+"_CRASH_BEFORE_ENQUEUE") != "" {
		o.BeforeEnqueue = func(_, _ string, ready []string) {
			if len(ready) > 0 {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL) // no defers, no goodbyes
				select {}
			}
		}
	}
	err = worker.Run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(0)
}

type proc struct {
	cmd  *exec.Cmd
	done chan error
}

// workerCmd is this test binary as a worker process on e's Redis and chaosllm.
func workerCmd(e *testenv.Env, concurrency int, extraEnv ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), workerEnv+"=1", workerEnv+"_REDIS="+e.DB.Addr, workerEnv+"_DB="+strconv.Itoa(e.DB.DB),
		workerEnv+"_CHAOS="+e.URL, workerEnv+"_CONCURRENCY="+strconv.Itoa(concurrency)), extraEnv...)
	return cmd
}

func startWorkerProcess(t *testing.T, e *testenv.Env, concurrency int, extraEnv ...string) *proc {
	t.Helper()
	cmd := workerCmd(e, concurrency, extraEnv...)
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan error, 1)}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "ready" {
				close(ready)
			}
		}
		p.done <- cmd.Wait()
	}()
	select {
	case <-ready:
	case err := <-p.done:
		t.Fatalf("worker process exited: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("worker process not ready within 20s")
	}
	t.Cleanup(func() { p.stop(t) })
	return p
}

// stop sends SIGTERM and waits for a clean exit.
func (p *proc) stop(t *testing.T) {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("worker process after SIGTERM: %v", err)
		}
	case <-time.After(60 * time.Second):
		_ = p.cmd.Process.Kill()
		t.Error("worker process did not stop within 60s of SIGTERM")
	}
}

// Steps at 200ms each: one worker process of concurrency 10 never has
// more than 10 calls in flight; three of them have more than 20 at once
// (the work spreads over the processes), every workflow completes and no
// step is called twice. (How much faster three are is the bench's to
// show; the durations are logged.)
func TestMoreWorkerProcessesRunMoreAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs worker processes for a few seconds")
	}
	e := testenv.Start(t, testenv.Options{NoWorker: true, Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Latency: chaosllm.Fixed(200 * time.Millisecond)}}}})
	const concurrency, n = 10, 120
	batch := func() time.Duration {
		start := time.Now()
		var ids []string
		for i := 0; i < n; i++ {
			ids = append(ids, e.Submit(t, e.Spec(step("solo", ""))))
		}
		for _, id := range ids {
			e.Wait(t, id, 60*time.Second, store.StateCompleted)
		}
		return time.Since(start)
	}
	var procs []*proc
	procs = append(procs, startWorkerProcess(t, e, concurrency))
	one := batch()
	if peak := e.Chaos.Snapshot().PeakInFlight["openai"]; peak > concurrency {
		t.Fatalf("one worker process of concurrency %d had %d calls in flight", concurrency, peak)
	}
	for i := 0; i < 2; i++ {
		procs = append(procs, startWorkerProcess(t, e, concurrency))
	}
	three := batch()
	calls := e.Chaos.Snapshot().Count("openai", "", "ok")
	t.Logf("%d steps at 200ms, concurrency %d per worker: 1 process %s (%.0f steps/s), 3 processes %s (%.0f steps/s)",
		n, concurrency, one.Round(time.Millisecond), n/one.Seconds(), three.Round(time.Millisecond), n/three.Seconds())
	if calls != 2*n {
		t.Fatalf("chaosllm answered %d calls for %d steps", calls, 2*n)
	}
	if peak := e.Chaos.Snapshot().PeakInFlight["openai"]; peak <= 2*concurrency {
		t.Fatalf("3 worker processes of concurrency %d had at most %d calls in flight at once (want more than %d)", concurrency, peak, 2*concurrency)
	}
	for _, p := range procs {
		p.stop(t)
	}
}

// SIGTERM while a step's call is in flight: the worker lets it finish
// (shutdown_timeout), the workflow completes, and the step is called once.
func TestSIGTERMMidStepLosesNothing(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true, Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Latency: chaosllm.Fixed(time.Second)}}}})
	p := startWorkerProcess(t, e, 4)
	id := e.Submit(t, e.Spec(step("solo", "")))
	deadline := time.Now().Add(10 * time.Second)
	for {
		wf, _ := e.Store.Get(context.Background(), id)
		if wf.Steps[0].State == store.StepRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the step never started")
		}
		time.Sleep(10 * time.Millisecond) //nolint: polling with a deadline
	}
	p.stop(t) // returns once the process exited
	wf, _ := e.Store.Get(context.Background(), id)
	if wf.State != store.StateCompleted || e.Chaos.Snapshot().Count("openai", "", "ok") != 1 {
		t.Fatalf("after SIGTERM: workflow %s, %d answers; want completed with one call", wf.State, e.Chaos.Snapshot().Count("openai", "", "ok"))
	}
	// another worker finds nothing left to do and calls nothing
	e.StartWorker(t)
	waitQueueEmpty(t, e)
	if n := e.Chaos.Snapshot().Total; n != 1 {
		t.Fatalf("%d calls in all, want 1", n)
	}
}
