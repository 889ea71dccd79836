package main

import (
	"math"
	"testing"
	"time"
)

func TestFillBoundCountsWholeCalls(t *testing.T) {
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-2 }
	// every slot filled at once: three waves take three latencies
	if got := fillBound([]float64{0, 0, 0, 0}, 12, 10); !near(got, 12.0/30) {
		t.Fatalf("an instant fill: %.4f steps/s, want %.4f", got, 12.0/30)
	}
	// slots filled evenly over 8 s: every slot must make its three
	// calls, so the last slot's ends at 38 s (the mean offset, 4 s,
	// would say 34)
	offsets := []float64{0, 2, 4, 6, 8}
	if got := fillBound(offsets, 15, 10); !near(got, 15.0/38) {
		t.Fatalf("a fill over 8 s: %.4f steps/s, want %.4f", got, 15.0/38)
	}
	// fewer steps than three a slot: the first slot makes the extra
	// call (three by 30 s, the others two each by 28 s)
	if got := fillBound(offsets, 11, 10); !near(got, 11.0/30) {
		t.Fatalf("eleven calls: %.4f steps/s, want %.4f", got, 11.0/30)
	}
	if got := fillBound(nil, 3, 10); got != 0 {
		t.Fatalf("no slots: %v, want 0", got)
	}
}

func TestSustainedIsSlotsOverACycle(t *testing.T) {
	at := func(s float64) time.Time { return time.Unix(0, 0).Add(time.Duration(s * float64(time.Second))) }
	// two slots, calls of 10 s, each slot's next call 0.5 s after its
	// last one ended: a cycle of 10.5 s, 2/10.5 steps/s, whether the
	// waves come in bursts (both slots at once) or not
	for name, first := range map[string][]float64{"at once": {0, 0}, "spread": {0, 4}} {
		var starts, ends []time.Time
		for _, s := range first {
			for w := range 3 {
				st := s + float64(w)*10.5
				starts, ends = append(starts, at(st)), append(ends, at(st+10))
			}
		}
		if got, want := sustained(starts, ends, 2), 2/10.5; math.Abs(got-want) > 1e-9 {
			t.Errorf("%s: %.6f steps/s, want %.6f", name, got, want)
		}
	}
	if got := sustained([]time.Time{at(0)}, []time.Time{at(10)}, 1); got != 0 {
		t.Errorf("no refill: %v, want 0", got)
	}
}
