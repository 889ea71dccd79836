package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Schedules. Each schedule name has one lease, schedLeaseKey(name): a
// string holding the replica that runs the schedule, taken with SET NX PX
// and renewed by a script that checks the holder, so at most one replica
// evaluates a schedule at a time. Its state, schedKey(name), a hash
// sharing the lease's hash tag, holds the last slot fired (what a replica
// taking the lease over catches up from) and what `enqueue schedule list`
// shows; schedIndexKey() lists the names by when they were last written.

func schedKey(name string) string      { return Prefix + "{sched:" + name + "}" }
func schedLeaseKey(name string) string { return schedKey(name) + ":lease" }
func schedIndexKey() string            { return Prefix + "schedules" }

// schedStateTTL is how long a schedule's state outlives its last write.
const schedStateTTL = 7 * 24 * time.Hour

// Schedules keeps the leases and state of schedules.
type Schedules struct{ rdb redis.UniversalClient }

// NewSchedules returns the schedules' leases and state on rdb.
func NewSchedules(rdb redis.UniversalClient) *Schedules { return &Schedules{rdb: rdb} }

// renewScript extends a lease its holder still holds.
// KEYS: the lease. ARGV: holder, ttl (ms). Returns 1 if it did.
var renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
`)

// Lease takes the lease of schedule name for holder (SET NX PX) or, if
// holder has it, renews it; it reports whether holder holds it for ttl
// from now.
func (s *Schedules) Lease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	ms := max(ttl.Milliseconds(), 1)
	n, err := renewScript.Run(ctx, s.rdb, []string{schedLeaseKey(name)}, holder, ms).Int()
	if err != nil {
		return false, fmt.Errorf("store: renew lease of schedule %s: %w", name, err)
	}
	if n == 1 {
		return true, nil
	}
	ok, err := s.rdb.SetNX(ctx, schedLeaseKey(name), holder, time.Duration(ms)*time.Millisecond).Result()
	if err != nil {
		return false, fmt.Errorf("store: take lease of schedule %s: %w", name, err)
	}
	return ok, nil
}

// releaseLeaseScript drops a lease its holder still holds.
// KEYS: the lease. ARGV: holder.
var releaseLeaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

// Release gives up holder's lease of schedule name, if it holds it, so
// another replica takes over at once.
func (s *Schedules) Release(ctx context.Context, name, holder string) error {
	if err := releaseLeaseScript.Run(ctx, s.rdb, []string{schedLeaseKey(name)}, holder).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("store: release lease of schedule %s: %w", name, err)
	}
	return nil
}

// LastFired is the last slot fired of schedule name; nil if none is known.
func (s *Schedules) LastFired(ctx context.Context, name string) (*time.Time, error) {
	v, err := s.rdb.HGet(ctx, schedKey(name), "last").Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: last slot of schedule %s: %w", name, err)
	}
	return parseTS(v), nil
}

// Fired is what the lease holder records after it submitted a slot.
type Fired struct {
	Slot     time.Time
	Workflow string // the id submitted for the slot
	Cron     string
	Spec     string // the spec's name
	Next     time.Time
}

// firedScript records a fired slot if the holder still holds the lease;
// the last slot never goes back. KEYS: the lease, the state. ARGV:
// holder, slot (ms), workflow id, cron, spec name, next (ms), ttl (s).
// Returns 1 if it wrote.
var firedScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local last = tonumber(redis.call('HGET', KEYS[2], 'last') or '0')
if tonumber(ARGV[2]) > last then
  redis.call('HSET', KEYS[2], 'last', ARGV[2], 'last_workflow', ARGV[3])
end
redis.call('HSET', KEYS[2], 'cron', ARGV[4], 'spec', ARGV[5], 'next', ARGV[6])
redis.call('EXPIRE', KEYS[2], ARGV[7])
return 1
`)

