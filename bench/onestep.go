package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/redistest"
)

// -onestep N: the cheapest workflow there is, one prompt step, against
// the same call made by a bare asynq task and by the floor (bare asynq
// plus two scripted writes of the answer per task), in the same run,
// -runs times, the order alternated (measure). Every figure reported is
// the median of the repetitions; the ratios to the floor are the medians
// of each repetition's own ratio.

// Targets of a one-step workflow against the floor.
const (
	oneStepProcTarget  = 1.3 // process CPU per step, at most
	oneStepRedisTarget = 1.5 // Redis CPU per step, at most
	oneStepRateTarget  = 0.8 // steps/s, at least
)

// OneStepSide is one contender's medians over the repetitions.
type OneStepSide struct {
	Name                           string
	StepsPerSec                    float64
	ProcCPUMicros, RedisCPUMicros  float64
	CallsPerStep, MicrosPerStep    float64
	RedisReadsPerStep              float64 // Cost's
	AllocsPerStep, AllocKiBPerStep float64
	// Commands are Redis's commands per step by name (a script's inner
	// commands counted too), each figure the median of the repetitions,
	// the costliest first.
	Commands []CommandCost
}

// OneStepReport is what a -onestep run measured; -json writes it.
type OneStepReport struct {
	Params Params
	Steps  int
	Sides  []OneStepSide // agentq, bare asynq, + 1 write, + 2 writes
	// Floor ratios, agentq ÷ bare asynq + 2 writes: the median of the
	// repetitions' (and every repetition's, in order).
	RateRatio, ProcRatio, RedisRatio    float64
	RateRatios, ProcRatios, RedisRatios []float64
	Runs                                []Run `json:",omitempty"`
}

// oneStepShape is n workflows of one prompt step. Its bare side runs n
// independent tasks (not chains: the shape is not named "chains").
func oneStepShape(n int) shape {
	sh := chainShape(n, 1)
	sh.name = "onestep"
	return sh
}

func runOneStep(ctx context.Context, p params, out io.Writer, rdb *redis.Client, db redistest.DB, chaos *chaosllm.Server, chaosURL string) error {
	if p.onestep < 1 {
		return errors.New("-onestep must be at least 1")
	}
	sh := oneStepShape(p.onestep)
	r := OneStepReport{Steps: p.onestep, Params: Params{Chains: p.onestep, Length: 1, Concurrency: p.concurrency, LatencyMs: ms(p.latency), Redis: db.Kind}}
	fmt.Fprintf(out, "bench: %d one-step workflows against %d bare asynq tasks and the floor (+1, +2 scripted writes), %d repetitions; concurrency %d, LLM latency %s, Redis %s at %s\n",
		p.onestep, p.onestep, p.runs, p.concurrency, p.latency, db.Kind, db.Addr)
	q := p
	q.floor = true
	for i := 0; i < p.runs; i++ {
		res, err := measure(ctx, q, sh, rdb, db, chaos, chaosURL, i%2 == 1)
		if err != nil {
			return err
		}
		f := res.floor2()
		rr := []float64{res.Agentq.StepsPerSec / f.StepsPerSec, div(res.Agentq.Cost.ProcCPUMicros, f.Cost.ProcCPUMicros),
			div(res.Agentq.Cost.RedisCPUMicros, f.Cost.RedisCPUMicros)}
		r.RateRatios, r.ProcRatios, r.RedisRatios = append(r.RateRatios, rr[0]), append(r.ProcRatios, rr[1]), append(r.RedisRatios, rr[2])
		fmt.Fprintf(out, "bench:   repetition %d (%s first): steps/s agentq %.0f, bare %.0f, floor %.0f; process CPU µs/step %.0f, %.0f, %.0f; Redis CPU µs/step %.0f, %.0f, %.0f; ÷ floor: steps/s %.2f, process %.2f, Redis %.2f\n",
			i+1, map[bool]string{false: "agentq", true: "floor"}[res.AgentqLast], res.Agentq.StepsPerSec, res.Bare.StepsPerSec, f.StepsPerSec,
			res.Agentq.Cost.ProcCPUMicros, res.Bare.Cost.ProcCPUMicros, f.Cost.ProcCPUMicros,
			res.Agentq.Cost.RedisCPUMicros, res.Bare.Cost.RedisCPUMicros, f.Cost.RedisCPUMicros, rr[0], rr[1], rr[2])
		r.Runs = append(r.Runs, res)
	}
	r.RateRatio, r.ProcRatio, r.RedisRatio = medianFloats(r.RateRatios), medianFloats(r.ProcRatios), medianFloats(r.RedisRatios)
	type sideOf func(Run) (float64, Cost)
	sides := []struct {
		name string
		of   sideOf
	}{
		{"agentq one-step workflows", func(x Run) (float64, Cost) { return x.Agentq.StepsPerSec, x.Agentq.Cost }},
		{"bare asynq tasks", func(x Run) (float64, Cost) { return x.Bare.StepsPerSec, x.Bare.Cost }},
		{"bare asynq + 1 write", func(x Run) (float64, Cost) { return x.Floor[0].StepsPerSec, x.Floor[0].Cost }},
		{"bare asynq + 2 writes (the floor)", func(x Run) (float64, Cost) { return x.Floor[1].StepsPerSec, x.Floor[1].Cost }},
	}
	for _, s := range sides {
		r.Sides = append(r.Sides, oneStepSide(s.name, r.Runs, s.of))
	}
	printOneStep(out, &r)
	return writeReport(p.jsonOut, r)
}

