package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/record"
)

// The record types are public (package record) so that an SDK user can
// name them; the store works with them under these names.
type (
	Usage      = record.Usage
	Workflow   = record.Workflow
	StepRecord = record.StepRecord
)

// Workflow and step states.
const (
	StatePending   = record.StatePending
	StateRunning   = record.StateRunning
	StateBlocked   = record.StateBlocked
	StateCompleted = record.StateCompleted
	StateFailed    = record.StateFailed
	StateCanceled  = record.StateCanceled

	StepPending  = record.StepPending
	StepQueued   = record.StepQueued
	StepRunning  = record.StepRunning
	StepDone     = record.StepDone
	StepDead     = record.StepDead
	StepCanceled = record.StepCanceled
)

// Terminal reports whether a workflow state is final for a waiting caller.
// Blocked is not final (a requeue resumes it) but callers waiting for an
// outcome treat it as one.
func Terminal(state string) bool {
	return state == StateCompleted || state == StateFailed || state == StateCanceled
}

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

// ErrAlreadySettled is returned by Settle for an OnlyIfOpen outcome when
// the step was already settled or canceled: nothing was written.
var ErrAlreadySettled = errors.New("step already settled")

// Store reads and writes agentq state. The zero value is not usable; use New.
type Store struct {
	rdb       redis.UniversalClient
	retention time.Duration
	now       func() time.Time
}

// New returns a store. retention is the TTL of every record (at least a
// minute); now is the clock (nil: time.Now).
func New(rdb redis.UniversalClient, retention time.Duration, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	if retention < time.Minute {
		retention = 24 * time.Hour
	}
	return &Store{rdb: rdb, retention: retention, now: now}
}

// Retention is the TTL of records.
func (s *Store) Retention() time.Duration { return s.retention }

// NewWorkflow is what Create writes.
type NewWorkflow struct {
	ID    string
	Name  string
	Spec  []byte   // the validated spec as JSON
	Steps []string // step ids in spec order
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

// Create writes the workflow record in one script.
func (s *Store) Create(ctx context.Context, w NewWorkflow) error {
	stepsJSON, _ := json.Marshal(w.Steps)
	now := s.now()
	args := []any{s.ttl(), "id", w.ID, "name", w.Name, "state", StatePending, "created_at", ts(now),
		"spec", string(w.Spec), "steps", string(stepsJSON), "nsteps", len(w.Steps), "nsettled", 0, "nfailed", 0}
	// One round trip: the record script and the index entry (another slot,
	// so a separate command; a cluster client splits the pipeline by slot).
	// EVAL, not EVALSHA: a pipeline cannot fall back on NOSCRIPT, and Redis
	// caches the compiled script either way. An index entry for an id that
	// turns out to be taken points at the existing workflow: harmless.
	pipe := s.rdb.Pipeline()
	created := createScript.Eval(ctx, pipe, []string{wfKey(w.ID)}, args...)
	pipe.ZAdd(ctx, indexKey(), redis.Z{Score: float64(now.UnixMilli()), Member: w.ID})
	pipe.ZAdd(ctx, openKey(), redis.Z{Score: float64(now.UnixMilli()), Member: w.ID})
	pipe.ZRemRangeByScore(ctx, indexKey(), "-inf", strconv.FormatInt(now.Add(-s.retention).UnixMilli(), 10))
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("store: create workflow %s: %w", w.ID, err)
	}
	if n, _ := created.Int(); n == 0 {
		return fmt.Errorf("store: create workflow %s: %w", w.ID, ErrExists)
	}
	return nil
}

// Attempt is what Begin returns: the workflow's state, the step's record
// (with its checkpoint) and its inputs' outputs.
type Attempt struct {
	WorkflowState string
	Step          StepRecord
	Deps          map[string]StepRecord // state, output, degraded only
}

// BusyError says another task holds the step's lease until Until.
type BusyError struct{ Until time.Time }

func (e *BusyError) Error() string {
	return "step is running under another task until " + e.Until.Format(time.RFC3339Nano)
}

