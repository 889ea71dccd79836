package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Limits enforces a provider's cluster-wide max_concurrency (leases in a
// sorted set, scored by expiry, so a dead worker's leases lapse) and rpm
// (a sliding minute of request times), both in one script per call.
type Limits struct {
	rdb redis.UniversalClient
	now func() time.Time
}

// NewLimits returns the limits store on rdb; now may be nil.
func NewLimits(rdb redis.UniversalClient, now func() time.Time) *Limits {
	if now == nil {
		now = time.Now
	}
	return &Limits{rdb: rdb, now: now}
}

// acquireScript takes a concurrency lease and a request slot, or neither.
// KEYS: inflight, rpm. ARGV: now ms, lease id, lease expiry ms, max
// concurrency (0: none), rpm (0: none).
// Returns {1} or {0, ms until a slot may free}.
var acquireScript = redis.NewScript(`
local now = tonumber(ARGV[1])
local maxc, rpm = tonumber(ARGV[4]), tonumber(ARGV[5])
if maxc > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  if redis.call('ZCARD', KEYS[1]) >= maxc then
    local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
    return {0, math.max(tonumber(first[2]) - now, 1)}
  end
end
if rpm > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - 60000)
  if redis.call('ZCARD', KEYS[2]) >= rpm then
    local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
    return {0, math.max(tonumber(first[2]) + 60000 - now, 1)}
  end
  redis.call('ZADD', KEYS[2], now, ARGV[2])
  redis.call('PEXPIRE', KEYS[2], 61000)
end
if maxc > 0 then
  redis.call('ZADD', KEYS[1], tonumber(ARGV[3]), ARGV[2])
  redis.call('PEXPIRE', KEYS[1], math.max(tonumber(ARGV[3]) - now, 1000) + 1000)
end
return {1}
`)

// Acquire takes a slot for one call to provider: a concurrency lease held
// until release (or until lease passes, if this worker dies) and a
// request in the sliding minute. When a limit is full it returns ok false
// and how long until a slot may free.
func (l *Limits) Acquire(ctx context.Context, provider string, maxConcurrency, rpm int, lease time.Duration) (release func(context.Context), wait time.Duration, ok bool, err error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	now := l.now().UnixMilli()
	res, err := acquireScript.Run(ctx, l.rdb, []string{inflightKey(provider), rpmKey(provider)},
		now, id, now+lease.Milliseconds(), maxConcurrency, rpm).Slice()
	if err != nil {
		return nil, 0, false, fmt.Errorf("store: limits of %s: %w", provider, err)
	}
	if n, _ := res[0].(int64); n != 1 {
		ms, _ := res[1].(int64)
		return nil, time.Duration(ms) * time.Millisecond, false, nil
	}
	release = func(ctx context.Context) {
		if maxConcurrency > 0 {
			_ = l.rdb.ZRem(ctx, inflightKey(provider), id).Err() // the lease lapses anyway
		}
	}
	return release, 0, true, nil
}
