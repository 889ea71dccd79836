package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/record"
)

// The open index (openKey) is a sorted set of the workflows that may still
// have steps in flight, scored by when the reconciler last looked at each
// (its creation time, at first). Create adds a workflow; the reconciler
// takes the ones it has not looked at for a while, oldest first and a page
// at a time, moves each it keeps to the back (Revisit) and drops those that
// ended (Forget). A requeued dead letter puts its workflow back (Watch).
// Settle and Begin never touch it: the hot path pays nothing for it.

// DueWorkflows returns up to limit workflow ids of the open index last
// looked at no later than before, oldest first.
func (s *Store) DueWorkflows(ctx context.Context, before time.Time, limit int) ([]string, error) {
	ids, err := s.rdb.ZRangeByScore(ctx, openKey(), &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(before.UnixMilli(), 10),
		Count: int64(max(limit, 1))}).Result()
	if err != nil {
		return nil, fmt.Errorf("store: open workflows: %w", err)
	}
	return ids, nil
}

// Revisit moves an open workflow to the back of the index, as looked at
// when at; a workflow no longer in it is not added.
func (s *Store) Revisit(ctx context.Context, id string, at time.Time) error {
	if err := s.rdb.ZAddXX(ctx, openKey(), redis.Z{Score: float64(at.UnixMilli()), Member: id}).Err(); err != nil {
		return fmt.Errorf("store: revisit %s: %w", id, err)
	}
	return nil
}

// Forget drops a workflow from the open index.
func (s *Store) Forget(ctx context.Context, id string) error {
	if err := s.rdb.ZRem(ctx, openKey(), id).Err(); err != nil {
		return fmt.Errorf("store: forget %s: %w", id, err)
	}
	return nil
}

// Watch puts a workflow (back) into the open index, e.g. when one of its
// dead letters is requeued.
func (s *Store) Watch(ctx context.Context, id string) error {
	if err := s.rdb.ZAdd(ctx, openKey(), redis.Z{Score: float64(s.now().UnixMilli()), Member: id}).Err(); err != nil {
		return fmt.Errorf("store: watch %s: %w", id, err)
	}
	return nil
}

// OpenCount is how many workflows the open index holds.
func (s *Store) OpenCount(ctx context.Context) (int64, error) {
	n, err := s.rdb.ZCard(ctx, openKey()).Result()
	if err != nil {
		return 0, fmt.Errorf("store: open workflows: %w", err)
	}
	return n, nil
}

// StepProgress is what the reconciler reads of a step.
type StepProgress struct {
	ID         string
	State      string // "pending" when the step has no fields yet
	Attempts   int
	LeaseUntil *time.Time // the end of its current attempt's lease, if it began one
	// Owner is the task that began its current attempt: its own, or a
	// concurrency grant's (another task id).
	Owner string
	Map   *MapCounts // a map step's counters, once it expanded
}

// Progress is what the reconciler reads of a workflow.
type Progress struct {
	State     string
	CreatedAt time.Time
	Steps     []StepProgress
	Gen       int // the workflow's generation (Rerun)
}

// progressFields are the fields of a step Progress reads, in this order.
var progressFields = append([]string{"state", "attempts", "lease_until", "owner"}, mapCountFields...)

// Progress reads a workflow's state and each step's state, attempts and
// lease: two reads of one hash, the second only if the first found it.
// ErrOldLayout for a record an older agentq wrote.
func (s *Store) Progress(ctx context.Context, id string) (*Progress, error) {
	h, err := s.rdb.HMGet(ctx, wfKey(id), "state", "created_at", "steps", "nsettled", "gen").Result()
	if err != nil {
		return nil, fmt.Errorf("store: progress %s: %w", id, err)
	}
	if h[0] == nil {
		return nil, fmt.Errorf("store: progress %s: %w", id, ErrNotFound)
	}
	if h[3] == nil {
		return nil, fmt.Errorf("store: progress %s: %w", id, ErrOldLayout)
	}
	var steps []string
	_ = json.Unmarshal([]byte(str(h[2])), &steps)
	p := &Progress{State: str(h[0]), Steps: make([]StepProgress, 0, len(steps))}
	p.Gen, _ = strconv.Atoi(str(h[4]))
	if c := parseTS(str(h[1])); c != nil {
		p.CreatedAt = *c
	}
	if len(steps) == 0 {
		return p, nil
	}
	fields := make([]string, 0, len(steps)*len(progressFields))
	for _, st := range steps {
		for _, f := range progressFields {
			fields = append(fields, st+"."+f)
		}
	}
	vals, err := s.rdb.HMGet(ctx, wfKey(id), fields...).Result()
	if err != nil {
		return nil, fmt.Errorf("store: progress %s steps: %w", id, err)
	}
	for i, st := range steps {
		p.Steps = append(p.Steps, stepProgress(st, func(f int) string { return str(vals[i*len(progressFields)+f]) }))
	}
	return p, nil
}

// stepProgress builds a step's progress from its values in
// progressFields' order.
func stepProgress(id string, v func(int) string) StepProgress {
	r := StepProgress{ID: id, State: v(0), LeaseUntil: parseTS(v(2)), Owner: v(3), Map: mapCounts(func(i int) string { return v(4 + i) })}
	r.Attempts, _ = strconv.Atoi(v(1))
	if r.State == "" {
		r.State = StepPending
	}
	return r
}

// InstanceProgress reads the progress of instances [from, from+n) of a
// map step, for the reconciler: one HMGET, so it pages through a wide map.
func (s *Store) InstanceProgress(ctx context.Context, wf, step string, from, n int) ([]StepProgress, error) {
	if n <= 0 {
		return nil, nil
	}
	fields := make([]string, 0, n*len(progressFields))
	for i := from; i < from+n; i++ {
		id := record.InstanceID(step, i)
		for _, f := range progressFields {
			fields = append(fields, id+"."+f)
		}
	}
	vals, err := s.rdb.HMGet(ctx, wfKey(wf), fields...).Result()
	if err != nil {
		return nil, fmt.Errorf("store: progress of %s/%s: %w", wf, step, err)
	}
	out := make([]StepProgress, 0, n)
	for i := range n {
		out = append(out, stepProgress(record.InstanceID(step, from+i), func(f int) string { return str(vals[i*len(progressFields)+f]) }))
	}
	return out, nil
}

// leadScript takes or renews a lease on a chore for owner.
// KEYS: the lock. ARGV: owner, ttl (ms). Returns 1 if owner holds it now.
var leadScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if cur then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
`)

// Lead takes the lock of a cluster-wide chore for owner, or renews it if
// owner holds it, for ttl; it reports whether owner holds it. One call
// per round: whoever stops renewing loses it after ttl.
func (s *Store) Lead(ctx context.Context, chore, owner string, ttl time.Duration) (bool, error) {
	n, err := leadScript.Run(ctx, s.rdb, []string{leaderKey(chore)}, owner, max(ttl.Milliseconds(), 1)).Int()
	if err != nil {
		return false, fmt.Errorf("store: lead %s: %w", chore, err)
	}
	return n == 1, nil
}
