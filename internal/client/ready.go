package client

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/app"
)

// ReadyTimeout bounds a readiness check (app.ReadyTimeout).
const ReadyTimeout = app.ReadyTimeout

// PrimariesAnswer is the readiness check of a face's Redis: nil while
// every primary it writes to answers (app.PrimariesAnswer).
func PrimariesAnswer(ctx context.Context, rdb redis.UniversalClient) error {
	return app.PrimariesAnswer(ctx, rdb)
}

// NotReady is PrimariesAnswer's error: What is the one line a probe shows.
type NotReady = app.NotReady
