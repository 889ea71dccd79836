package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/defaults"
	"github.com/agentq/agentq/internal/record"
)

// The record types are public (package record) so that an SDK user can
// name them; the store works with them under these names.
type (
	Usage      = record.Usage
	Workflow   = record.Workflow
	StepRecord = record.StepRecord
	RawJSON    = record.RawJSON
)

// Workflow and step states.
const (
	StatePending   = record.StatePending
	StateRunning   = record.StateRunning
	StateBlocked   = record.StateBlocked
	StateCompleted = record.StateCompleted
	StateFailed    = record.StateFailed
	StateCanceled  = record.StateCanceled
	StateTimedOut  = record.StateTimedOut
	StateWaiting   = record.StateWaiting

	StepPending   = record.StepPending
	StepQueued    = record.StepQueued
	StepRunning   = record.StepRunning
	StepDone      = record.StepDone
	StepDead      = record.StepDead
	StepCanceled  = record.StepCanceled
	StepMapped    = record.StepMapped
	StepWaiting   = record.StepWaiting
	StepThrottled = record.StepThrottled
)

// Terminal reports whether a workflow state is final (record.Terminal).
func Terminal(state string) bool { return record.Terminal(state) }

// ErrNotFound is returned for a workflow id that does not exist (or expired).
var ErrNotFound = record.ErrNotFound

// ErrOldLayout is returned for a workflow whose record an older agentq
// wrote (one key per step, before the one-hash layout): this worker cannot
// run or settle its steps without losing checkpoints or the fan-in.
var ErrOldLayout = errors.New("workflow record has an older Redis layout (written by an earlier agentq); finish it with that version")

// ErrExists is returned when creating a workflow whose id is taken.
var ErrExists = errors.New("workflow id already exists")

// ErrStaleAttempt is returned by Settle and RecordError for an outcome of
// an attempt that is no longer the step's own: a later attempt has begun,
// or the safety net ended this one (asynq gave up on it), or, for a map
// instance, its map holds no expansion (a failover lost it). Its goroutine
// may still have been running; what it found is not recorded.
var ErrStaleAttempt = errors.New("stale attempt: the step has moved on")

// ErrOtherRun is returned by Begin for a task of another generation of the
// workflow (it was rerun since), and by Settle for an outcome of one:
// nothing was written.
var ErrOtherRun = errors.New("task of another run of the workflow")

// ErrAlreadySettled is returned by Settle for an OnlyIfOpen outcome when
// the step was already settled or canceled: nothing was written.
var ErrAlreadySettled = errors.New("step already settled")

// Store reads and writes agentq state. The zero value is not usable; use New.
type Store struct {
	rdb       redis.UniversalClient
	retention time.Duration
	// maxOpenAge is the oldest an open workflow gets (limits.max_open_age)
	// before the reconciler ends it: an open workflow's records live that
	// long and the retention more, an ended one's the retention from its
	// end (SetMaxOpenAge).
	maxOpenAge time.Duration
	now        func() time.Time
	fused      atomic.Bool // Create and Settle enqueue the Tasks they are given (asynqtask.go)
	queues     sync.Map    // queue names added to asynq's set of queues
	fields     fieldCache
	// eventLimit bounds each workflow's event log (0: no log).
	eventLimit  int
	workerField string     // ,"worker":"…" (SetLog)
	durability  Durability // acknowledging writes' confirmation (durability.go)
	// scriptsLoaded says the scripts sent in pipelines are loaded (scriptload.go)
	scriptsLoaded atomic.Bool
}

// New returns a store. retention is how long a workflow's records are
// kept once it ended, taken as given: the configuration's retention,
// which it refuses under a minute (as engine.NewHandler does). An open
// workflow's records are kept the built-in limits.max_open_age more
// (SetMaxOpenAge). now is the clock (nil: time.Now).
func New(rdb redis.UniversalClient, retention time.Duration, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	s := &Store{rdb: rdb, retention: retention, maxOpenAge: defaults.MaxOpenAge, now: now}
	s.fused.Store(fusable(rdb))
	return s
}

// SetMaxOpenAge sets limits.max_open_age (positive): an open workflow's
// records are kept that long and the retention more, so that none
// expires before the reconciler ends it. Call it before use.
func (s *Store) SetMaxOpenAge(d time.Duration) {
	if d > 0 {
		s.maxOpenAge = d
	}
}

// MaxOpenAge is limits.max_open_age as the store keeps records for it.
func (s *Store) MaxOpenAge() time.Duration { return s.maxOpenAge }

// Retention is how long an ended workflow's records are kept.
func (s *Store) Retention() time.Duration { return s.retention }

// NewWorkflow is what Create writes.
type NewWorkflow struct {
	ID    string
	Name  string
	Spec  []byte   // the validated spec as JSON
	Steps []string // step ids in spec order
	// DeadlineAt, when not zero, is when the workflow times out.
	DeadlineAt time.Time
	// Roots are the tasks of the steps that depend on nothing, enqueued
	// with the record when the store EnqueuesTasks (else ignored).
	Roots []Task
	// Ready are the steps that depend on nothing: the log says they are
	// ready.
	Ready []string
	// Parent, for a child workflow, is the step that started it: told
	// when the child ends.
	Parent *ParentLink
	// IdempotencyKey is the submit's key (record.Workflow.IdempotencyKey).
	IdempotencyKey string
	// KeyRecord says the key keeps a record of its own (ClaimIdempotency
	// claimed it first); a generated key keeps none (the record says so,
	// "nokey", until a claim of the key: the settle that ends the
	// workflow then has no key record's TTL to shorten).
	KeyRecord bool
}

