package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq"
	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
)

// -keys: what concurrency keys cost and what they buy.
//
//  1. Fairness: tenant A submits a 2,000-item map (every instance
//     released at once), then tenant B submits one-step workflows one at a
//     time; B's time from submit to completion, without keys (A's map fills
//     every worker slot, and B queues behind it) and with a key per tenant
//     (limit 10 each).
//  2. Idle cost: the Redis commands per second while 1,000 steps wait for a
//     full key (its one slot held by a step that does not end), beside the
//     same worker with nothing waiting: waiting steps are not polled.
//  3. Overhead: each shape with and without a key on every step (limit high
//     enough that nothing waits), back to back; Redis and process CPU per
//     step, and their ratios.

// keysTarget is the most CPU per step may rise with a key on every step;
// fairTargetMs the most B's p95 may be; idleTarget the most commands per
// second 1,000 waiting steps may add.
const (
	keysTarget   = 1.2
	fairTargetMs = 2000
	idleTarget   = 50
)

// FairRun is B's times beside A's map, with or without keys.
type FairRun struct {
	Keys           bool
	BP50ms, BP95ms float64
	AMapSeconds    float64
	// ACompletedFirst says A's map completed before B's last workflow.
	ACompletedFirst bool
}

// IdleRun is Redis's commands per second around an idle worker.
type IdleRun struct {
	Waiting                       int
	BaselinePerSec, WaitingPerSec float64
}

// KeysReport is what a -keys run measured; -json writes it.
type KeysReport struct {
	Params   Params
	MapItems int
	Fair     []FairRun
	Idle     IdleRun
	Overhead []EventsRun // Off: no keys, On: a key on every step
}

const (
	fairItems  = 2000
	fairLimit  = 10
	fairB      = 40
	idleWaiter = 1000
	idleWindow = 10 * time.Second
)

func runKeys(ctx context.Context, p params, out io.Writer, rdb *redis.Client, db redistest.DB, chaos *chaosllm.Server, chaosURL string) error {
	r := KeysReport{MapItems: fairItems, Params: Params{Chords: p.chords, Members: p.members, Chains: p.chains, Length: p.length,
		Concurrency: p.concurrency, LatencyMs: ms(p.latency), Redis: db.Kind}}
	fmt.Fprintf(out, "bench: concurrency keys; concurrency %d, LLM latency %s, Redis %s at %s\n", p.concurrency, p.latency, db.Kind, db.Addr)
	for _, keys := range []bool{false, true} {
		f, err := fairness(ctx, p, rdb, db, chaosURL, keys)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "bench:   tenant B beside A's %d-item map, keys %t: p50 %.0f ms, p95 %.0f ms; A's map %.1f s\n", fairItems, keys, f.BP50ms, f.BP95ms, f.AMapSeconds)
		r.Fair = append(r.Fair, f)
	}
	idle, err := idleWaiting(ctx, p, rdb, db, chaosURL)
	if err != nil {
		return err
	}
	r.Idle = idle
	fmt.Fprintf(out, "bench:   Redis commands/s: idle worker %.1f, with %d steps waiting on a full key %.1f\n", idle.BaselinePerSec, idle.Waiting, idle.WaitingPerSec)
	shapes := []shape{chordShape(p.chords, p.members)}
	if p.chains > 0 {
		shapes = append(shapes, chainShape(p.chains, p.length))
	}
	for _, sh := range shapes {
		res, err := pairRuns(p, sh, out, func(on bool) (AgentqRun, error) {
			if on {
				return measureAgentq(ctx, p, keyed(sh), "agentq keys on "+sh.name, rdb, db, chaos, chaosURL)
			}
			return measureAgentq(ctx, p, sh, "agentq keys off "+sh.name, rdb, db, chaos, chaosURL)
		})
		if err != nil {
			return err
		}
		r.Overhead = append(r.Overhead, res)
	}
	printKeysReport(out, &r)
	return writeReport(p.jsonOut, r)
}

// keyed is sh with a key on every step: ten tenants, a limit nothing
// reaches.
func keyed(sh shape) shape {
	sh.spec = strings.Replace(sh.spec, "\nsteps:\n", "\nconcurrency: { key: \"tenant-{{ .Input.tenant }}\", limit: 100000 }\nsteps:\n", 1)
	sh.input = func(i int) map[string]any { return map[string]any{"n": i, "tenant": strconv.Itoa(i % 10)} }
	return sh
}

