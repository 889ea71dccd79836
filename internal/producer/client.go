// Package producer is the producer client over Redis: submit (with an
// idempotency key, a deadline), status, result, wait, list, cancel,
// approve or reject, rerun, dead letters, queues and schedules. The SDK's
// agentq.Client, the enqueue command and the dashboard reach it through
// internal/client. It shares the spec and the flow with the engine and
// imports no part of it.
package producer

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
)

// Workflow is a workflow's state and steps as Status returns them; its
// JSON shape is stable (enqueue --json and the dashboard's API print it).
type Workflow = record.Workflow

// StepRecord is one step of a Workflow.
type StepRecord = record.StepRecord

// ErrNotFound is returned for a workflow id that does not exist or expired.
var ErrNotFound = record.ErrNotFound

// ClientOptions configures a Client from the configuration (app builds
// them): Retention and Limits are taken as given, never filled in here.
type ClientOptions struct {
	// Retention is how long an ended workflow's records and finished
	// tasks are kept (retention): at least a minute.
	Retention time.Duration
	// MaxOpenAge is limits.max_open_age: an open workflow's records are
	// kept that long and Retention more. 0: the built-in default.
	MaxOpenAge time.Duration
	// Routes, when not nil, are the routes a spec may name.
	Routes []string
	// Limits are what specs are checked against (limits): a parse
	// refuses a limit that is not positive.
	Limits spec.Limits
	// NewKey makes the idempotency key of a submit that names none (a
	// workflow's id derives from its key); nil: random "k_…" keys.
	NewKey func() string
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// Webhooks, when set, is the configuration's webhooks: a spec's
	// notify: is checked against it, and Cancel notifies; nil: a spec
	// with notify: is refused.
	Webhooks *flow.Webhooks
	// MaxRetries is the retries of steps whose spec sets none (neither the
	// step nor its defaults); nil: DefaultMaxRetries. The configuration's
	// resilience.retry.max_retries.
	MaxRetries *int
	// SkipWorkerCheck submits without checking specs against what live
	// workers serve (WithoutWorkerCheck does it for one Submit).
	SkipWorkerCheck bool
	// EventLimit bounds each workflow's event log (events.limit); 0 keeps
	// no log of what the client does (submits, cancels, reruns).
	EventLimit int
	// SignalKeep is how long a signal no step waited for is kept
	// (signals.keep); 0: defaults.SignalKeep.
	SignalKeep time.Duration
	// MaxSignalBytes bounds a signal's data (limits.max_signal_bytes, at
	// most limits.max_output_bytes: it is the output of the steps it
	// completes); 0: the default, 64 KiB.
	MaxSignalBytes int
	// MaxKeptSignals bounds the signals kept at once, across every name
	// and match (limits.max_kept_signals): a send no step waits for is
	// refused past it (ErrOverLimit). 0: the default, 10,000.
	MaxKeptSignals int
	// Shards are the shard counts of the sharded queues (queues: NAME:
	// shards:); a submitted workflow keeps them for all its steps and
	// children. nil: no queue is sharded.
	Shards map[string]int
	// Durability, when Replicas is set, has every acknowledging write
	// (submit, signal, cancel, rerun, requeue) confirmed by that many
	// replicas (redis.durability); one that is not is ErrNotConfirmed.
	Durability store.Durability
}

// ErrNotConfirmed is returned for a write that reached the Redis primary
// but was not confirmed by the replicas ClientOptions.Durability asks
// for: it may not survive a failover.
var ErrNotConfirmed = store.ErrNotConfirmed

// Client is the producer API: parse, submit, follow and cancel workflows.
// The enqueue command is built on it.
type Client struct {
	o      ClientOptions
	rdb    redis.UniversalClient
	store  *store.Store
	asynq  *asynq.Client
	insp   *asynq.Inspector
	fleet  *store.Fleet
	live   liveWorkers // the last read of the fleet (checkWorkers)
	routes map[string]bool
}

