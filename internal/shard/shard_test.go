package shard

import (
	"fmt"
	"maps"
	"slices"
	"testing"
)

// The slot is Redis's: the CRC16 test vector, and the hash tag rule.
func TestSlotIsRedisCRC16(t *testing.T) {
	for key, want := range map[string]uint16{
		"123456789":         0x31C3 % Slots,
		"":                  0,
		"{user1000}.follow": Slot("user1000"),
		"foo{}{bar}":        Slot("foo{}{bar}"), // an empty tag: the whole key
		"foo{{bar}}zap":     Slot("{bar"),
	} {
		if got := Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
	if Slot("foo{}{bar}") == Slot("bar") {
		t.Error("an empty first tag must hash the whole key")
	}
}

// N shards' names are distinct, in shard order, and their slots lie in
// the middle half of the N equal ranges: on a cluster of N primaries (or
// a divisor of N) each primary has as many shards as any other.
func TestShardsSpreadOverTheSlotRanges(t *testing.T) {
	for _, q := range []string{"default", "critical", "low", "a", "Q-1_x"} {
		for n := 1; n <= Max; n++ {
			names := Names(q, n)
			if len(names) != n {
				t.Fatalf("%s/%d: %d names", q, n, len(names))
			}
			if n == 1 {
				if names[0] != q {
					t.Fatalf("one shard is the queue itself: %v", names)
				}
				continue
			}
			seen := map[string]bool{}
			for i, name := range names {
				if seen[name] || Base(name) != q {
					t.Fatalf("%s/%d: shard %d named %q (seen %v, base %q)", q, n, i, name, seen[name], Base(name))
				}
				seen[name] = true
				lo, hi := i*Slots/n, (i+1)*Slots/n
				if s := int(Slot(name)); s < lo || s >= hi {
					t.Fatalf("%s/%d: shard %d (%s) in slot %d, outside [%d,%d)", q, n, i, name, s, lo, hi)
				}
			}
		}
	}
	// a 3-primary cluster (0-5460, 5461-10922, 10923-16383): 6 shards, 2 each
	per := map[int]int{}
	for _, name := range Names("default", 6) {
		per[int(Slot(name))*3/Slots]++
	}
	if per[0] != 2 || per[1] != 2 || per[2] != 2 {
		t.Fatalf("6 shards over 3 primaries: %v", per)
	}
}

// Only a shard's name is taken for a shard: another application's
// dotted queues on the same Redis are their own.
func TestBaseKnowsAShardFromADottedName(t *testing.T) {
	for name, want := range map[string]string{
		"default.0": "default", "default.5.17": "default", "Q-1_x.127": "Q-1_x",
		"default": "default", "default.low": "default.low", "default.128": "default.128", "default.01": "default.01",
		"default.1.0": "default.1.0", "1x.2": "1x.2", "a.b.1": "a.b.1", "default.": "default.", ".1": ".1",
	} {
		if got := Base(name); got != want {
			t.Errorf("Base(%q) = %q, want %q", name, got, want)
		}
	}
}

// A workflow's shard is a function of its id alone, and ids spread.
func TestAWorkflowsShardIsAFunctionOfItsID(t *testing.T) {
	count := map[string]int{}
	for i := range 60000 {
		wf := fmt.Sprintf("wf-%d", i)
		s := Of("default", 6, wf)
		if s != Of("default", 6, wf) {
			t.Fatal("not a function of the id")
		}
		count[s]++
	}
	if len(count) != 6 {
		t.Fatalf("shards used: %v", count)
	}
	for s, c := range count {
		if c < 9000 || c > 11000 {
			t.Fatalf("shard %s took %d of 60000 workflows (want about 10000)", s, c)
		}
	}
	if Of("default", 1, "x") != "default" || Of("default", 0, "x") != "default" {
		t.Fatal("one shard is the queue itself")
	}
}

// Weights split a queue's weight over its shards and keep the queues'
// ratios.
func TestWeightsSplitAQueuesWeightOverItsShards(t *testing.T) {
	w := Weights(map[string]int{"critical": 6, "default": 3, "low": 1}, map[string]int{"default": 6})
	sum := func(q string) int {
		n := 0
		for name, v := range w {
			if Base(name) == q {
				n += v
			}
		}
		return n
	}
	if sum("critical") != 2*sum("default") || sum("default") != 3*sum("low") {
		t.Fatalf("weights %v lost the 6:3:1 ratio", w)
	}
	for _, name := range Names("default", 6) {
		if w[name] != w[Names("default", 6)[0]] {
			t.Fatalf("shards weighed unevenly: %v", w)
		}
	}
	if got := Weights(map[string]int{"a": 4, "b": 2}, nil); !maps.Equal(got, map[string]int{"a": 2, "b": 1}) {
		t.Fatalf("no shards: %v", got)
	}
	// shard counts whose multiple passes 64: the totals keep the ratio,
	// no shard is left out
	w = Weights(map[string]int{"a": 1, "b": 1, "c": 3}, map[string]int{"a": 127, "b": 100})
	if len(w) != 228 || slices.Min(slices.Collect(maps.Values(w))) < 1 || sum("a") != sum("b") || sum("c") != 3*sum("a") {
		t.Fatalf("%d weights, min %d, totals a %d b %d c %d", len(w), slices.Min(slices.Collect(maps.Values(w))), sum("a"), sum("b"), sum("c"))
	}
}
