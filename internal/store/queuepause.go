package store

import (
	"context"
	"fmt"
)

// A queue's pause, by its name: asynq pauses each of its asynq queues (a
// sharded queue's shards), and this marker says the queue itself is
// paused, so that a shard that comes later (a new shard count, a worker
// that serves one nobody used yet) is paused when a worker starts
// serving it.

func queuePausedKey(queue string) string { return Prefix + "{queue:" + queue + "}:paused" }

// SetQueuePaused marks queue paused, with the asynq queues (its shards)
// the pause pauses, or clears the mark (paused false).
func (s *Store) SetQueuePaused(ctx context.Context, queue string, paused bool, shards ...string) error {
	var err error
	if paused && len(shards) > 0 {
		members := make([]any, len(shards))
		for i, n := range shards {
			members[i] = n
		}
		err = s.rdb.SAdd(ctx, queuePausedKey(queue), members...).Err()
	} else if !paused {
		err = s.rdb.Del(ctx, queuePausedKey(queue)).Err()
	}
	if err != nil {
		return fmt.Errorf("queue %s: %w", queue, err)
	}
	return nil
}

// QueuePaused returns the asynq queues a pause of queue paused (none:
// queue is not marked paused).
func (s *Store) QueuePaused(ctx context.Context, queue string) ([]string, error) {
	names, err := s.rdb.SMembers(ctx, queuePausedKey(queue)).Result()
	if err != nil {
		return nil, fmt.Errorf("queue %s: %w", queue, err)
	}
	return names, nil
}

// AsynqPaused reports whether asynq queue queue (a queue, or a shard of
// one) is paused: asynq's own marker (v0.26, internal/base.PausedKey),
// read for queues asynq has not registered too (no task was ever queued
// on them), whose state its Inspector cannot tell.
func (s *Store) AsynqPaused(ctx context.Context, queue string) (bool, error) {
	n, err := s.rdb.Exists(ctx, asynqKey(queue, "paused")).Result()
	if err != nil {
		return false, fmt.Errorf("queue %s: %w", queue, err)
	}
	return n == 1, nil
}