// beginStepFields are the step's fields beginScript reads, in its order
// (the first five it also writes).
var beginStepFields = []string{"state", "owner", "lease_until", "attempts", "started_at",
	"input_hash", "output", "tool_calls", "degraded", "target", "prompt_tokens", "completion_tokens"}

// beginFields is how many values beginScript returns before the inputs':
// the workflow's state and settled count, and the step's fields.
var beginFields = 2 + len(beginStepFields)

// Begin counts an attempt at a step by the asynq task owner, leasing the
// step for lease, and loads what the handler needs in one round trip. It
// returns ErrNotFound if the workflow is gone and a *BusyError if another
// task holds the step.
func (s *Store) Begin(ctx context.Context, wf, step, owner string, lease time.Duration, inputs []string) (*Attempt, error) {
	args := make([]any, 0, 3+len(beginStepFields)+3*len(inputs))
	args = append(args, ts(s.now()), owner, lease.Milliseconds())
	for _, f := range beginStepFields {
		args = append(args, step+"."+f)
	}
	for _, d := range inputs {
		args = append(args, d+".state", d+".output", d+".degraded")
	}
	res, err := beginScript.Run(ctx, s.rdb, []string{wfKey(wf)}, args...).Slice()
	if err != nil {
		return nil, fmt.Errorf("store: begin %s/%s: %w", wf, step, err)
	}
	if len(res) == 2 && str(res[0]) == "busy" {
		return nil, &BusyError{Until: *parseTS(str(res[1]))}
	}
	if len(res) == 1 && str(res[0]) == "layout" {
		return nil, fmt.Errorf("store: begin %s/%s: %w", wf, step, ErrOldLayout)
	}
	if len(res) != beginFields+3*len(inputs) {
		return nil, fmt.Errorf("store: begin %s/%s: %w", wf, step, ErrNotFound)
	}
	// the order of beginScript's query
	v := func(i int) string { return str(res[i]) }
	a := &Attempt{WorkflowState: v(0), Deps: make(map[string]StepRecord, len(inputs))}
	a.Step = StepRecord{ID: step, State: v(2), InputHash: v(7), Output: v(8), ToolCalls: v(9), Degraded: v(10) == "1", Target: v(11),
		StartedAt: parseTS(v(6))}
	a.Step.Attempts, _ = strconv.Atoi(v(5))
	a.Step.Usage.PromptTokens, _ = strconv.Atoi(v(12))
	a.Step.Usage.CompletionTokens, _ = strconv.Atoi(v(13))
	if a.Step.State == "" {
		a.Step.State = StepPending
	}
	for i, d := range inputs {
		at := beginFields + 3*i
		r := StepRecord{ID: d, State: v(at), Output: v(at + 1), Degraded: v(at+2) == "1"}
		if r.State == "" {
			r.State = StepPending
		}
		a.Deps[d] = r
	}
	return a, nil
}

// Outcome is how a step ended.
type Outcome struct {
	Done bool // false: dead-lettered
	// OnlyIfOpen, with Done false, settles the step dead only if it has
	// not been settled already (else ErrAlreadySettled), and marks its
	// current attempt abandoned.
	OnlyIfOpen bool
	Optional   bool
	Output     string // with Done false: the answer that was rejected, if any
	ToolCalls  string // JSON list of the model's tool calls, if any
	Degraded   bool
	Error      string
	// Class, with Done false, is the error class that ended the step
	// (bad_request, panic, …), kept in its record as a field of its own.
	Class     string
	Target    string
	Usage     Usage
	InputHash string

	// Attempt is the attempt the outcome belongs to (Begin's count). When
	// positive, Settle refuses it with ErrStaleAttempt if the step has
	// begun a later attempt or this one was abandoned. Zero: not checked.
	Attempt int
}

// Dependent is a step that may become ready, with its dependencies.
type Dependent struct {
	ID   string
	Deps []string
}

