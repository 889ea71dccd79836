package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// keptKey is the sorted set of every kept signal's id, across all names
// and matches, scored by when it lapses (ms since the epoch): what
// limits.max_kept_signals counts. Kept signals live in their (name,
// match)'s slot; this key is in a slot of its own (Redis Cluster safe:
// each script touches one slot), written beside them rather than with
// them: a place is reserved here before a signal is kept there, and given
// up when it is taken (AwaitSignal) or not kept after all; it frees itself
// when the signal lapses (same score).
func keptKey() string { return Prefix + "signals:kept" }

// reserveKeptScript reserves a place among the kept signals for id until
// it lapses, unless max (> 0) places are taken by signals that have not
// lapsed; an id that holds a place already keeps it (its lapse moved).
// KEYS: keptKey. ARGV: now (ms), id, lapse (ms), max (0: no bound).
// Returns {1} or {0, the first lapse of a place (ms)}.
var reserveKeptScript = redis.NewScript(`
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
local max = tonumber(ARGV[4])
if max > 0 and not redis.call('ZSCORE', KEYS[1], ARGV[2]) and redis.call('ZCARD', KEYS[1]) >= max then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, first[2]}
end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[2])
local ttl = tonumber(ARGV[3]) - tonumber(ARGV[1])
if ttl > 0 and redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
return {1}
`)

// ReserveKeptSignal reserves a place for signal id among the kept
// signals until lapse, before it is kept; with max > 0 it is refused
// (false) when max signals that have not lapsed hold one already: then
// next is when the first of them lapses (a taken one frees its place
// sooner). An id that holds a place keeps it. max 0 reserves whatever the
// count (a kept signal a step took and gave back, counted before).
func (s *Store) ReserveKeptSignal(ctx context.Context, id string, lapse time.Time, max int) (ok bool, next time.Time, err error) {
	res, err := reserveKeptScript.Run(ctx, s.rdb, []string{keptKey()}, s.now().UnixMilli(), id, lapse.UnixMilli(), max).Slice()
	if err != nil {
		return false, time.Time{}, fmt.Errorf("store: count kept signals: %w", err)
	}
	if len(res) > 0 && res[0] == int64(1) {
		return true, time.Time{}, nil
	}
	if len(res) == 2 {
		if str, isStr := res[1].(string); isStr {
			ms, _ := strconv.ParseFloat(str, 64)
			next = time.UnixMilli(int64(ms))
		}
	}
	return false, next, nil
}

// ReleaseKeptSignal gives up the places of signals ids: taken by a step,
// or not kept after all.
func (s *Store) ReleaseKeptSignal(ctx context.Context, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	members := make([]any, len(ids))
	for i, id := range ids {
		members[i] = id
	}
	if err := s.rdb.ZRem(ctx, keptKey(), members...).Err(); err != nil {
		return fmt.Errorf("store: count kept signals: %w", err)
	}
	return nil
}

// KeptSignalCount is the number of places held among the kept signals,
// across all names and matches (signals kept and not lapsed, and places
// reserved by sends keeping one now).
func (s *Store) KeptSignalCount(ctx context.Context) (int64, error) {
	n, err := s.rdb.ZCount(ctx, keptKey(), "("+strconv.FormatInt(s.now().UnixMilli(), 10), "+inf").Result()
	if err != nil {
		return 0, fmt.Errorf("store: count kept signals: %w", err)
	}
	return n, nil
}
