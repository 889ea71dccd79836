package store

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// beginScript starts an attempt at a step: it counts the attempt and marks
// the step running under a lease held by the asynq task (unless it is
// already done: a redelivery), and returns all a handler needs in one round
// trip. While another task holds an unexpired lease on the step, it returns
// {'busy', lease_until} and changes nothing: concurrent duplicates never
// call the LLM twice. The same task (a redelivery after a crash) may take
// its own lease over.
// A map step that has expanded ("mapped") is left as it is: its task ran
// again (a redelivery) and only re-releases its instances. A throttled
// step's output (what it waited for: Throttle's text) is cleared, so a
// step that then fails says why, not what it once waited for.
// A task of another generation of the workflow (a rerun) gets {'gen',
// current} and changes nothing.
// The checkpoint (what a done step answered) is read only when the step is
// done: its field names are built here, on that rare path, so a first
// attempt reads and passes only what it needs.
// An attempt starts only when every input's "settled" flag is set: on a
// Cluster the dependent's task (on the queue's primary) can outlive an
// input's settle that a promotion of the workflow's primary lost, and it
// gets {'unready', k, its state} (k: the first open input, from 0),
// changing nothing, until the input's own task settles it again.
// KEYS: wf. ARGV: now (ms), owner (asynq task id), lease (ms), the task's
// generation, the step's field prefix ("<step>."), the number of inputs,
// the step's fields state, owner, lease_until, attempts, started_at (and
// item, for a map instance, and the spec field when asked for), then
// beginInputFields of each input (settled last), then deadline_at and gen.
// Returns {} if the workflow is gone, {'layout'} if its record predates
// this layout, else the workflow's state and settled count followed by the
// values of the fields asked for, the step's as they are after the call,
// and for a done step its checkpoint (Go's checkpointFields order).
var beginScript = redis.NewScript(luaEvents + luaHelpers + `
local K, now, owner = KEYS[1], tonumber(ARGV[1]), ARGV[2]
local q = {'state', 'nsettled'}
for i = 7, #ARGV do q[#q + 1] = ARGV[i] end
q[#q + 1] = '` + logHead + `' -- the log's head, for flush (taken off v at once)
local v = hmget(K, q)
LH = v[#v]
v[#v] = nil
local state = v[1]
if not state then return {} end
if not v[2] then return {'layout'} end
if (v[#v] or '0') ~= ARGV[4] then return {'gen', v[#v] or '0'} end -- a task of another run: touch nothing
if state ~= 'canceled' and state ~= 'timed_out' and state ~= 'failed' then -- ended: nothing more starts
  local s = v[3]
  if s == 'waiting' then return v end -- an approval step waits for a person, not for this task
  if s == 'running' and v[4] and v[4] ~= owner and tonumber(v[5] or '0') > now then
    return {'busy', v[5]}
  end
  local w = {}
  if s ~= 'done' and s ~= 'mapped' then
    -- an attempt starts only on settled inputs: a promotion may have lost
    -- an input's settle after its dependent's task was enqueued
    local n = tonumber(ARGV[6])
    for k = 0, n - 1 do
      local at = #v - 2 - ` + beginInputStride + ` * (n - 1 - k)
      if v[at] ~= '1' then return {'unready', k, v[at - ` + beginInputStride + ` + 1] or ''} end
    end
    local attempts = tonumber(v[6] or '0') + 1
    w = {ARGV[7], 'running', ARGV[8], owner, ARGV[9], tostring(now + tonumber(ARGV[3])), ARGV[10], attempts}
    if s == 'throttled' then -- its wait for a key's slot is over: the text saying so goes
      w[#w + 1] = ARGV[5] .. 'output'; w[#w + 1] = ''
    end
    v[3], v[4], v[6] = 'running', owner, tostring(attempts)
    ev('{"type":"step.started","step":"' .. string.sub(ARGV[5], 1, -2) .. '","attempt":' .. attempts)
    if not v[7] then
      w[#w + 1] = ARGV[11]; w[#w + 1] = ARGV[1]
      v[7] = ARGV[1]
    end
  end
  if state == 'pending' then
    w[#w + 1] = 'state'; w[#w + 1] = 'running'
    v[1] = 'running'
  end
  if #w > 0 then
    flush(false, w)
    redis.call('HSET', K, unpack(w))
  end
end
if v[3] == 'done' then
  local p = ARGV[5]
  local c = redis.call('HMGET', K, p .. 'input_hash', p .. 'output', p .. 'tool_calls', p .. 'degraded', p .. 'target',
    p .. 'prompt_tokens', p .. 'completion_tokens')
  for i = 1, #c do v[#v + 1] = c[i] end
end
return v
`)

