package producer

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/store"
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

// Feed reads workflows' event logs for a process that follows many at
// once (the dashboard): instead of each follower polling its log, one
// reader a workflow subscribes to the workflow's channel (Channel), where
// every append is announced, reads the new entries once (Page, from the
// last event it read) and shares them; a follower reads its history
// itself (Since). Every method is one or two Redis commands.
type Feed struct{ c *Client }

// Feed is the client's Feed.
func (c *Client) Feed() *Feed { return &Feed{c: c} }

// Channel is the Pub/Sub channel on which every append to workflow id's
// log is announced (the message: the new entry's id, an event id).
func (f *Feed) Channel(id string) string { return store.EventsChannel(id) }

// Subscribe opens a Pub/Sub connection on the client's Redis, to be
// subscribed to Channels (it connects on first use); close it when done.
func (f *Feed) Subscribe(ctx context.Context) *redis.PubSub { return f.c.rdb.Subscribe(ctx) }

// Page is the events of up to a page of workflow id's log entries after
// the event id after ("": from the start), oldest first; full says the
// page was full (more may follow at once).
func (f *Feed) Page(ctx context.Context, id, after string) (evs []Event, full bool, err error) {
	evs, full, err = f.c.store.EventsPage(ctx, id, after, eventPage)
	if err != nil {
		return nil, false, f.c.eventsErr(id, err)
	}
	return evs, full, nil
}

// Last is the id of the last event of workflow id's log ("": none).
func (f *Feed) Last(ctx context.Context, id string) (string, error) {
	last, err := f.c.store.LastEventID(ctx, id)
	if err != nil {
		return "", f.c.eventsErr(id, err)
	}
	return last, nil
}

// State is workflow id's state as its record says; ErrNotFound when it
// does not exist.
func (f *Feed) State(ctx context.Context, id string) (string, error) {
	wf, err := f.c.store.Summary(ctx, id)
	if err != nil {
		return "", f.c.eventsErr(id, err)
	}
	return wf.State, nil
}

// Since is every event of workflow id's log after the event id after
// ("": from the start), in order, up to the log's end as it is read; it
// does not wait for more. As Events, a reader whose next entries the
// log's bound trimmed first gets a log.truncated event.
func (f *Feed) Since(ctx context.Context, id, after string) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		check := true // the first read, or after a full page: the bound may have passed the reader
		for {
			if check {
				check = false
				info, err := f.c.store.EventLog(ctx, id)
				if err != nil {
					yield(Event{}, f.c.eventsErr(id, err))
					return
				}
				if info.Trimmed() > 0 && (after == "" || record.EventIDBefore(after, info.First)) {
					if !yield(Event{Type: record.EventTruncated, Dropped: info.Trimmed(), At: time.Now().UTC()}, nil) {
						return
					}
				}
			}
			evs, full, err := f.Page(ctx, id, after)
			if err != nil {
				yield(Event{}, err)
				return
			}
			for _, e := range evs {
				if !yield(e, nil) {
					return
				}
				after = e.ID
			}
			if !full {
				return
			}
			check = true
		}
	}
}