// MarkFired records that holder fired f's slot of schedule name (only if
// it still holds the lease) and lists the schedule.
func (s *Schedules) MarkFired(ctx context.Context, name, holder string, f Fired) (bool, error) {
	n, err := firedScript.Run(ctx, s.rdb, []string{schedLeaseKey(name), schedKey(name)}, holder, ts(f.Slot), f.Workflow,
		f.Cron, f.Spec, ts(f.Next), int64(schedStateTTL/time.Second)).Int()
	if err != nil {
		return false, fmt.Errorf("store: mark schedule %s fired: %w", name, err)
	}
	if err := s.rdb.ZAdd(ctx, schedIndexKey(), redis.Z{Score: float64(f.Slot.UnixMilli()), Member: name}).Err(); err != nil {
		return false, fmt.Errorf("store: list schedule %s: %w", name, err)
	}
	return n == 1, nil
}

// announceScript records what a schedule is (cron, spec, next slot) for
// its lease holder, before its first slot fires. KEYS: the lease, the
// state. ARGV: holder, cron, spec name, next (ms), ttl (s). Returns 1 if
// it wrote.
var announceScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[2], 'cron', ARGV[2], 'spec', ARGV[3], 'next', ARGV[4])
redis.call('EXPIRE', KEYS[2], ARGV[5])
return 1
`)

// Announce lists schedule name as its lease holder runs it (its cron,
// spec and next slot), so a schedule shows in List from the moment a
// worker holds it, not only once a slot has fired. The listing lasts as
// MarkFired's does (a week), counted from now; a holder announces again
// as it renews its lease. Nothing is written unless holder holds the
// lease.
func (s *Schedules) Announce(ctx context.Context, name, holder string, f Fired, now time.Time) error {
	n, err := announceScript.Run(ctx, s.rdb, []string{schedLeaseKey(name), schedKey(name)}, holder, f.Cron, f.Spec, ts(f.Next),
		int64(schedStateTTL/time.Second)).Int()
	if err != nil || n == 0 {
		if err != nil {
			return fmt.Errorf("store: announce schedule %s: %w", name, err)
		}
		return nil
	}
	if err := s.rdb.ZAddGT(ctx, schedIndexKey(), redis.Z{Score: float64(now.UnixMilli()), Member: name}).Err(); err != nil {
		return fmt.Errorf("store: list schedule %s: %w", name, err)
	}
	return nil
}

// ScheduleState is a schedule as its lease holder last recorded it.
type ScheduleState struct {
	Name         string
	Cron         string
	Spec         string
	Holder       string // empty: no replica holds the lease now
	LastSlot     *time.Time
	LastWorkflow string
	Next         *time.Time
}

// List returns the schedules a worker held or fired within the last
// week, by name.
func (s *Schedules) List(ctx context.Context, now time.Time) ([]ScheduleState, error) {
	cut := strconv.FormatInt(now.Add(-schedStateTTL).UnixMilli(), 10)
	if err := s.rdb.ZRemRangeByScore(ctx, schedIndexKey(), "-inf", "("+cut).Err(); err != nil {
		return nil, fmt.Errorf("store: schedules: %w", err)
	}
	names, err := s.rdb.ZRange(ctx, schedIndexKey(), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("store: schedules: %w", err)
	}
	sort.Strings(names)
	out := make([]ScheduleState, 0, len(names))
	for _, name := range names {
		pipe := s.rdb.Pipeline()
		h := pipe.HGetAll(ctx, schedKey(name))
		holder := pipe.Get(ctx, schedLeaseKey(name))
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("store: schedule %s: %w", name, err)
		}
		v := h.Val()
		if len(v) == 0 {
			continue
		}
		out = append(out, ScheduleState{Name: name, Cron: v["cron"], Spec: v["spec"], Holder: holder.Val(),
			LastSlot: parseTS(v["last"]), LastWorkflow: v["last_workflow"], Next: parseTS(v["next"])})
	}
	return out, nil
}
