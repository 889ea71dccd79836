package producer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/tasks"
)

// WithDeadline bounds the submitted workflow to d from now (instead of its
// spec's deadline).
func WithDeadline(d time.Duration) SubmitOption {
	return func(s *SubmitSettings) { s.Deadline = d }
}

// deadlineAt is when a workflow submitted now times out; zero: never.
func (c *Client) deadlineAt(wspec *spec.Spec, set SubmitSettings) time.Time {
	d := set.Deadline
	if d <= 0 {
		d = time.Duration(wspec.Deadline)
	}
	if d <= 0 {
		return time.Time{}
	}
	return c.now().Add(d)
}

// scheduleDeadline enqueues the task that ends workflow id at at (nothing
// for a zero at); one that exists already is success.
func (c *Client) scheduleDeadline(ctx context.Context, id string, wspec *spec.Spec, at time.Time) error {
	if at.IsZero() {
		return nil
	}
	payload, _ := json.Marshal(tasks.Payload{Workflow: id, Step: "deadline"})
	queue := wspec.Defaults.Queue
	if queue == "" {
		queue = spec.DefaultQueue
	}
	// asynq schedules by whole seconds: the task is due at the second
	// after the deadline, never before it
	due := at.Truncate(time.Second).Add(time.Second)
	t := asynq.NewTask(tasks.TypeDeadline, payload, asynq.TaskID(id+":deadline"), asynq.Queue(queue), asynq.ProcessAt(due),
		asynq.MaxRetry(spec.DefaultMaxRetries), asynq.Timeout(time.Minute), asynq.Retention(c.o.Retention))
	if _, err := c.asynq.EnqueueContext(ctx, t); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return fmt.Errorf("schedule the deadline of %s: %w", id, err)
	}
	return nil
}