// Attempt is what Begin returns: the workflow's state, the step's record
// (with its checkpoint) and its inputs' outputs.
type Attempt struct {
	WorkflowState string
	Step          StepRecord
	Deps          map[string]StepRecord // state, output, degraded and a map's counters only
	// Item is, for a map instance, its item (JSON).
	Item string
	// DeadlineAt is the workflow's deadline, if it has one.
	DeadlineAt *time.Time
	// Gen is the workflow's generation (Rerun): a task of an earlier one
	// is stale.
	Gen int
	// Spec is the workflow's stored spec (JSON), read by
	// BeginReadingSpec only.
	Spec []byte
}

// UnsettledInputError says a step cannot start yet: its input Input is
// not settled in the workflow's record (on a Cluster, a promotion lost
// the input's settle after the dependent's task was enqueued), its state
// State. Nothing was written; the input's own task settles it again,
// or, dead, its requeue does.
type UnsettledInputError struct{ Input, State string }

func (e *UnsettledInputError) Error() string {
	return "input " + e.Input + " is not settled yet"
}

// BusyError says another task holds the step's lease until Until.
type BusyError struct{ Until time.Time }

func (e *BusyError) Error() string {
	return "step is running under another task until " + e.Until.Format(time.RFC3339Nano)
}

// beginStepFields are the step's fields beginScript reads (and the first
// five it writes), in its order; a map instance's item follows them.
var beginStepFields = []field{fState, fOwner, fLeaseUntil, fAttempts, fStartedAt}

// beginInputFields are the fields of each input beginScript reads; the
// script finds the settled flag, last, by its stride.
var beginInputFields = []field{fState, fOutput, fDegraded, fNitems, fSettled}

// beginInputStride is len(beginInputFields), as beginScript's Lua reads it.
var beginInputStride = strconv.Itoa(len(beginInputFields))

// checkpointFields are a done step's fields beginScript returns last, in
// its order.
var checkpointFields = []string{"input_hash", "output", "tool_calls", "degraded", "target", "prompt_tokens", "completion_tokens"}

// Begin counts an attempt at a step by the asynq task owner, leasing the
// step for lease, and loads what the handler needs in one round trip. It
// returns ErrNotFound if the workflow is gone, a *BusyError if another
// task holds the step and an *UnsettledInputError if one of inputs is not
// settled.
func (s *Store) Begin(ctx context.Context, wf, step, owner string, gen int, lease time.Duration, inputs []string) (*Attempt, error) {
	return s.begin(ctx, wf, step, owner, gen, lease, inputs, false)
}

// BeginReadingSpec is Begin reading the workflow's stored spec too
// (Attempt.Spec), in the same script: a worker that knows the spec's
// shape (spec.ShapeKey) but not this workflow's input begins without
// reading the spec first.
func (s *Store) BeginReadingSpec(ctx context.Context, wf, step, owner string, gen int, lease time.Duration, inputs []string) (*Attempt, error) {
	return s.begin(ctx, wf, step, owner, gen, lease, inputs, true)
}

