package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

func printReport(out io.Writer, p params, r *Report) {
	fmt.Fprintf(out, "\n| run | seconds | steps/s | workflows/s | ratio to bare asynq | hand-off p50 | hand-off p99 |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	row := func(name string, x *Run) {
		fmt.Fprintf(out, "| agentq %s | %.2f | %.0f | %.1f | %.2f | %.1f ms | %.1f ms |\n", name, x.Agentq.Seconds, x.Agentq.StepsPerSec,
			x.Agentq.WorkflowsPerSec, x.Ratio, x.Agentq.HandoffP50ms, x.Agentq.HandoffP99ms)
		fmt.Fprintf(out, "| bare asynq, same calls | %.2f | %.0f | %.1f | 1 | – | – |\n", x.Bare.Seconds, x.Bare.StepsPerSec, x.Bare.WorkflowsPerSec)
		for _, f := range x.Floor {
			fmt.Fprintf(out, "| bare asynq + %d write(s) of the answer per step | %.2f | %.0f | %.1f | %.2f | – | – |\n", f.Writes, f.Seconds, f.StepsPerSec,
				f.StepsPerSec/float64(x.StepsPerWorkflow), f.Ratio)
		}
	}
	row("chords", &r.Chords)
	if r.Chains != nil {
		row("chains", r.Chains)
	}
	if c := r.Celery; c != nil {
		fmt.Fprintf(out, "| celery chords (%s pool) | %.2f | %.0f | %.1f | – | – | – |\n", c.Pool, c.Seconds, c.StepsPerSec, c.ChordsPerSec)
		fmt.Fprintf(out, "\nchords/s: agentq %.1f× Celery's, bare asynq %.1f× Celery's\n", r.CeleryRatio, r.BareCeleryRatio)
	}
	if len(r.Chords.Ratios) > 1 {
		fmt.Fprintf(out, "\nratios of %d repetitions (median reported above): chords %s", len(r.Chords.Ratios), ratios(r.Chords.Ratios))
		if r.Chains != nil {
			fmt.Fprintf(out, ", chains %s", ratios(r.Chains.Ratios))
		}
		fmt.Fprintln(out)
	}
	floorTargets(out, "chords", &r.Chords)
	if r.Chains != nil {
		floorTargets(out, "chains", r.Chains)
	}
	printCosts(out, r)
	if len(r.Resources) > 0 {
		fmt.Fprintf(out, "\n| worker concurrency | steps | seconds | peak RSS | CPU s per 1,000 steps (user) |\n| ---: | ---: | ---: | ---: | ---: |\n")
		for _, x := range r.Resources {
			fmt.Fprintf(out, "| %d | %d | %.1f | %.0f MiB | %.2f (%.2f) |\n", x.Concurrency, x.Steps, x.Seconds, x.PeakRSSMiB, x.CPUSecPer1000, x.UserSecPer1000)
		}
	}
	if r.Chords.Ratio < 0.8 {
		fmt.Fprintf(out, "\ntarget missed: chords ratio %.2f < 0.8 of bare asynq (docs/benchmarks.md says why; -floor shows the floor)\n", r.Chords.Ratio)
	}
	if r.Celery != nil && r.CeleryRatio < 3 {
		fmt.Fprintf(out, "\ntarget missed: agentq chords/s %.1f× Celery's < 3×\n", r.CeleryRatio)
	}
}

// printCosts prints each run's cost per step, when Redis kept statistics.
func printCosts(out io.Writer, r *Report) {
	if r.Chords.Agentq.Cost.CallsPerStep == 0 {
		return
	}
	fmt.Fprintf(out, "\n| run | CPU µs per step: this process | redis-server | heap allocations per step (KiB) | Redis commands per step | Redis µs executing them | most costly |\n| --- | ---: | ---: | ---: | ---: | ---: | --- |\n")
	cost := func(name string, c Cost) {
		fmt.Fprintf(out, "| %s | %.0f | %.0f | %.0f (%.1f) | %.1f | %.1f | %s |\n", name, c.ProcCPUMicros, c.RedisCPUMicros, c.AllocsPerStep, c.AllocKiBPerStep,
			c.CallsPerStep, c.MicrosPerStep, strings.Join(c.Top, "; "))
	}
	cost("agentq chords", r.Chords.Agentq.Cost)
	cost("bare chords", r.Chords.Bare.Cost)
	for _, f := range r.Chords.Floor {
		cost(fmt.Sprintf("bare chords + %d write(s)", f.Writes), f.Cost)
	}
	if r.Chains != nil {
		cost("agentq chains", r.Chains.Agentq.Cost)
		cost("bare chains", r.Chains.Bare.Cost)
		for _, f := range r.Chains.Floor {
			cost(fmt.Sprintf("bare chains + %d write(s)", f.Writes), f.Cost)
		}
	}
}

func ratios(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(s, " ")
}

func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(float64(len(s)-1) * p / 100)
	return s[i]
}

// floorTargets prints, with -floor, agentq against bare asynq + 2 writes
// per step in each repetition: steps/s (target ≥ 0.8) and Redis CPU per
// step (target ≤ 1.5).
func floorTargets(out io.Writer, name string, x *Run) {
	if len(x.FloorRatios) == 0 {
		return
	}
	fmt.Fprintf(out, "agentq %s ÷ bare asynq + 2 writes, %d repetitions: steps/s %s (median %.2f, target ≥ 0.8); Redis CPU per step %s (median %.2f, target ≤ 1.5)\n",
		name, len(x.FloorRatios), ratios(x.FloorRatios), x.FloorRatios[len(x.FloorRatios)/2], ratios(x.FloorRedisCPU), medianOf(x.FloorRedisCPU))
	if len(x.FloorRatiosAgentqLast) > 0 {
		fmt.Fprintf(out, "  of which agentq run after the floor (odd repetitions): steps/s %s\n", ratios(x.FloorRatiosAgentqLast))
	}
}

// medianOf is the median of sorted xs, 0 for none.
func medianOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return xs[len(xs)/2]
}

// writeReport writes report r as indented JSON to path ("": nowhere), for
// -json.
func writeReport(path string, r any) error {
	if path == "" {
		return nil
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