// Settle records a step's outcome and returns the workflow's state and the
// dependents that are now ready to run. It is idempotent: settling the same
// step again returns the same dependents (if they have not started), so the
// caller can always enqueue them (with deterministic task ids).
func (s *Store) Settle(ctx context.Context, wf, step string, o Outcome, dependents []Dependent) (string, []string, error) {
	outcome := StepDone
	switch {
	case !o.Done && o.OnlyIfOpen:
		outcome = "dead_if_open"
	case !o.Done:
		outcome = StepDead
	}
	p := step + "."
	args := make([]any, 0, 29+4*len(dependents))
	// args[11] is the number of field/value pairs that follow it, set below
	args = append(args, outcome, b2s(o.Optional), ts(s.now()), s.ttl(), p+"state", p+"settled", p+"failed", p+"finished_at",
		p+"attempts", p+"abandoned", max(o.Attempt, 0), 0, p+"error", Excerpt(o.Error))
	switch {
	case o.Done:
		args = append(args, p+"output", o.Output, p+"tool_calls", o.ToolCalls, p+"degraded", b2s(o.Degraded), p+"target", o.Target,
			p+"prompt_tokens", o.Usage.PromptTokens, p+"completion_tokens", o.Usage.CompletionTokens, p+"input_hash", o.InputHash)
	case o.Output != "":
		args = append(args, p+"output", o.Output) // the rejected answer, for review
	}
	if !o.Done && o.Class != "" {
		args = append(args, p+"class", o.Class)
	}
	args[11] = (len(args) - 12) / 2
	for _, d := range dependents {
		args = append(args, d.ID+".state", len(d.Deps))
		for _, x := range d.Deps {
			args = append(args, x+".settled")
		}
	}
	res, err := settleScript.Run(ctx, s.rdb, []string{wfKey(wf)}, args...).Slice()
	if err != nil {
		return "", nil, fmt.Errorf("store: settle %s/%s: %w", wf, step, err)
	}
	state := str(res[0])
	switch state {
	case "gone":
		return "", nil, fmt.Errorf("store: settle %s/%s: %w", wf, step, ErrNotFound)
	case "layout":
		return "", nil, fmt.Errorf("store: settle %s/%s: %w", wf, step, ErrOldLayout)
	case "stale":
		return "", nil, fmt.Errorf("store: settle %s/%s attempt %d (the step is at attempt %s): %w", wf, step, o.Attempt, str(res[1]), ErrStaleAttempt)
	case "settled":
		return str(res[1]), nil, fmt.Errorf("store: settle %s/%s: %w", wf, step, ErrAlreadySettled)
	}
	var ready []string
	for _, v := range res[1:] {
		if i, ok := v.(int64); ok && i >= 1 && int(i) <= len(dependents) {
			ready = append(ready, dependents[i-1].ID)
		}
	}
	return state, ready, nil
}

// RecordError notes a failed attempt's error on the step without settling
// it (bounded by Excerpt). attempt is checked as Settle checks
// Outcome.Attempt (ErrStaleAttempt); a gone workflow is ErrNotFound and is
// not recreated.
func (s *Store) RecordError(ctx context.Context, wf, step string, attempt int, msg string) error {
	p := step + "."
	n, err := recordErrorScript.Run(ctx, s.rdb, []string{wfKey(wf)}, p+"attempts", p+"abandoned", p+"error", max(attempt, 0), Excerpt(msg)).Int()
	switch {
	case err != nil:
		return fmt.Errorf("store: record error %s/%s: %w", wf, step, err)
	case n == 0:
		return fmt.Errorf("store: record error %s/%s: %w", wf, step, ErrNotFound)
	case n < 0:
		return fmt.Errorf("store: record error %s/%s attempt %d: %w", wf, step, attempt, ErrStaleAttempt)
	}
	return nil
}

// Cancel marks a workflow and its unsettled steps canceled; steps stop at
// their next start. It returns the workflow's state after the call.
func (s *Store) Cancel(ctx context.Context, wf string, steps []string) (string, error) {
	args := make([]any, 0, 1+len(steps))
	args = append(args, ts(s.now()))
	for _, st := range steps {
		args = append(args, st+".state")
	}
	st, err := cancelScript.Run(ctx, s.rdb, []string{wfKey(wf)}, args...).Text()
	if err != nil {
		return "", fmt.Errorf("store: cancel %s: %w", wf, err)
	}
	if st == "" {
		return "", fmt.Errorf("store: cancel %s: %w", wf, ErrNotFound)
	}
	return st, nil
}