// NewClient returns a client on rdb. It does not close rdb.
func NewClient(rdb redis.UniversalClient, o ClientOptions) *Client {
	if o.NewKey == nil {
		o.NewKey = NewKey
	}
	c := &Client{o: o, rdb: rdb, store: store.New(rdb, o.Retention, o.Now),
		asynq: asynq.NewClientFromRedisClient(rdb), insp: asynq.NewInspectorFromRedisClient(rdb), fleet: store.NewFleet(rdb, o.Now)}
	c.store.SetMaxOpenAge(o.MaxOpenAge)
	c.store.SetLog(store.LogOptions{Limit: o.EventLimit})
	c.store.SetDurability(o.Durability)
	if o.Routes != nil {
		c.routes = map[string]bool{}
		for _, r := range o.Routes {
			c.routes[r] = true
		}
	}
	return c
}

// NewKey returns a random idempotency key: "k_" and 20 base32
// characters.
func NewKey() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "k_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

// Parse reads and validates a spec against the client's routes and limits.
func (c *Client) Parse(source string, data []byte) (*spec.Spec, error) {
	wspec, err := spec.ParseSpec(source, data, c.routes, c.o.Limits)
	if err != nil {
		return nil, err
	}
	if err := c.o.Webhooks.Check(source, wspec); err != nil {
		return nil, err
	}
	return wspec, nil
}

