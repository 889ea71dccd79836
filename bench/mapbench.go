package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/redistest"
)

// -map N: one workflow whose map step (for_each over .Input.items) runs N
// prompt instances, max_parallel -map-parallel, and a reduce step reading
// len .Steps.m.Outputs; and, in the same invocation and at the same
// concurrency, as many steps in -members-member chords (the chords
// workload). Both on an agentq worker, one after the other, the order
// alternating from one repetition to the next. The CPU per step of the
// map over the chords' says whether a wide fan-in costs what a narrow one
// does (target: mapCPUTarget).

// mapCPUTarget is the most a map's CPU per step (process or Redis) may be
// against 10-member chords'.
const mapCPUTarget = 1.2

// MapFigures are one run's figures (or, in MapResult, the medians of
// every repetition's, each taken on its own).
type MapFigures struct {
	Seconds, StepsPerSec            float64
	ProcCPUMicros, RedisCPUMicros   float64 // per step
	RedisCallsPerStep, HandoffP50ms float64
}

// MapRepetition is one repetition: the map, the chords, their CPU ratios.
type MapRepetition struct {
	Map, Chords                 AgentqRun
	ProcCPURatio, RedisCPURatio float64 // map ÷ chords, CPU µs per step
	ChordsFirst                 bool
}

// MapResult is what a -map run measured (the report's Map section).
type MapResult struct {
	Items, MaxParallel, Concurrency int
	// Chords × (Members + 1) steps is the comparison run, as close to
	// Items + 1 steps as whole chords get.
	Chords, Members int
	// Steps are what each run counts: the map's instances and its reduce
	// (its own expanding task makes no LLM call and is not counted), and
	// every chord step.
	MapSteps, ChordSteps int
	Map, Chord           MapFigures // medians of -runs
	// ProcCPURatio and RedisCPURatio are the medians of every repetition's
	// map ÷ chords CPU µs per step (target ≤ mapCPUTarget).
	ProcCPURatio, RedisCPURatio float64
	Repetitions                 []MapRepetition
}

// maxMapItems is the workers' default limits.max_map_items.
const maxMapItems = 10000

// benchMapCounts are a map step's counters as its record's JSON shows them
// ("map": items, started, settled, missing).
type benchMapCounts struct{ Items, Started, Settled, Missing int }

// mapCounts reads a step record's map counters through its JSON, the
// record's user contract; zero for a step that has none.
func mapCounts(st producer.StepRecord) benchMapCounts {
	var v struct{ Map benchMapCounts }
	b, _ := json.Marshal(st)
	_ = json.Unmarshal(b, &v)
	return v.Map
}

// mapShape is one workflow, plan-free (the items are its input), mapping
// items prompt instances.
func mapShape(items, parallel int) shape {
	spec := fmt.Sprintf(`name: plan-free
defaults: { route: bench }
steps:
  - { id: m, for_each: "{{ .Input.items }}", max_items: %d, max_parallel: %d, prompt: "item {{ .Item }}" }
  - { id: reduce, depends_on: [m], prompt: "reduce {{ len .Steps.m.Outputs }} outputs" }
`, items, parallel)
	list := make([]int, items)
	for i := range list {
		list[i] = i
	}
	return shape{name: "map", spec: spec, workflows: 1, steps: items + 1, last: "reduce",
		input: func(int) map[string]any { return map[string]any{"items": list} },
		check: func(wf *producer.Workflow) error {
			if len(wf.Steps) != 2 {
				return fmt.Errorf("%d steps, want 2", len(wf.Steps))
			}
			m, r := wf.Steps[0], wf.Steps[1]
			if got, want := mapCounts(m), (benchMapCounts{Items: items, Started: items, Settled: items}); got != want {
				return fmt.Errorf("map counts %+v, want %+v", got, want)
			}
			if want := fmt.Sprintf("reduce %d outputs", items); !strings.Contains(r.Output, want) {
				return fmt.Errorf("the reduce answered %q, not on %q", r.Output, want)
			}
			return nil
		},
		handoffs: func(wf *producer.Workflow) []float64 {
			if m, r := wf.Steps[0], wf.Steps[1]; m.FinishedAt != nil && r.StartedAt != nil {
				return []float64{ms(r.StartedAt.Sub(*m.FinishedAt))}
			}
			return nil
		}}
}

