package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
)

// -handoff: what a person waiting on a multi-step agent feels. One
// worker, idle between workflows, runs chains of 21 steps one at a time
// (200 hand-offs from ten chains); a hand-off is the time from a step's
// settle to its successor's start. Beside it, the Redis commands per
// second the same worker costs while idle (commands inside scripts
// counted): asynq's dequeue polling, every TaskCheckInterval.

const (
	handoffChains = 10
	handoffLength = 21
)

func runHandoff(ctx context.Context, p params, out io.Writer, rdb *redis.Client, db redistest.DB, chaosURL string) error {
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		return err
	}
	cfg, err := benchCfg(db, chaosURL, p.concurrency)
	if err != nil {
		return err
	}
	sh := chainShape(handoffChains, handoffLength)
	w, err := startWorker(ctx, p, sh, cfg, rdb)
	if err != nil {
		return err
	}
	defer w.stop()
	idle, err := commandsPerSec(ctx, rdb, idleWindow)
	if err != nil {
		return err
	}
	client := producer.NewClient(rdb, producer.ClientOptions{Limits: spec.DefaultLimits(), Retention: time.Hour, Routes: []string{"bench"}, SkipWorkerCheck: true})
	wspec, err := client.Parse("chain.yaml", []byte(sh.spec))
	if err != nil {
		return err
	}
	var handoffs []float64
	for i := range handoffChains {
		wspec.Input = map[string]any{"n": i}
		id, err := client.Submit(ctx, wspec)
		if err != nil {
			return err
		}
		wf, err := client.Wait(ctx, id, 5*time.Millisecond, nil)
		if err != nil {
			return err
		}
		if wf.State != store.StateCompleted {
			return fmt.Errorf("chain %s is %s", id, wf.State)
		}
		handoffs = append(handoffs, sh.handoffs(wf)...)
	}
	fmt.Fprintf(out, "bench: hand-offs on an idle worker (TaskCheckInterval %s, concurrency %d, LLM latency %s): %d hand-offs, p50 %.1f ms, p99 %.1f ms, max %.1f ms; the idle worker costs Redis %.1f commands/s\n",
		p.check, p.concurrency, p.latency, len(handoffs), percentile(handoffs, 50), percentile(handoffs, 99), percentile(handoffs, 100), idle)
	return nil
}
