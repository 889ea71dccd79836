package app

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// ReadyTimeout bounds a readiness check (PrimariesAnswer) of /readyz.
const ReadyTimeout = 2 * time.Second

// NotReady says why PrimariesAnswer failed: What is one line that names
// no address (for a caller not signed in), Err the failure itself.
type NotReady struct {
	What string
	Err  error
}

func (e *NotReady) Error() string { return e.What + ": " + e.Err.Error() }
func (e *NotReady) Unwrap() error { return e.Err }

// PrimariesAnswer returns nil while every primary rdb writes to answers a
// PING, else a *NotReady. On a Cluster, every primary of the slot map,
// reloaded for the check (a primary that died is in it until the cluster
// promotes its replica, the replica after that); behind Sentinel, the
// master the sentinels name (the failover client connects to no other);
// else the server. The PINGs run at once, each bounded by ctx.
func PrimariesAnswer(ctx context.Context, rdb redis.UniversalClient) error {
	c, ok := rdb.(*redis.ClusterClient)
	if !ok {
		if err := rdb.Ping(ctx).Err(); err != nil {
			return &NotReady{What: "Redis does not answer", Err: err}
		}
		return nil
	}
	var asked, down atomic.Int32
	err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		asked.Add(1)
		if err := m.Ping(ctx).Err(); err != nil {
			down.Add(1)
			return fmt.Errorf("primary %s: %w", m.Options().Addr, err)
		}
		return nil
	})
	switch {
	case err == nil:
		return nil
	case asked.Load() == 0:
		return &NotReady{What: "no Redis Cluster node answers", Err: err}
	}
	return &NotReady{What: fmt.Sprintf("%d of %d Redis Cluster primaries do not answer", down.Load(), asked.Load()), Err: err}
}
