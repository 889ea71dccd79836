// Command bench measures agentq's orchestration overhead: N chords of M
// steps against chaosllm at zero latency, and the same number of the same
// HTTP calls made by a bare asynq handler on the same Redis in the same
// run. The ratio of their step rates is the cost of agentq's bookkeeping
// (records, checkpoints, exactly-once fan-in). See bench/README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"sort"
	"strings"
	"time"

	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/redistest"
)

type params struct {
	chords, members, concurrency int
	chains, length               int
	inflight, waves              int
	workerProfile                string // -inflight: a directory for the widest worker's profiles
	tls                          bool   // -inflight: chaosllm over HTTPS (HTTP/2), as a provider's endpoint is
	chaosCA                      string // -tls: the PEM file of chaosllm's certificate, the worker's ca_file
	onestep                      int
	cluster                      bool
	primaries, shards            int
	check, latency               time.Duration
	jsonOut                      string
	celery                       bool
	python, celeryPool           string
	resources                    []int
	floor                        bool
	runs                         int
	codestep                     bool
	mapItems, mapParallel        int
	events                       bool
	keys                         bool
	handoff                      bool
	followers                    int
	idleWorkflows                int
	eventsOff                    bool // this run keeps no event log (-events sets it per run)
	durable                      bool
	durability                   *config.Durability // this run's redis.durability (-durability sets it per run)
}

// AgentqRun is one timed run of a workload on an agentq worker.
type AgentqRun struct {
	Seconds, StepsPerSec, WorkflowsPerSec float64
	HandoffP50ms, HandoffP99ms            float64
	LLMCalls                              int
	Cost                                  Cost
}

// Run is one workload's agentq and bare asynq figures.
type Run struct {
	Workflows, StepsPerWorkflow int
	Agentq                      AgentqRun
	Bare                        struct {
		Seconds, StepsPerSec, WorkflowsPerSec float64
		Cost                                  Cost
	}
	Ratio float64 // agentq steps/s ÷ bare steps/s
	// Ratios are every repetition's (-runs), lowest first; the figures
	// above are those of the median repetition.
	Ratios []float64 `json:",omitempty"`
	// Floor (with -floor): bare asynq plus N scripted writes of the answer
	// per task, the least any durable per-step bookkeeping adds.
	Floor []FloorRun `json:",omitempty"`
	// FloorRatios (with -floor) are every repetition's agentq steps/s ÷
	// bare asynq + 2 writes' steps/s, and FloorRedisCPU its agentq Redis
	// CPU per step ÷ the floor's, lowest first: the targets are
	// against that floor (≥ 0.8, ≤ 1.5).
	FloorRatios   []float64 `json:",omitempty"`
	FloorRedisCPU []float64 `json:",omitempty"`
	// FloorRatiosAgentqLast are those of FloorRatios measured with agentq
	// run after the others (odd repetitions), in repetition order: a
	// difference from the others says the order weighs on the ratio.
	FloorRatiosAgentqLast []float64 `json:",omitempty"`
	// AgentqLast says this repetition ran agentq after bare asynq and the
	// floor.
	AgentqLast bool `json:",omitempty"`
}

// floor2 is the run's bare asynq + 2 writes, nil without -floor.
func (r *Run) floor2() *FloorRun {
	for i := range r.Floor {
		if r.Floor[i].Writes == 2 {
			return &r.Floor[i]
		}
	}
	return nil
}

// FloorRun is bare asynq with Writes extra round trips per task.
type FloorRun struct {
	Writes               int
	Seconds, StepsPerSec float64
	Ratio                float64 // to bare asynq in the same run
	Cost                 Cost
}

// Params are a run's workload parameters, as reported.
type Params struct {
	Chords, Members, Chains, Length, Concurrency int
	LatencyMs                                    float64
	Redis                                        string
}

// Report is what one run measured; -json writes it.
type Report struct {
	Params      Params
	Chords      Run
	Chains      *Run          `json:",omitempty"`
	Celery      *CeleryResult `json:",omitempty"`
	CeleryError string        `json:",omitempty"`
	// CeleryRatio is agentq's chords/s over Celery's, same chords, same
	// call, same Redis; BareCeleryRatio is bare asynq's over Celery's.
	CeleryRatio, BareCeleryRatio float64     `json:",omitempty"`
	Resources                    []Resources `json:",omitempty"`
	// Map (with -map) is a wide map's cost per step against chords'; a
	// -map run measures it alone (Chords stays empty).
	Map *MapResult `json:",omitempty"`
}