// fairness runs A's map and B's workflows (see -keys) and returns B's
// times.
func fairness(ctx context.Context, p params, rdb *redis.Client, db redistest.DB, chaosURL string, keys bool) (FairRun, error) {
	res := FairRun{Keys: keys}
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		return res, err
	}
	cfg, err := benchCfg(db, chaosURL, p.concurrency)
	if err != nil {
		return res, err
	}
	client := producer.NewClient(rdb, producer.ClientOptions{Limits: spec.Limits{MaxSteps: 100, MaxSpecBytes: 1 << 20, MaxTurns: 20, MaxMapItems: fairItems},
		Retention: time.Hour, Routes: []string{"bench"}, SkipWorkerCheck: true})
	w, err := startWorker(ctx, p, shape{workflows: -1}, cfg, rdb)
	if err != nil {
		return res, err
	}
	defer w.stop()
	key := func(tenant string) string {
		if !keys {
			return ""
		}
		return fmt.Sprintf("concurrency: { key: %q, limit: %d }\n", tenant, fairLimit)
	}
	items := make([]string, fairItems)
	for i := range items {
		items[i] = strconv.Itoa(i)
	}
	aSpec, err := client.Parse("a.yaml", []byte(fmt.Sprintf("name: tenant-a\ninput: { items: [%s] }\n%ssteps:\n"+
		"  - { id: each, for_each: \"{{ .Input.items }}\", max_items: %d, max_parallel: %d, route: bench, prompt: \"item {{ .Item }}\" }\n",
		strings.Join(items, ","), key("tenant-a"), fairItems, fairItems)))
	if err != nil {
		return res, err
	}
	bSpec, err := client.Parse("b.yaml", []byte("name: tenant-b\n"+key("tenant-b")+"steps:\n  - { id: one, route: bench, prompt: \"hello\" }\n"))
	if err != nil {
		return res, err
	}
	start := time.Now()
	a, err := client.Submit(ctx, aSpec)
	if err != nil {
		return res, err
	}
	aDone := make(chan time.Time, 1)
	go func() {
		if wf, err := client.Wait(ctx, a, 20*time.Millisecond, nil); err == nil && wf.State == store.StateCompleted {
			aDone <- time.Now()
		}
		close(aDone)
	}()
	// A's map is released and running before B comes
	for {
		wf, err := client.Status(ctx, a)
		if err != nil {
			return res, err
		}
		if m := wf.Steps[0].Map; m != nil && m.Started >= p.concurrency {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	var (
		mu    sync.Mutex
		times []float64
		wg    sync.WaitGroup
		errs  []error
	)
	for range fairB {
		sub := time.Now()
		id, err := client.Submit(ctx, bSpec)
		if err != nil {
			return res, err
		}
		wg.Go(func() {
			wf, err := client.Wait(ctx, id, 5*time.Millisecond, nil)
			mu.Lock()
			defer mu.Unlock()
			if err != nil || wf.State != store.StateCompleted {
				errs = append(errs, fmt.Errorf("tenant b workflow %s: %v %v", id, wf, err))
				return
			}
			times = append(times, ms(time.Since(sub)))
		})
		time.Sleep(50 * time.Millisecond)
	}
	wg.Wait()
	bLast := time.Now()
	if len(errs) > 0 {
		return res, errs[0]
	}
	at, ok := <-aDone
	if !ok {
		return res, fmt.Errorf("tenant a's map did not complete")
	}
	res.AMapSeconds = at.Sub(start).Seconds()
	res.ACompletedFirst = at.Before(bLast)
	res.BP50ms, res.BP95ms = percentile(times, 50), percentile(times, 95)
	return res, nil
}

// idleWaiting measures Redis's commands per second around an idle worker,
// then with idleWaiter steps waiting for a key whose one slot a step
// holds (a code step that ends only when the run is over).
func idleWaiting(ctx context.Context, p params, rdb *redis.Client, db redistest.DB, chaosURL string) (IdleRun, error) {
	res := IdleRun{Waiting: idleWaiter}
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		return res, err
	}
	cfg, err := benchCfg(db, chaosURL, p.concurrency)
	if err != nil {
		return res, err
	}
	release := make(chan struct{})
	hold := map[string]agentq.StepFunc{"hold": func(ctx context.Context, _ *agentq.Step) (any, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return "held", nil
	}}
	client := producer.NewClient(rdb, producer.ClientOptions{Limits: spec.DefaultLimits(), Retention: time.Hour, Routes: []string{"bench"}, SkipWorkerCheck: true})
	w, err := startWorker(ctx, p, shape{workflows: -1, funcs: hold}, cfg, rdb)
	if err != nil {
		return res, err
	}
	defer w.stop()
	defer close(release)
	if res.BaselinePerSec, err = commandsPerSec(ctx, rdb, idleWindow); err != nil {
		return res, err
	}
	wspec, err := client.Parse("full.yaml", []byte("name: full\nconcurrency: { key: full, limit: 1 }\nsteps:\n  - { id: s, run: hold, timeout: 10m }\n"))
	if err != nil {
		return res, err
	}
	for range idleWaiter + 1 {
		if _, err := client.Submit(ctx, wspec); err != nil {
			return res, err
		}
	}
	st := store.New(rdb, time.Hour, nil)
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		_, inflight, waiting, err := st.KeyLoads(ctx, 1)
		if err != nil {
			return res, err
		}
		if inflight == 1 && waiting == idleWaiter {
			break
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("%d steps wait for the full key, %d hold it: want %d and 1", waiting, inflight, idleWaiter)
		}
	}
	res.WaitingPerSec, err = commandsPerSec(ctx, rdb, idleWindow)
	return res, err
}

