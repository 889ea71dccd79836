package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
)

// -inflight N: LLM calls take seconds, so a worker's throughput is its
// concurrency over the call latency. N calls in flight at -latency each,
// in one worker process of concurrency N, then in 4 processes of N/4,
// then in one of 500 for the per-step cost to compare: single-step
// workflows, -waves of them (waves × concurrency steps), submitted by 32
// producers before the workers start (the span measured, from the first
// step's start to the last one's end, is the workers'). Reported: steps/s
// against concurrency ÷ latency, the most the span allows at the rate the
// slots filled, the rate once they were full, each process's peak RSS,
// steps run more than once, asynq's retried and archived tasks (a lease
// that lapsed shows there), and Redis, worker and bench CPU per step. The
// bench waits on the queue's counts, not on each workflow, and reads the
// workflows once the measure has stopped.

// InflightResult is one -inflight run.
type InflightResult struct {
	Workers, Concurrency, Steps int // Concurrency is per worker
	Seconds, StepsPerSec        float64
	Target                      float64 // total concurrency ÷ latency
	PeakRSSMiB                  []float64
	RanTwice, Retried, Archived int
	RedisMicrosPerStep          float64
	RedisReadsPerStep           float64 // Cost's
	WorkerCPUMicrosPerStep      float64 // all worker processes, user + system
	// BenchCPUMicrosPerStep is this process's: chaosllm answering, the
	// producers submitting, the waits. ProducerCPUMicrosPerStep is its
	// part while the producers submitted (before the workers started),
	// ChaosCPUMicrosPerStep the rest: chaosllm answering, and the bench
	// starting the workers, waiting on the queue's counts once a second
	// and, with -workerprofile, fetching the profiles. All three are zero
	// when Redis's statistics cannot be reset (as Cost's figures are).
	BenchCPUMicrosPerStep, ProducerCPUMicrosPerStep, ChaosCPUMicrosPerStep float64
	// RedisSubmitMicrosPerStep is the part of Redis's CPU per step spent
	// while the producers submitted: the create scripts.
	RedisSubmitMicrosPerStep float64
	// Ceiling is the steps/s this machine's cores carry at the CPU per
	// step measured (worker, Redis and bench together).
	Ceiling float64
	// FillSeconds is how long the workers took to start as many steps as
	// they have slots (the first wave, all pending at the start): their
	// dequeue rate is slots over it.
	FillSeconds float64
	// FillBound is the most steps/s the span allows at the fill measured,
	// whatever the rate once every slot is busy (fillBound).
	FillBound float64
	// SustainedPerSec is the rate the slots sustain once full (sustained).
	SustainedPerSec float64
	// Connections is how many connections chaosllm accepted during the
	// run: about the slots when the workers reuse theirs, about the steps
	// when each call dials again.
	Connections int64
}

func runInflight(ctx context.Context, p params, out io.Writer, rdb *redis.Client, db redistest.DB, chaosURL string) error {
	dir, bin, err := buildCmd(ctx, "worker")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	runs := []struct{ workers, each int }{{1, p.inflight}, {4, p.inflight / 4}, {1, 500}}
	fmt.Fprintf(out, "bench: %d calls in flight at %s each (chaosllm), %d waves of single-step workflows\n", p.inflight, p.latency, p.waves)
	var res []InflightResult
	for i, r := range runs {
		x, err := measureInflight(ctx, p, bin, dir, r.workers, r.each, i == 0 && p.workerProfile != "", rdb, db, chaosURL)
		if err != nil {
			return fmt.Errorf("%d worker(s) of %d: %w", r.workers, r.each, err)
		}
		res = append(res, x)
		if i == 0 && p.workerProfile != "" {
			fmt.Fprintf(out, "bench: profiled (-workerprofile %s): this run's share, CPU and RSS include the profiles' own cost (a CPU profile over the fill, a collection, a goroutine dump)\n", p.workerProfile)
		}
		fmt.Fprintf(out, "bench: %d worker(s) × %d: %d steps in %.1fs, %.0f steps/s (target %.0f: %.0f%%; this machine's %d cores carry %.0f at the CPU per step measured), peak RSS %v MiB, %d ran twice, asynq retried %d archived %d, CPU µs/step: Redis %.0f (the submits' %.0f%s), workers %.0f, bench %.0f (producers %.0f, chaosllm and the waits %.0f); %d connections opened to chaosllm; the first %d steps started within %.1fs (the span allows at most %.0f steps/s, %.0f%%, at that fill); once the slots were full: %s\n",
			x.Workers, x.Concurrency, x.Steps, x.Seconds, x.StepsPerSec, x.Target, 100*x.StepsPerSec/x.Target, runtime.NumCPU(), x.Ceiling, x.PeakRSSMiB, x.RanTwice, x.Retried, x.Archived,
			x.RedisMicrosPerStep, x.RedisSubmitMicrosPerStep, readsText(x.RedisReadsPerStep), x.WorkerCPUMicrosPerStep, x.BenchCPUMicrosPerStep, x.ProducerCPUMicrosPerStep, x.ChaosCPUMicrosPerStep, x.Connections, x.Workers*x.Concurrency, x.FillSeconds, x.FillBound, 100*x.FillBound/x.Target, x.sustainedText(true))
	}
	fmt.Fprintf(out, "\n| workers × concurrency | steps | steps/s | concurrency ÷ latency | share | the fill's bound | once full | CPU ceiling steps/s | peak RSS MiB | ran twice | retried | archived | Redis µs/step | ratio to 1 × 500 | worker CPU µs/step | producers, chaosllm CPU µs/step | connections opened |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |\n")
	base := res[len(res)-1].RedisMicrosPerStep
	for _, x := range res {
		fmt.Fprintf(out, "| %d × %d | %d | %.0f | %.0f | %.1f%% | %.1f%% | %s | %.0f | %v | %d | %d | %d | %.0f | %.2f | %.0f | %.0f, %.0f | %d |\n", x.Workers, x.Concurrency, x.Steps, x.StepsPerSec, x.Target,
			100*x.StepsPerSec/x.Target, 100*x.FillBound/x.Target, x.sustainedText(false), x.Ceiling, x.PeakRSSMiB, x.RanTwice, x.Retried, x.Archived, x.RedisMicrosPerStep, x.RedisMicrosPerStep/base, x.WorkerCPUMicrosPerStep, x.ProducerCPUMicrosPerStep, x.ChaosCPUMicrosPerStep, x.Connections)
	}
	return nil
}