func main() {
	var p params
	flag.IntVar(&p.chords, "chords", 200, "chords to run")
	flag.IntVar(&p.members, "members", 10, "parallel steps per chord (each chord has one more step: its body)")
	flag.IntVar(&p.chains, "chains", 100, "linear chains to run (0: none)")
	flag.IntVar(&p.length, "length", 10, "steps per chain")
	flag.IntVar(&p.concurrency, "concurrency", 50, "worker concurrency (every run)")
	flag.DurationVar(&p.check, "check-interval", 100*time.Millisecond, "asynq TaskCheckInterval (agentq and bare runs)")
	flag.StringVar(&p.jsonOut, "json", "", "also write the report as JSON to this file")
	flag.DurationVar(&p.latency, "latency", 0, "chaosllm answers after this long (every run); 0 measures pure orchestration")
	flag.BoolVar(&p.celery, "celery", false, "also run the chords on Celery (bench/celery; needs Celery and redis-py for -python)")
	flag.StringVar(&p.python, "python", defaultPython(), "python interpreter with Celery")
	flag.StringVar(&p.celeryPool, "celery-pool", "threads", "Celery worker pool: threads or prefork (-concurrency of either)")
	flag.BoolVar(&p.floor, "floor", false, "also run bare asynq with one and two scripted writes of the answer per task: the floor of any durable per-step bookkeeping")
	flag.BoolVar(&p.codestep, "codestep", false, "instead of agentq against bare asynq, run each shape with prompt steps and with code steps (run: a Go function making the same chat call through s.LLM().Chat), back to back (-chords 0 or -chains 0 skips a shape)")
	flag.IntVar(&p.runs, "runs", 1, "repeat each agentq/bare asynq measurement this many times and report the median ratio (shared machines are noisy)")
	flag.IntVar(&p.mapItems, "map", 0, "instead of agentq against bare asynq, run one workflow mapping this many items (for_each, prompt instances) then a reduce, against as many steps of -members-member chords; reports CPU per step of each and their ratio")
	flag.BoolVar(&p.events, "events", false, "instead of agentq against bare asynq, run each shape with the event log off and with it on and every step streaming (stream: true), back to back; reports Redis and process CPU per step of each and their ratio")
	flag.BoolVar(&p.handoff, "handoff", false, "instead of agentq against bare asynq, measure hand-offs on an idle worker: ten chains of 21 steps one at a time (200 hand-offs, a step's settle to its successor's start), p50 and p99, and the idle worker's Redis commands/s")
	flag.BoolVar(&p.keys, "keys", false, "instead of agentq against bare asynq, measure concurrency keys: tenant B's time to completion beside tenant A's 2,000-item map without and with a key per tenant (limit 10), Redis commands/s while 1,000 steps wait on a full key, and each shape's CPU per step with and without a key on every step")
	flag.IntVar(&p.onestep, "onestep", 0, "instead of agentq against bare asynq, run this many one-step workflows (one prompt step) against as many bare asynq tasks and the floor (+1, +2 scripted writes), -runs times alternated; reports medians of steps/s, process and Redis CPU µs per step, Redis commands per step by name and heap allocations per step, and agentq ÷ the floor")
	flag.IntVar(&p.inflight, "inflight", 0, "instead of agentq against bare asynq, keep this many LLM calls in flight (-latency each): one worker process of this concurrency, four of a quarter each, one of 500; reports steps/s against concurrency ÷ latency, peak RSS, steps run twice, asynq retries and archives, and CPU per step")
	flag.IntVar(&p.followers, "followers", 0, "instead of agentq against bare asynq, have one dashboard process serve this many event-stream followers, one per running workflow (chains of -length streaming steps, -latency each); reports the dashboard's peak RSS and the followers' lag")
	flag.IntVar(&p.idleWorkflows, "idle", 0, "with -followers: the followers idle, spread over this many workflows that wait (no worker); reports Redis commands/s while they idle, the dashboard's RSS, and each follower's latency for one new event")
	flag.IntVar(&p.mapParallel, "map-parallel", 200, "with -map: the map step's max_parallel (instances in flight)")
	flag.IntVar(&p.waves, "waves", 3, "with -inflight: how many times over each run fills its slots (waves × concurrency single-step workflows, all submitted before the workers start)")
	flag.StringVar(&p.workerProfile, "workerprofile", "", "with -inflight: write the widest worker's profiles here (worker.profiling): CPU over its first latency from the start, then, a latency in (the slots full when they filled within it), its live heap, its goroutines and its Go memory gauges (worker-memory.txt: heap, stacks and the runtime's total in MiB, the goroutines' count)")
	flag.BoolVar(&p.tls, "tls", false, "with -inflight: chaosllm serves HTTPS, HTTP/2 offered, as a provider's endpoint does (the worker trusts its certificate by ca_file); without it, plain HTTP/1.1, one connection per call in flight")
	flag.BoolVar(&p.cluster, "cluster", false, "instead of agentq against bare asynq, start a Redis Cluster of -primaries primaries and run -chains chains of -length prompt steps with the default queue in -shards shards, then in one: each primary's commands/s and CPU, and steps per second of the busiest primary's CPU")
	flag.BoolVar(&p.durable, "durability", false, "instead of agentq against bare asynq, start a Redis primary with one replica and run each shape without and with redis.durability {replicas: 1, timeout: 1s}, back to back; reports steps/s, wall time, Redis commands, WAITs and Redis CPU per step of each and their ratio")
	flag.IntVar(&p.primaries, "primaries", 3, "with -cluster: the cluster's primaries")
	flag.IntVar(&p.shards, "shards", 6, "with -cluster: the default queue's shards")
	resources := flag.String("resources", "", "comma-separated worker concurrencies at which to measure a worker process's RSS and CPU per 1,000 steps (e.g. 50,500)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run here")
	memprofile := flag.String("memprofile", "", "write a heap profile (allocations of the whole run: -sample_index alloc_objects) here at the end")
	flag.Parse()
	var err error
	if p.resources, err = parseInts(*resources); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if *cpuprofile != "" {
		if err := startCPUProfile(*cpuprofile); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}
	if *memprofile != "" {
		defer writeHeapProfile(*memprofile)
	}
	if err := run(context.Background(), p, os.Stdout); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// defaultPython prefers the system interpreter, where Debian's
// python3-celery installs.
func defaultPython() string {
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3"
	}
	return "python3"
}

