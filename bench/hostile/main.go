// Command hostile measures what a hostile provider costs a worker process:
// its resident memory while every call meets a body that never ends, or a
// huge error body, against the same worker's idle RSS. Not part of make
// test; `make bench` runs it.
//
//	go run ./bench/hostile -window 30s -parallel 8
//
// It starts a throwaway redis-server (the test harness's), chaosllm over
// real HTTP, and cmd/worker as a child process whose one provider has a
// timeout of -window; it keeps -parallel steps calling that provider for
// the whole window, samples the child's VmRSS every 50 ms, and prints
// idle RSS, peak RSS and the difference per fault. It exits 1 when a
// fault's peak is more than -budget over idle.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
)

const config = `
redis: { addr: %q, db: %d }
worker: { concurrency: %d }
providers:
  - { name: hostile, kind: openai, base_url: "%s/v1", keys: ["sk-hostile-bench-0123456789abcdef"], timeout: %s }
routes:
  bench: { targets: [ { provider: hostile, model: m } ] }
resilience:
  retry: { base: 200ms, factor: 1, max_delay: 200ms }
  breaker: { consecutive_failures: 1000000, error_rate: 1, min_calls: 1000000 }
retention: 1h
`

type result struct {
	fault            string
	idleMiB, peakMiB float64
	calls            int
}

func main() {
	window := flag.Duration("window", 30*time.Second, "the provider timeout, and how long each fault is kept up")
	parallel := flag.Int("parallel", 8, "steps calling the hostile provider at once")
	budget := flag.Float64("budget", 64, "MiB a fault may add to the idle RSS")
	flag.Parse()
	if err := run(*window, *parallel, *budget); err != nil {
		fmt.Fprintln(os.Stderr, "hostile:", err)
		os.Exit(1)
	}
}

func run(window time.Duration, parallel int, budget float64) error {
	ctx := context.Background()
	db, rdb, err := redistest.Open()
	if err != nil {
		return err
	}
	defer redistest.Stop()
	dir, err := os.MkdirTemp("", "agentq-hostile-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "agentq-worker")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/worker").CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/worker: %w: %s", err, out)
	}
	faults := []chaosllm.Fault{
		{Kind: chaosllm.KindEndless},              // a 200 answer that never ends
		{Kind: chaosllm.KindEndless, Status: 503}, // an error body that never ends
		{Kind: chaosllm.KindHuge, Size: 50 << 20}, // a 50 MiB 500
	}
	var results []result
	for _, f := range faults {
		r, err := measure(ctx, bin, dir, db, rdb, f, window, parallel)
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	fmt.Printf("worker RSS while every call meets a hostile body for %s (%d steps at once)\n\n", window, parallel)
	fmt.Println("| fault | provider calls | idle RSS MiB | peak RSS MiB | peak − idle MiB |")
	fmt.Println("| --- | ---: | ---: | ---: | ---: |")
	var over []string
	for _, r := range results {
		d := r.peakMiB - r.idleMiB
		fmt.Printf("| %s | %d | %.1f | %.1f | %+.1f |\n", r.fault, r.calls, r.idleMiB, r.peakMiB, d)
		if d > budget {
			over = append(over, fmt.Sprintf("%s: +%.1f MiB", r.fault, d))
		}
	}
	if len(over) > 0 {
		return fmt.Errorf("over the %.0f MiB budget: %s", budget, strings.Join(over, ", "))
	}
	return nil
}

func measure(ctx context.Context, bin, dir string, db redistest.DB, rdb *redis.Client, f chaosllm.Fault, window time.Duration, parallel int) (result, error) {
	name := f.Kind
	if f.Status != 0 {
		name += " " + strconv.Itoa(f.Status)
	}
	if f.Size != 0 {
		name += fmt.Sprintf(" (%d MiB)", f.Size>>20)
	}
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		return result{}, err
	}
	srv, err := chaosllm.New(chaosllm.Scenario{Phases: []chaosllm.Phase{{Fault: &f}}}, chaosllm.Options{})
	if err != nil {
		return result{}, err
	}
	cctx, stopChaos := context.WithCancel(ctx)
	defer stopChaos()
	addrc := make(chan net.Addr, 1)
	go func() { _ = chaosllm.Serve(cctx, "127.0.0.1:0", srv, func(a net.Addr) { addrc <- a }) }()
	url := "http://" + (<-addrc).String()

	cfgPath := filepath.Join(dir, "agentq.yaml")
	cfg := fmt.Sprintf(config, db.Addr, db.DB, parallel, url, window)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return result{}, err
	}
	cmd := exec.Command(bin, "--config", cfgPath, "--log-level", "error")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	// idle: the worker has started and polls an empty queue
	idle, err := settledRSS(ctx, rdb, cmd.Process.Pid)
	if err != nil {
		return result{}, err
	}
	client := producer.NewClient(rdb, producer.ClientOptions{Limits: spec.DefaultLimits(), Retention: time.Hour, Routes: []string{"bench"}})
	spec, err := client.Parse("hostile.yaml", []byte("name: hostile\nsteps:\n  - { id: s, route: bench, prompt: \"hostile body\", max_retries: 100 }\n"))
	if err != nil {
		return result{}, err
	}
	for range parallel {
		if _, err := client.Submit(ctx, spec); err != nil {
			return result{}, err
		}
	}
	peak := idle
	end := time.Now().Add(window)
	for time.Now().Before(end) {
		rss, err := rssMiB(cmd.Process.Pid)
		if err != nil {
			return result{}, fmt.Errorf("the worker died during %s: %w", name, err)
		}
		peak = max(peak, rss)
		time.Sleep(50 * time.Millisecond) // a sampling period, not a synchronisation
	}
	if hwm, err := statusMiB(cmd.Process.Pid, "VmHWM:"); err == nil {
		peak = max(peak, hwm) // the kernel's own high-water mark catches what sampling missed
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	return result{fault: name, idleMiB: idle, peakMiB: peak, calls: srv.Snapshot().Total}, nil
}

// settledRSS waits until the worker has started (it advertises itself in
// Redis once it takes tasks), then reads its RSS.
func settledRSS(ctx context.Context, rdb *redis.Client, pid int) (float64, error) {
	fleet := store.NewFleet(rdb, nil)
	for deadline := time.Now().Add(time.Minute); ; {
		ads, err := fleet.Live(ctx)
		if err == nil && len(ads) > 0 {
			return rssMiB(pid)
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("the worker did not start within a minute (%v)", err)
		}
		time.Sleep(50 * time.Millisecond) // polling, with a deadline
	}
}

func rssMiB(pid int) (float64, error) { return statusMiB(pid, "VmRSS:") }

// statusMiB reads a kB field of /proc/PID/status in MiB.
func statusMiB(pid int, field string) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				return 0, err
			}
			return kb / 1024, nil
		}
	}
	return 0, errors.New("no " + field + " in /proc/" + strconv.Itoa(pid) + "/status")
}
