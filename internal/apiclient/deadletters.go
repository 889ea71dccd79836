package apiclient

import (
	"context"
	"net/url"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/producer"
)

// DeadLetterTask is the task id of step's dead letter in workflow id (of
// its current run): its own task's, or, for a signal step that timed
// out, its timeout's.
func (c *Client) DeadLetterTask(ctx context.Context, id, step string) (string, error) {
	wf, err := c.Status(ctx, id)
	if err != nil {
		return "", err
	}
	for _, s := range wf.Steps {
		if s.ID != step || s.Attempts == 0 {
			continue
		}
		t := flow.SignalTimeoutTaskID(id, step, wf.Generation, s.Attempts)
		var d producer.DeadLetterDetail
		if c.do(ctx, "GET", "/api/v1/dlq/"+url.PathEscape(t), nil, &d) == nil {
			return t, nil
		}
	}
	return flow.StepTaskID(id, step, wf.Generation), nil
}

// DeadLetters lists dead letters, optionally of one class.
func (c *Client) DeadLetters(ctx context.Context, class string) ([]producer.DeadLetter, error) {
	var dls []producer.DeadLetter
	err := c.do(ctx, "GET", "/api/v1/dlq?class="+url.QueryEscape(class), nil, &dls)
	return dls, err
}

// DeadLetterDetail returns one dead letter with its prompt and errors.
func (c *Client) DeadLetterDetail(ctx context.Context, task string) (*producer.DeadLetterDetail, error) {
	var d producer.DeadLetterDetail
	if err := c.do(ctx, "GET", "/api/v1/dlq/"+url.PathEscape(task), nil, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// Requeue sends a dead letter back to its queue.
func (c *Client) Requeue(ctx context.Context, task string) error {
	return c.do(ctx, "POST", "/api/v1/dlq/"+url.PathEscape(task)+"/requeue", nil, nil)
}

// RequeueAll requeues every dead letter (of class, if set).
func (c *Client) RequeueAll(ctx context.Context, class string) (int, error) {
	var r struct {
		Requeued int `json:"requeued"`
	}
	err := c.do(ctx, "POST", "/api/v1/dlq?class="+url.QueryEscape(class), nil, &r)
	return r.Requeued, err
}

// Discard deletes a dead letter for good.
func (c *Client) Discard(ctx context.Context, task string) error {
	return c.do(ctx, "POST", "/api/v1/dlq/"+url.PathEscape(task)+"/discard", nil, nil)
}