func figures(r AgentqRun) MapFigures {
	return MapFigures{Seconds: r.Seconds, StepsPerSec: r.StepsPerSec, ProcCPUMicros: r.Cost.ProcCPUMicros, RedisCPUMicros: r.Cost.RedisCPUMicros,
		RedisCallsPerStep: r.Cost.CallsPerStep, HandoffP50ms: r.HandoffP50ms}
}

// median is the median of f over xs (the upper one of an even count).
func median[T any](xs []T, f func(T) float64) float64 {
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = f(x)
	}
	sort.Float64s(v)
	return v[len(v)/2]
}

// mapMedians is the median of each figure on its own.
func mapMedians(runs []AgentqRun) MapFigures {
	fs := make([]MapFigures, len(runs))
	for i, r := range runs {
		fs[i] = figures(r)
	}
	return MapFigures{
		Seconds:           median(fs, func(f MapFigures) float64 { return f.Seconds }),
		StepsPerSec:       median(fs, func(f MapFigures) float64 { return f.StepsPerSec }),
		ProcCPUMicros:     median(fs, func(f MapFigures) float64 { return f.ProcCPUMicros }),
		RedisCPUMicros:    median(fs, func(f MapFigures) float64 { return f.RedisCPUMicros }),
		RedisCallsPerStep: median(fs, func(f MapFigures) float64 { return f.RedisCallsPerStep }),
		HandoffP50ms:      median(fs, func(f MapFigures) float64 { return f.HandoffP50ms }),
	}
}

func runMap(ctx context.Context, p params, out io.Writer, rdb *redis.Client, db redistest.DB, chaos *chaosllm.Server, chaosURL string) error {
	if p.mapItems > maxMapItems {
		return fmt.Errorf("-map %d is over the workers' limits.max_map_items (%d)", p.mapItems, maxMapItems)
	}
	if p.mapParallel < 1 {
		return errors.New("-map-parallel must be at least 1")
	}
	msh := mapShape(p.mapItems, p.mapParallel)
	chords := max(1, (p.mapItems+1+(p.members+1)/2)/(p.members+1))
	csh := chordShape(chords, p.members)
	res := MapResult{Items: p.mapItems, MaxParallel: p.mapParallel, Concurrency: p.concurrency, Chords: chords, Members: p.members,
		MapSteps: msh.steps, ChordSteps: chords * csh.steps}
	fmt.Fprintf(out, "bench: map of %d items (max_parallel %d) + reduce against %d chords × %d steps; concurrency %d, LLM latency %s, Redis %s at %s\n",
		p.mapItems, p.mapParallel, chords, csh.steps, p.concurrency, p.latency, db.Kind, db.Addr)
	var maps, chordRuns []AgentqRun
	var procR, redisR []float64
	for i := 0; i < p.runs; i++ {
		rep := MapRepetition{ChordsFirst: i%2 == 1}
		order := []bool{false, true} // chords?
		if rep.ChordsFirst {
			order = []bool{true, false}
		}
		for _, chord := range order {
			var err error
			if chord {
				rep.Chords, err = measureAgentq(ctx, p, csh, "agentq chords", rdb, db, chaos, chaosURL)
			} else {
				rep.Map, err = measureAgentq(ctx, p, msh, "agentq map", rdb, db, chaos, chaosURL)
			}
			if err != nil {
				return err
			}
		}
		if c := rep.Chords.Cost; c.ProcCPUMicros > 0 && c.RedisCPUMicros > 0 {
			rep.ProcCPURatio = rep.Map.Cost.ProcCPUMicros / c.ProcCPUMicros
			rep.RedisCPURatio = rep.Map.Cost.RedisCPUMicros / c.RedisCPUMicros
		}
		fmt.Fprintf(out, "bench:   repetition %d: map %.0f steps/s %.0f+%.0f µs/step, chords %.0f steps/s %.0f+%.0f µs/step (process+redis)\n", i+1,
			rep.Map.StepsPerSec, rep.Map.Cost.ProcCPUMicros, rep.Map.Cost.RedisCPUMicros,
			rep.Chords.StepsPerSec, rep.Chords.Cost.ProcCPUMicros, rep.Chords.Cost.RedisCPUMicros)
		maps, chordRuns = append(maps, rep.Map), append(chordRuns, rep.Chords)
		procR, redisR = append(procR, rep.ProcCPURatio), append(redisR, rep.RedisCPURatio)
		res.Repetitions = append(res.Repetitions, rep)
	}
	res.Map, res.Chord = mapMedians(maps), mapMedians(chordRuns)
	id := func(x float64) float64 { return x }
	res.ProcCPURatio, res.RedisCPURatio = median(procR, id), median(redisR, id)
	r := Report{Map: &res}
	r.Params = Params{Chords: chords, Members: p.members, Concurrency: p.concurrency, LatencyMs: ms(p.latency), Redis: db.Kind}
	printMap(out, &res)
	return writeReport(p.jsonOut, r)
}

