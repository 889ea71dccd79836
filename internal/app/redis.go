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
)

// ErrRedisUnreachable wraps every failure to reach Redis at start.
var ErrRedisUnreachable = errors.New("cannot reach Redis")

// Redis connects to the configured Redis and checks it answers.
func Redis(ctx context.Context, c config.Redis) (redis.UniversalClient, error) {
	opts, err := c.Universal()
	if err != nil {
		return nil, err
	}
	rdb := redis.NewUniversalClient(opts)
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

// AsynqConnOpt is the configured Redis as asynq's connection options.
func AsynqConnOpt(c config.Redis) (asynq.RedisConnOpt, error) {
	u, err := c.Universal()
	if err != nil {
		return nil, err
	}
	switch {
	case u.IsClusterMode:
		return asynq.RedisClusterClientOpt{Addrs: u.Addrs, Username: u.Username, Password: u.Password, TLSConfig: u.TLSConfig}, nil
	case u.MasterName != "":
		return asynq.RedisFailoverClientOpt{MasterName: u.MasterName, SentinelAddrs: u.Addrs, SentinelPassword: u.SentinelPassword,
			Username: u.Username, Password: u.Password, DB: u.DB, TLSConfig: u.TLSConfig}, nil
	}
	return asynq.RedisClientOpt{Addr: u.Addrs[0], Username: u.Username, Password: u.Password, DB: u.DB, TLSConfig: u.TLSConfig}, nil
}