// Status returns the workflow with all its steps; a pending or queued
// step that no live worker serves says so in its Unserved.
func (c *Client) Status(ctx context.Context, id string) (*Workflow, error) {
	wf, wspec, err := c.withSpec(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := c.markUnserved(ctx, wf, wspec); err != nil {
		return nil, fmt.Errorf("workflow %s: %w", id, err)
	}
	parseOutputs(wspec, wf)
	return wf, nil
}

// withSpec reads workflow id and its spec in one go (two round trips).
func (c *Client) withSpec(ctx context.Context, id string) (*Workflow, *spec.Spec, error) {
	wf, raw, err := c.store.GetWithSpec(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	wspec, err := parseStoredSpec(id, raw)
	if err != nil {
		return nil, nil, err
	}
	return wf, wspec, nil
}

// parseOutputs sets JSON, beside Output, on each done step whose output
// is JSON (a code step's value, a decision, a format: json answer), and
// WaitsFor on each waiting step.
func parseOutputs(wspec *spec.Spec, wf *Workflow) {
	for i := range wf.Steps {
		s := &wf.Steps[i]
		st, ok := wspec.Step(s.ID)
		if !ok {
			continue
		}
		if spec.WantsJSON(st) && s.State == store.StepDone && !s.Degraded {
			s.JSON, _ = spec.ParseJSONAnswer(s.Output)
		}
		switch s.State {
		case store.StepWaiting:
			s.WaitsFor = spec.WaitsFor(st)
		case store.StepThrottled:
			s.WaitsFor = record.WaitsForKey
		}
	}
}

// Result is a workflow's outputs.
type Result struct {
	Workflow *Workflow
	// Final are the steps nothing depends on (a chord's body, a chain's
	// end), in spec order: the workflow's answer.
	Final []StepRecord
}

// Result returns the workflow and its final steps. It does not wait.
func (c *Client) Result(ctx context.Context, id string) (*Result, error) {
	wf, wspec, err := c.withSpec(ctx, id)
	if err != nil {
		return nil, err
	}
	r := &Result{Workflow: wf}
	parseOutputs(wspec, wf)
	finals := map[string]bool{}
	for _, id := range wspec.Finals() {
		finals[id] = true
	}
	for _, s := range wf.Steps {
		if finals[s.ID] {
			r.Final = append(r.Final, s)
		}
	}
	return r, nil
}

// Spec returns the spec a workflow was submitted with.
func (c *Client) Spec(ctx context.Context, id string) (*spec.Spec, error) {
	s, err := c.spec(ctx, id)
	if s != nil {
		s.Shards = nil // the client's stamp (submit's): the spec as it can be submitted again
	}
	return s, err
}

func (c *Client) spec(ctx context.Context, id string) (*spec.Spec, error) {
	raw, err := c.store.Spec(ctx, id)
	if err != nil {
		return nil, err
	}
	return parseStoredSpec(id, raw)
}

// parseStoredSpec parses workflow id's stored spec.
func parseStoredSpec(id string, raw []byte) (*spec.Spec, error) {
	var s spec.Spec
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("workflow %s: stored spec is unreadable: %w", id, err)
	}
	return &s, nil
}

// Settled reports whether a waiting caller is done with a workflow in this
// state: it ended, or it is blocked on a dead-lettered step.
func Settled(state string) bool {
	return store.Terminal(state) || state == record.StateBlocked
}

// ListOptions filters and pages ListPage.
type ListOptions struct {
	State string // only workflows in this state; "": any
	Name  string // only workflows of this name (the spec's name:); "": any
	Limit int    // at most this many, 1 to 1000; 0: 50
	// After, a workflow id (the last of the previous page), lists only
	// workflows submitted before it; "": from the newest.
	After string
}

// ListPage returns workflows newest first, filtered and paged by o,
// without their steps (Status reads one whole): a page costs the same
// however wide its workflows. An After that is unknown or expired is
// ErrNotFound.
func (c *Client) ListPage(ctx context.Context, o ListOptions) ([]*Workflow, error) {
	if err := CheckState(o.State); err != nil {
		return nil, err
	}
	wfs, err := c.store.ListPage(ctx, store.ListQuery{State: o.State, Name: o.Name, Limit: o.Limit, After: o.After})
	if errors.Is(err, store.ErrNotFound) && o.After != "" { // the cursor, not a workflow of the page: named, bounded
		return nil, fmt.Errorf("after %q: %w", flow.BoundID(o.After), ErrNotFound)
	}
	return wfs, err
}

// DeadLetterTask is the task id of step's dead letter in workflow id (of
// its current run), for Requeue, Discard and DeadLetterDetail: its own
// task's, a signal step's timeout's, a child workflow step's child-ended
// task's, or a concurrency grant's that ran it.
func (c *Client) DeadLetterTask(ctx context.Context, id, step string) (string, error) {
	w, err := c.store.Get(ctx, id)
	if err != nil {
		return "", err
	}
	own := flow.StepTaskID(id, step, w.Generation)
	for _, s := range w.Steps {
		if s.ID != step || s.Attempts == 0 {
			continue
		}
		if t := flow.SignalTimeoutTaskID(id, step, w.Generation, s.Attempts); c.archived(t) {
			return t, nil
		}
		l := store.ParentLink{Workflow: id, Step: step, Gen: w.Generation, Attempt: s.Attempts}
		if child, err := c.store.Summary(ctx, flow.ChildID(id, step, w.Generation, s.Attempts)); err == nil {
			l.ChildGen = child.Generation
		}
		if t := flow.ChildEndedTaskID(l); c.archived(t) {
			return t, nil // a child workflow step whose child failed
		}
		if o, _ := c.store.Owners(ctx, id, []string{step}); len(o) == 1 && strings.HasPrefix(o[0], own+":") && c.archived(o[0]) {
			return o[0], nil // a concurrency grant's task ran it
		}
	}
	return own, nil
}

// archived reports whether task id is a dead letter in some queue.
func (c *Client) archived(id string) bool {
	_, err := c.findArchived(id)
	return err == nil
}

// List returns recent workflows, newest first, optionally in one state.
func (c *Client) List(ctx context.Context, state string, limit int) ([]*Workflow, error) {
	if err := CheckState(state); err != nil {
		return nil, err
	}
	return c.store.List(ctx, state, limit)
}

// ErrUnknownState is returned for a list filtered by a state that is not
// a workflow state.
var ErrUnknownState = errors.New("unknown workflow state")

// CheckState refuses a state filter that is not a workflow state ("":
// any): it would list nothing, silently.
func CheckState(state string) error {
	if state != "" && !slices.Contains(record.States, state) {
		return fmt.Errorf("%w %q: one of %s", ErrUnknownState, state, strings.Join(record.States, ", "))
	}
	return nil
}

// Usage sums the tokens of a workflow's steps.
func Usage(wf *Workflow) record.Usage {
	var u store.Usage
	for _, s := range wf.Steps {
		u.PromptTokens += s.Usage.PromptTokens
		u.CompletionTokens += s.Usage.CompletionTokens
	}
	return u
}

func (c *Client) now() time.Time {
	if c.o.Now != nil {
		return c.o.Now()
	}
	return time.Now()
}
