// Package webhook tells other systems that a workflow ended: a signed POST
// (the Standard Webhooks scheme) delivered at least once from a durable
// asynq queue, with backoff, to a destination the SSRF guard lets through
// (docs/webhooks.md).
//
// An event is enqueued once per workflow and event (its task id is
// deterministic, so a settle delivered twice does not enqueue it twice); a
// worker that has the signing secret serves the webhooks queue, signs each
// attempt with a fresh timestamp and posts the stored body. The secret is
// never in the task, the body or a header but the signature.
package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/hookcheck"
)

// TypeDelivery is the asynq task type of one event's delivery.
const TypeDelivery = "agentq:webhook"

// Queue is the asynq queue deliveries wait in; only workers with the
// signing secret serve it.
const Queue = hookcheck.Queue

// DefaultMaxRetry is how many times a delivery is retried before it is
// archived: about nine hours of DefaultBackoff.
const DefaultMaxRetry = 8

// deliveryTimeout is the asynq deadline of one attempt: the HTTP call's
// own timeout and a margin.
const deliveryTimeout = 30 * time.Second

// The events a workflow can notify, named as its end states.
const (
	Completed = hookcheck.Completed
	Blocked   = hookcheck.Blocked
	Failed    = hookcheck.Failed
	TimedOut  = hookcheck.TimedOut
	Canceled  = hookcheck.Canceled
)

// Events are every event, in the order docs list them; the default of a
// notify that names none.
var Events = hookcheck.Events

// Event is one workflow end to deliver. Its fields are ids and states
// only: never a step's output, a prompt or a key.
type Event struct {
	Workflow string    // the workflow's id
	Name     string    // the spec's name
	Event    string    // one of Events
	State    string    // the workflow's state
	URL      string    // where to POST
	At       time.Time // when it happened
	// Unfinished are the ids of steps that did not finish (for an event
	// other than completed).
	Unfinished []string
	// Error says why, in ids and classes ("step fetch dead-lettered:
	// rate_limited"); empty when completed.
	Error string
}

// ID is the event's webhook-id: unique per workflow and event, the same on
// every attempt, so a receiver can drop a redelivery.
func (e Event) ID() string { return "msg_" + e.Workflow + "_" + e.Event }

// TaskID is the delivery's asynq task id: enqueuing the same event twice
// is a no-op while the first task is kept.
func TaskID(wf, event string) string { return "webhook:" + wf + ":" + event }

// Body is what is posted.
type Body struct {
	Type      string    `json:"type"` // "workflow." + the event
	Timestamp time.Time `json:"timestamp"`
	Data      BodyData  `json:"data"`
}

// BodyData is the workflow the body is about.
type BodyData struct {
	ID         string   `json:"id"`
	Name       string   `json:"name"`
	State      string   `json:"state"`
	Unfinished []string `json:"unfinished_steps,omitempty"`
	Error      string   `json:"error,omitempty"`
}

// payload is what the task carries: the body as it will be posted, the
// destination and the ids the dashboard lists. Its field names differ from
// a step task's ("wf"), so nothing mistakes one for the other.
type payload struct {
	MsgID    string          `json:"msg_id"`
	Workflow string          `json:"workflow"`
	Event    string          `json:"event"`
	URL      string          `json:"url"`
	Body     json.RawMessage `json:"body"`
}

// Enqueue queues the event's delivery, kept for retention once it is
// delivered or archived (the configuration's retention: at least a
// minute): on Queue, with DefaultMaxRetry and the task id TaskID, unless
// opts say otherwise. An event already queued, delivered or archived
// (within its retention) is not queued again: that is not an error.
func Enqueue(ctx context.Context, c *asynq.Client, e Event, retention time.Duration, opts ...asynq.Option) error {
	if retention < time.Minute {
		return fmt.Errorf("webhook %s: retention %s is under a minute", e.ID(), retention)
	}
	if err := CheckURL(e.URL); err != nil {
		return fmt.Errorf("webhook %s: url: %w", e.ID(), err)
	}
	if !slices.Contains(Events, e.Event) {
		return fmt.Errorf("webhook %s: unknown event %q", e.ID(), e.Event)
	}
	body, err := json.Marshal(Body{Type: "workflow." + e.Event, Timestamp: e.At.UTC(),
		Data: BodyData{ID: e.Workflow, Name: e.Name, State: e.State, Unfinished: e.Unfinished, Error: e.Error}})
	if err != nil {
		return err
	}
	p, err := json.Marshal(payload{MsgID: e.ID(), Workflow: e.Workflow, Event: e.Event, URL: e.URL, Body: body})
	if err != nil {
		return err
	}
	all := append([]asynq.Option{asynq.Queue(Queue), asynq.TaskID(TaskID(e.Workflow, e.Event)), asynq.MaxRetry(DefaultMaxRetry),
		asynq.Timeout(deliveryTimeout), asynq.Retention(retention)}, opts...)
	_, err = c.EnqueueContext(ctx, asynq.NewTask(TypeDelivery, p), all...)
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return nil
	}
	return err
}

// CheckURL reports a URL that cannot be a webhook's destination
// (hookcheck.CheckURL). Whether its host may be reached is the Guard's
// question, asked when it is delivered.
func CheckURL(s string) error { return hookcheck.CheckURL(s) }

// CheckEvents returns the index and name of the first unknown event, or
// -1 (hookcheck.CheckEvents).
func CheckEvents(events []string) (int, string) { return hookcheck.CheckEvents(events) }

// EventsHelp names the events for an error message.
func EventsHelp() string { return hookcheck.EventsHelp() }
