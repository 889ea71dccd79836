package engine

import (
	"context"

	"github.com/hibiken/asynq"
)

// delivery is what the handler knows of the task it runs: its id and
// retry counts. asynq puts them in the context of a task it dequeued; a
// hand-off (handoff.go) puts its own, read the same way.
type delivery struct {
	taskID            string
	retried, maxRetry int
	handoff           bool // run by a hand-off (handoff.go)
}

// last says whether asynq archives the task should this delivery fail,
// whatever the error (IsFailure or not): its retries are used up. A wait
// that uses no retry (unconfirmed, unready) cannot be one then.
func (d delivery) last() bool { return d.retried >= d.maxRetry }

type deliveryKey struct{}

// withDelivery is ctx carrying a hand-off's delivery.
func withDelivery(ctx context.Context, d delivery) context.Context {
	return context.WithValue(ctx, deliveryKey{}, d)
}

// deliveryOf is the delivery of the task ctx runs: a hand-off's, or
// asynq's.
func deliveryOf(ctx context.Context) delivery {
	if d, ok := ctx.Value(deliveryKey{}).(delivery); ok {
		return d
	}
	var d delivery
	d.taskID, _ = asynq.GetTaskID(ctx)
	d.retried, _ = asynq.GetRetryCount(ctx)
	d.maxRetry, _ = asynq.GetMaxRetry(ctx)
	return d
}
