package apiclient

import (
	"context"
	"net/url"
	"strings"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/producer"
)

// DeadLetterTask is the task id of step's dead letter in workflow id (of
// its current run): its own task's, a signal step's timeout's or a
// concurrency grant's, as the dead letters list it.
func (c *Client) DeadLetterTask(ctx context.Context, id, step string) (string, error) {
	wf, err := c.Status(ctx, id)
	if err != nil {
		return "", err
	}
	own := flow.StepTaskID(id, step, wf.Generation)
	dls, err := c.DeadLetters(ctx, "")
	if err != nil {
		return "", err
	}
	for _, d := range dls {
		if d.Workflow == id && d.Step == step && strings.HasPrefix(d.TaskID, own) && (d.TaskID == own || d.TaskID[len(own)] == ':') {
			return d.TaskID, nil
		}
	}
	return own, nil
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