func printMap(out io.Writer, r *MapResult) {
	fmt.Fprintf(out, "\n| run (median of %d) | steps | seconds | steps/s | CPU µs per step: this process | redis-server | Redis commands per step | hand-off p50 |\n",
		len(r.Repetitions))
	fmt.Fprintf(out, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	row := func(name string, steps int, f MapFigures) {
		fmt.Fprintf(out, "| %s | %d | %.2f | %.0f | %.0f | %.0f | %.1f | %.1f ms |\n", name, steps, f.Seconds, f.StepsPerSec, f.ProcCPUMicros,
			f.RedisCPUMicros, f.RedisCallsPerStep, f.HandoffP50ms)
	}
	row(fmt.Sprintf("agentq map: %d items, max_parallel %d, + reduce", r.Items, r.MaxParallel), r.MapSteps, r.Map)
	row(fmt.Sprintf("agentq chords: %d × %d members + body", r.Chords, r.Members), r.ChordSteps, r.Chord)
	fmt.Fprintf(out, "| map ÷ chords (target ≤ %.1f) | | %.2f | %.2f | %.2f | %.2f | | |\n", mapCPUTarget, r.Map.Seconds/r.Chord.Seconds,
		r.Map.StepsPerSec/r.Chord.StepsPerSec, r.ProcCPURatio, r.RedisCPURatio)
	if len(r.Repetitions) > 1 {
		var pr, rr []float64
		for _, x := range r.Repetitions {
			pr, rr = append(pr, x.ProcCPURatio), append(rr, x.RedisCPURatio)
		}
		sort.Float64s(pr)
		sort.Float64s(rr)
		fmt.Fprintf(out, "\nCPU map ÷ chords of %d repetitions (medians above): process %s, redis %s\n", len(r.Repetitions), ratios(pr), ratios(rr))
	}
	if len(r.Repetitions) > 0 && r.Repetitions[0].Map.Cost.CallsPerStep > 0 {
		mid := r.Repetitions[len(r.Repetitions)/2]
		fmt.Fprintf(out, "\n| run (repetition %d) | Redis µs executing commands per step | most costly |\n| --- | ---: | --- |\n", len(r.Repetitions)/2+1)
		fmt.Fprintf(out, "| map | %.1f | %s |\n", mid.Map.Cost.MicrosPerStep, strings.Join(mid.Map.Cost.Top, "; "))
		fmt.Fprintf(out, "| chords | %.1f | %s |\n", mid.Chords.Cost.MicrosPerStep, strings.Join(mid.Chords.Cost.Top, "; "))
	}
	if r.ProcCPURatio > mapCPUTarget || r.RedisCPURatio > mapCPUTarget {
		fmt.Fprintf(out, "\ntarget missed: map CPU per step %.2f× (process), %.2f× (redis) the chords' > %.1f×\n", r.ProcCPURatio, r.RedisCPURatio, mapCPUTarget)
	}
}
