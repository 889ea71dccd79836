package producer

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/record"
)

// Event is one entry of a workflow's event log.
type Event = record.Event

// EventPoll is how often a follower looks for new events while none come.
const EventPoll = 200 * time.Millisecond

// eventPage is how many log entries one read takes.
const eventPage = 500

// Events follows a workflow's event log: every event after the event id
// after ("": from the start), in order, once each; then new ones as they
// are logged, until the workflow ends (completed, failed, canceled,
// timed_out: after its workflow.ended event) or ctx does. A blocked or
// waiting workflow is followed on: a requeue, a decision or a rerun
// continues it. When the log's bound trimmed entries the reader would
// have read, it first gets a log.truncated event saying how many the log
// has dropped. A workflow that does not exist is ErrNotFound; Redis
// failing ends the sequence with its error.
func (c *Client) Events(ctx context.Context, id, after string) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		if after != "" && !record.ValidEventID(after) {
			yield(Event{}, fmt.Errorf("event id %q: want the id of an event (ms-seq)", after))
			return
		}
		if _, err := c.store.Summary(ctx, id); err != nil {
			yield(Event{}, c.eventsErr(id, err))
			return
		}
		info, err := c.store.EventLog(ctx, id)
		if err != nil {
			yield(Event{}, c.eventsErr(id, err))
			return
		}
		if info.Trimmed() > 0 && (after == "" || record.EventIDBefore(after, info.First)) {
			if !yield(Event{Type: record.EventTruncated, Dropped: info.Trimmed(), At: time.Now().UTC()}, nil) {
				return
			}
		}
		idle := time.NewTimer(0)
		defer idle.Stop()
		<-idle.C
		ended := false  // the last event read was workflow.ended
		behind := false // the last page was full: the log's bound may have passed this reader
		for {
			if behind {
				if info, err := c.store.EventLog(ctx, id); err == nil && info.Trimmed() > 0 && record.EventIDBefore(after, info.First) {
					if !yield(Event{Type: record.EventTruncated, Dropped: info.Trimmed(), At: time.Now().UTC()}, nil) {
						return
					}
				}
			}
			evs, full, err := c.store.EventsPage(ctx, id, after, eventPage)
			if err != nil {
				yield(Event{}, c.eventsErr(id, err))
				return
			}
			for _, e := range evs {
				if !yield(e, nil) {
					return
				}
				after, ended = e.ID, e.Final()
			}
			if behind = full; behind {
				continue
			}
			if ended {
				return // nothing after the end: a later rerun is a new follow
			}
			if len(evs) == 0 {
				// no log (events off, or written before it existed): the
				// record says when it is over; the state and the log
				// change in one script, so a final state's events are
				// all in the log by now
				wf, err := c.store.Summary(ctx, id)
				if err != nil {
					yield(Event{}, c.eventsErr(id, err))
					return
				}
				if record.Terminal(wf.State) {
					if more, err := c.store.Events(ctx, id, after, eventPage); err == nil && len(more) > 0 {
						continue
					}
					return
				}
			}
			idle.Reset(EventPoll)
			select {
			case <-ctx.Done():
				yield(Event{}, ctx.Err())
				return
			case <-idle.C:
			}
		}
	}
}

func (c *Client) eventsErr(id string, err error) error {
	if flow.RedisUnavailable(err) {
		return fmt.Errorf("events of workflow %s: %w: %w", id, flow.ErrUnavailable, err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("events of workflow %s: %w", id, err)
}
