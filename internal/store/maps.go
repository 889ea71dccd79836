package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/record"
)

// A map step (for_each) runs once per item of an array known at run time.
// Its instances are steps of their own, "<map>[<n>]", with fields in the
// workflow's hash like any step's ("<map>[<n>].state", ….output, ….item),
// but they are not in the workflow's step list and do not count toward
// nsteps: the map step counts once, and its own fields count its
// instances ("<map>.nitems", ".next", ".ndone", ".nmissing"; see
// settleScript).

// MapCounts are a map step's instance counters.
type MapCounts = record.MapCounts

// isInstance reports whether a step id names a map instance (a spec's step
// ids cannot hold brackets).
func isInstance(step string) bool { return strings.HasSuffix(step, "]") }

// mapCountFields are the map counters Get and Begin read, in this order.
var mapCountFields = []string{"nitems", "next", "ndone", "nmissing"}

// mapCounts reads the counters from values in mapCountFields' order; nil
// for a step that never expanded.
func mapCounts(v func(int) string) *MapCounts {
	if v(0) == "" {
		return nil
	}
	c := &MapCounts{}
	c.Items, _ = strconv.Atoi(v(0))
	c.Started, _ = strconv.Atoi(v(1))
	c.Settled, _ = strconv.Atoi(v(2))
	c.Missing, _ = strconv.Atoi(v(3))
	c.Started = min(c.Started, c.Items)
	return c
}

// expandScript expands a map step once: it stores each item with its
// instance, sets the counters and marks the map "mapped". Expanding again
// changes nothing and returns the first expansion's counts.
// KEYS: wf. ARGV: the map's state, nitems, next, ndone and nmissing
// fields, the number of items, the window (instances released at once),
// then item field/value pairs.
// Returns {nitems, next}, {'gone'}, {'canceled'} or {'settled', state}.
var expandScript = redis.NewScript(luaHelpers + `
local K = KEYS[1]
local v = redis.call('HMGET', K, 'state', ARGV[1], ARGV[2], ARGV[3])
if not v[1] then return {'gone'} end
if v[1] == 'canceled' then return {'canceled'} end
if v[3] then return {tonumber(v[3]), tonumber(v[4] or '0')} end
if v[2] == 'done' or v[2] == 'dead' or v[2] == 'canceled' then return {'settled', v[2]} end
local n, window = tonumber(ARGV[6]), tonumber(ARGV[7])
local next = math.min(n, window)
redis.call('HSET', K, ARGV[1], 'mapped', ARGV[2], n, ARGV[3], next, ARGV[4], 0, ARGV[5], 0)
hset(K, ARGV, 8)
return {n, next}
`)

// Expansion is what Expand did.
type Expansion struct {
	Items int // instances of the map
	Next  int // instances [0, Next) are released: enqueue them
}

// ErrCanceled is returned by Expand when the workflow was canceled.
var ErrCanceled = fmt.Errorf("workflow canceled")

// Expand records a map step's items (each a JSON value) and releases the
// first window of its instances (all of them when window ≤ 0). It is
// idempotent: a second call returns the first one's expansion (its
// instances may have settled meanwhile; enqueuing their ids again is
// harmless). ErrAlreadySettled if the map step was settled (or canceled)
// without expanding; ErrCanceled if the workflow was. Under Durability,
// an expansion the replicas did not confirm comes with ErrNotConfirmed:
// release none of its instances until one is (a promotion that lost it
// would leave them without their items).
func (s *Store) Expand(ctx context.Context, wf, step string, items []string, window int) (*Expansion, error) {
	if window <= 0 {
		window = len(items)
	}
	p := step + "."
	args := make([]any, 0, 7+2*len(items))
	args = append(args, p+"state", p+"nitems", p+"next", p+"ndone", p+"nmissing", len(items), window)
	for i, it := range items {
		args = append(args, record.InstanceID(step, i)+".item", it)
	}
	var res []any
	err := s.acked(ctx, wfKey(wf), func(c redis.Cmdable) (err error) {
		res, err = expandScript.Run(ctx, c, []string{wfKey(wf)}, args...).Slice()
		return err
	})
	// not confirmed: expanded on the primary all the same, and the caller
	// is told at the end (it releases no instance until it is confirmed)
	err, unconfirmed := Unconfirmed(err)
	if err != nil {
		return nil, fmt.Errorf("store: expand %s/%s: %w", wf, step, err)
	}
	if unconfirmed != nil {
		unconfirmed = fmt.Errorf("store: expand %s/%s: %w", wf, step, unconfirmed)
	}
	switch str(res[0]) {
	case "gone":
		return nil, fmt.Errorf("store: expand %s/%s: %w", wf, step, ErrNotFound)
	case "canceled":
		return nil, fmt.Errorf("store: expand %s/%s: %w", wf, step, ErrCanceled)
	case "settled":
		return nil, fmt.Errorf("store: expand %s/%s (%s): %w", wf, step, str(res[1]), ErrAlreadySettled)
	}
	e := &Expansion{}
	e.Items, _ = strconv.Atoi(str(res[0]))
	e.Next, _ = strconv.Atoi(str(res[1]))
	return e, unconfirmed
}

