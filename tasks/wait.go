package tasks

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// WideSteps is the number of steps past which Wait reports a workflow's
// progress by its counters only (Workflow.Counts, no Steps): a poll then
// costs the same however wide the workflow is.
const WideSteps = 100

// Wait polls the workflow every poll (0: 200ms) until it is Settled or ctx
// ends, and returns it whole. onChange, if not nil, is called with each
// new version: with its steps for a workflow of at most WideSteps steps,
// with its counters only (Steps nil) for a wider one. Each poll reads the
// counters (a fixed-size read); the steps are read only when they changed.
func (c *Client) Wait(ctx context.Context, id string, poll time.Duration, onChange func(*Workflow)) (*Workflow, error) {
	if poll <= 0 {
		poll = 200 * time.Millisecond
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	last, lastDetail := "", ""
	for {
		sum, err := c.store.Summary(ctx, id)
		if err != nil {
			return nil, err
		}
		if onChange != nil {
			if err := c.report(ctx, sum, &last, &lastDetail, onChange); err != nil {
				return nil, err
			}
		}
		if Settled(sum.State) {
			return c.store.Get(ctx, id)
		}
		select {
		case <-ctx.Done():
			return sum, fmt.Errorf("gave up waiting for workflow %s (state %s): %w", id, sum.State, ctx.Err())
		case <-t.C:
		}
	}
}

// report calls onChange when the workflow changed since the last report.
// A narrow workflow is read whole each poll (its steps' attempts change
// without the counters), a wide one never.
func (c *Client) report(ctx context.Context, sum *Workflow, last, lastDetail *string, onChange func(*Workflow)) error {
	if sum.Counts != nil && sum.Counts.Steps > WideSteps {
		if sig := fmt.Sprintf("%s|%+v", sum.State, *sum.Counts); sig != *last {
			*last = sig
			onChange(sum)
		}
		return nil
	}
	wf, err := c.store.Get(ctx, sum.ID)
	if err != nil {
		return err
	}
	if sig := signature(wf); sig != *lastDetail {
		*lastDetail = sig
		onChange(wf)
	}
	return nil
}

// signature changes when a narrow workflow's state or any step's state,
// attempts or map counters change.
func signature(wf *Workflow) string {
	var b strings.Builder
	b.WriteString(wf.State)
	for _, s := range wf.Steps {
		fmt.Fprintf(&b, "|%s:%d", s.State, s.Attempts)
		if s.Map != nil {
			fmt.Fprintf(&b, ":%d/%d", s.Map.Settled, s.Map.Items)
		}
	}
	return b.String()
}
