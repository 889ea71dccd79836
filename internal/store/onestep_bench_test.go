package store_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
)

// BenchmarkOneStepBookkeeping is a one-step workflow's Redis bookkeeping
// as a worker and a producer do it, with the event log on (as by
// default: log) and off (nolog): its
// create (the root task enqueued by the same script), its step's begin
// and its settle (an LLM call's event carried, the workflow ended), each
// phase run for b.N workflows in turn. Besides ns/step it reports the
// microseconds Redis spent executing each phase's script (create-µs,
// begin-µs, settle-µs) and their sum (redis-µs/step): scripts' inner
// commands are part of their script's time.
func BenchmarkOneStepBookkeeping(b *testing.B) {
	for _, c := range []struct {
		name  string
		limit int
	}{{"log", 10000}, {"nolog", 0}} {
		b.Run(c.name, func(b *testing.B) { oneStepBookkeeping(b, c.limit) })
	}
}

// oneStepBookkeeping is BenchmarkOneStepBookkeeping with the event log
// bounded by limit (0: off).
func oneStepBookkeeping(b *testing.B, limit int) {
	db, rdb := redistest.New(b)
	s := store.New(rdb, time.Hour, nil)
	s.SetLog(store.LogOptions{Limit: limit, Worker: "vm-1-5c35e5b4"})
	ctx := context.Background()
	spec := []byte(`{"name":"bench-chain","input":{"n":0},"defaults":{"route":"bench"},"steps":[{"id":"s0","prompt":"chain {{ .Input.n }}"}]}`)
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	var phase [3]float64
	mark := func(i int) {
		var total float64
		for name, c := range commandStats(b, rdb) {
			if name == "evalsha" || name == "eval" {
				total += c.usec
			}
		}
		phase[i] = total - phase[0] - phase[1] - phase[2] + phase[i]
	}
	ids := make([]string, b.N)
	b.ResetTimer()
	for i := range ids {
		ids[i] = "wf_bench" + strconv.Itoa(i)
		root := store.Task{ID: ids[i] + ":s0", Queue: "default", Type: "agentq:step", Payload: []byte(`{"wf":"` + ids[i] + `","step":"s0","slack":300}`),
			MaxRetry: 12, Retention: time.Hour}
		if _, err := s.Create(ctx, store.NewWorkflow{ID: ids[i], Name: "bench-chain", Spec: spec, Steps: []string{"s0"}, Ready: []string{"s0"},
			Roots: []store.Task{root}, IdempotencyKey: "key-" + ids[i]}); err != nil {
			b.Fatal(err)
		}
	}
	mark(0)
	for _, id := range ids {
		if _, err := s.Begin(ctx, id, "s0", id+":s0", 0, time.Minute, nil); err != nil {
			b.Fatal(err)
		}
	}
	mark(1)
	for _, id := range ids {
		call := store.Event{Type: record.EventLLMCall, Step: "s0", Attempt: 1, Route: "bench", Target: "chaos/bench-model", Provider: "chaos",
			Key: "chaos#1 (…-key)", LatencyMS: 1, PromptTokens: 12, CompletionTokens: 9}
		o := store.Outcome{Done: true, Attempt: 1, NoDurableCalls: true, Output: "chaosllm answer 01f3311b to: chain 0", Target: "chaos/bench-model",
			InputHash: "bc8844f0a1b2c3d4", Usage: store.Usage{PromptTokens: 12, CompletionTokens: 9}, Events: []store.Event{call}}
		r, err := s.Settle(ctx, id, "s0", o, nil)
		if err != nil || r.State != store.StateCompleted {
			b.Fatalf("settle: %+v %v", r, err)
		}
	}
	mark(2)
	b.StopTimer()
	n := float64(b.N)
	// every command by name (a script's inner commands too): what each
	// feature's commands cost, for docs/benchmarks.md's per-feature table
	stats := commandStats(b, rdb)
	names := make([]string, 0, len(stats))
	for name := range stats {
		if name != "config|resetstat" {
			names = append(names, name)
		}
	}
	sort.Slice(names, func(i, j int) bool { return stats[names[i]].usec > stats[names[j]].usec })
	var table strings.Builder
	for _, name := range names {
		fmt.Fprintf(&table, "\n%-10s %5.2f calls/step %6.2f µs/step", name, float64(stats[name].calls)/n, stats[name].usec/n)
	}
	b.Logf("%d one-step workflows:%s", b.N, table.String())
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/step")
	if db.Kind == "redis-server" {
		b.ReportMetric(phase[0]/n, "create-µs")
		b.ReportMetric(phase[1]/n, "begin-µs")
		b.ReportMetric(phase[2]/n, "settle-µs")
		b.ReportMetric((phase[0]+phase[1]+phase[2])/n, "redis-µs/step")
	}
}
