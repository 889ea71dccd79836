package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Workers advertise what they serve: each live worker keeps one key,
// workerKey(id), holding its WorkerAd as JSON with a TTL it renews on a
// heartbeat, and an entry in the index workersKey(), a sorted set scored
// by when that key expires (Redis' own clock, so no process clock skews
// it). Readers drop the index's expired entries and read the keys that
// are left: two round trips, however many workers, and no SCAN. Both keys
// share the hash tag {workers}, so each command touches one slot.

func workersKey() string         { return Prefix + "{workers}" }
func workerKey(id string) string { return Prefix + "{workers}:" + id }

// WorkerAd is what one worker serves, as it advertises itself. It holds
// names, key ids and key fingerprints, never a key.
type WorkerAd struct {
	ID      string         `json:"id"`      // host, pid and a random part
	Version string         `json:"version"` // the build, when known
	Queues  map[string]int `json:"queues"`  // queue → priority
	// Shards are, for each queue it serves at more than one shard count
	// or at a count above 1 (queues: NAME: shards:, and the shards an
	// earlier count left), every count whose shards it all serves; a
	// producer submits to a queue only at a count live workers serve.
	// Missing: 1 alone.
	Shards map[string][]int `json:"shards,omitempty"`
	Routes []string         `json:"routes"`
	// Handlers are the code steps it runs (a spec's run: NAME).
	Handlers []string `json:"handlers"`
	// Tools are the tools it runs for a model; empty until it registers any.
	Tools     []string  `json:"tools"`
	Keys      []AdKey   `json:"keys"`
	StartedAt time.Time `json:"started_at"`
}

// AdKey names one of a worker's provider keys: its fingerprint
// (provider#N and the end of the key's hash) and its key id (the hash the
// shared key state is kept under).
type AdKey struct {
	Provider    string `json:"provider"`
	Fingerprint string `json:"fingerprint"`
	ID          string `json:"id"`
}

// ServedCounts are the shard counts ad serves queue q at (1 when it
// names none).
func ServedCounts(ad WorkerAd, q string) []int {
	if c := ad.Shards[q]; len(c) > 0 {
		return c
	}
	return []int{1}
}

// ErrBadAd is returned for an advertisement that cannot be written.
var ErrBadAd = errors.New("store: bad worker advertisement")

// Fleet reads and writes the workers' advertisements.
type Fleet struct {
	rdb redis.UniversalClient
	now func() time.Time // for the key state's cooldowns (FleetKeys)
}

// NewFleet returns the advertisements on rdb; now may be nil (time.Now).
func NewFleet(rdb redis.UniversalClient, now func() time.Time) *Fleet {
	if now == nil {
		now = time.Now
	}
	return &Fleet{rdb: rdb, now: now}
}

// advertiseScript writes an advertisement for ttl and indexes it by its
// expiry, dropping index entries that expired.
// KEYS: index, the worker's key. ARGV: ttl (ms), JSON, worker id.
var advertiseScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[1])
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[1]), ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return 1
`)

// liveScript drops the index's expired entries and returns the rest.
// KEYS: index.
var liveScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return redis.call('ZRANGE', KEYS[1], 0, -1)
`)

// Advertise writes (or renews) a worker's advertisement for ttl.
func (f *Fleet) Advertise(ctx context.Context, ad WorkerAd, ttl time.Duration) error {
	if ad.ID == "" || ttl < time.Millisecond {
		return fmt.Errorf("%w: id %q, ttl %s (want an id and a ttl of at least 1ms)", ErrBadAd, ad.ID, ttl)
	}
	data, err := json.Marshal(ad)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadAd, err)
	}
	if err := advertiseScript.Run(ctx, f.rdb, []string{workersKey(), workerKey(ad.ID)}, ttl.Milliseconds(), data, ad.ID).Err(); err != nil {
		return fmt.Errorf("store: advertise worker %s: %w", ad.ID, err)
	}
	return nil
}

// Withdraw removes a worker's advertisement (a graceful stop).
func (f *Fleet) Withdraw(ctx context.Context, id string) error {
	pipe := f.rdb.TxPipeline()
	pipe.Del(ctx, workerKey(id))
	pipe.ZRem(ctx, workersKey(), id)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("store: withdraw worker %s: %w", id, err)
	}
	return nil
}

// Live returns the advertisements of the workers alive now, by id. An
// advertisement that does not decode is left out.
func (f *Fleet) Live(ctx context.Context) ([]WorkerAd, error) {
	ids, err := liveScript.Run(ctx, f.rdb, []string{workersKey()}).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("store: live workers: %w", err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	// one MGET per 500 keys, all in one round trip
	pipe := f.rdb.Pipeline()
	var cmds []*redis.SliceCmd
	for i := 0; i < len(ids); i += 500 {
		keys := make([]string, 0, 500)
		for _, id := range ids[i:min(i+500, len(ids))] {
			keys = append(keys, workerKey(id))
		}
		cmds = append(cmds, pipe.MGet(ctx, keys...))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("store: live workers: %w", err)
	}
	var out []WorkerAd
	for _, c := range cmds {
		for _, v := range c.Val() {
			s, ok := v.(string)
			if !ok { // expired between the two reads
				continue
			}
			var ad WorkerAd
			if json.Unmarshal([]byte(s), &ad) == nil && ad.ID != "" {
				out = append(out, ad)
			}
		}
	}
	return out, nil
}
