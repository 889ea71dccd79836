package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/redistest"
)

// -events: the same workload twice in the same process and run, once with
// the event log off and once with it on and every prompt step streaming
// (stream: true: its text goes to the log as step.delta events besides
// each step's ready, started, llm.call and done). What the log costs is
// the ratio of their CPU per step, Redis's above all.

// eventsTarget is the most Redis CPU per step may rise with the event log
// and streaming on.
const eventsTarget = 1.15

// EventsRun is one shape's figures with the log off and on (the median
// repetition's).
type EventsRun struct {
	Shape                       string
	Workflows, StepsPerWorkflow int
	Off, On                     AgentqRun
	// RedisRatio is Redis's CPU per step with the log on over off;
	// ProcRatio this process's.
	RedisRatio, ProcRatio float64
	// RedisRatios are every repetition's RedisRatio, lowest first.
	RedisRatios []float64 `json:",omitempty"`
	// OnFirst says the median repetition ran with the log on first.
	OnFirst bool
}

// EventsReport is what an -events run measured; -json writes it.
type EventsReport struct {
	Params Params
	Events []EventsRun
}

// streaming is sh with every prompt step streaming.
func streaming(sh shape) shape {
	sh.spec = strings.ReplaceAll(sh.spec, "prompt: ", "stream: true, prompt: ")
	return sh
}

func runEvents(ctx context.Context, p params, out io.Writer, rdb *redis.Client, db redistest.DB, chaos *chaosllm.Server, chaosURL string) error {
	var r EventsReport
	r.Params = Params{Chords: p.chords, Members: p.members, Chains: p.chains, Length: p.length, Concurrency: p.concurrency,
		LatencyMs: ms(p.latency), Redis: db.Kind}
	fmt.Fprintf(out, "bench: event log off against on (and streaming); concurrency %d, LLM latency %s, Redis %s at %s\n", p.concurrency, p.latency, db.Kind, db.Addr)
	shapes := []shape{chordShape(p.chords, p.members)}
	if p.chains > 0 {
		shapes = append(shapes, chainShape(p.chains, p.length))
	}
	for _, sh := range shapes {
		fmt.Fprintf(out, "bench: %d %s × %d steps = %d steps, log off and on\n", sh.workflows, sh.name, sh.steps, sh.workflows*sh.steps)
		res, err := pairRuns(p, sh, out, func(on bool) (AgentqRun, error) {
			q := p
			q.eventsOff = !on
			if !on {
				return measureAgentq(ctx, q, sh, "agentq events off "+sh.name, rdb, db, chaos, chaosURL)
			}
			run, err := measureAgentq(ctx, q, streaming(sh), "agentq events on "+sh.name, rdb, db, chaos, chaosURL)
			if err == nil {
				err = checkLogged(ctx, rdb, sh)
			}
			return run, err
		})
		if err != nil {
			return err
		}
		r.Events = append(r.Events, res)
	}
	printEventsReport(out, &r)
	return writeReport(p.jsonOut, r)
}

// checkLogged checks, after a run with the log on, that every workflow
// has its log (kept in its record), with its steps' streamed text in it.
func checkLogged(ctx context.Context, rdb *redis.Client, sh shape) error {
	var logs int
	iter := rdb.Scan(ctx, 0, "agentq:{wf:*}:wf", 1000).Iterator()
	var first string
	for iter.Next(ctx) {
		if !rdb.HExists(ctx, iter.Val(), "#log").Val() {
			continue
		}
		if first == "" {
			first = iter.Val()
		}
		logs++
	}
	if err := iter.Err(); err != nil {
		return err
	}
	if logs != sh.workflows {
		return fmt.Errorf("events %s: %d workflows have a log, want %d", sh.name, logs, sh.workflows)
	}
	fields, err := rdb.HGetAll(ctx, first).Result()
	if err != nil {
		return err
	}
	deltas := 0
	for f, v := range fields {
		if strings.HasPrefix(f, "#") {
			deltas += strings.Count(v, `"type":"step.delta"`)
		}
	}
	if deltas < sh.steps {
		return fmt.Errorf("events %s: a workflow's log has %d step.delta events for %d streaming steps", sh.name, deltas, sh.steps)
	}
	return nil
}

