package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/spec"
)

// -cluster: past one Redis. A throwaway Redis Cluster of -primaries
// primaries (redis-server and redis-cli on the PATH) runs -chains chains
// of -length prompt steps on one in-process worker (its configured poll
// interval unless -check-interval is given), first with the
// default queue in -shards shards, then in one; for each, every primary's
// commands per second and CPU, and steps per second per second of the
// busiest primary's CPU (what one primary core carries when it is the
// bottleneck).

// clusterIdle is how long each run first measures the primaries idle.
const clusterIdle = 5 * time.Second

func runCluster(ctx context.Context, p params, out io.Writer, chaosURL string) error {
	if p.primaries < 1 || p.shards < 1 {
		return fmt.Errorf("-primaries and -shards must be at least 1")
	}
	if !flagSet("check-interval") {
		p.check = 0 // the worker's configured poll interval
	}
	procs, err := redistest.StartCluster(ctx, p.primaries)
	if err != nil {
		return fmt.Errorf("a Redis Cluster: %w", err)
	}
	defer procs.Stop()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: procs.Addrs})
	defer rdb.Close()
	fmt.Fprintf(out, "bench: a %d-primary Redis Cluster, %d chains of %d prompt steps, concurrency %d, LLM latency %s\n",
		p.primaries, p.chains, p.length, p.concurrency, p.latency)
	for _, shards := range slices.Compact([]int{p.shards, 1}) {
		if err := clusterRun(ctx, p, out, rdb, procs.Addrs, chaosURL, shards); err != nil {
			return err
		}
	}
	return nil
}

func clusterRun(ctx context.Context, p params, out io.Writer, rdb *redis.ClusterClient, addrs []string, chaosURL string, shards int) error {
	if err := rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.FlushDB(ctx).Err() }); err != nil {
		return err
	}
	cfg, err := benchCfg(redistest.DB{Addr: addrs[0]}, chaosURL, p.concurrency)
	if err != nil {
		return err
	}
	cfg.Redis.Cluster = addrs
	cfg.Queues = map[string]config.Queue{"default": {Shards: shards}}
	sh := chainShape(p.chains, p.length)
	w, err := startWorker(ctx, p, sh, cfg, rdb)
	if err != nil {
		return err
	}
	defer w.stop()
	client := producer.NewClient(rdb, producer.ClientOptions{Limits: spec.DefaultLimits(), Retention: time.Hour, Routes: []string{"bench"},
		SkipWorkerCheck: true, Shards: cfg.Shards()})
	// each primary's cost with the worker idle (the cluster's own cron
	// and bus, the worker's polls of each shard), subtracted below
	idleFrom, err := redistest.PrimaryStats(ctx, rdb)
	if err != nil {
		return err
	}
	time.Sleep(clusterIdle)
	before, err := redistest.PrimaryStats(ctx, rdb)
	if err != nil {
		return err
	}
	start := time.Now()
	if _, err := submitAll(ctx, client, sh); err != nil {
		return err
	}
	if err := w.wait(); err != nil {
		return err
	}
	took := time.Since(start).Seconds()
	after, err := redistest.PrimaryStats(ctx, rdb)
	if err != nil {
		return err
	}
	steps := float64(p.chains * p.length)
	fmt.Fprintf(out, "\n| default queue in %d shard(s): %.0f steps in %.1fs, %.0f steps/s | commands | commands/s | share | idle commands/s | CPU s | CPU s above idle | µs above idle per step |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
		shards, steps, took, steps/took)
	var total int64
	busiest := 0.0
	for _, a := range addrs {
		total += after[a].Commands - before[a].Commands
	}
	idle := clusterIdle.Seconds()
	for _, a := range addrs {
		n, cpu := after[a].Commands-before[a].Commands, after[a].CPU-before[a].CPU
		idleCmds, idleCPU := float64(before[a].Commands-idleFrom[a].Commands)/idle, (before[a].CPU-idleFrom[a].CPU)/idle
		above := max(cpu-idleCPU*took, 0)
		busiest = max(busiest, above)
		fmt.Fprintf(out, "| primary %s | %d | %.0f | %.1f%% | %.0f | %.2f | %.2f | %.0f |\n", a, n, float64(n)/took, 100*float64(n)/float64(total), idleCmds, cpu, above, 1e6*above/steps)
	}
	fmt.Fprintf(out, "\nsteps per second of the busiest primary's CPU above idle: %.0f (all primaries: %.1f commands per step)\n", steps/busiest, float64(total)/steps)
	return nil
}
