package mcpserve

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/record"
)

// How a wait ended (submitted.Waited).
const (
	waitedEnded   = "ended"   // the workflow ended
	waitedWaiting = "waiting" // a step waits for a decision or a signal
	waitedBlocked = "blocked" // a step was dead-lettered
	waitedTimeout = "timeout" // wait_seconds passed
	waitedStopped = "stopped" // the server shuts down
	waitedBusy    = "busy"    // MaxWaiting calls wait already
	waitedFailed  = "failed"  // reading the workflow's events failed
)

// wait follows workflow id's event log until it ends, a step waits for a
// decision or a signal, a step is dead-lettered, d passes or the server
// stops; with the request's progress token, its steps' progress is sent
// as notifications/progress. It returns the workflow then, how the wait
// ended and a note for the caller. The workflow goes on either way.
func (t *tools) wait(ctx context.Context, req *mcp.CallToolRequest, id string, d time.Duration) (*producer.Workflow, string, string, error) {
	select {
	case t.waiting <- struct{}{}:
		defer func() { <-t.waiting }()
	default:
		wf, err := t.b.Status(ctx, id)
		return wf, waitedBusy, fmt.Sprintf("not waited: this server has %d waits in progress already; follow it with %s", cap(t.waiting), ToolStatus), err
	}
	start, err := t.b.Status(ctx, id)
	if err != nil {
		return nil, "", "", err
	}
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	defer context.AfterFunc(t.o.Stop, cancel)()
	p := newProgress(req, start)
	how, note := "", ""
	for ev, err := range t.b.Events(wctx, id, "") {
		if err != nil {
			if wctx.Err() == nil {
				how, note = waitedFailed, fmt.Sprintf("stopped waiting: reading its events: %v; follow it with %s", err, ToolStatus)
			}
			break
		}
		p.send(wctx, ev)
		if ev.Type == record.EventEnded {
			how = waitedEnded
			break
		}
		if ev.Type == record.EventWaiting || ev.Type == record.EventDead {
			// the event and the workflow's state are written together
			if wf, err := t.b.Status(wctx, id); err == nil && (wf.State == record.StateWaiting || wf.State == record.StateBlocked) {
				how = wf.State
				break
			}
		}
	}
	switch {
	case how != "":
	case ctx.Err() != nil:
		return nil, "", "", ctx.Err() // the caller gave up
	case t.o.Stop.Err() != nil:
		how = waitedStopped
	case errors.Is(wctx.Err(), context.DeadlineExceeded):
		how = waitedTimeout
	default:
		how = waitedEnded // the log ends after the workflow ends
	}
	wf, err := t.b.Status(ctx, id)
	if err != nil {
		return nil, "", "", err
	}
	if how == waitedEnded && !p.ended && record.Terminal(wf.State) {
		// the log's reader stopped at the end before it yielded the
		// workflow.ended entry: its progress still comes, from the status
		p.send(ctx, record.Event{Type: record.EventEnded, State: wf.State, Reason: wf.Error})
	}
	switch how {
	case waitedWaiting:
		note = fmt.Sprintf("a step waits for a person's decision (%s or %s) or for a signal (%s); the others go on", ToolApprove, ToolReject, ToolSignal)
	case waitedBlocked:
		note = "a step was dead-lettered (retries exhausted or not retryable): see its error in steps"
	case waitedTimeout:
		note = fmt.Sprintf("still %s after %s: it goes on; follow it with %s", wf.State, d, ToolStatus)
	case waitedStopped:
		note = fmt.Sprintf("the server is shutting down: the workflow goes on; follow it with %s", ToolStatus)
	}
	return wf, how, note, nil
}

// progress sends a wait's notifications/progress, when the request has a
// progress token: one per step event that says how a step is doing (a
// map's instances are not sent one by one; their map step is), and one
// when the workflow ends, at most MaxProgress. Progress counts them (it
// must increase); the message says what happened and how many of the
// workflow's steps are settled.
type progress struct {
	req     *mcp.CallToolRequest
	token   any
	n       int
	steps   int
	settled map[string]bool
	ended   bool // the workflow's end was described
}

func newProgress(req *mcp.CallToolRequest, wf *producer.Workflow) *progress {
	p := &progress{req: req, steps: len(wf.Steps), settled: map[string]bool{}}
	if req.Params != nil {
		p.token = req.Params.GetProgressToken()
	}
	return p
}

func (p *progress) send(ctx context.Context, ev record.Event) {
	msg := p.describe(ev)
	if p.token == nil || msg == "" || p.n >= MaxProgress || p.req.Session == nil {
		return
	}
	p.n++
	// a client that went away ends the call's context, and the wait
	_ = p.req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: p.token, Progress: float64(p.n), Message: msg})
}

// maxReasonBytes bounds a reason quoted in a progress message.
const maxReasonBytes = 300

// describe is an event's progress message, or "" for one not sent.
func (p *progress) describe(ev record.Event) string {
	if strings.Contains(ev.Step, "[") {
		return "" // a map's instance
	}
	settle := func(what string) string {
		p.settled[ev.Step] = true
		return fmt.Sprintf("step %s %s (%d of %d steps settled)", ev.Step, what, len(p.settled), p.steps)
	}
	reason := oneLine(bound(ev.Reason, maxReasonBytes))
	switch ev.Type {
	case record.EventStarted:
		return fmt.Sprintf("step %s started (attempt %d)", ev.Step, ev.Attempt)
	case record.EventFailed:
		return fmt.Sprintf("step %s attempt %d failed: %s: %s", ev.Step, ev.Attempt, ev.Class, reason)
	case record.EventWaiting:
		return fmt.Sprintf("step %s waits: %s", ev.Step, reason)
	case record.EventThrottled:
		return fmt.Sprintf("step %s waits for a concurrency slot", ev.Step)
	case record.EventDone:
		return settle("done")
	case record.EventDegraded:
		return settle("done, degraded")
	case record.EventDead:
		return settle(fmt.Sprintf("dead-lettered: %s: %s", ev.Class, reason))
	case record.EventCanceled:
		return settle("canceled")
	case record.EventRerun:
		for _, s := range ev.Steps {
			delete(p.settled, s)
		}
		return fmt.Sprintf("workflow runs again (run %d) from %s", ev.Gen, strings.Join(ev.Steps, ", "))
	case record.EventEnded:
		p.ended = true
		if reason != "" {
			return fmt.Sprintf("workflow %s: %s", ev.State, reason)
		}
		return "workflow " + ev.State
	}
	return ""
}
