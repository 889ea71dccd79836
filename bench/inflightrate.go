package main

import (
	"fmt"
	"slices"
	"time"
)

// What an -inflight run's span allows: the bound its fill sets, and the
// rate its slots sustain once full.

// fillBound is the most steps/s a run of steps calls of latency seconds
// each can show over its span when its slots' first calls started at
// offsets (seconds from the first start; one per slot): a slot whose
// first call started at s has finished at most ⌊(T−s)/latency⌋ calls by
// T, so the span is at least the least T at which the slots' sums reach
// steps. Calls are whole: with three waves whose slots filled within a
// latency, every slot must make three calls, and the span is at least
// three latencies plus the last slot's offset, not the mean one (a
// longer fill lets the first slots make a fourth).
func fillBound(offsets []float64, steps int, latency float64) float64 {
	if len(offsets) == 0 || steps <= 0 || latency <= 0 {
		return 0
	}
	done := func(t float64) int {
		n := 0
		for _, s := range offsets {
			if t >= s {
				n += int((t - s) / latency)
			}
		}
		return n
	}
	lo, hi := 0.0, latency*float64(steps/len(offsets)+1)+slices.Max(offsets)
	for hi-lo > 1e-4 {
		if mid := (lo + hi) / 2; done(mid) >= steps {
			hi = mid
		} else {
			lo = mid
		}
	}
	return float64(steps) / hi
}

// sustainedText is the rate once full (long: with steps/s) as a share of
// the target; "–" for a run with no refill (-waves 1).
func (x InflightResult) sustainedText(long bool) string {
	switch {
	case x.SustainedPerSec <= 0:
		return "–"
	case long:
		return fmt.Sprintf("%.0f steps/s (%.0f%%)", x.SustainedPerSec, 100*x.SustainedPerSec/x.Target)
	}
	return fmt.Sprintf("%.1f%%", 100*x.SustainedPerSec/x.Target)
}

// sustained is the rate slots sustain once full, from the steps' starts
// and ends: each start after the first slots' worth waited for a slot to
// free, so the k-th of them (in time) took the slot the k-th end freed.
// A slot's cycle is then a step's mean span plus the mean time from an
// end to the start that took its slot (the dequeue, the begin, asynq's
// completion of the task before), and slots ÷ cycle is the rate. Starts
// are counted from their first slot's, not over a window of time: the
// waves of a run that fills at once come in bursts a latency apart,
// which a window's ends would cut.
func sustained(starts, ends []time.Time, slots int) float64 {
	starts, ends = slices.Clone(starts), slices.Clone(ends)
	slices.SortFunc(starts, time.Time.Compare)
	slices.SortFunc(ends, time.Time.Compare)
	refills := len(starts) - slots
	if slots <= 0 || refills <= 0 || len(starts) != len(ends) {
		return 0
	}
	var span, gap time.Duration
	for i := range starts {
		span += ends[i].Sub(starts[i]) // sorted apart: the sum is the same
	}
	for k := range refills {
		gap += starts[slots+k].Sub(ends[k])
	}
	cycle := span.Seconds()/float64(len(starts)) + gap.Seconds()/float64(refills)
	if cycle <= 0 {
		return 0
	}
	return float64(slots) / cycle
}
