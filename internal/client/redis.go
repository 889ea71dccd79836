package client

import (
	"context"
	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/app"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/store"
)

// ErrRedisUnreachable wraps every failure to reach Redis when a client
// opens.
var ErrRedisUnreachable = app.ErrRedisUnreachable

// Open connects to cfg's Redis (one try) and returns a client over it.
func Open(ctx context.Context, cfg config.Config) (*Client, error) {
	a, err := app.Build(ctx, cfg, app.Options{}, app.Producer())
	if err != nil {
		return nil, err
	}
	return &Client{driver: redisDriver{Client: a.Client, fleet: store.NewFleet(a.Redis, nil), ads: app.AdKeys(cfg)}, cfg: cfg, close: a.Close}, nil
}

// Over is a client over rdb, which it leaves open, that also reads the
// workers' shared breaker and health state (Targets): the dashboard's.
// Its parts log to log (nil: nowhere).
func Over(ctx context.Context, cfg config.Config, rdb redis.UniversalClient, log *slog.Logger) (*Client, error) {
	a, err := app.Build(ctx, cfg, app.Options{Logger: log, Redis: rdb}, app.Producer(), app.Monitor())
	if err != nil {
		return nil, err
	}
	return &Client{driver: redisDriver{Client: a.Client, fleet: store.NewFleet(rdb, nil), ads: app.AdKeys(cfg)}, cfg: cfg, close: a.Close,
		mon: &monitor{breakers: a.Breakers, health: a.Health, metrics: a.Metrics.Handler(), gauges: a.Metrics}}, nil
}

// redisDriver is the producer client (internal/producer) with the keys the live
// workers advertise (and the configuration holds).
type redisDriver struct {
	*producer.Client
	fleet *store.Fleet
	ads   []store.AdKey
}

func (d redisDriver) Keys(ctx context.Context) ([]record.KeyInfo, error) {
	return d.fleet.FleetKeys(ctx, d.ads)
}

func (d redisDriver) EnableKeys(ctx context.Context, ref string, all bool) (record.EnableResult, error) {
	return d.fleet.EnableKeys(ctx, d.ads, ref, all)
}
