package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/agentq/agentq/internal/apiclient"
	"github.com/agentq/agentq/internal/client"
	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/producer"
)

// waitPoll is how often --wait reads the workflow.
const waitPoll = 200 * time.Millisecond

// waitThroughOutages waits for workflow id like client.Wait, and keeps
// waiting while Redis (or, with --server, the dashboard) does not answer,
// for at most outage in one stretch: a restart or a failover of Redis says
// nothing about the workflow, which goes on on the workers. It says so on
// w once per outage. Past outage it returns the last error, which exits 3.
func waitThroughOutages(ctx context.Context, cl *client.Client, id string, outage time.Duration, onChange func(*producer.Workflow), w io.Writer) (*producer.Workflow, error) {
	var since time.Time // the start of the current outage; zero: none
	// each Wait reports its first read: an answer ends the outage
	answered := func(wf *producer.Workflow) {
		since = time.Time{}
		if onChange != nil {
			onChange(wf)
		}
	}
	for {
		wf, err := cl.Wait(ctx, id, waitPoll, answered)
		if err == nil || !(errors.Is(err, flow.ErrUnavailable) || errors.Is(err, apiclient.ErrUnreachable)) || ctx.Err() != nil {
			return wf, err
		}
		switch {
		case since.IsZero():
			since = time.Now()
			fmt.Fprintf(w, "workflow %s: cannot read its state (%v); still waiting, for up to %s (--wait-outage)\n", id, err, outage)
		case time.Since(since) >= outage:
			return wf, fmt.Errorf("gave up waiting for workflow %s after %s without an answer (--wait-outage; the workflow goes on: follow it with 'enqueue status %s'): %w",
				id, outage, id, err)
		}
		select {
		case <-ctx.Done():
			return wf, fmt.Errorf("gave up waiting for workflow %s: %w", id, ctx.Err())
		case <-time.After(waitPoll):
		}
	}
}
