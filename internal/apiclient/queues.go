package apiclient

import (
	"context"
	"net/url"

	"github.com/agentq/agentq/internal/producer"
)

// Queues lists the queues with their state.
func (c *Client) Queues(ctx context.Context) ([]producer.QueueInfo, error) {
	var qs []producer.QueueInfo
	err := c.do(ctx, "GET", "/api/v1/queues", nil, &qs)
	return qs, err
}

// PauseQueue stops workers taking tasks from a queue.
func (c *Client) PauseQueue(ctx context.Context, name string) (producer.QueueChange, error) {
	var ch producer.QueueChange
	err := c.do(ctx, "POST", "/api/v1/queues/"+url.PathEscape(name)+"/pause", nil, &ch)
	return ch, err
}

// ResumeQueue lets workers take tasks from a paused queue again.
func (c *Client) ResumeQueue(ctx context.Context, name string) (producer.QueueChange, error) {
	var ch producer.QueueChange
	err := c.do(ctx, "POST", "/api/v1/queues/"+url.PathEscape(name)+"/resume", nil, &ch)
	return ch, err
}

// Schedules lists the periodic workflows the workers run.
func (c *Client) Schedules(ctx context.Context) ([]producer.ScheduleInfo, error) {
	var ss []producer.ScheduleInfo
	err := c.do(ctx, "GET", "/api/v1/schedules", nil, &ss)
	return ss, err
}
