package producer

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
)

// WideSteps is the number of steps past which Wait reports a workflow's
// progress by its counters only (Workflow.Counts, no Steps): a poll then
// costs the same however wide the workflow is.
const WideSteps = 100

// Wait polls the workflow every poll (0: 200ms) until it is Settled or ctx
// ends, and returns it whole. onChange, if not nil, is called with each
// new version: with its steps for a workflow of at most WideSteps steps
// (read whole each poll: its steps' attempts change without the
// counters), with its counters only (Steps nil) for a wider one, whose
// polls read the counters alone (a fixed-size read) and whose steps are
// read once, at the end. A poll that Redis does not answer ends the wait
// with an error wrapping ErrUnavailable (and the last workflow read, if
// any): it says nothing about how the workflow is doing.
func (c *Client) Wait(ctx context.Context, id string, poll time.Duration, onChange func(*Workflow)) (*Workflow, error) {
	if poll <= 0 {
		poll = 200 * time.Millisecond
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	narrow, last := false, "" // narrow is known after the first read
	var wspec *spec.Spec      // read when a step first waits: what it waits for
	waitsFor := func(wf *Workflow) {
		if wspec == nil && hasWaiting(wf) {
			wspec, _ = c.spec(ctx, id) // unread: the steps say less, and the wait goes on
		}
		if wspec != nil {
			parseOutputs(wspec, wf)
		}
	}
	for {
		var (
			wf  *Workflow
			err error
		)
		if narrow {
			wf, err = c.store.Get(ctx, id)
		} else if wf, err = c.store.Summary(ctx, id); err == nil && onChange != nil && wf.Counts != nil && wf.Counts.Steps <= WideSteps {
			narrow = true
			wf, err = c.store.Get(ctx, id)
		}
		if err != nil && flow.RedisUnavailable(err) {
			return nil, fmt.Errorf("waiting for workflow %s: %w: %w", id, flow.ErrUnavailable, err)
		}
		if err != nil {
			return nil, err
		}
		waitsFor(wf)
		if sig := Signature(wf); onChange != nil && sig != last {
			last = sig
			onChange(wf)
		}
		if Settled(wf.State) {
			if wf.Steps == nil {
				if wf, err = c.store.Get(ctx, id); err == nil {
					waitsFor(wf)
				}
				return wf, err
			}
			return wf, nil
		}
		select {
		case <-ctx.Done():
			return wf, fmt.Errorf("gave up waiting for workflow %s (state %s): %w", id, wf.State, ctx.Err())
		case <-t.C:
		}
	}
}

// Signature changes when a workflow's state, its counters (read without
// steps) or any step's state, attempts or map counters change.
func Signature(wf *Workflow) string {
	var b strings.Builder
	b.WriteString(wf.State)
	if wf.Steps == nil && wf.Counts != nil {
		fmt.Fprintf(&b, "|%+v", *wf.Counts)
	}
	for _, s := range wf.Steps {
		fmt.Fprintf(&b, "|%s:%d", s.State, s.Attempts)
		if s.Map != nil {
			fmt.Fprintf(&b, ":%d/%d", s.Map.Settled, s.Map.Items)
		}
	}
	return b.String()
}

// hasWaiting reports a step of wf that waits (a decision, a signal, a
// child workflow).
func hasWaiting(wf *Workflow) bool {
	for _, s := range wf.Steps {
		if s.State == store.StepWaiting {
			return true
		}
	}
	return false
}
