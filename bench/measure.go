package main

import (
	"context"
	"fmt"
	"runtime/pprof"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/redistest"
)

// measureAgentq runs sh on an in-process agentq worker, Redis flushed
// first; label names the run in a -cpuprofile. It checks that chaosllm
// saw exactly one call per step.
func measureAgentq(ctx context.Context, p params, sh shape, label string, rdb *redis.Client, db redistest.DB, chaos *chaosllm.Server, chaosURL string) (AgentqRun, error) {
	var res AgentqRun
	steps := sh.workflows * sh.steps
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		return res, err
	}
	before := chaos.Snapshot().Total
	m := &meter{rdb: rdb, steps: steps}
	var (
		secs     float64
		handoffs []float64
		err      error
	)
	// labelled so that a -cpuprofile can be read per run (pprof -tagfocus)
	pprof.Do(ctx, pprof.Labels("run", label), func(ctx context.Context) {
		secs, handoffs, err = runAgentq(ctx, p, sh, rdb, db, chaosURL, m)
	})
	if err != nil {
		return res, fmt.Errorf("%s: %w", label, err)
	}
	res.Seconds = secs
	res.StepsPerSec = float64(steps) / secs
	res.WorkflowsPerSec = float64(sh.workflows) / secs
	res.HandoffP50ms, res.HandoffP99ms = percentile(handoffs, 50), percentile(handoffs, 99)
	res.Cost = m.cost
	res.LLMCalls = chaos.Snapshot().Total - before
	if res.LLMCalls != steps {
		return res, fmt.Errorf("%s made %d LLM calls for %d steps", label, res.LLMCalls, steps)
	}
	return res, nil
}

// measure runs sh on agentq and on bare asynq (and with -floor the floor
// runs), Redis flushed before each. agentqLast puts agentq's run after the
// others: -runs alternates it, so that what a run leaves behind (a grown
// heap, warm connections, a machine getting busier) does not always fall
// on the same side of a ratio.
func measure(ctx context.Context, p params, sh shape, rdb *redis.Client, db redistest.DB, chaos *chaosllm.Server, chaosURL string, agentqLast bool) (Run, error) {
	var res Run
	steps := sh.workflows * sh.steps
	res.Workflows, res.StepsPerWorkflow = sh.workflows, sh.steps
	res.AgentqLast = agentqLast
	runAgentqSide := func() (err error) {
		res.Agentq, err = measureAgentq(ctx, p, sh, "agentq "+sh.name, rdb, db, chaos, chaosURL)
		return err
	}
	runBareSide := func() error {
		if err := rdb.FlushDB(ctx).Err(); err != nil {
			return err
		}
		m := &meter{rdb: rdb, steps: steps}
		var bsecs float64
		var err error
		pprof.Do(ctx, pprof.Labels("run", "bare "+sh.name), func(ctx context.Context) {
			bsecs, err = runBare(ctx, p, sh, rdb, chaosURL, m, 0)
		})
		if err != nil {
			return fmt.Errorf("bare asynq %s: %w", sh.name, err)
		}
		res.Bare.Cost = m.cost
		res.Bare.Seconds = bsecs
		res.Bare.StepsPerSec = float64(steps) / bsecs
		res.Bare.WorkflowsPerSec = float64(sh.workflows) / bsecs
		for writes := 1; p.floor && writes <= 2; writes++ {
			if err := rdb.FlushDB(ctx).Err(); err != nil {
				return err
			}
			m = &meter{rdb: rdb, steps: steps}
			var fsecs float64
			pprof.Do(ctx, pprof.Labels("run", fmt.Sprintf("floor %d %s", writes, sh.name)), func(ctx context.Context) {
				fsecs, err = runBare(ctx, p, sh, rdb, chaosURL, m, writes)
			})
			if err != nil {
				return fmt.Errorf("bare asynq + %d writes %s: %w", writes, sh.name, err)
			}
			sps := float64(steps) / fsecs
			res.Floor = append(res.Floor, FloorRun{Writes: writes, Seconds: fsecs, StepsPerSec: sps, Ratio: sps / res.Bare.StepsPerSec, Cost: m.cost})
		}
		return nil
	}
	order := []func() error{runAgentqSide, runBareSide}
	if agentqLast {
		order[0], order[1] = order[1], order[0]
	}
	for _, f := range order {
		if err := f(); err != nil {
			return res, err
		}
	}
	res.Ratio = res.Agentq.StepsPerSec / res.Bare.StepsPerSec
	return res, nil
}
