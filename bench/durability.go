package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/redistest"
)

// -durability: what replicated durability costs. A throwaway primary with
// one replica (no persistence, both on loopback) runs each shape twice per
// repetition on an in-process worker and producer: without
// redis.durability and with { replicas: 1, timeout: 1s }, where every
// acknowledging write (a submit, a settle) is followed on its connection
// by a marker SET in its slot and WAIT 1 1000. The replica is attached
// in both runs, so the difference is the confirmation alone.

// benchDurability is the durability the runs with it ask for.
var benchDurability = config.Durability{Replicas: 1, Timeout: config.Duration(time.Second)}

// DurabilityRun is one shape's figures without (Off) and with (On)
// durability, the repetition with the median Redis CPU ratio.
type DurabilityRun struct {
	EventsRun
	// WaitsPerStep and ReplconfPerStep are, for every repetition with
	// durability (lowest first), the WAITs the primary ran per step and
	// the REPLCONF commands (the replica's ACKs, which WAIT asks for).
	WaitsPerStep, ReplconfPerStep []float64
	// ReplconfOffPerStep are the runs without durability's REPLCONFs per
	// step (the replica's ACK every second).
	ReplconfOffPerStep []float64
	// StepsRatios are every repetition's steps/s with ÷ without, lowest
	// first (the repetition above is the median by Redis CPU, not by
	// steps/s, which swing more on a shared machine).
	StepsRatios []float64
}

// DurabilityReport is what a -durability run measured; -json writes it.
type DurabilityReport struct {
	Params     Params
	Durability config.Durability
	Shapes     []DurabilityRun
}

func runDurability(ctx context.Context, p params, out io.Writer, chaos *chaosllm.Server, chaosURL string) error {
	procs, err := redistest.StartReplicated(ctx, 1)
	if err != nil {
		return fmt.Errorf("a Redis primary and replica: %w", err)
	}
	defer procs.Stop()
	rdb := redis.NewClient(&redis.Options{Addr: procs.Primary})
	defer rdb.Close()
	db := redistest.DB{Addr: procs.Primary, Kind: "redis-server, 1 replica"}
	var r DurabilityReport
	r.Params = Params{Chords: p.chords, Members: p.members, Chains: p.chains, Length: p.length, Concurrency: p.concurrency,
		LatencyMs: ms(p.latency), Redis: db.Kind}
	r.Durability = benchDurability
	fmt.Fprintf(out, "bench: durability off against on (replicas %d, timeout %s); concurrency %d, LLM latency %s, primary %s, replica %s\n",
		benchDurability.Replicas, benchDurability.Timeout.D(), p.concurrency, p.latency, procs.Primary, strings.Join(procs.Replicas, ", "))
	shapes := []shape{chordShape(p.chords, p.members)}
	if p.chains > 0 {
		shapes = append(shapes, chainShape(p.chains, p.length))
	}
	for _, sh := range shapes {
		steps := sh.workflows * sh.steps
		fmt.Fprintf(out, "bench: %d %s × %d steps = %d steps, durability off and on\n", sh.workflows, sh.name, sh.steps, steps)
		var res DurabilityRun
		// every run's steps/s, in order: each repetition is two runs, one
		// with and one without
		type rate struct {
			on  bool
			sps float64
		}
		var rates []rate
		er, err := pairRuns(p, sh, out, func(on bool) (AgentqRun, error) {
			q, label := p, "agentq durability off "+sh.name
			if on {
				d := benchDurability
				q.durability, label = &d, "agentq durability on "+sh.name
			}
			run, err := measureAgentq(ctx, q, sh, label, rdb, db, chaos, chaosURL)
			if err != nil {
				return run, err
			}
			// since the run's start (the meter reset the statistics);
			// reading the results afterwards makes no WAIT
			waits, replconf, err := waitStats(ctx, rdb)
			if err != nil {
				return run, err
			}
			switch {
			case on && waits < int64(steps):
				return run, fmt.Errorf("%s: %d WAITs for %d steps: durability was not on", label, waits, steps)
			case !on && waits > 0:
				return run, fmt.Errorf("%s: %d WAITs: durability was not off", label, waits)
			}
			rates = append(rates, rate{on, run.StepsPerSec})
			if on {
				res.WaitsPerStep = append(res.WaitsPerStep, float64(waits)/float64(steps))
				res.ReplconfPerStep = append(res.ReplconfPerStep, float64(replconf)/float64(steps))
			} else {
				res.ReplconfOffPerStep = append(res.ReplconfOffPerStep, float64(replconf)/float64(steps))
			}
			return run, nil
		})
		if err != nil {
			return err
		}
		res.EventsRun = er
		for i := 0; i+1 < len(rates); i += 2 {
			a, b := rates[i], rates[i+1]
			if a.on {
				a, b = b, a
			}
			res.StepsRatios = append(res.StepsRatios, b.sps/a.sps)
		}
		sort.Float64s(res.StepsRatios)
		sort.Float64s(res.WaitsPerStep)
		sort.Float64s(res.ReplconfPerStep)
		sort.Float64s(res.ReplconfOffPerStep)
		r.Shapes = append(r.Shapes, res)
	}
	printDurabilityReport(out, &r)
	return writeReport(p.jsonOut, r)
}

