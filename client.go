package agentq

import (
	"context"
	"errors"
	"iter"
	"time"

	"github.com/agentq/agentq/internal/apiclient"
	"github.com/agentq/agentq/internal/client"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/spec"
)

// Client submits workflows and reads them: what a producer (a web app, a
// cron job, a script) uses. It is safe for concurrent use.
type Client struct {
	c *client.Client // the client the CLI and the dashboard use too
}

// NewClient connects to cfg's Redis. Close it when done.
func NewClient(ctx context.Context, cfg Config) (*Client, error) {
	if cfg.c == nil {
		return nil, errors.New("agentq: NewClient: the Config is empty (use LoadConfig or ParseConfig)")
	}
	cl, err := client.Open(ctx, *cfg.c)
	if err != nil {
		return nil, wrap(err)
	}
	return &Client{c: cl}, nil
}

// NewServerClient is a Client over a dashboard's HTTP API at url (what
// enqueue --server uses), for a producer that does not reach Redis. token
// is the dashboard's (AGENTQ_DASHBOARD_TOKEN; empty: none). It makes no
// call until a method is used; Parse checks a spec against the built-in
// limits (the server checks it again against its own configuration).
func NewServerClient(url, token string) *Client {
	return &Client{c: client.Remote(config.Default(), url, token)}
}

// NewServerClientWithConfig is NewServerClient with cfg in place of the
// defaults: Cost prices a workflow with cfg's prices, and Parse checks a
// spec against cfg's limits (what enqueue --server does with its
// configuration; the server checks it again against its own). An empty
// Config is the defaults.
func NewServerClientWithConfig(cfg Config, url, token string) *Client {
	c := config.Default()
	if cfg.c != nil {
		c = *cfg.c
	}
	return &Client{c: client.Remote(c, url, token)}
}

// ErrUnauthorized is returned (match it with errors.Is) by a server
// client's call that the dashboard refused: no token, or a wrong one
// (AGENTQ_DASHBOARD_TOKEN).
var ErrUnauthorized = apiclient.ErrUnauthorized

// ErrInvalidSpec is matched (errors.Is) by every error that says a spec
// is not valid (Parse, Config.ParseSpec, a submit a server checked, a
// Rerun from a step the spec does not have): each problem names its
// place, one a line.
var ErrInvalidSpec = spec.ErrInvalidSpec

// Parse reads and checks a workflow spec (YAML or JSON); name says where
// it came from in errors. Every problem is reported with its line.
func (c *Client) Parse(name string, spec []byte) (*Spec, error) {
	return wrapped(c.c.Parse(name, spec))
}

// SubmitOption changes one submit (WithIdempotencyKey).
type SubmitOption = producer.SubmitOption

// Submission is a submitted workflow's id, and whether an idempotency key
// named one that existed already.
type Submission = producer.Submission

// ErrIdempotencyConflict is returned for a submit whose idempotency key
// was used, within the retention, with a different spec or input.
var ErrIdempotencyConflict = producer.ErrIdempotencyConflict

// ConflictError is what ErrIdempotencyConflict wraps: the key, the
// workflow it names, and how long a key holds.
type ConflictError = producer.ConflictError

// ErrNotConfirmed is returned (match it with errors.Is) when a write that
// acknowledges something — a submit, a signal, a cancel, a rerun, a
// requeue — reached the Redis primary but was not confirmed by the
// replicas that redis.durability asks for within its timeout: it may not
// survive a failover. Nothing was undone. For a submit, the error is a
// *SubmitError naming the idempotency key: submitting again with it
// (WithIdempotencyKey) runs the workflow once either way.
var ErrNotConfirmed = producer.ErrNotConfirmed

// SubmitError is a submit's error that leaves the caller unsure whether
// the workflow was written: Redis unreachable, the write not confirmed
// (ErrNotConfirmed), a timeout. Its fields:
//
//   - Key: the submit's idempotency key (every submit has one: the
//     caller's, or one generated before the first write);
//   - Workflow: the workflow id that key names;
//   - Err: what went wrong (Unwrap returns it, so errors.Is sees
//     ErrNotConfirmed through it).
//
// Submitting the same spec and input again with WithIdempotencyKey(Key)
// is safe: it returns the workflow if the first submit wrote it
// (Submission.Existing) and creates it once if not.
//
//	var se *agentq.SubmitError
//	if errors.As(err, &se) {
//		sub, err = c.SubmitWorkflow(ctx, spec, agentq.WithIdempotencyKey(se.Key))
//	}
type SubmitError = producer.SubmitError

// ErrNoWorkers is returned by a submit when no live worker has advertised
// what it serves (none is running): the workflow was not written.
// WithoutWorkerCheck submits anyway.
var ErrNoWorkers = producer.ErrNoWorkers

// ErrBadIdempotencyKey is matched (errors.Is) by the error for an
// idempotency key that is empty, longer than 255 bytes, not UTF-8 or holds
// a control character (CheckIdempotencyKey, a submit, a signal).
var ErrBadIdempotencyKey = producer.ErrBadIdempotencyKey

// CheckIdempotencyKey returns nil for a key WithIdempotencyKey (or a
// Signal's IdempotencyKey) takes, and otherwise an error matching
// ErrBadIdempotencyKey that says what is wrong with it: a key checked
// before anything is sent.
func CheckIdempotencyKey(key string) error { return producer.CheckIdempotencyKey(key) }

