package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/flow"
)

// ErrRedisUnreachable wraps every failure to reach Redis at start.
var ErrRedisUnreachable = errors.New("cannot reach Redis")

// Redis connects to the configured Redis and checks it answers.
func Redis(ctx context.Context, c config.Redis) (redis.UniversalClient, error) {
	opts, err := c.Universal()
	if err != nil {
		return nil, err
	}
	rdb := newClient(opts)
	pctx, cancel := context.WithTimeout(ctx, c.DialTimeout.D()+time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("%w at %s: %v", ErrRedisUnreachable, c.Where(), err)
	}
	return rdb, nil
}

// WaitForRedis is Redis, tried again with backoff (0.5s doubling to 10s)
// until Redis answers, up to wait in all (wait ≤ 0: one try) or until ctx
// ends. Each failed try is logged at warn level.
func WaitForRedis(ctx context.Context, c config.Redis, wait time.Duration, log *slog.Logger) (redis.UniversalClient, error) {
	deadline := time.Now().Add(wait)
	delay := 500 * time.Millisecond
	for {
		rdb, err := Redis(ctx, c)
		if err == nil || wait <= 0 {
			return rdb, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, fmt.Errorf("%w (gave up after waiting %s)", err, wait)
		}
		d := min(delay, left)
		log.Warn("Redis is not answering yet; trying again", "in", d, "err", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (stopped while waiting: %v)", err, ctx.Err())
		case <-time.After(d):
		}
		delay = min(2*delay, 10*time.Second)
	}
}

// AsynqMon makes App.AsynqOpt: the configured Redis as asynq's connection
// options, for asynqmon (which opens its own connection).
func AsynqMon() Part {
	return Part{name: "AsynqMon", build: func(_ context.Context, a *App) error {
		var err error
		a.AsynqOpt, err = AsynqConnOpt(a.Config.Redis)
		return err
	}}
}

// AsynqConnOpt is the configured Redis as asynq's connection options: each
// client asynq (or asynqmon) makes with them is built as Redis builds its
// own, so it follows a failover as fast. asynq's RedisClusterClientOpt
// could not: it has no field for the slot map's reload period.
func AsynqConnOpt(c config.Redis) (asynq.RedisConnOpt, error) {
	u, err := c.Universal()
	if err != nil {
		return nil, err
	}
	return connOpt{u}, nil
}

// connOpt makes agentq's own client for asynq.
type connOpt struct{ u *redis.UniversalOptions }

// MakeRedisClient returns a new client: a *redis.ClusterClient on a
// Cluster, else a *redis.Client (asynqmon tells the two apart).
func (o connOpt) MakeRedisClient() any { return newClient(o.u) }

// ClusterStateReload is how old a Cluster client's map of slots to
// primaries may get before go-redis reloads it (CLUSTER SLOTS from a node
// that answers; the reload runs beside the command that found the map
// too old). go-redis reloads it at once on a MOVED, ASK or READONLY
// answer, but a primary that died answers nothing: until the next reload
// every command for its slots goes to the dead address, even after the
// cluster promoted its replica. go-redis' default period, 60s, held
// clients there for up to a minute; at 2s a client reaches the promoted
// replica within 2s of the promotion (sooner: see reloadOnUnavailable),
// for one CLUSTER SLOTS per client every 2s while it sends commands.
const ClusterStateReload = 2 * time.Second

// newClient is every Redis client agentq opens: on a Cluster, one whose
// slot map is reloaded every ClusterStateReload and after a command found
// Redis unavailable; behind Sentinel, go-redis' failover client, which
// asks a sentinel for the master on each new connection and drops the
// old master's connections when a sentinel announces the switch
// (+switch-master), so it follows a failover as soon as the sentinels
// have made it, with nothing to tune.
func newClient(u *redis.UniversalOptions) redis.UniversalClient {
	if !u.IsClusterMode {
		return redis.NewUniversalClient(u)
	}
	o := u.Cluster()
	o.ClusterStateReloadInterval = ClusterStateReload
	c := redis.NewClusterClient(o)
	c.AddHook(reloadOnUnavailable{c})
	return c
}

// reloadOnUnavailable asks for a reload of the slot map (go-redis runs
// one at a time, at most one every 200ms) whenever a command or pipeline
// found Redis unavailable: refused by a dead primary, CLUSTERDOWN,
// TRYAGAIN. The command's own retries then go to the primary that
// replaced it as soon as the cluster names one.
type reloadOnUnavailable struct{ c *redis.ClusterClient }

func (h reloadOnUnavailable) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h reloadOnUnavailable) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.reloadAfter(ctx, err)
		return err
	}
}

func (h reloadOnUnavailable) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.reloadAfter(ctx, err)
		return err
	}
}

func (h reloadOnUnavailable) reloadAfter(ctx context.Context, err error) {
	if err != nil && !errors.Is(err, redis.ErrClosed) && flow.RedisUnavailable(err) {
		h.c.ReloadState(ctx)
	}
}