// oneStepSide is a contender's medians over runs.
func oneStepSide(name string, runs []Run, of func(Run) (float64, Cost)) OneStepSide {
	col := func(f func(float64, Cost) float64) float64 {
		xs := make([]float64, len(runs))
		for i, x := range runs {
			xs[i] = f(of(x))
		}
		return medianFloats(xs)
	}
	s := OneStepSide{Name: name,
		StepsPerSec:       col(func(sps float64, _ Cost) float64 { return sps }),
		ProcCPUMicros:     col(func(_ float64, c Cost) float64 { return c.ProcCPUMicros }),
		RedisCPUMicros:    col(func(_ float64, c Cost) float64 { return c.RedisCPUMicros }),
		CallsPerStep:      col(func(_ float64, c Cost) float64 { return c.CallsPerStep }),
		RedisReadsPerStep: col(func(_ float64, c Cost) float64 { return c.RedisReadsPerStep }),
		MicrosPerStep:     col(func(_ float64, c Cost) float64 { return c.MicrosPerStep }),
		AllocsPerStep:     col(func(_ float64, c Cost) float64 { return c.AllocsPerStep }),
		AllocKiBPerStep:   col(func(_ float64, c Cost) float64 { return c.AllocKiBPerStep }),
	}
	// each command's median over the repetitions (0 where one did not run it)
	names := map[string]bool{}
	for _, x := range runs {
		_, c := of(x)
		for _, cc := range c.Commands {
			names[cc.Name] = true
		}
	}
	for n := range names {
		calls, us := make([]float64, len(runs)), make([]float64, len(runs))
		for i, x := range runs {
			_, c := of(x)
			for _, cc := range c.Commands {
				if cc.Name == n {
					calls[i], us[i] = cc.Calls, cc.Micros
				}
			}
		}
		s.Commands = append(s.Commands, CommandCost{Name: n, Calls: medianFloats(calls), Micros: medianFloats(us)})
	}
	sort.Slice(s.Commands, func(i, j int) bool {
		if s.Commands[i].Micros != s.Commands[j].Micros {
			return s.Commands[i].Micros > s.Commands[j].Micros
		}
		return s.Commands[i].Name < s.Commands[j].Name
	})
	return s
}

func printOneStep(out io.Writer, r *OneStepReport) {
	fmt.Fprintf(out, "\n%d steps a run, medians of %d repetitions\n", r.Steps, len(r.Runs))
	fmt.Fprintf(out, "\n| run | steps/s | process CPU µs/step | Redis CPU µs/step | Redis commands/step | Redis µs executing them | Redis reads from clients/step | heap allocations/step (KiB) |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, s := range r.Sides {
		reads := "–"
		if s.RedisReadsPerStep > 0 {
			reads = fmt.Sprintf("%.1f", s.RedisReadsPerStep)
		}
		fmt.Fprintf(out, "| %s | %.0f | %.0f | %.0f | %.1f | %.1f | %s | %.0f (%.1f) |\n", s.Name, s.StepsPerSec, s.ProcCPUMicros, s.RedisCPUMicros,
			s.CallsPerStep, s.MicrosPerStep, reads, s.AllocsPerStep, s.AllocKiBPerStep)
	}
	fmt.Fprintf(out, "\nagentq ÷ the floor, median of the repetitions' ratios (each repetition's in brackets): steps/s %.2f (%s, target ≥ %.1f); process CPU %.2f (%s, target ≤ %.1f); Redis CPU %.2f (%s, target ≤ %.1f)\n",
		r.RateRatio, ratios(r.RateRatios), oneStepRateTarget, r.ProcRatio, ratios(r.ProcRatios), oneStepProcTarget, r.RedisRatio, ratios(r.RedisRatios), oneStepRedisTarget)
	if len(r.Sides) == 0 || len(r.Sides[0].Commands) == 0 {
		return
	}
	// the commands, by name, of agentq and of the floor side by side
	fmt.Fprintf(out, "\nRedis commands per step by name (median calls per step, µs per step):\n\n| command | agentq | µs | floor | µs |\n| --- | ---: | ---: | ---: | ---: |\n")
	floor := map[string]CommandCost{}
	for _, c := range r.Sides[len(r.Sides)-1].Commands {
		floor[c.Name] = c
	}
	seen := map[string]bool{}
	row := func(c, f CommandCost, name string) {
		fmt.Fprintf(out, "| %s | %.2f | %.1f | %.2f | %.1f |\n", name, c.Calls, c.Micros, f.Calls, f.Micros)
	}
	for _, c := range r.Sides[0].Commands {
		seen[c.Name] = true
		row(c, floor[c.Name], c.Name)
	}
	for _, f := range r.Sides[len(r.Sides)-1].Commands {
		if !seen[f.Name] {
			row(CommandCost{}, f, f.Name)
		}
	}
	var missed []string
	if r.RateRatio < oneStepRateTarget {
		missed = append(missed, fmt.Sprintf("steps/s %.2f of the floor's < %.1f", r.RateRatio, oneStepRateTarget))
	}
	if r.ProcRatio > oneStepProcTarget {
		missed = append(missed, fmt.Sprintf("process CPU per step %.2f× the floor's > %.1f×", r.ProcRatio, oneStepProcTarget))
	}
	if r.RedisRatio > oneStepRedisTarget {
		missed = append(missed, fmt.Sprintf("Redis CPU per step %.2f× the floor's > %.1f×", r.RedisRatio, oneStepRedisTarget))
	}
	for _, m := range missed {
		fmt.Fprintf(out, "\ntarget missed: one-step %s\n", m)
	}
}

// medianFloats is the median of xs (not sorted in place), 0 for none.
func medianFloats(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

func div(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
