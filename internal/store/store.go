package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

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
// or the safety net ended this one (asynq gave up on it). Its goroutine
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
	now       func() time.Time
	fused     atomic.Bool // Create and Settle enqueue the Tasks they are given (asynqtask.go)
	queues    sync.Map    // queue names added to asynq's set of queues
	fields    fieldCache
	// eventLimit bounds each workflow's event log (0: no log).
	eventLimit  int
	workerField string     // ,"worker":"…" (SetLog)
	durability  Durability // acknowledging writes' confirmation (durability.go)
}

// New returns a store. retention is the TTL of every record, taken as
// given: the configuration's retention, which it refuses under a minute
// (as engine.NewHandler does). now is the clock (nil: time.Now).
func New(rdb redis.UniversalClient, retention time.Duration, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	s := &Store{rdb: rdb, retention: retention, now: now}
	s.fused.Store(fusable(rdb))
	return s
}

// Retention is the TTL of records.
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
}

func (s *Store) ttl() string { return strconv.Itoa(int(s.retention / time.Second)) }

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

// Create writes the workflow record in one script, with w.Roots enqueued
// by the same script when the store EnqueuesTasks; it reports whether it
// enqueued them (if not, the caller does).
func (s *Store) Create(ctx context.Context, w NewWorkflow) (rootsEnqueued bool, err error) {
	fused := s.fused.Load() && len(w.Roots) > 0
	err = s.create(ctx, w, fused)
	if fused && s.crossSlot(err) {
		fused = false
		err = s.create(ctx, w, false)
	}
	return fused && err == nil, err
}

func (s *Store) create(ctx context.Context, w NewWorkflow, withRoots bool) error {
	stepsJSON, _ := json.Marshal(w.Steps)
	now := s.now()
	args := []any{s.ttl(), 0, "id", w.ID, "name", w.Name, "state", StatePending, "created_at", ts(now),
		"spec", string(w.Spec), "steps", string(stepsJSON), "nsteps", len(w.Steps), "nsettled", 0, "nfailed", 0, "fanin", fanInLayout}
	if !w.DeadlineAt.IsZero() {
		args = append(args, "deadline_at", ts(w.DeadlineAt))
	}
	if w.IdempotencyKey != "" {
		args = append(args, "idem_key", w.IdempotencyKey)
	}
	if w.Parent != nil {
		b, _ := json.Marshal(w.Parent)
		args = append(args, "parent", string(b))
	}
	args[1] = len(args) - 2
	keys := []string{wfKey(w.ID)}
	events := []Event{{Type: record.EventSubmitted, Name: w.Name}}
	for _, id := range w.Ready {
		events = append(events, Event{Type: record.EventReady, Step: id})
	}
	if withRoots {
		for i := range w.Roots {
			if err := s.registerQueue(ctx, w.Roots[i].Queue); err != nil {
				return err
			}
			keys, _ = taskKeys(keys, &w.Roots[i])
			args = append(args, w.Roots[i].ID, w.Roots[i].message())
		}
		args = append(args, s.nowNanos())
	}
	keys, args = s.logged(w.ID, now, keys, args, events...)
	// One round trip: the record script (with the root tasks) and the
	// index entry (another slot, so a separate command; a cluster client
	// splits the pipeline by slot). EVAL, not EVALSHA: a pipeline cannot
	// fall back on NOSCRIPT, and Redis caches the compiled script either
	// way. An index entry for an id that turns out to be taken points at
	// the existing workflow: harmless.
	//
	// With durability on, the record is confirmed on its primary; on a
	// Cluster the index entries (other slots) are written after it, the
	// open index's confirmed on its own primary (the reconciler walks it).
	_, cluster := s.rdb.(*redis.ClusterClient)
	indexed := func(p redis.Pipeliner) {
		p.ZAdd(ctx, indexKey(), redis.Z{Score: float64(now.UnixMilli()), Member: w.ID})
		p.ZAdd(ctx, openKey(), redis.Z{Score: float64(now.UnixMilli()), Member: w.ID})
		p.ZRemRangeByScore(ctx, indexKey(), "-inf", strconv.FormatInt(now.Add(-s.retention).UnixMilli(), 10))
	}
	var created *redis.Cmd
	err := s.acked(ctx, wfKey(w.ID), func(c redis.Cmdable) error {
		pipe := c.Pipeline()
		created = createScript.Eval(ctx, pipe, keys, args...)
		if !cluster || s.durability.Replicas == 0 {
			indexed(pipe)
		}
		_, err := pipe.Exec(ctx)
		return err
	})
	if err == nil && cluster && s.durability.Replicas > 0 {
		err = s.acked(ctx, openKey(), func(c redis.Cmdable) error {
			return c.ZAdd(ctx, openKey(), redis.Z{Score: float64(now.UnixMilli()), Member: w.ID}).Err()
		})
		if err == nil {
			_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error { indexed(p); return nil })
		}
	}
	if created != nil && created.Err() == nil {
		if n, _ := created.Int(); n == 0 {
			return fmt.Errorf("store: create workflow %s: %w", w.ID, ErrExists)
		}
	}
	if err != nil {
		// not confirmed (ErrNotConfirmed): created on the primary all the same
		return fmt.Errorf("store: create workflow %s: %w", w.ID, err)
	}
	return nil
}

// Cancel marks a workflow and its unsettled steps canceled; steps stop at
// their next start. It returns the workflow's state after the call.
func (s *Store) Cancel(ctx context.Context, wf string, steps []string) (string, error) {
	state, _, err := s.end(ctx, wf, StateCanceled, steps, "")
	return state, err
}

// TimeOut ends a workflow whose deadline has passed as timed_out, its
// unsettled steps canceled, and records which they were; a workflow that
// ended already, or whose deadline has not passed, keeps its state. It
// returns the state after the call and whether this call ended it (of
// several callers at the deadline, one).
func (s *Store) TimeOut(ctx context.Context, wf string, steps []string) (string, bool, error) {
	return s.end(ctx, wf, StateTimedOut, steps, "the workflow's deadline passed")
}

// end runs endScript.
func (s *Store) end(ctx context.Context, wf, state string, steps []string, reason string) (string, bool, error) {
	args := make([]any, 0, 3+2*len(steps))
	args = append(args, ts(s.now()), state, reason)
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
	keys, args := s.logged(wf, now, []string{wfKey(wf)}, []any{ts(now)}, Event{Type: record.EventEnded, State: StateFailed})
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