func splitComma(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func run(ctx context.Context, p params, out io.Writer) error {
	minChords := 1
	if p.mapItems != 0 && (p.codestep || p.floor || p.celery || len(p.resources) > 0) {
		return errors.New("-map runs alone: not with -codestep, -floor, -celery or -resources")
	}
	if p.mapItems < 0 {
		return errors.New("-map must be at least 1")
	}
	if p.keys && (p.codestep || p.floor || p.celery || p.events || len(p.resources) > 0) {
		return errors.New("-keys runs alone: not with -codestep, -floor, -celery, -events or -resources")
	}
	if p.events && (p.codestep || p.floor || p.celery || len(p.resources) > 0) {
		return errors.New("-events runs alone: not with -codestep, -floor, -celery or -resources")
	}
	if p.codestep {
		if p.floor || p.celery || len(p.resources) > 0 {
			return errors.New("-codestep runs alone: not with -floor, -celery or -resources")
		}
		if p.chords+p.chains < 1 {
			return errors.New("-codestep needs -chords or -chains")
		}
		minChords = 0 // -chords 0: chains only
	}
	if p.chords < minChords || p.members < 1 || p.concurrency < 1 || p.chains < 0 || p.length < 1 || p.runs < 1 {
		return errors.New("-chords, -members, -length, -concurrency and -runs must be at least 1 (-chords 0 allowed with -codestep), -chains at least 0")
	}
	if p.inflight > 0 && p.waves < 1 {
		return errors.New("-waves must be at least 1")
	}
	if p.workerProfile != "" && p.inflight == 0 {
		return errors.New("-workerprofile goes with -inflight")
	}
	if p.tls && p.inflight == 0 {
		return errors.New("-tls goes with -inflight (chaosllm over HTTPS for the calls in flight)")
	}
	if p.durable {
		if p.cluster || p.codestep || p.floor || p.celery || p.events || p.keys || p.handoff || p.inflight > 0 || p.followers > 0 || p.mapItems != 0 || len(p.resources) > 0 {
			return errors.New("-durability runs alone")
		}
		chaos, chaosURL, stop, err := serveChaos(p.latency)
		if err != nil {
			return err
		}
		defer stop()
		return runDurability(ctx, p, out, chaos, chaosURL)
	}
	if p.cluster {
		_, chaosURL, stop, err := serveChaos(p.latency)
		if err != nil {
			return err
		}
		defer stop()
		return runCluster(ctx, p, out, chaosURL)
	}
	db, rdb, err := redistest.Open()
	if err != nil {
		return err
	}
	defer redistest.Stop()
	defer rdb.Close()
	chaos, chaosURL, stop, err := serveChaos(p.latency)
	if err != nil {
		return err
	}
	defer stop()

	if p.mapItems > 0 {
		return runMap(ctx, p, out, rdb, db, chaos, chaosURL)
	}
	if p.codestep {
		return runCodeSteps(ctx, p, out, rdb, db, chaos, chaosURL)
	}
	if p.events {
		return runEvents(ctx, p, out, rdb, db, chaos, chaosURL)
	}
	if p.keys {
		return runKeys(ctx, p, out, rdb, db, chaos, chaosURL)
	}
	if p.onestep != 0 {
		if p.codestep || p.celery || p.events || p.keys || p.handoff || p.inflight > 0 || p.followers > 0 || len(p.resources) > 0 {
			return errors.New("-onestep runs alone (it runs the floor itself)")
		}
		return runOneStep(ctx, p, out, rdb, db, chaos, chaosURL)
	}
	if p.handoff {
		return runHandoff(ctx, p, out, rdb, db, chaosURL)
	}
	if p.inflight > 0 {
		if p.latency <= 0 {
			return errors.New("-inflight needs -latency (the time each call takes)")
		}
		if p.tls {
			url, ca, stop, err := serveChaosTLS(chaos)
			if err != nil {
				return err
			}
			defer stop()
			chaosURL, p.chaosCA = url, ca
		}
		return runInflight(ctx, p, out, rdb, db, chaosURL)
	}
	if p.followers > 0 {
		return runFollowers(ctx, p, out, rdb, db, chaosURL)
	}
	var r Report
	r.Params.Chords, r.Params.Members, r.Params.Concurrency, r.Params.Redis = p.chords, p.members, p.concurrency, db.Kind
	r.Params.Chains, r.Params.Length = p.chains, p.length
	r.Params.LatencyMs = ms(p.latency)
	fmt.Fprintf(out, "bench: concurrency %d, LLM latency %s, Redis %s at %s\n", p.concurrency, p.latency, db.Kind, db.Addr)

	shapes := []shape{chordShape(p.chords, p.members)}
	if p.chains > 0 {
		shapes = append(shapes, chainShape(p.chains, p.length))
	}
	for _, sh := range shapes {
		fmt.Fprintf(out, "bench: %d %s × %d steps = %d steps\n", sh.workflows, sh.name, sh.steps, sh.workflows*sh.steps)
		// each repetition measures agentq and bare asynq back to back,
		// agentq first in even repetitions and last in odd ones; the
		// repetition with the median ratio is reported, with every ratio
		var runs []Run
		for i := 0; i < p.runs; i++ {
			res, err := measure(ctx, p, sh, rdb, db, chaos, chaosURL, i%2 == 1)
			if err != nil {
				return err
			}
			runs = append(runs, res)
		}
		sort.Slice(runs, func(i, j int) bool { return runs[i].Ratio < runs[j].Ratio })
		res := runs[len(runs)/2]
		for _, x := range runs {
			res.Ratios = append(res.Ratios, x.Ratio)
			if f := x.floor2(); f != nil {
				res.FloorRatios = append(res.FloorRatios, x.Agentq.StepsPerSec/f.StepsPerSec)
				if x.AgentqLast {
					res.FloorRatiosAgentqLast = append(res.FloorRatiosAgentqLast, x.Agentq.StepsPerSec/f.StepsPerSec)
				}
				if f.Cost.RedisCPUMicros > 0 {
					res.FloorRedisCPU = append(res.FloorRedisCPU, x.Agentq.Cost.RedisCPUMicros/f.Cost.RedisCPUMicros)
				}
			}
		}
		sort.Float64s(res.FloorRatios)
		sort.Float64s(res.FloorRedisCPU)
		if sh.name == "chords" {
			r.Chords = res
		} else {
			r.Chains = &res
		}
	}
	if p.celery {
		if err := rdb.FlushDB(ctx).Err(); err != nil {
			return err
		}
		c, err := runCelery(ctx, p, db, chaosURL)
		if err != nil {
			r.CeleryError = err.Error()
			fmt.Fprintln(out, "bench: celery run failed:", err)
		} else {
			r.Celery = c
			r.CeleryRatio = r.Chords.Agentq.WorkflowsPerSec / c.ChordsPerSec
			r.BareCeleryRatio = r.Chords.Bare.WorkflowsPerSec / c.ChordsPerSec
		}
	}
	for _, c := range p.resources {
		if err := rdb.FlushDB(ctx).Err(); err != nil {
			return err
		}
		res, err := measureResources(ctx, p, c, rdb, db, chaosURL)
		if err != nil {
			return fmt.Errorf("resources at concurrency %d: %w", c, err)
		}
		r.Resources = append(r.Resources, res)
	}
	printReport(out, p, &r)
	return writeReport(p.jsonOut, r)
}
