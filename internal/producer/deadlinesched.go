package producer

import (
	"context"
	"time"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/spec"
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
	return flow.ScheduleDeadline(ctx, c.asynq, id, wspec, at, c.o.Retention)
}
