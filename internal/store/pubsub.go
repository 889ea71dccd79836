package store

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Subscribe calls changed(channel, payload) for every announcement on the
// channels (KeyChanges, BreakerChanges) until ctx ends. It returns once the
// subscription is active; go-redis re-subscribes after a reconnect.
func Subscribe(ctx context.Context, rdb redis.UniversalClient, changed func(channel, payload string), channels ...string) error {
	sub := rdb.Subscribe(ctx, channels...)
	if _, err := sub.Receive(ctx); err != nil {
		sub.Close()
		return fmt.Errorf("store: subscribe to %v: %w", channels, err)
	}
	go func() {
		defer sub.Close()
		ch := sub.Channel()
		for {
			select {
			case <-ctx.Done():
				return
			case m, ok := <-ch:
				if !ok {
					return
				}
				changed(m.Channel, m.Payload)
			}
		}
	}()
	return nil
}
