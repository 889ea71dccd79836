package store_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
)

// BenchmarkChordBookkeeping is a workflow's whole Redis bookkeeping for a
// chord of 10 members and a body: create, then begin and settle of every
// step, one at a time. Besides ns/step it reports the microseconds Redis
// itself spent executing the commands (redis-µs/step), the figure that
// bounds a worker fleet's throughput on one Redis.
func BenchmarkChordBookkeeping(b *testing.B) {
	db, rdb := redistest.New(b)
	s := store.New(rdb, time.Hour, nil)
	ctx := context.Background()
	members := make([]string, 10)
	for i := range members {
		members[i] = fmt.Sprintf("m%d", i)
	}
	steps := append(append([]string{}, members...), "body")
	body := []store.Dependent{{ID: "body", Inputs: len(members)}}
	spec := []byte(strings.Repeat(`{"id":"m0","prompt":"member {{ .Input.n }}"},`, 11))
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		wf := "bench" + strconv.Itoa(i)
		if _, err := s.Create(ctx, store.NewWorkflow{ID: wf, Name: "chord", Spec: spec, Steps: steps}); err != nil {
			b.Fatal(err)
		}
		for _, m := range members {
			if _, err := s.Begin(ctx, wf, m, wf+":"+m, 0, time.Minute, nil); err != nil {
				b.Fatal(err)
			}
			o := store.Outcome{Done: true, Output: "an answer of a few words", Target: "chaos/bench-model", InputHash: "0123456789abcdef"}
			if _, _, err := settle(ctx, s, wf, m, o, body); err != nil {
				b.Fatal(err)
			}
		}
		a, err := s.Begin(ctx, wf, "body", wf+":body", 0, time.Minute, members)
		if err != nil || len(a.Deps) != len(members) {
			b.Fatalf("begin body: %v %+v", err, a)
		}
		state, _, err := settle(ctx, s, wf, "body", store.Outcome{Done: true, Output: "joined"}, nil)
		if err != nil || state != store.StateCompleted {
			b.Fatalf("settle body: %q %v", state, err)
		}
	}
	reportPerStep(b, db, rdb, b.N*len(steps))
}

// reportPerStep stops b's timer and reports ns/step and, against a real
// redis-server, the microseconds Redis spent executing per step.
func reportPerStep(b *testing.B, db redistest.DB, rdb *redis.Client, steps int) {
	b.StopTimer()
	n := float64(steps)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/step")
	if db.Kind == "redis-server" {
		b.ReportMetric(redisMicros(b, rdb)/n, "redis-µs/step")
	}
}

// redisMicros is the time Redis spent executing scripts and commands
// (inner commands of scripts are part of their script's time).
func redisMicros(b *testing.B, rdb *redis.Client) float64 {
	var total float64
	for name, c := range commandStats(b, rdb) {
		switch name {
		case "evalsha", "eval", "zadd", "zremrangebyscore":
			total += c.usec
		}
	}
	return total
}

// commandStat is what Redis counts of one command since its statistics
// were last reset: calls (a script's inner commands counted too) and
// microseconds spent executing them.
type commandStat struct {
	calls int
	usec  float64
}

// commandStats reads INFO commandstats by command name ("hset",
// "evalsha"), without the INFO that reads it.
func commandStats(tb testing.TB, rdb *redis.Client) map[string]commandStat {
	tb.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]commandStat{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") || name == "cmdstat_info" {
			continue
		}
		var c commandStat
		for _, kv := range strings.Split(rest, ",") {
			switch k, v, _ := strings.Cut(kv, "="); k {
			case "calls":
				c.calls, _ = strconv.Atoi(v)
			case "usec":
				c.usec, _ = strconv.ParseFloat(v, 64)
			}
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = c
	}
	return out
}

// BenchmarkChainBookkeeping is BenchmarkChordBookkeeping for a chain of
// 10 steps, each the next one's only input: what one linear step costs
// Redis, begin reading its input's output included.
func BenchmarkChainBookkeeping(b *testing.B) {
	db, rdb := redistest.New(b)
	s := store.New(rdb, time.Hour, nil)
	ctx := context.Background()
	steps := make([]string, 10)
	for i := range steps {
		steps[i] = fmt.Sprintf("s%d", i)
	}
	spec := []byte(strings.Repeat(`{"id":"s0","prompt":"link {{ .Steps.s0.Output }}"},`, 10))
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		wf := "bench" + strconv.Itoa(i)
		if _, err := s.Create(ctx, store.NewWorkflow{ID: wf, Name: "chain", Spec: spec, Steps: steps}); err != nil {
			b.Fatal(err)
		}
		for n, st := range steps {
			var inputs []string
			if n > 0 {
				inputs = steps[n-1 : n]
			}
			if _, err := s.Begin(ctx, wf, st, wf+":"+st, 0, time.Minute, inputs); err != nil {
				b.Fatal(err)
			}
			var next []store.Dependent
			if n+1 < len(steps) {
				next = []store.Dependent{{ID: steps[n+1], Inputs: 1}}
			}
			o := store.Outcome{Done: true, Output: "an answer of a few words", Target: "chaos/bench-model", InputHash: "0123456789abcdef"}
			if _, _, err := settle(ctx, s, wf, st, o, next); err != nil {
				b.Fatal(err)
			}
		}
	}
	reportPerStep(b, db, rdb, b.N*len(steps))
}

// BenchmarkFloorBookkeeping is the floor the bench (-floor) measures agentq
// against, in the same shape as BenchmarkChainBookkeeping: per step, two
// round trips of a one-line script writing the answer into a hash, and
// nothing else (no lease, no attempt count, no fan-in, no checkpoint). The
// two benchmarks side by side say what agentq's bookkeeping costs Redis
// beyond the least any durable per-step record can.
func BenchmarkFloorBookkeeping(b *testing.B) {
	db, rdb := redistest.New(b)
	ctx := context.Background()
	write := redis.NewScript(`redis.call('HSET', KEYS[1], 'output', ARGV[1]) return 1`)
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for n := 0; n < 10; n++ {
			key := "floor" + strconv.Itoa(i) + ":" + strconv.Itoa(n)
			for w := 0; w < 2; w++ {
				if err := write.Run(ctx, rdb, []string{key}, "an answer of a few words").Err(); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	reportPerStep(b, db, rdb, b.N*10)
}