func printEventsReport(out io.Writer, r *EventsReport) {
	fmt.Fprintf(out, "\n| shape | steps | Redis CPU µs/step off | on | on ÷ off (target ≤ %.2f) | process CPU µs/step off | on | on ÷ off | steps/s off / on |\n", eventsTarget)
	fmt.Fprintf(out, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, x := range r.Events {
		fmt.Fprintf(out, "| %s | %d | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f | %.0f / %.0f |\n", x.Shape, x.Workflows*x.StepsPerWorkflow,
			x.Off.Cost.RedisCPUMicros, x.On.Cost.RedisCPUMicros, x.RedisRatio, x.Off.Cost.ProcCPUMicros, x.On.Cost.ProcCPUMicros, x.ProcRatio,
			x.Off.StepsPerSec, x.On.StepsPerSec)
	}
	if len(r.Events) > 0 && len(r.Events[0].RedisRatios) > 1 {
		var s []string
		for _, x := range r.Events {
			s = append(s, x.Shape+" "+ratios(x.RedisRatios))
		}
		fmt.Fprintf(out, "\nRedis CPU on ÷ off of %d repetitions (median reported above): %s\n", len(r.Events[0].RedisRatios), strings.Join(s, ", "))
	}
	if len(r.Events) > 0 && r.Events[0].Off.Cost.CallsPerStep > 0 {
		fmt.Fprintf(out, "\n| run | Redis commands per step | Redis µs executing them | most costly |\n| --- | ---: | ---: | --- |\n")
		for _, x := range r.Events {
			for _, c := range []struct {
				name string
				c    Cost
			}{{"off " + x.Shape, x.Off.Cost}, {"on " + x.Shape, x.On.Cost}} {
				fmt.Fprintf(out, "| %s | %.1f | %.1f | %s |\n", c.name, c.c.CallsPerStep, c.c.MicrosPerStep, strings.Join(c.c.Top, "; "))
			}
		}
	}
	for _, x := range r.Events {
		if x.RedisRatio > eventsTarget {
			fmt.Fprintf(out, "\ntarget missed: %s Redis CPU per step with the log on is %.2f× off > %.2f×\n", x.Shape, x.RedisRatio, eventsTarget)
		}
	}
}

// pairRuns measures sh p.runs times, each repetition the run without
// (on false) and with the thing measured back to back (with it first in
// odd repetitions, so that what a run leaves behind does not always fall
// on one side), and returns the repetition with the median Redis CPU
// ratio, with every repetition's ratio.
func pairRuns(p params, sh shape, out io.Writer, measure func(on bool) (AgentqRun, error)) (EventsRun, error) {
	var runs []EventsRun
	for i := 0; i < p.runs; i++ {
		res := EventsRun{Shape: sh.name, Workflows: sh.workflows, StepsPerWorkflow: sh.steps, OnFirst: i%2 == 1}
		order := []bool{false, true}
		if res.OnFirst {
			order = []bool{true, false}
		}
		for _, on := range order {
			run, err := measure(on)
			if err != nil {
				return res, err
			}
			if on {
				res.On = run
			} else {
				res.Off = run
			}
		}
		if c := res.Off.Cost.RedisCPUMicros; c > 0 {
			res.RedisRatio = res.On.Cost.RedisCPUMicros / c
		}
		if c := res.Off.Cost.ProcCPUMicros; c > 0 {
			res.ProcRatio = res.On.Cost.ProcCPUMicros / c
		}
		fmt.Fprintf(out, "bench:   %s repetition %d: Redis CPU/step off %.0f µs, on %.0f µs (%.2f×); process %.0f µs, %.0f µs (%.2f×)\n", sh.name, i+1,
			res.Off.Cost.RedisCPUMicros, res.On.Cost.RedisCPUMicros, res.RedisRatio, res.Off.Cost.ProcCPUMicros, res.On.Cost.ProcCPUMicros, res.ProcRatio)
		runs = append(runs, res)
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].RedisRatio < runs[j].RedisRatio })
	res := runs[len(runs)/2]
	for _, x := range runs {
		res.RedisRatios = append(res.RedisRatios, x.RedisRatio)
	}
	return res, nil
}