func (s *Store) begin(ctx context.Context, wf, step, owner string, gen int, lease time.Duration, inputs []string, readSpec bool) (*Attempt, error) {
	f := s.fields.of(step)
	inst := isInstance(step)
	args := make([]any, 0, 12+len(beginStepFields)+len(beginInputFields)*len(inputs))
	args = append(args, ts(s.now()), owner, lease.Milliseconds(), strconv.Itoa(gen), f.name(fPrefix), len(inputs))
	for _, x := range beginStepFields {
		args = append(args, f.name(x))
	}
	if inst {
		args = append(args, f.name(fItem))
	}
	if readSpec {
		args = append(args, "spec")
	}
	for _, d := range inputs {
		df := s.fields.of(d)
		for _, x := range beginInputFields {
			args = append(args, df.name(x))
		}
	}
	args = append(args, "deadline_at", "gen") // read last, after the inputs
	keys, args := s.loggedWith(wf, s.now(), s.workerField, []string{wfKey(wf)}, args)
	res, err := beginScript.Run(ctx, s.rdb, keys, args...).Slice()
	if err != nil {
		return nil, fmt.Errorf("store: begin %s/%s: %w", wf, step, err)
	}
	if len(res) == 2 && str(res[0]) == "busy" {
		return nil, &BusyError{Until: *parseTS(str(res[1]))}
	}
	if len(res) == 1 && str(res[0]) == "layout" {
		return nil, fmt.Errorf("store: begin %s/%s: %w", wf, step, ErrOldLayout)
	}
	if len(res) == 3 && str(res[0]) == "unready" {
		k, _ := res[1].(int64)
		if k < 0 || int(k) >= len(inputs) {
			return nil, fmt.Errorf("store: begin %s/%s: the record answered input %d of %d", wf, step, k, len(inputs))
		}
		return nil, &UnsettledInputError{Input: inputs[k], State: cmp.Or(str(res[2]), StepPending)}
	}
	if len(res) == 2 && str(res[0]) == "gen" {
		return nil, fmt.Errorf("store: begin %s/%s of run %d (the workflow is at run %s): %w", wf, step, gen, str(res[1]), ErrOtherRun)
	}
	// the order of beginScript's query: the workflow's 2, the step's (an
	// instance's item, the spec), the inputs', deadline_at and gen, then a
	// done step's checkpoint
	at := 2 + len(beginStepFields) // the inputs'
	if inst {
		at++
	}
	if readSpec {
		at++
	}
	end := at + len(beginInputFields)*len(inputs) + 2
	if len(res) != end && len(res) != end+len(checkpointFields) {
		return nil, fmt.Errorf("store: begin %s/%s: %w", wf, step, ErrNotFound)
	}
	v := func(i int) string { return str(res[i]) }
	a := &Attempt{WorkflowState: v(0), Deps: make(map[string]StepRecord, len(inputs)), DeadlineAt: parseTS(v(end - 2))}
	if inst {
		a.Item = v(2 + len(beginStepFields))
	}
	if readSpec {
		a.Spec = []byte(v(at - 1))
	}
	a.Gen, _ = strconv.Atoi(v(end - 1))
	a.Step = StepRecord{ID: step, State: v(2), StartedAt: parseTS(v(6))}
	a.Step.Attempts, _ = strconv.Atoi(v(5))
	if len(res) > end { // the checkpoint, in checkpointFields' order
		c := func(i int) string { return v(end + i) }
		a.Step.InputHash, a.Step.Output, a.Step.ToolCalls, a.Step.Degraded, a.Step.Target = c(0), c(1), RawJSON(c(2)), c(3) == "1", c(4)
		a.Step.Usage.PromptTokens, _ = strconv.Atoi(c(5))
		a.Step.Usage.CompletionTokens, _ = strconv.Atoi(c(6))
	}
	if a.Step.State == "" {
		a.Step.State = StepPending
	}
	for i, d := range inputs {
		at := at + len(beginInputFields)*i
		r := StepRecord{ID: d, State: v(at), Output: v(at + 1), Degraded: v(at+2) == "1"}
		if n, err := strconv.Atoi(v(at + 3)); err == nil {
			r.Map = &MapCounts{Items: n}
		}
		if r.State == "" {
			r.State = StepPending
		}
		a.Deps[d] = r
	}
	return a, nil
}
