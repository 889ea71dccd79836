package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// KeyStatus is the shared state of one API key, named by its key id (a
// hash of the key, never the key).
type KeyStatus struct {
	CoolUntil time.Time // zero: not cooling
	Disabled  string    // the reason; empty: enabled
}

// disabledTTL bounds how long a disabled key's record lives without being
// disabled again.
const disabledTTL = 30 * 24 * time.Hour

// KeyState keeps key cooldowns and disables in Redis for every worker. It
// is the shared half of llmclient's key pools.
type KeyState struct {
	rdb redis.UniversalClient
	now func() time.Time
}

// NewKeyState returns the shared key state on rdb; now may be nil.
func NewKeyState(rdb redis.UniversalClient, now func() time.Time) *KeyState {
	if now == nil {
		now = time.Now
	}
	return &KeyState{rdb: rdb, now: now}
}

// coolScript sets a key's cooldown to the later of the stored one and
// ARGV[2], keeps the hash alive as long as its longest cooldown, and
// announces the change. KEYS: cooling. ARGV: key id, until (ms), channel, provider.
var coolScript = redis.NewScript(`
local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
local til = tonumber(ARGV[2])
if til <= cur then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], til)
local ttl = redis.call('PTTL', KEYS[1])
local want = til - tonumber(redis.call('TIME')[1]) * 1000 + 1000
if ttl < want then redis.call('PEXPIRE', KEYS[1], math.max(want, 1000)) end
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
`)

// Cool marks a key cooling until until (a later cooldown already stored
// wins) and tells the other workers.
func (k *KeyState) Cool(ctx context.Context, provider, keyID string, until time.Time) error {
	err := coolScript.Run(ctx, k.rdb, []string{coolingKey(provider)}, keyID, until.UnixMilli(), KeyChanges, provider).Err()
	if err != nil {
		return fmt.Errorf("store: cool key of %s: %w", provider, err)
	}
	return nil
}

// Disable takes a key out until Enable, and tells the other workers.
func (k *KeyState) Disable(ctx context.Context, provider, keyID, reason string) error {
	pipe := k.rdb.TxPipeline()
	pipe.HSet(ctx, disabledKey(provider), keyID, strconv.FormatInt(k.now().UnixMilli(), 10)+" "+reason)
	pipe.Expire(ctx, disabledKey(provider), disabledTTL)
	pipe.Publish(ctx, KeyChanges, provider)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("store: disable key of %s: %w", provider, err)
	}
	return nil
}

// Enable clears a key's disable and cooldown. It reports whether the key
// was disabled or cooling.
func (k *KeyState) Enable(ctx context.Context, provider, keyID string) (bool, error) {
	pipe := k.rdb.TxPipeline()
	d := pipe.HDel(ctx, disabledKey(provider), keyID)
	c := pipe.HDel(ctx, coolingKey(provider), keyID)
	pipe.Publish(ctx, KeyChanges, provider)
	if _, err := pipe.Exec(ctx); err != nil {
		return false, fmt.Errorf("store: enable key of %s: %w", provider, err)
	}
	return d.Val()+c.Val() > 0, nil
}

// Load reads the state of the given providers' keys in one round trip.
// Cooldowns that have ended are left out.
func (k *KeyState) Load(ctx context.Context, providers []string) (map[string]map[string]KeyStatus, error) {
	pipe := k.rdb.Pipeline()
	cool := make([]*redis.MapStringStringCmd, len(providers))
	dis := make([]*redis.MapStringStringCmd, len(providers))
	for i, p := range providers {
		cool[i] = pipe.HGetAll(ctx, coolingKey(p))
		dis[i] = pipe.HGetAll(ctx, disabledKey(p))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("store: load key state: %w", err)
	}
	now := k.now()
	out := map[string]map[string]KeyStatus{}
	for i, p := range providers {
		m := map[string]KeyStatus{}
		for id, v := range cool[i].Val() {
			ms, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				continue
			}
			if t := time.UnixMilli(ms); t.After(now) {
				m[id] = KeyStatus{CoolUntil: t}
			}
		}
		for id, v := range dis[i].Val() {
			st := m[id]
			_, reason, _ := strings.Cut(v, " ")
			st.Disabled = reason
			m[id] = st
		}
		out[p] = m
	}
	return out, nil
}
