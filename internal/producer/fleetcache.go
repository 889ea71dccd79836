package producer

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
)

// liveReuse is how long a Client checks submits against the live workers
// it read for an earlier one, when they serve the new spec: a producer
// submitting hundreds of workflows a second reads the fleet (two round
// trips and a JSON decode per worker) about once a second, not at every
// submit. Only an accepting check is taken from it: a spec the remembered
// workers do not serve, or no worker at all, is checked against a fresh
// read, so a worker that just started is never missed. A worker that
// stopped less than liveReuse ago may still be counted; its steps then
// wait for the next worker, which Status reports.
const liveReuse = time.Second

// liveWorkers remembers the last read of the live workers.
type liveWorkers struct {
	mu   sync.Mutex
	ads  []store.WorkerAd
	read time.Time // zero: never
}

// checkWorkers checks spec against the live workers: those read less
// than liveReuse ago if they serve it, else a fresh read.
func (c *Client) checkWorkers(ctx context.Context, wspec *spec.Spec) error {
	now := c.now()
	c.live.mu.Lock()
	ads, read := c.live.ads, c.live.read
	c.live.mu.Unlock()
	if !read.IsZero() && now.Sub(read) < liveReuse && now.Sub(read) >= 0 && checkServed(wspec, ads, c.o.Shards) == nil {
		return nil
	}
	ads, err := c.fleet.Live(ctx)
	if err != nil {
		return fmt.Errorf("check the spec against live workers: %w", err)
	}
	c.live.mu.Lock()
	c.live.ads, c.live.read = ads, now
	c.live.mu.Unlock()
	return checkServed(wspec, ads, c.o.Shards)
}
