package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq"
	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/llmclient"
)

// -codestep: the same workload twice in the same process and run, once
// with prompt steps and once with code steps (run: chat) whose function
// makes the same single chat call, on the same route, through
// s.LLM().Chat (durable: the answer is kept in Redis) and returns its
// text. Same prompt text, same request, same chaosllm, same Redis.

// codeStepTarget is the most a code step making one LLM call may cost
// against a prompt step making the same call (prompt steps/s ÷ code
// steps/s).
const codeStepTarget = 1.15

// chatFunc is the name the code steps run.
const chatFunc = "chat"

// stepLine is one step of a bench spec: a prompt step sending text, or a
// code step handing text to chatFunc as its with: argument.
func stepLine(id, deps, text string, code bool) string {
	dep := ""
	if deps != "" {
		dep = "depends_on: [" + deps + "], "
	}
	if code {
		return fmt.Sprintf("  - { id: %s, %srun: %s, with: %q }\n", id, dep, chatFunc, text)
	}
	return fmt.Sprintf("  - { id: %s, %sprompt: %q }\n", id, dep, text)
}

// outputField is what a dependent's template reads of its input: a code
// step's value is JSON (here a string, which renders as the same text as
// a prompt step's .Output).
func outputField(code bool) string {
	if code {
		return "JSON"
	}
	return "Output"
}

func stepFuncs(code bool) map[string]agentq.StepFunc {
	if !code {
		return nil
	}
	return map[string]agentq.StepFunc{chatFunc: chatStep("bench")}
}

// chatStep is the code steps' function, written as a user writes one (the
// SDK's types): the request a prompt step with the same text sends (one
// user message, no system prompt, default max tokens and temperature),
// through the durable LLM.
func chatStep(route string) agentq.StepFunc {
	return func(ctx context.Context, s *agentq.Step) (any, error) {
		var prompt string
		if err := s.Args(&prompt); err != nil {
			return nil, err
		}
		resp, err := s.LLM().Chat(ctx, route, llmclient.Request{Messages: []llmclient.Message{{Role: "user", Content: prompt}}})
		if err != nil {
			return nil, err
		}
		return resp.Text, nil
	}
}

// CodeRun is one shape's prompt-step and code-step figures (the median
// repetition's).
type CodeRun struct {
	Shape                       string
	Workflows, StepsPerWorkflow int
	Prompt, Code                AgentqRun
	// Ratio is prompt steps/s ÷ code steps/s: what a code step costs in
	// wall time against a prompt step (≤ codeStepTarget is the target).
	Ratio float64
	// CPURatio is the code run's CPU per step (this process and
	// redis-server) over the prompt run's.
	CPURatio float64
	// Ratios are every repetition's Ratio, lowest first.
	Ratios []float64 `json:",omitempty"`
	// CodeFirst says the median repetition ran the code steps first (the
	// order alternates from one repetition to the next).
	CodeFirst bool
}

// CodeReport is what a -codestep run measured; -json writes it.
type CodeReport struct {
	Params    Params
	CodeSteps []CodeRun
}

func runCodeSteps(ctx context.Context, p params, out io.Writer, rdb *redis.Client, db redistest.DB, chaos *chaosllm.Server, chaosURL string) error {
	var r CodeReport
	r.Params = Params{Chords: p.chords, Members: p.members, Chains: p.chains, Length: p.length, Concurrency: p.concurrency,
		LatencyMs: ms(p.latency), Redis: db.Kind}
	fmt.Fprintf(out, "bench: code steps against prompt steps; concurrency %d, LLM latency %s, Redis %s at %s\n", p.concurrency, p.latency, db.Kind, db.Addr)
	type pair struct{ prompt, code shape }
	var pairs []pair
	if p.chords > 0 {
		pairs = append(pairs, pair{chordShapeOf(p.chords, p.members, false), chordShapeOf(p.chords, p.members, true)})
	}
	if p.chains > 0 {
		pairs = append(pairs, pair{chainShapeOf(p.chains, p.length, false), chainShapeOf(p.chains, p.length, true)})
	}
	for _, sh := range pairs {
		fmt.Fprintf(out, "bench: %d %s × %d steps = %d steps, prompt steps and code steps\n", sh.prompt.workflows, sh.prompt.name, sh.prompt.steps,
			sh.prompt.workflows*sh.prompt.steps)
		var runs []CodeRun
		for i := 0; i < p.runs; i++ {
			res := CodeRun{Shape: sh.prompt.name, Workflows: sh.prompt.workflows, StepsPerWorkflow: sh.prompt.steps, CodeFirst: i%2 == 1}
			order := []bool{false, true}
			if res.CodeFirst {
				order = []bool{true, false}
			}
			for _, code := range order {
				var err error
				if code {
					if res.Code, err = measureAgentq(ctx, p, sh.code, "agentq code "+sh.code.name, rdb, db, chaos, chaosURL); err == nil {
						err = checkDurableCalls(ctx, rdb, sh.code)
					}
				} else {
					res.Prompt, err = measureAgentq(ctx, p, sh.prompt, "agentq prompt "+sh.prompt.name, rdb, db, chaos, chaosURL)
				}
				if err != nil {
					return err
				}
			}
			res.Ratio = res.Prompt.StepsPerSec / res.Code.StepsPerSec
			if pc := res.Prompt.Cost.ProcCPUMicros + res.Prompt.Cost.RedisCPUMicros; pc > 0 {
				res.CPURatio = (res.Code.Cost.ProcCPUMicros + res.Code.Cost.RedisCPUMicros) / pc
			}
			fmt.Fprintf(out, "bench:   repetition %d: prompt %.0f steps/s, code %.0f steps/s, ratio %.2f\n", i+1, res.Prompt.StepsPerSec, res.Code.StepsPerSec, res.Ratio)
			runs = append(runs, res)
		}
		sort.Slice(runs, func(i, j int) bool { return runs[i].Ratio < runs[j].Ratio })
		res := runs[len(runs)/2]
		for _, x := range runs {
			res.Ratios = append(res.Ratios, x.Ratio)
		}
		r.CodeSteps = append(r.CodeSteps, res)
	}
	printCodeReport(out, &r)
	return writeReport(p.jsonOut, r)
}