// WithoutWorkerCheck submits without checking the spec against what live
// workers serve (the CLI's --no-check): its steps wait in their queues
// until a worker that serves them starts.
func WithoutWorkerCheck() SubmitOption { return producer.WithoutWorkerCheck() }

// WithIdempotencyKey makes a submit idempotent: the first submit with key
// creates the workflow; later ones within the retention (24h by default)
// return it instead of creating another, however many run at once. The
// same key with a different spec or input is refused with
// ErrIdempotencyConflict. A key is 1 to 255 bytes without control
// characters, e.g. "order-1234-summary".
func WithIdempotencyKey(key string) SubmitOption { return producer.WithIdempotencyKey(key) }

// Submit writes the workflow and enqueues its first steps; it returns the
// workflow's id.
func (c *Client) Submit(ctx context.Context, spec *Spec, opts ...SubmitOption) (string, error) {
	s, err := c.c.SubmitWorkflow(ctx, spec, opts...)
	return s.ID, wrap(err)
}

// SubmitWorkflow is Submit, saying also whether an idempotency key named
// a workflow that existed already (nothing was created then).
func (c *Client) SubmitWorkflow(ctx context.Context, spec *Spec, opts ...SubmitOption) (Submission, error) {
	return wrapped(c.c.SubmitWorkflow(ctx, spec, opts...))
}

// Spec returns the spec workflow id was submitted with (over a server:
// its notify.url as scheme and host only, which may be a credential).
func (c *Client) Spec(ctx context.Context, id string) (*Spec, error) {
	return wrapped(c.c.Spec(ctx, id))
}

// Status returns a workflow's state and steps.
func (c *Client) Status(ctx context.Context, id string) (*Workflow, error) {
	return wrapped(c.c.Status(ctx, id))
}

// Result returns a workflow and the outputs of its final steps.
func (c *Client) Result(ctx context.Context, id string) (*Result, error) {
	return wrapped(c.c.Result(ctx, id))
}

// Wait polls the workflow every poll (0: 200ms) until it is completed,
// failed, canceled or blocked on a dead-lettered step, or ctx is done.
func (c *Client) Wait(ctx context.Context, id string, poll time.Duration) (*Workflow, error) {
	if poll <= 0 {
		poll = 200 * time.Millisecond
	}
	return wrapped(c.c.Wait(ctx, id, poll, nil))
}

// WaitNotify is Wait calling onChange (if not nil) with each new version
// of the workflow it reads, the first read included: with its steps for
// a workflow of at most 100 steps, with its Counts only (Steps nil) for a
// wider one, whose steps it reads once, at the end (what
// enqueue --wait draws its progress from). A read that is not answered
// ends it with an error matching ErrUnavailable.
func (c *Client) WaitNotify(ctx context.Context, id string, poll time.Duration, onChange func(*Workflow)) (*Workflow, error) {
	if poll <= 0 {
		poll = 200 * time.Millisecond
	}
	return wrapped(c.c.Wait(ctx, id, poll, onChange))
}

// Events follows a workflow's event log (docs/events.md): every event
// after the event id from ("": from the start) in order, once each, then
// new ones as they are logged, until the workflow ends (after its
// workflow.ended event) or ctx is done; a blocked or waiting workflow is
// followed on. A reader that resumes passes the last id it read. An error
// ends the sequence (ErrNotFound for a workflow that does not exist).
//
//	for ev, err := range c.Events(ctx, id, "") {
//		if err != nil { return err }
//		fmt.Println(ev.Type, ev.Step)
//	}
func (c *Client) Events(ctx context.Context, id, from string) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		for ev, err := range c.c.Events(ctx, id, from) {
			if !yield(ev, wrap(err)) {
				return
			}
		}
	}
}

// Cancel stops a workflow: pending steps never run, running ones see their
// context canceled. It returns the workflow's state afterwards.
func (c *Client) Cancel(ctx context.Context, id string) (string, error) {
	return wrapped(c.c.Cancel(ctx, id))
}

// Close releases the connection to Redis (a server client holds none).
func (c *Client) Close() error { return c.c.Close() }

// QueueInfo is one queue: paused or not, and its tasks by state.
type QueueInfo = producer.QueueInfo

// QueueChange is what PauseQueue and ResumeQueue did.
type QueueChange = producer.QueueChange

// ErrUnknownQueue is returned for a queue no live worker serves and no
// task was ever queued on.
var ErrUnknownQueue = producer.ErrUnknownQueue

// Queues lists the queues asynq knows and live workers serve.
func (c *Client) Queues(ctx context.Context) ([]QueueInfo, error) { return wrapped(c.c.Queues(ctx)) }

// PauseQueue stops every worker taking a queue's steps until ResumeQueue;
// running steps finish, submits are still accepted.
func (c *Client) PauseQueue(ctx context.Context, name string) (QueueChange, error) {
	return wrapped(c.c.PauseQueue(ctx, name))
}

// ResumeQueue lets workers take a paused queue's steps again.
func (c *Client) ResumeQueue(ctx context.Context, name string) (QueueChange, error) {
	return wrapped(c.c.ResumeQueue(ctx, name))
}

// ScheduleInfo is one periodic workflow the workers run.
type ScheduleInfo = producer.ScheduleInfo

// Schedules lists the periodic workflows (schedules: in the workers'
// configuration) a worker ran within the last week.
func (c *Client) Schedules(ctx context.Context) ([]ScheduleInfo, error) {
	return wrapped(c.c.Schedules(ctx))
}
