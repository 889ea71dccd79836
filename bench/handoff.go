package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
)

// -handoff: what a person waiting on a multi-step agent feels. One
// worker with the default configuration (its queues, its poll interval;
// -check-interval sets another), idle between workflows, runs chains of 21
// steps one at a time (200 hand-offs from ten chains); a hand-off is the
// time from a step's settle to its successor's start. Beside it, the Redis
// commands per second the same worker costs while idle (commands inside
// scripts counted). Then the same chains as bare asynq tasks, each
// enqueueing the next link when it ends, at asynq's default poll and at
// agentq's previous one (100ms).

const (
	handoffChains = 10
	handoffLength = 21
)

// handoffResult is one row of the report.
type handoffResult struct {
	name          string
	p50, p99, max float64
	idle          Cost
}

func runHandoff(ctx context.Context, p params, out io.Writer, rdb *redis.Client, db redistest.DB, chaosURL string) error {
	if !flagSet("check-interval") {
		p.check = 0 // the worker's configured poll interval
	}
	var rows []handoffResult
	for _, off := range []bool{false, true} {
		r, err := agentqHandoffs(ctx, p, rdb, db, chaosURL, off)
		if err != nil {
			return err
		}
		rows = append(rows, r)
	}
	for _, check := range []time.Duration{time.Second, 100 * time.Millisecond} {
		r, err := bareHandoffs(ctx, rdb, check)
		if err != nil {
			return err
		}
		rows = append(rows, r)
	}
	fmt.Fprintf(out, "\n| %d hand-offs on an idle worker (concurrency %d, LLM latency %s) | p50 ms | p99 ms | max ms | idle Redis commands/s |\n| --- | ---: | ---: | ---: | ---: |\n",
		handoffChains*(handoffLength-1), p.concurrency, p.latency)
	for _, r := range rows {
		fmt.Fprintf(out, "| %s | %.1f | %.1f | %.1f | %.1f |\n", r.name, r.p50, r.p99, r.max, r.idle.CallsPerStep)
	}
	for _, r := range rows {
		fmt.Fprintf(out, "\n%s, idle: %s\n", r.name, strings.ReplaceAll(strings.Join(r.idle.Top, ", "), "/step", "/s"))
	}
	return nil
}

// flagSet reports whether the command line set flag name.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func agentqHandoffs(ctx context.Context, p params, rdb *redis.Client, db redistest.DB, chaosURL string, off bool) (handoffResult, error) {
	var res handoffResult
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		return res, err
	}
	cfg, err := benchCfg(db, chaosURL, p.concurrency)
	if err != nil {
		return res, err
	}
	cfg.Worker.Queues = config.Default().Worker.Queues
	cfg.Worker.NoHandoffs = off
	poll := cmp(p.check, cfg.Worker.PollInterval.D())
	res.name = "agentq, poll " + poll.String()
	if off {
		res.name += ", hand-offs off"
	}
	sh := chainShape(handoffChains, handoffLength)
	w, err := startWorker(ctx, p, sh, cfg, rdb)
	if err != nil {
		return res, err
	}
	defer w.stop()
	if res.idle, err = idleCost(ctx, rdb, idleWindow); err != nil {
		return res, err
	}
	client := producer.NewClient(rdb, producer.ClientOptions{Limits: spec.DefaultLimits(), Retention: time.Hour, Routes: []string{"bench"}, SkipWorkerCheck: true})
	wspec, err := client.Parse("chain.yaml", []byte(sh.spec))
	if err != nil {
		return res, err
	}
	var gaps []float64
	for i := range handoffChains {
		wspec.Input = map[string]any{"n": i}
		id, err := client.Submit(ctx, wspec)
		if err != nil {
			return res, err
		}
		wf, err := client.Wait(ctx, id, 5*time.Millisecond, nil)
		if err != nil {
			return res, err
		}
		if wf.State != store.StateCompleted {
			return res, fmt.Errorf("chain %s is %s", id, wf.State)
		}
		gaps = append(gaps, sh.handoffs(wf)...)
	}
	res.p50, res.p99, res.max = percentile(gaps, 50), percentile(gaps, 99), percentile(gaps, 100)
	return res, nil
}

func cmp(a, b time.Duration) time.Duration {
	if a != 0 {
		return a
	}
	return b
}

// bareHandoffs runs the chains as plain asynq tasks (no LLM call, no
// bookkeeping) on an asynq server polling every check: a link's hand-off
// is from the return of its enqueue of the next link to that link's start.
func bareHandoffs(ctx context.Context, rdb *redis.Client, check time.Duration) (handoffResult, error) {
	res := handoffResult{name: "bare asynq, poll " + check.String()}
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		return res, err
	}
	var mu sync.Mutex
	ended := map[string]time.Time{} // "chain link" → when its next link was enqueued
	var gaps []float64
	chainDone := make(chan struct{}, 1)
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{Concurrency: 50, TaskCheckInterval: check, Queues: map[string]int{"default": 1}, LogLevel: asynq.ErrorLevel})
	ac := asynq.NewClientFromRedisClient(rdb)
	defer ac.Close()
	if err := srv.Start(asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		started := time.Now()
		f := strings.Fields(string(t.Payload())) // "<chain> <link>"
		link, _ := strconv.Atoi(f[1])
		mu.Lock()
		if e, ok := ended[f[0]+" "+strconv.Itoa(link-1)]; ok {
			gaps = append(gaps, float64(started.Sub(e).Microseconds())/1000)
		}
		mu.Unlock()
		if link+1 == handoffLength {
			chainDone <- struct{}{}
			return nil
		}
		if _, err := ac.EnqueueContext(ctx, asynq.NewTask("bare", fmt.Appendf(nil, "%s %d", f[0], link+1))); err != nil {
			return err
		}
		mu.Lock()
		ended[f[0]+" "+strconv.Itoa(link)] = time.Now()
		mu.Unlock()
		return nil
	})); err != nil {
		return res, err
	}
	defer srv.Shutdown()
	var err error
	if res.idle, err = idleCost(ctx, rdb, idleWindow); err != nil {
		return res, err
	}
	for i := range handoffChains {
		if _, err := ac.EnqueueContext(ctx, asynq.NewTask("bare", fmt.Appendf(nil, "%d 0", i))); err != nil {
			return res, err
		}
		select {
		case <-chainDone:
		case <-time.After(time.Minute):
			return res, fmt.Errorf("bare asynq chain %d did not finish in a minute", i)
		}
	}
	res.p50, res.p99, res.max = percentile(gaps, 50), percentile(gaps, 99), percentile(gaps, 100)
	return res, nil
}
