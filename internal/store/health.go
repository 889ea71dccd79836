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

// HealthStats keeps every worker's call counts per target in time buckets:
// one hash per provider per bucket (one slot per provider), fields
// "<model>|<counter>". Workers add their counts once a second in one
// pipeline and read the window back the same way.
type HealthStats struct{ rdb redis.UniversalClient }

// NewHealthStats returns the health store on rdb.
func NewHealthStats(rdb redis.UniversalClient) *HealthStats { return &HealthStats{rdb: rdb} }

// HealthAdd is one worker's counts for a provider's bucket.
type HealthAdd struct {
	Provider string
	Bucket   int64                       // bucket start, unix seconds
	Models   map[string]map[string]int64 // model -> counter name -> count
}

// Add adds counts in one round trip; buckets expire after ttl.
func (h *HealthStats) Add(ctx context.Context, adds []HealthAdd, ttl time.Duration) error {
	if len(adds) == 0 {
		return nil
	}
	pipe := h.rdb.Pipeline()
	for _, a := range adds {
		key := healthKey(a.Provider, a.Bucket)
		for model, c := range a.Models {
			for name, n := range c {
				if n != 0 {
					pipe.HIncrBy(ctx, key, model+"|"+name, n)
				}
			}
		}
		pipe.Expire(ctx, key, ttl)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("store: add health counts: %w", err)
	}
	return nil
}

// Load sums the given buckets of each provider: provider -> bucket ->
// model -> counters, in one round trip.
func (h *HealthStats) Load(ctx context.Context, providers []string, buckets []int64) (map[string]map[int64]map[string]map[string]int64, error) {
	pipe := h.rdb.Pipeline()
	type req struct {
		p   string
		b   int64
		cmd *redis.MapStringStringCmd
	}
	var reqs []req
	for _, p := range providers {
		for _, b := range buckets {
			reqs = append(reqs, req{p, b, pipe.HGetAll(ctx, healthKey(p, b))})
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("store: load health counts: %w", err)
	}
	out := map[string]map[int64]map[string]map[string]int64{}
	for _, r := range reqs {
		if out[r.p] == nil {
			out[r.p] = map[int64]map[string]map[string]int64{}
		}
		for field, v := range r.cmd.Val() {
			model, name, ok := strings.Cut(field, "|")
			n, err := strconv.ParseInt(v, 10, 64)
			if !ok || err != nil {
				continue
			}
			if out[r.p][r.b] == nil {
				out[r.p][r.b] = map[string]map[string]int64{}
			}
			if out[r.p][r.b][model] == nil {
				out[r.p][r.b][model] = map[string]int64{}
			}
			out[r.p][r.b][model][name] += n
		}
	}
	return out, nil
}
