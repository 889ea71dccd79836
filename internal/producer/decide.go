package producer

import (
	"context"
	"fmt"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/spec"
)

// Decide approves (or rejects) approval step step of workflow id, with a
// comment; by says who (cli, dashboard, api). It returns the workflow's
// state after the decision; flow.ErrNotWaiting if the step is not waiting.
func (c *Client) Decide(ctx context.Context, id, step string, approve bool, comment, by string) (string, error) {
	wspec, err := c.spec(ctx, id)
	if err != nil {
		return "", err
	}
	if st, ok := wspec.Step(step); !ok || st.Approve == nil {
		return "", fmt.Errorf("workflow %s has no approval step %q: %w", id, step, flow.ErrNotWaiting)
	}
	return flow.Decide(ctx, c.store, c.asynq, id, wspec, step, -1, spec.Decision{Approved: approve, Comment: comment, By: by, At: c.now().UTC()})
}