// waitStats reads the calls of WAIT and REPLCONF from the primary's
// command statistics.
func waitStats(ctx context.Context, rdb *redis.Client) (waits, replconf int64, err error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, 0, fmt.Errorf("INFO commandstats: %w", err)
	}
	for _, line := range strings.Split(info, "\n") {
		// cmdstat_wait:calls=10,usec=55,...
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		n, _ := strconv.ParseInt(calls, 10, 64)
		switch name {
		case "cmdstat_wait":
			waits = n
		case "cmdstat_replconf":
			replconf = n
		}
	}
	return waits, replconf, nil
}

func printDurabilityReport(out io.Writer, r *DurabilityReport) {
	fmt.Fprintf(out, "\n| shape | run | steps/s | wall µs per step | hand-off p50 / p99 ms | Redis commands per step | WAIT per step | Redis CPU µs per step | process CPU µs per step |\n")
	fmt.Fprintf(out, "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, x := range r.Shapes {
		n := float64(x.Workflows * x.StepsPerWorkflow)
		wall := func(a AgentqRun) float64 { return 1e6 * a.Seconds / n }
		name := fmt.Sprintf("%s %d × %d", x.Shape, x.Workflows, x.StepsPerWorkflow)
		for _, row := range []struct {
			run   string
			a     AgentqRun
			waits float64
		}{{"without", x.Off, 0}, {"with", x.On, medianOf(x.WaitsPerStep)}} {
			fmt.Fprintf(out, "| %s | %s | %.0f | %.0f | %.1f / %.1f | %.1f | %.2f | %.0f | %.0f |\n", name, row.run, row.a.StepsPerSec, wall(row.a),
				row.a.HandoffP50ms, row.a.HandoffP99ms, row.a.Cost.CallsPerStep, row.waits, row.a.Cost.RedisCPUMicros, row.a.Cost.ProcCPUMicros)
		}
		fmt.Fprintf(out, "| %s | with ÷ without | %.2f | %.2f | %s / %s | %s | – | %.2f | %.2f |\n", name, x.On.StepsPerSec/x.Off.StepsPerSec,
			x.On.Seconds/x.Off.Seconds, quotient(x.On.HandoffP50ms, x.Off.HandoffP50ms), quotient(x.On.HandoffP99ms, x.Off.HandoffP99ms),
			quotient(x.On.Cost.CallsPerStep, x.Off.Cost.CallsPerStep), x.RedisRatio, x.ProcRatio)
	}
	if len(r.Shapes) > 0 && len(r.Shapes[0].RedisRatios) > 1 {
		var s []string
		for _, x := range r.Shapes {
			s = append(s, x.Shape+" "+ratios(x.RedisRatios))
		}
		fmt.Fprintf(out, "\nRedis CPU per step with ÷ without, %d repetitions (median reported above): %s\n", len(r.Shapes[0].RedisRatios), strings.Join(s, ", "))
		s = s[:0]
		for _, x := range r.Shapes {
			s = append(s, fmt.Sprintf("%s %s (median %.2f)", x.Shape, ratios(x.StepsRatios), medianOf(x.StepsRatios)))
		}
		fmt.Fprintf(out, "steps/s with ÷ without, every repetition: %s\n", strings.Join(s, ", "))
	}
	for _, x := range r.Shapes {
		fmt.Fprintf(out, "%s: WAIT per step %s; REPLCONF (the replica's ACKs) per step with %s, without %s\n", x.Shape, ratios(x.WaitsPerStep),
			ratios(x.ReplconfPerStep), ratios(x.ReplconfOffPerStep))
	}
	if len(r.Shapes) > 0 && r.Shapes[0].Off.Cost.CallsPerStep > 0 {
		fmt.Fprintf(out, "\n| run | Redis commands per step | Redis µs executing them | most costly |\n| --- | ---: | ---: | --- |\n")
		for _, x := range r.Shapes {
			for _, c := range []struct {
				name string
				c    Cost
			}{{"without " + x.Shape, x.Off.Cost}, {"with " + x.Shape, x.On.Cost}} {
				fmt.Fprintf(out, "| %s | %.1f | %.1f | %s |\n", c.name, c.c.CallsPerStep, c.c.MicrosPerStep, strings.Join(c.c.Top, "; "))
			}
		}
	}
}

// quotient is a ÷ b to two places, "–" without b.
func quotient(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return strconv.FormatFloat(a/b, 'f', 2, 64)
}