// ttl is an open workflow's records' TTL (seconds): the oldest it gets
// open, and the retention after that.
func (s *Store) ttl() string { return strconv.Itoa(int((s.maxOpenAge + s.retention) / time.Second)) }

// ttls is what the scripts that may end or reopen a workflow are given
// (one argument, "open ended key"): the TTL of an open workflow's
// records, of an ended one's (the retention, from its end), and of an
// ended one's idempotency key (a margin more), in seconds.
func (s *Store) ttls() string {
	return s.ttl() + " " + strconv.Itoa(int(s.retention/time.Second)) + " " + strconv.Itoa(int((s.retention+idemMargin)/time.Second))
}

// luaEnded sets an ended workflow's TTLs (ttls, ended and key; KEYS[1]
// its record): its record (and the log in it) and idempotency key live
// the retention from now on, and so does the log an older version kept
// as a stream (EK: unless the script read the log's head, LH, in the
// record). The key and the stream share the record's slot. noKey: the
// workflow's idempotency key keeps no record (its "nokey" field:
// NewWorkflow.KeyRecord).
const luaEnded = `
local function ended(ttls, noKey)
  local _, rttl, kttl = string.match(ttls, '(%d+) (%d+) (%d+)')
  redis.call('EXPIRE', KEYS[1], rttl)
  if not LH then redis.call('EXPIRE', EK, rttl) end
  if not noKey then
    redis.call('EXPIRE', string.sub(KEYS[1], 1, #KEYS[1] - 2) .. 'idem', kttl)
  end
end
`

func ts(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

func parseTS(v string) *time.Time {
	if v == "" {
		return nil
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return nil
	}
	t := time.UnixMilli(ms).UTC()
	return &t
}

// Cancel marks a workflow and its unsettled steps canceled; steps stop at
// their next start. It returns the workflow's state after the call.
func (s *Store) Cancel(ctx context.Context, wf string, steps []string) (string, error) {
	state, _, err := s.end(ctx, wf, StateCanceled, steps, "", false)
	return state, err
}

// TimeOut ends a workflow whose deadline has passed as timed_out, its
// unsettled steps canceled, and records which they were; a workflow that
// ended already, or whose deadline has not passed, keeps its state. It
// returns the state after the call and whether this call ended it (of
// several callers at the deadline, one).
func (s *Store) TimeOut(ctx context.Context, wf string, steps []string) (string, bool, error) {
	return s.end(ctx, wf, StateTimedOut, steps, "the workflow's deadline passed", false)
}

// TimeOutOpen ends a workflow still open past limits.max_open_age as
// timed_out (deadline or none), as TimeOut does, with reason.
func (s *Store) TimeOutOpen(ctx context.Context, wf string, steps []string, reason string) (string, bool, error) {
	return s.end(ctx, wf, StateTimedOut, steps, reason, true)
}

// end runs endScript.
func (s *Store) end(ctx context.Context, wf, state string, steps []string, reason string, force bool) (string, bool, error) {
	args := make([]any, 0, 5+2*len(steps))
	args = append(args, ts(s.now()), state, reason, s.ttls(), b2s(force))
	for _, st := range steps {
		args = append(args, st, st+".state")
	}
	keys, args := s.logged(wf, s.now(), []string{wfKey(wf)}, args)
	var res []any
	err := s.acked(ctx, wfKey(wf), func(c redis.Cmdable) (err error) {
		res, err = endScript.Run(ctx, c, keys, args...).Slice()
		return err
	})
	err, unconfirmed := Unconfirmed(err)
	if err != nil {
		return "", false, fmt.Errorf("store: %s %s: %w", state, wf, err)
	}
	if len(res) != 2 {
		return "", false, fmt.Errorf("store: %s %s: %w", state, wf, ErrNotFound)
	}
	ended, _ := res[1].(int64)
	if unconfirmed != nil {
		unconfirmed = fmt.Errorf("store: %s %s: %w", state, wf, unconfirmed)
	}
	return str(res[0]), ended == 1, unconfirmed
}

// Fail ends a blocked workflow as failed; other states are left alone.
func (s *Store) Fail(ctx context.Context, wf string) (string, error) {
	now := s.now()
	keys, args := s.logged(wf, now, []string{wfKey(wf)}, []any{ts(now), s.ttls()}, Event{Type: record.EventEnded, State: StateFailed})
	st, err := failScript.Run(ctx, s.rdb, keys, args...).Text()
	if err != nil {
		return "", fmt.Errorf("store: fail %s: %w", wf, err)
	}
	if st == "" {
		return "", fmt.Errorf("store: fail %s: %w", wf, ErrNotFound)
	}
	return st, nil
}

// Spec returns the stored spec JSON of a workflow.
func (s *Store) Spec(ctx context.Context, id string) ([]byte, error) {
	v, err := s.rdb.HGet(ctx, wfKey(id), "spec").Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("store: spec %s: %w", id, ErrNotFound)
	}
	return v, err
}

func str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case nil:
		return ""
	default:
		return fmt.Sprint(x)
	}
}

func b2s(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