// Fail ends a blocked workflow as failed; other states are left alone.
func (s *Store) Fail(ctx context.Context, wf string) error {
	st, err := failScript.Run(ctx, s.rdb, []string{wfKey(wf)}, ts(s.now())).Text()
	if err != nil {
		return fmt.Errorf("store: fail %s: %w", wf, err)
	}
	if st == "" {
		return fmt.Errorf("store: fail %s: %w", wf, ErrNotFound)
	}
	return nil
}

// workflowFields are the record's own fields that Get reads (not the spec).
var workflowFields = []string{"id", "name", "state", "created_at", "finished_at", "steps"}

// stepFields are the fields of a step that Get reads, in this order.
var stepFields = []string{"state", "attempts", "output", "tool_calls", "degraded", "error", "target",
	"prompt_tokens", "completion_tokens", "input_hash", "started_at", "finished_at", "class"}

// Get reads a workflow with all its steps: two reads of one hash, the
// second only if the first found it (the step list says which fields).
func (s *Store) Get(ctx context.Context, id string) (*Workflow, error) {
	h, err := s.rdb.HMGet(ctx, wfKey(id), workflowFields...).Result()
	if err != nil {
		return nil, fmt.Errorf("store: get %s: %w", id, err)
	}
	if h[0] == nil {
		return nil, fmt.Errorf("store: get %s: %w", id, ErrNotFound)
	}
	var steps []string
	_ = json.Unmarshal([]byte(str(h[5])), &steps)
	fields := make([]string, 0, len(steps)*len(stepFields))
	for _, st := range steps {
		for _, f := range stepFields {
			fields = append(fields, st+"."+f)
		}
	}
	var vals []any
	if len(fields) > 0 {
		if vals, err = s.rdb.HMGet(ctx, wfKey(id), fields...).Result(); err != nil {
			return nil, fmt.Errorf("store: get %s steps: %w", id, err)
		}
	}
	w := &Workflow{ID: str(h[0]), Name: str(h[1]), State: str(h[2]), Steps: make([]StepRecord, 0, len(steps)), FinishedAt: parseTS(str(h[4]))}
	if c := parseTS(str(h[3])); c != nil {
		w.CreatedAt = *c
	}
	for i, st := range steps {
		v := func(f int) string { return str(vals[i*len(stepFields)+f]) }
		r := StepRecord{ID: st, State: v(0), Output: v(2), ToolCalls: v(3), Degraded: v(4) == "1", Error: v(5), Target: v(6),
			InputHash: v(9), StartedAt: parseTS(v(10)), FinishedAt: parseTS(v(11)), Class: v(12)}
		r.Attempts, _ = strconv.Atoi(v(1))
		r.Usage.PromptTokens, _ = strconv.Atoi(v(7))
		r.Usage.CompletionTokens, _ = strconv.Atoi(v(8))
		if r.State == "" {
			r.State = StepPending
		}
		w.Steps = append(w.Steps, r)
	}
	return w, nil
}

// Spec returns the stored spec JSON of a workflow.
func (s *Store) Spec(ctx context.Context, id string) ([]byte, error) {
	v, err := s.rdb.HGet(ctx, wfKey(id), "spec").Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("store: spec %s: %w", id, ErrNotFound)
	}
	return v, err
}

// List returns the newest workflows first, at most limit, optionally only
// those in state.
func (s *Store) List(ctx context.Context, state string, limit int) ([]*Workflow, error) {
	ids, err := s.rdb.ZRevRange(ctx, indexKey(), 0, 999).Result()
	if err != nil {
		return nil, fmt.Errorf("store: list: %w", err)
	}
	var out []*Workflow
	for _, id := range ids {
		if len(out) >= limit {
			break
		}
		w, err := s.Get(ctx, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if state == "" || w.State == state {
			out = append(out, w)
		}
	}
	return out, nil
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
