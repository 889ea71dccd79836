// Command drill runs outage scenarios (bench/scenarios/*.yaml) against real
// agentq workers, Redis and chaosllm, and the same scenario against a naive
// retry loop in the same run, and writes a Markdown and a JSON report per
// scenario. See bench/README.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/redistest"
)

// side is one contender in a drill.
type side interface {
	name() string
	prepare(ctx context.Context) error
	begin(ctx context.Context) error // the scenario's clock starts
	submit(ctx context.Context, n int) error
	pending(ctx context.Context) (int, error) // workflows not yet at an end
	collect(ctx context.Context) (*result, error)
	close()
}

func main() { os.Exit(mainErr()) }

func mainErr() int {
	outDir := flag.String("out", "bench/reports", "write <scenario>.md and <scenario>.json here")
	noNaive := flag.Bool("no-naive", false, "skip the naive baseline")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: drill [-out DIR] [-no-naive] SCENARIO.yaml ...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		return 2
	}
	var scs []*Scenario
	for _, path := range flag.Args() {
		sc, err := loadScenario(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "drill:", err)
			return 2
		}
		scs = append(scs, sc)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "drill:", err)
		return 1
	}
	db, rdb, err := redistest.Open()
	if err != nil {
		fmt.Fprintln(os.Stderr, "drill:", err)
		return 1
	}
	defer redistest.Stop()
	failed := false
	for _, sc := range scs {
		rep, err := drill(ctx, sc, db, rdb, !*noNaive, os.Stderr)
		if err != nil {
			fmt.Fprintf(os.Stderr, "drill: %s: %v\n", sc.Name, err)
			return 1
		}
		base := filepath.Join(*outDir, slug(sc.Name))
		var md strings.Builder
		writeMarkdown(&md, rep)
		js, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(base+".md", []byte(md.String()), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "drill:", err)
			return 1
		}
		if err := os.WriteFile(base+".json", append(js, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "drill:", err)
			return 1
		}
		fmt.Println(md.String())
		for _, t := range rep.Targets {
			failed = failed || !t.Met
		}
	}
	if failed {
		fmt.Fprintln(os.Stderr, "drill: a target was missed (see the reports)")
		return 1
	}
	return 0
}

func slug(s string) string {
	return strings.Trim(strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '-'
	}, s), "-")
}

func drill(ctx context.Context, sc *Scenario, db redistest.DB, rdb *redis.Client, naive bool, log io.Writer) (*Report, error) {
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		return nil, err
	}
	sides := []side{&agentqSide{sc: sc, db: db, rdb: rdb}}
	if naive {
		sides = append(sides, &naiveSide{sc: sc})
	}
	for _, s := range sides {
		defer s.close()
		if err := s.prepare(ctx); err != nil {
			return nil, fmt.Errorf("%s: %w", s.name(), err)
		}
	}
	fmt.Fprintf(log, "drill %q: %.1f workflows/s for %s, then up to %s to drain\n", sc.Name, sc.Rate, sc.Duration.D(), sc.Drain.D())
	t0 := time.Now()
	for _, s := range sides {
		if err := s.begin(ctx); err != nil {
			return nil, fmt.Errorf("%s: %w", s.name(), err)
		}
	}
	every := time.Duration(float64(time.Second) / sc.Rate)
	tick := time.NewTicker(every)
	n := 0
	for time.Since(t0) < sc.Duration.D() {
		for _, s := range sides {
			if err := s.submit(ctx, n); err != nil {
				tick.Stop()
				return nil, fmt.Errorf("%s: submit: %w", s.name(), err)
			}
		}
		n++
		select {
		case <-tick.C:
		case <-ctx.Done():
			tick.Stop()
			return nil, ctx.Err()
		}
	}
	tick.Stop()
	fmt.Fprintf(log, "drill %q: %d workflows submitted to each side; draining\n", sc.Name, n)
	deadline := time.Now().Add(sc.Drain.D())
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	for {
		left := 0
		for _, s := range sides {
			k, err := s.pending(ctx)
			if err != nil {
				return nil, err
			}
			left += k
		}
		if left == 0 || !time.Now().Before(deadline) {
			break
		}
		select {
		case <-poll.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	rep := &Report{Scenario: sc.Name, About: sc.About, Started: t0, Machine: machine(), DurationSeconds: sc.Duration.D().Seconds(),
		RatePerSecond: sc.Rate, Workers: sc.Workers, Concurrency: sc.Concurrency, Redis: db.Kind}
	primary := sides[0].(*agentqSide).primary()
	for _, s := range sides {
		r, err := s.collect(ctx)
		if err != nil {
			return nil, err
		}
		rep.Sides = append(rep.Sides, summarize(sc, r, t0, primary))
	}
	rep.Targets = targets(rep)
	return rep, nil
}

// targets checks issue 07's targets for the agentq side.
func targets(r *Report) []Target {
	a := r.Sides[0]
	ts := []Target{
		{What: "0 workflows lost", Measured: fmt.Sprintf("%d lost, %d unfinished", a.Lost, a.Unfinished), Met: a.Lost == 0 && a.Unfinished == 0},
		{What: "≥ 99% completed (degraded counted separately)", Measured: fmt.Sprintf("%.1f%% completed, %.1f%% degraded", a.CompletedPct, a.CompletedOrDegradedPct-a.CompletedPct), Met: a.CompletedPct >= 99},
	}
	calls, allowed, over := 0, 0, []string{}
	for _, o := range a.CallsWhileOpen {
		calls += o.Calls
		allowed += o.AllowedProbes
		if o.OverLimit {
			over = append(over, o.Target)
		}
	}
	if len(a.CallsWhileOpen) > 0 {
		m := fmt.Sprintf("%d calls while open, %d allowed", calls, allowed)
		if len(over) > 0 {
			m += "; over on " + strings.Join(over, ", ")
		}
		ts = append(ts, Target{What: "calls to a target after its breaker opened ≤ 1 probe per cooldown, cluster-wide", Measured: m, Met: len(over) == 0})
	}
	return ts
}

func machine() string {
	h, _ := os.Hostname()
	return fmt.Sprintf("%s (%s/%s, %d CPUs, %s)", h, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
}
