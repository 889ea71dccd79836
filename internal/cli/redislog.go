package cli

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"
)

// redisLog routes go-redis' own log lines (dial retries, pool trouble)
// through the command's logger at debug level, so a Redis that cannot be
// reached makes one line — agentq's error — instead of several from the
// client's standard logger first.
type redisLog struct{ log *slog.Logger }

func (r redisLog) Printf(ctx context.Context, format string, v ...any) {
	r.log.DebugContext(ctx, "redis client: "+fmt.Sprintf(format, v...))
}

// useLoggerForRedis makes log go-redis' logger for this process.
func useLoggerForRedis(log *slog.Logger) { redis.SetLogger(redisLog{log: log}) }