// checkDurableCalls checks, after a code run, that every step kept its one
// LLM answer durably (one calls hash per step).
func checkDurableCalls(ctx context.Context, rdb *redis.Client, sh shape) error {
	var n int
	iter := rdb.Scan(ctx, 0, store.Prefix+"{wf:*}:calls:*", 1000).Iterator()
	for iter.Next(ctx) {
		n++
	}
	if err := iter.Err(); err != nil {
		return err
	}
	if want := sh.workflows * sh.steps; n != want {
		return fmt.Errorf("code %s: %d steps kept durable calls, want %d", sh.name, n, want)
	}
	return nil
}

func printCodeReport(out io.Writer, r *CodeReport) {
	fmt.Fprintf(out, "\n| shape | steps | prompt steps/s | code steps/s | prompt ÷ code (target ≤ %.2f) | CPU µs/step prompt: process + redis | code: process + redis | CPU code ÷ prompt | hand-off p50 prompt / code |\n",
		codeStepTarget)
	fmt.Fprintf(out, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, x := range r.CodeSteps {
		pc, cc := x.Prompt.Cost, x.Code.Cost
		fmt.Fprintf(out, "| %s | %d | %.0f | %.0f | %.2f | %.0f + %.0f | %.0f + %.0f | %.2f | %.1f / %.1f ms |\n", x.Shape, x.Workflows*x.StepsPerWorkflow,
			x.Prompt.StepsPerSec, x.Code.StepsPerSec, x.Ratio, pc.ProcCPUMicros, pc.RedisCPUMicros, cc.ProcCPUMicros, cc.RedisCPUMicros, x.CPURatio,
			x.Prompt.HandoffP50ms, x.Code.HandoffP50ms)
	}
	if len(r.CodeSteps) > 0 && len(r.CodeSteps[0].Ratios) > 1 {
		var s []string
		for _, x := range r.CodeSteps {
			s = append(s, x.Shape+" "+ratios(x.Ratios))
		}
		fmt.Fprintf(out, "\nprompt ÷ code of %d repetitions (median reported above): %s\n", len(r.CodeSteps[0].Ratios), strings.Join(s, ", "))
	}
	if len(r.CodeSteps) > 0 && r.CodeSteps[0].Prompt.Cost.CallsPerStep > 0 {
		fmt.Fprintf(out, "\n| run | Redis commands per step | Redis µs executing them | most costly |\n| --- | ---: | ---: | --- |\n")
		for _, x := range r.CodeSteps {
			for _, c := range []struct {
				name string
				c    Cost
			}{{"prompt " + x.Shape, x.Prompt.Cost}, {"code " + x.Shape, x.Code.Cost}} {
				fmt.Fprintf(out, "| %s | %.1f | %.1f | %s |\n", c.name, c.c.CallsPerStep, c.c.MicrosPerStep, strings.Join(c.c.Top, "; "))
			}
		}
	}
	for _, x := range r.CodeSteps {
		if x.Ratio > codeStepTarget {
			fmt.Fprintf(out, "\ntarget missed: %s code steps cost %.2f× prompt steps > %.2f×\n", x.Shape, x.Ratio, codeStepTarget)
		}
	}
}
