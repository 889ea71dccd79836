package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/agentq/agentq"
)

// waitPoll is how often --wait reads the workflow.
const waitPoll = 200 * time.Millisecond

// unanswered reports an error that says Redis (or, with --server, the
// dashboard) did not answer: it says nothing about the workflow, which
// goes on on the workers.
func unanswered(err error) bool {
	return errors.Is(err, agentq.ErrUnreachable)
}

// outage is one stretch of Redis (or the dashboard) not answering, which
// a command rides for at most limit before it gives up (exit 3).
type outage struct {
	limit time.Duration
	since time.Time // the start of the current outage; zero: none
}

// failed records a read that was not answered. It reports whether the
// read began an outage (the caller says so, once) and whether the outage
// has lasted limit (the caller gives up).
func (o *outage) failed() (began, over bool) {
	if began = o.since.IsZero(); began {
		o.since = time.Now()
	}
	return began, time.Since(o.since) >= o.limit
}

// answered ends the outage, if one was going; it reports whether one was.
func (o *outage) answered() bool {
	was := !o.since.IsZero()
	o.since = time.Time{}
	return was
}

// pause waits before the next try.
func (o *outage) pause(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(waitPoll):
		return nil
	}
}

// waitThroughOutages waits for workflow id like agentq.Client.Wait, and keeps
// waiting while Redis (or, with --server, the dashboard) does not answer,
// for at most limit in one stretch: a restart or a failover of Redis says
// nothing about the workflow, which goes on on the workers. It says so on
// w once per outage. Past limit it returns the last error, which exits 3.
func waitThroughOutages(ctx context.Context, cl *agentq.Client, id string, limit time.Duration, onChange func(*agentq.Workflow), w io.Writer) (*agentq.Workflow, error) {
	o := outage{limit: limit}
	// each Wait reports its first read: an answer ends the outage
	answered := func(wf *agentq.Workflow) {
		o.answered()
		if onChange != nil {
			onChange(wf)
		}
	}
	for {
		wf, err := cl.WaitNotify(ctx, id, waitPoll, answered)
		if err == nil || !unanswered(err) || ctx.Err() != nil {
			return wf, err
		}
		switch began, over := o.failed(); {
		case began:
			fmt.Fprintf(w, "workflow %s: cannot read its state (%v); still waiting, for up to %s (--wait-outage)\n", id, err, limit)
		case over:
			return wf, fmt.Errorf("gave up waiting for workflow %s after %s without an answer (--wait-outage; the workflow goes on: follow it with 'enqueue status %s'): %w",
				id, limit, id, err)
		}
		if err := o.pause(ctx); err != nil {
			return wf, fmt.Errorf("gave up waiting for workflow %s: %w", id, err)
		}
	}
}
