// Package shard splits one queue into N asynq queues, each kept by asynq
// in a Redis Cluster hash slot of its own, so that a cluster's primaries
// share one queue's load. It holds the one rule for a shard's name, the
// shard a workflow's tasks go to, and the weights a worker serves the
// shards with.
//
// A queue of one shard is its own name ("default"). A queue of N > 1
// shards is served as N asynq queues "default.0" … "default.N-1", each
// name chosen (with a suffix, "default.1.7", where its plain form falls
// elsewhere) so that its hash slot lies in the middle half of the i-th of
// N equal ranges of the 16,384 slots: a cluster that splits the slots
// evenly over its primaries, as Redis does by default, gets the shards as
// evenly as N allows. Queue names are letters, digits, '_' and '-', so
// no queue a user names is ever taken for a shard.
package shard

import (
	"hash/fnv"
	"regexp"
	"strconv"
	"sync"
)

// Max is the most shards a queue may have.
const Max = 128

// Sep separates a queue's name from its shard's number.
const Sep = "."

// Slots is how many hash slots a Redis Cluster has.
const Slots = 16384

// Names are the asynq queues of queue split in n shards (n < 2: the queue
// itself; past Max: Max, which no configuration passes), in shard order.
// The slice is shared: callers must not change it.
func Names(queue string, n int) []string {
	if n < 2 {
		return []string{queue}
	}
	n = min(n, Max)
	key := queue + "/" + strconv.Itoa(n)
	if v, ok := cache.Load(key); ok {
		return v.([]string)
	}
	out := make([]string, n)
	for i := range out {
		out[i] = nameOf(queue, i, n)
	}
	v, _ := cache.LoadOrStore(key, out)
	return v.([]string)
}

var cache sync.Map // "queue/n" → []string

// nameOf is shard i of n: the first of "queue.i", "queue.i.1",
// "queue.i.2", … whose slot is in the middle half of the i-th range.
func nameOf(queue string, i, n int) string {
	lo, hi := i*Slots/n, (i+1)*Slots/n
	w := hi - lo
	base := queue + Sep + strconv.Itoa(i)
	for k := 0; ; k++ {
		name := base
		if k > 0 {
			name += Sep + strconv.Itoa(k)
		}
		// asynq's keys are asynq:{NAME}:…, so the slot is NAME's
		if s := int(Slot(name)); s >= lo+w/4 && s < hi-w/4 {
			return name
		}
	}
}

// Of is the asynq queue of workflow wf's tasks on queue split in n
// shards: one shard for all of a workflow's tasks, so their ids stay its
// own, chosen by a hash of the id (FNV-1a, 32 bits) alone.
func Of(queue string, n int, wf string) string {
	if n < 2 {
		return queue
	}
	names := Names(queue, n)
	h := fnv.New32a()
	_, _ = h.Write([]byte(wf))
	return names[h.Sum32()%uint32(len(names))]
}

// Base is the queue an asynq queue is a shard of (the name itself for a
// queue that is not): a shard is named QUEUE.I or QUEUE.I.K (digits, I
// under Max), QUEUE a queue name; another application's "mail.low" on
// the same Redis is nobody's shard.
func Base(name string) string {
	if base, _, ok := Parse(name); ok {
		return base
	}
	return name
}

// Parse reads a shard's name: its queue and its number (ok false for a
// name that is not a shard's).
func Parse(name string) (queue string, i int, ok bool) {
	m := shardName.FindStringSubmatch(name)
	if m == nil {
		return "", 0, false
	}
	if i, err := strconv.Atoi(m[2]); err == nil && i < Max {
		return m[1], i, true
	}
	return "", 0, false
}

var shardName = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9_-]{0,62})\.(0|[1-9][0-9]{0,2})(?:\.[1-9][0-9]{0,6})?$`)

// Weights are the asynq queues a worker serves and their weights, for
// queues (name → weight) with shards (name → count; missing: 1): each
// queue's weight split over its shards, the queues' totals in the ratio
// of their weights. asynq weighs in whole numbers: every weight is
// scaled by the least common multiple of the shard counts (past 64, by
// the largest count, a queue's total then shared out with the remainder
// on its first shards), then all divided by their greatest common
// divisor.
func Weights(queues map[string]int, shards map[string]int) map[string]int {
	scale, largest := 1, 1
	for q := range queues {
		if n := shards[q]; n > 1 {
			scale, largest = lcm(scale, n), max(largest, n)
		}
	}
	if scale > 64 {
		scale = largest // at least every count: no shard's weight is 0
	}
	out := make(map[string]int, len(queues))
	common := 0
	for q, w := range queues {
		n := max(shards[q], 1)
		total := w * scale
		for i, name := range Names(q, n) {
			out[name] = total / n
			if i < total%n {
				out[name]++
			}
			common = gcd(common, out[name])
		}
	}
	for name := range out {
		out[name] /= common // the smallest whole numbers in the same ratio
	}
	return out
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func lcm(a, b int) int { return a / gcd(a, b) * b }