// commandsPerSec counts the commands Redis executes over window (a
// script's own commands included; the count's own CONFIG and INFO not).
func commandsPerSec(ctx context.Context, rdb *redis.Client, window time.Duration) (float64, error) {
	c, err := idleCost(ctx, rdb, window)
	return c.CallsPerStep, err
}

// idleCost is Redis's commands (and their CPU) per second over window,
// the costliest commands in Top.
func idleCost(ctx context.Context, rdb *redis.Client, window time.Duration) (Cost, error) {
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		return Cost{}, err
	}
	time.Sleep(window)
	return commandCost(ctx, rdb, int(window.Seconds())), nil
}

func printKeysReport(out io.Writer, r *KeysReport) {
	fmt.Fprintf(out, "\n| tenant B beside A's %d-item map | B p50 ms | B p95 ms (target ≤ %d) | A's map s |\n| --- | ---: | ---: | ---: |\n", r.MapItems, fairTargetMs)
	for _, f := range r.Fair {
		name := "no keys"
		if f.Keys {
			name = fmt.Sprintf("a key per tenant, limit %d", fairLimit)
		}
		fmt.Fprintf(out, "| %s | %.0f | %.0f | %.1f |\n", name, f.BP50ms, f.BP95ms, f.AMapSeconds)
	}
	fmt.Fprintf(out, "\n| Redis commands/s | idle worker | %d steps waiting on a full key | added (target < %d) |\n| --- | ---: | ---: | ---: |\n", r.Idle.Waiting, idleTarget)
	fmt.Fprintf(out, "| | %.1f | %.1f | %.1f |\n", r.Idle.BaselinePerSec, r.Idle.WaitingPerSec, r.Idle.WaitingPerSec-r.Idle.BaselinePerSec)
	fmt.Fprintf(out, "\n| shape | steps | Redis CPU µs/step no keys | a key on every step | ratio (target ≤ %.1f) | process CPU µs/step no keys | keys | ratio |\n", keysTarget)
	fmt.Fprintf(out, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, x := range r.Overhead {
		fmt.Fprintf(out, "| %s | %d | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f |\n", x.Shape, x.Workflows*x.StepsPerWorkflow,
			x.Off.Cost.RedisCPUMicros, x.On.Cost.RedisCPUMicros, x.RedisRatio, x.Off.Cost.ProcCPUMicros, x.On.Cost.ProcCPUMicros, x.ProcRatio)
		if len(x.RedisRatios) > 1 {
			fmt.Fprintf(out, "|   %d repetitions' Redis ratios: %s | | | | | | | |\n", len(x.RedisRatios), ratios(x.RedisRatios))
		}
	}
	for _, f := range r.Fair {
		if f.Keys && f.BP95ms > fairTargetMs {
			fmt.Fprintf(out, "\ntarget missed: tenant B's p95 with keys is %.0f ms > %d ms\n", f.BP95ms, fairTargetMs)
		}
	}
	if d := r.Idle.WaitingPerSec - r.Idle.BaselinePerSec; d >= idleTarget {
		fmt.Fprintf(out, "\ntarget missed: %d waiting steps add %.1f commands/s ≥ %d\n", r.Idle.Waiting, d, idleTarget)
	}
	for _, x := range r.Overhead {
		if x.RedisRatio > keysTarget || x.ProcRatio > keysTarget {
			fmt.Fprintf(out, "\ntarget missed: %s CPU per step with keys is %.2f× (Redis), %.2f× (process) > %.1f×\n", x.Shape, x.RedisRatio, x.ProcRatio, keysTarget)
		}
	}
}
