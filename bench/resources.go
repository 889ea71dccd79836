package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/spec"
)

// Resources is one worker process's cost: peak RSS, and CPU time per
// 1,000 steps, for the chords workload at one concurrency.
type Resources struct {
	Concurrency    int
	Steps          int
	Seconds        float64
	PeakRSSMiB     float64
	CPUSecPer1000  float64 // user + system
	UserSecPer1000 float64
}

// measureResources builds cmd/worker, runs it as a child process with the
// given concurrency against the same Redis and chaosllm, puts the chords
// workload through it and reads the child's rusage after a clean stop.
func measureResources(ctx context.Context, p params, concurrency int, rdb *redis.Client, db redistest.DB, chaosURL string) (Resources, error) {
	dir, bin, err := buildCmd(ctx, "worker")
	if err != nil {
		return Resources{}, err
	}
	defer os.RemoveAll(dir)
	cfgPath := filepath.Join(dir, "agentq.yaml")
	cfg := fmt.Sprintf("redis: { addr: %q, db: %d }\nworker: { concurrency: %d }\n%s", db.Addr, db.DB, concurrency, benchConfig)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return Resources{}, err
	}
	cmd := exec.Command(bin, "--config", cfgPath, "--log-level", "error")
	cmd.Env = append(os.Environ(), "CHAOS="+chaosURL)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return Resources{}, err
	}
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	client := producer.NewClient(rdb, producer.ClientOptions{Limits: spec.DefaultLimits(), Retention: time.Hour, Routes: []string{"bench"}})
	sh := chordShape(p.chords, p.members)
	start := time.Now()
	ids, err := submitAll(ctx, client, sh)
	if err != nil {
		return Resources{}, err
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	for _, id := range ids {
		wf, err := client.Wait(wctx, id, 50*time.Millisecond, nil)
		if err != nil {
			return Resources{}, fmt.Errorf("waiting for %s: %w", id, err)
		}
		if wf.State != "completed" {
			return Resources{}, fmt.Errorf("workflow %s is %s", id, wf.State)
		}
	}
	secs := time.Since(start).Seconds()
	peak := peakRSS(cmd.Process.Pid)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return Resources{}, err
	}
	if err := cmd.Wait(); err != nil {
		return Resources{}, fmt.Errorf("worker exit: %w", err)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return Resources{}, fmt.Errorf("no rusage on this platform")
	}
	steps := sh.workflows * sh.steps
	user := time.Duration(ru.Utime.Nano()).Seconds()
	sys := time.Duration(ru.Stime.Nano()).Seconds()
	return Resources{Concurrency: concurrency, Steps: steps, Seconds: secs,
		PeakRSSMiB:     peak,
		CPUSecPer1000:  (user + sys) * 1000 / float64(steps),
		UserSecPer1000: user * 1000 / float64(steps)}, nil
}

// buildCmd builds ./cmd/<name> into a new temporary directory, which the
// caller removes.
func buildCmd(ctx context.Context, name string) (dir, bin string, err error) {
	if dir, err = os.MkdirTemp("", "agentq-bench-"); err != nil {
		return "", "", err
	}
	bin = filepath.Join(dir, "agentq-"+name)
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/"+name).CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", "", fmt.Errorf("go build ./cmd/%s: %w: %s", name, err, out)
	}
	return dir, bin, nil
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range splitComma(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-resources: %q is not a positive concurrency", f)
		}
		out = append(out, n)
	}
	return out, nil
}
