package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/breaker"
)

// BreakerChanges is the pub/sub channel on which breaker transitions are
// announced (the payload is the provider).
const BreakerChanges = Prefix + "breakers:changed"

// breakerTTL bounds how long a breaker record lives without a change.
const breakerTTL = 24 * time.Hour

// Breakers keeps every target's circuit breaker in Redis: one hash per
// provider (one slot), a field per model. The state machine itself is
// breaker.Breaker; this stores its values and changes them by
// compare-and-set on their version, one script per transition.
type Breakers struct{ rdb redis.UniversalClient }

// NewBreakers returns the breaker store on rdb.
func NewBreakers(rdb redis.UniversalClient) *Breakers { return &Breakers{rdb: rdb} }

// casScript writes a breaker if its stored version is the expected one.
// KEYS: breakers hash. ARGV: model, expected version, new value, new
// version, channel, provider, ttl seconds. Returns {1} or {0, current value}.
var casScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], ARGV[1])
local v = 0
if cur then v = tonumber(string.match(cur, '([^|]*)$')) or 0 end
if v ~= tonumber(ARGV[2]) then return {0, cur or ''} end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[7])
redis.call('PUBLISH', ARGV[5], ARGV[6])
return {1}
`)

// encode writes "state|consecutive|open_until_ms|probe_until_ms|version".
func encode(b breaker.Breaker) string {
	ms := func(t time.Time) int64 {
		if t.IsZero() {
			return 0
		}
		return t.UnixMilli()
	}
	return fmt.Sprintf("%d|%d|%d|%d|%d", b.State, b.Consecutive, ms(b.OpenUntil), ms(b.ProbeUntil), b.Version)
}

func decode(s string) (breaker.Breaker, error) {
	f := strings.Split(s, "|")
	if len(f) != 5 {
		return breaker.Breaker{}, fmt.Errorf("breaker record %q", s)
	}
	n := make([]int64, 5)
	for i, x := range f {
		v, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return breaker.Breaker{}, fmt.Errorf("breaker record %q", s)
		}
		n[i] = v
	}
	t := func(ms int64) time.Time {
		if ms == 0 {
			return time.Time{}
		}
		return time.UnixMilli(ms)
	}
	return breaker.Breaker{State: breaker.State(n[0]), Consecutive: int(n[1]), OpenUntil: t(n[2]), ProbeUntil: t(n[3]), Version: n[4]}, nil
}

// CAS stores next for provider/model if the stored version is old. On a
// conflict it returns false and the stored breaker.
func (b *Breakers) CAS(ctx context.Context, provider, model string, old int64, next breaker.Breaker) (bool, breaker.Breaker, error) {
	res, err := casScript.Run(ctx, b.rdb, []string{breakerKey(provider)}, model, old, encode(next), next.Version,
		BreakerChanges, provider, int(breakerTTL/time.Second)).Slice()
	if err != nil {
		return false, breaker.Breaker{}, fmt.Errorf("store: breaker %s/%s: %w", provider, model, err)
	}
	if n, _ := res[0].(int64); n == 1 {
		return true, next, nil
	}
	cur := breaker.Breaker{}
	if len(res) > 1 {
		if s, _ := res[1].(string); s != "" {
			if cur, err = decode(s); err != nil {
				return false, breaker.Breaker{}, err
			}
		}
	}
	return false, cur, nil
}

// Load reads the breakers of the given providers in one round trip:
// provider -> model -> breaker.
func (b *Breakers) Load(ctx context.Context, providers []string) (map[string]map[string]breaker.Breaker, error) {
	pipe := b.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(providers))
	for i, p := range providers {
		cmds[i] = pipe.HGetAll(ctx, breakerKey(p))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("store: load breakers: %w", err)
	}
	out := make(map[string]map[string]breaker.Breaker, len(providers))
	for i, p := range providers {
		m := map[string]breaker.Breaker{}
		for model, v := range cmds[i].Val() {
			if br, err := decode(v); err == nil {
				m[model] = br
			}
		}
		out[p] = m
	}
	return out, nil
}