const inflightSpec = "name: inflight\ndefaults: { route: bench }\nsteps:\n  - { id: call, prompt: \"call {{ .Input.n }}\" }\n"

func measureInflight(ctx context.Context, p params, bin, dir string, workers, each int, profile bool, rdb *redis.Client, db redistest.DB, chaosURL string) (InflightResult, error) {
	x := InflightResult{Workers: workers, Concurrency: each, Steps: p.waves * workers * each,
		Target: float64(workers*each) / p.latency.Seconds()}
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		return x, err
	}
	// the provider's timeout well over the latency: a call in flight
	// waits for its answer, however many are in flight
	cfgPath := filepath.Join(dir, fmt.Sprintf("agentq-%d.yaml", each))
	ca := ""
	if p.chaosCA != "" {
		ca = fmt.Sprintf(", ca_file: %q", p.chaosCA)
	}
	// -workerprofile: the widest worker serves its profiles on a port of
	// its own
	profileAddr, wextra := "", ""
	if profile {
		addr, err := freeAddr()
		if err != nil {
			return x, err
		}
		profileAddr, wextra = addr, fmt.Sprintf(", metrics_addr: %q, profiling: true", addr)
	}
	cfg := fmt.Sprintf(`redis: { addr: %q, db: %d }
worker: { concurrency: %d, shutdown_timeout: 2m%s }
providers:
  - { name: chaos, kind: openai, base_url: "${CHAOS}/v1", keys: ["bench-key"], timeout: %s%s }
routes:
  bench: { targets: [ { provider: chaos, model: bench-model } ] }
retention: 1h
`, db.Addr, db.DB, each, wextra, 6*p.latency+30*time.Second, ca)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return x, err
	}
	// every workflow is submitted before the workers start, so that the
	// span measured is theirs, not the producers'
	client := producer.NewClient(rdb, producer.ClientOptions{Limits: spec.DefaultLimits(), Retention: time.Hour, Routes: []string{"bench"}, SkipWorkerCheck: true})
	wspec, err := client.Parse("inflight.yaml", []byte(inflightSpec))
	if err != nil {
		return x, err
	}
	m := &meter{rdb: rdb, steps: x.Steps}
	m.start(ctx)
	conns := chaosConns.Opened()
	ids := make([]string, x.Steps)
	errs := make(chan error, 32)
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < x.Steps; i += 32 {
				s := *wspec
				s.Input = map[string]any{"n": i}
				id, err := client.Submit(ctx, &s)
				if err != nil {
					errs <- err
					return
				}
				ids[i] = id
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return x, err
	}
	m.mark(ctx) // the producers' share of the CPU ends here
	var cmds []*exec.Cmd
	defer func() {
		for _, c := range cmds {
			if c.ProcessState == nil {
				_ = c.Process.Kill()
				_ = c.Wait()
			}
		}
	}()
	for range workers {
		c := exec.Command(bin, "--config", cfgPath, "--log-level", "error")
		c.Env = append(os.Environ(), "CHAOS="+chaosURL)
		c.Stderr = os.Stderr
		if err := c.Start(); err != nil {
			return x, err
		}
		cmds = append(cmds, c)
	}
	if err := waitForWorkers(ctx, rdb, workers); err != nil {
		return x, err
	}
	profiled := make(chan error, 1)
	if profileAddr != "" {
		go func() { profiled <- profileWorker(ctx, profileAddr, p.workerProfile, p.latency) }()
	} else {
		profiled <- nil
	}
	// wait until the queue has no step left to run, asking asynq's counts
	// once a second: waiting on each workflow would poll Redis thousands
	// of times during the run, and the measure would charge that CPU to
	// the steps; every workflow is read after the measure stops
	if err := waitDrained(ctx, rdb, 20*p.latency+5*time.Minute); err != nil {
		return x, err
	}
	m.stop(ctx)
	x.Connections = chaosConns.Opened() - conns
	if err := <-profiled; err != nil {
		return x, fmt.Errorf("-workerprofile: %w", err)
	}
	sem := make(chan struct{}, 64)
	var mu sync.Mutex
	var first, last time.Time
	var starts, ends []time.Time
	var werr error
	for _, id := range ids {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			wf, err := client.Status(ctx, id)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				werr = fmt.Errorf("reading %s: %w", id, err)
			case wf.State != store.StateCompleted:
				werr = fmt.Errorf("workflow %s is %s", id, wf.State)
			default:
				s := wf.Steps[0]
				if s.Attempts > 1 {
					x.RanTwice++
				}
				if s.StartedAt == nil || s.FinishedAt == nil {
					werr = fmt.Errorf("workflow %s completed without its step's start or end time", id)
					return
				}
				starts, ends = append(starts, *s.StartedAt), append(ends, *s.FinishedAt)
				if first.IsZero() || s.StartedAt.Before(first) {
					first = *s.StartedAt
				}
				if s.FinishedAt.After(last) {
					last = *s.FinishedAt
				}
			}
		}()
	}
	wg.Wait()
	if werr != nil {
		return x, werr
	}
	x.Seconds = last.Sub(first).Seconds()
	slices.SortFunc(starts, time.Time.Compare)
	if n := workers * each; len(starts) >= n {
		x.FillSeconds = starts[n-1].Sub(starts[0]).Seconds()
		offsets := make([]float64, n)
		for i, st := range starts[:n] {
			offsets[i] = st.Sub(starts[0]).Seconds()
		}
		x.FillBound = fillBound(offsets, x.Steps, p.latency.Seconds())
	}
	x.SustainedPerSec = sustained(starts, ends, workers*each)
	// the first wave's calls start together and the last wave's end
	// together: steps over the span of the waves
	x.StepsPerSec = float64(x.Steps) / x.Seconds
	x.RedisMicrosPerStep, x.BenchCPUMicrosPerStep = m.cost.RedisCPUMicros, m.cost.ProcCPUMicros
	x.RedisReadsPerStep = m.cost.RedisReadsPerStep
	x.ProducerCPUMicrosPerStep, x.RedisSubmitMicrosPerStep = m.cost.LeadProcCPUMicros, m.cost.LeadRedisCPUMicros
	x.ChaosCPUMicrosPerStep = x.BenchCPUMicrosPerStep - x.ProducerCPUMicrosPerStep
	if qi, err := asynq.NewInspectorFromRedisClient(rdb).GetQueueInfo("default"); err == nil {
		x.Retried, x.Archived = qi.Retry+int(qi.FailedTotal), qi.Archived
	}
	var cpu time.Duration
	for _, c := range cmds {
		x.PeakRSSMiB = append(x.PeakRSSMiB, peakRSS(c.Process.Pid))
		_ = c.Process.Signal(syscall.SIGTERM)
		if err := c.Wait(); err != nil {
			return x, fmt.Errorf("worker exit: %w", err)
		}
		ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage)
		if !ok {
			return x, fmt.Errorf("no rusage on this platform")
		}
		cpu += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	x.WorkerCPUMicrosPerStep = float64(cpu.Microseconds()) / float64(x.Steps)
	x.Ceiling = float64(runtime.NumCPU()) * 1e6 / (x.WorkerCPUMicrosPerStep + x.RedisMicrosPerStep + x.BenchCPUMicrosPerStep)
	return x, nil
}

// waitDrained waits, up to limit, until the default queue has no task
// pending, running, scheduled or waiting for a retry.
func waitDrained(ctx context.Context, rdb *redis.Client, limit time.Duration) error {
	insp := asynq.NewInspectorFromRedisClient(rdb)
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		qi, err := insp.GetQueueInfo("default")
		if err == nil && qi.Pending+qi.Active+qi.Scheduled+qi.Retry == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the queue did not drain in %s (last read: %+v, %v)", limit, qi, err)
		case <-t.C:
		}
	}
}

// waitForWorkers waits until n workers advertise themselves.
func waitForWorkers(ctx context.Context, rdb *redis.Client, n int) error {
	deadline := time.Now().Add(time.Minute)
	fleet := store.NewFleet(rdb, nil)
	for {
		live, err := fleet.Live(ctx)
		if err == nil && len(live) >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d workers live after a minute (%v)", len(live), n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// readsText is Redis's reads from its clients a step for a report's
// line, nothing when Redis did not say (a server without the field).
func readsText(reads float64) string {
	if reads <= 0 {
		return ""
	}
	return fmt.Sprintf("; %.1f reads from clients a step", reads)
}