// Instances reads instances [from, from+n) of a map step (fewer at the
// end of the map): one HMGET, so callers page through a wide map.
func (s *Store) Instances(ctx context.Context, wf, step string, from, n int) ([]StepRecord, error) {
	if n <= 0 {
		return nil, nil
	}
	fields := make([]string, 0, n*len(stepFields))
	for i := from; i < from+n; i++ {
		id := record.InstanceID(step, i)
		for _, f := range stepFields {
			fields = append(fields, id+"."+f)
		}
	}
	vals, err := s.rdb.HMGet(ctx, wfKey(wf), fields...).Result()
	if err != nil {
		return nil, fmt.Errorf("store: instances of %s/%s: %w", wf, step, err)
	}
	out := make([]StepRecord, 0, n)
	now := s.now()
	for i := range n {
		r := stepRecord(record.InstanceID(step, from+i), func(f int) string { return str(vals[i*len(stepFields)+f]) })
		r.NextAttemptAt = dueAfter(r.NextAttemptAt, now)
		out = append(out, r)
	}
	return out, nil
}

// InstanceOutputs reads the state, output and degraded flag of instances
// [from, from+n) of a map step: what a dependent reads, a page at a time.
func (s *Store) InstanceOutputs(ctx context.Context, wf, step string, from, n int) ([]StepRecord, error) {
	if n <= 0 {
		return nil, nil
	}
	fields := make([]string, 0, 3*n)
	for i := from; i < from+n; i++ {
		id := record.InstanceID(step, i) + "."
		fields = append(fields, id+"state", id+"output", id+"degraded")
	}
	vals, err := s.rdb.HMGet(ctx, wfKey(wf), fields...).Result()
	if err != nil {
		return nil, fmt.Errorf("store: outputs of %s/%s: %w", wf, step, err)
	}
	out := make([]StepRecord, n)
	for i := range out {
		out[i] = StepRecord{ID: record.InstanceID(step, from+i), State: str(vals[3*i]), Output: str(vals[3*i+1]), Degraded: str(vals[3*i+2]) == "1"}
		if out[i].State == "" {
			out[i].State = StepPending
		}
	}
	return out, nil
}

// Item reads the item of a map's n-th instance (JSON; "" if the map has
// no such instance).
func (s *Store) Item(ctx context.Context, wf, step string, n int) (string, error) {
	v, err := s.rdb.HGet(ctx, wfKey(wf), record.InstanceID(step, n)+".item").Result()
	if err != nil && err != redis.Nil {
		return "", fmt.Errorf("store: item of %s/%s: %w", wf, record.InstanceID(step, n), err)
	}
	return v, nil
}

// Counts reads a map step's counters; nil if it has not expanded.
func (s *Store) Counts(ctx context.Context, wf, step string) (*MapCounts, error) {
	fields := make([]string, len(mapCountFields))
	for i, f := range mapCountFields {
		fields[i] = step + "." + f
	}
	v, err := s.rdb.HMGet(ctx, wfKey(wf), fields...).Result()
	if err != nil {
		return nil, fmt.Errorf("store: counts of %s/%s: %w", wf, step, err)
	}
	return mapCounts(func(i int) string { return str(v[i]) }), nil
}
