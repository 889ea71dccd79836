package store

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/record"
)

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
	Class  string
	Target string
	Usage  Usage
	// CostMicros is what the step's calls cost, in millionths of the
	// prices' currency (0: unknown, or free).
	CostMicros int64
	// Spend, with Decided, is what the step spent by provider (micros)
	// through calls no event of this workflow counted: a completed child
	// workflow's. It is added to the workflow's spend
	// (Workflow.CostByProvider) when the outcome lands, once (a decided
	// outcome settles a waiting step only); ignored without Decided.
	Spend     map[string]int64
	InputHash string

	// Decided, with Done, settles an approval step with a person's
	// decision only if it is waiting for one (else ErrAlreadySettled).
	Decided bool
	// Map, for an instance of a map step ("<map>[<n>]"), is the map's id:
	// the instance counts toward its map (see Settle).
	Map string
	// Release, for an instance, is the task of its map's instance
	// ReleaseProbe in the outcome's run (Gen): a settle that releases the
	// map's next instance enqueues that instance's task in the same script
	// (when the store enqueues tasks; Settled.ReleaseEnqueued says so).
	// Nil: the caller enqueues the released instance.
	Release *Task

	// Gen is the run (generation) of the workflow the outcome belongs to:
	// 0, one more at each Rerun. Settle refuses an outcome of another run
	// with ErrOtherRun, so a step still running when its workflow was
	// rerun cannot settle into the new run. -1: any run (a person's
	// decision on an approval step, which has its own guard).
	Gen int

	// Attempt is the attempt the outcome belongs to (Begin's count). When
	// positive, Settle refuses it with ErrStaleAttempt if the step has
	// begun a later attempt or this one was abandoned. Zero: not checked.
	Attempt int

	// NoDurableCalls says the step makes no durable calls (a prompt step
	// without tools): it keeps no calls key whose TTL the settle sets.
	NoDurableCalls bool

	// Events are what the attempt did before its outcome (its LLM calls,
	// tool turns, streamed text), logged with it, before its own event,
	// when the settle lands (and their calls' spend counted): a step that
	// answers fast costs the log no write of its own. They are logged
	// once: the same events settled again (a reply lost) are not logged
	// again, and they are logged on a step already finished too, without
	// a second outcome: its run again paid for its calls (see LogOnce).
	Events []Event
}

// Dependent is a step that may become ready, with its number of inputs
// (its depends_on).
type Dependent struct {
	ID     string
	Inputs int
	// Task, when set, is the dependent's task for the settling outcome's
	// run (Outcome.Gen): Settle enqueues it when the settle makes the
	// dependent ready, if the store EnqueuesTasks.
	Task *Task
}

// Settled is what Settle did.
type Settled struct {
	State string   // the workflow's state after the settle
	Ready []string // dependents now ready to run
	// Enqueued says, for each of Ready, whether Settle enqueued its Task
	// (else the caller enqueues it).
	Enqueued []bool
	// Release is the map instance to enqueue next (max_parallel's window),
	// -1 if none; only an instance's settle releases one.
	Release int
	// ReleaseEnqueued says the settle enqueued Release's task itself
	// (Outcome.Release); else the caller enqueues it.
	ReleaseEnqueued bool
	// Gen is the workflow's generation (0, and one more at each rerun):
	// the ready steps' tasks carry it.
	Gen int
	// ParentRead says the workflow has ended (State is final) and the
	// settle read its parent link: Parent, nil for a workflow that is not
	// a child (what ParentOf would read).
	ParentRead bool
	Parent     *ParentLink
}

// Settle records a step's outcome and returns the workflow's state and the
// dependents that are now ready to run. It is idempotent: settling the same
// step again returns the same dependents (if they have not started), so the
// caller can always enqueue them (with deterministic task ids), and leaves
// a finished step's record as its first outcome wrote it (a step done or
// canceled, or dead and settled dead again: see settleScript). For a map
// instance (o.Map set), dependents are the map's.
func (s *Store) Settle(ctx context.Context, wf, step string, o Outcome, dependents []Dependent) (*Settled, error) {
	outcome := StepDone
	switch {
	case o.Done && o.Decided:
		outcome = "decided"
	case !o.Done && o.OnlyIfOpen:
		outcome = "dead_if_open"
	case !o.Done:
		outcome = StepDead
	}
	f := s.fields.of(step)
	args := make([]any, 0, 40+6*len(dependents))
	// args[11] is the number of field/value pairs that follow it, set below
	args = append(args, outcome, b2s(o.Optional), ts(s.now()), s.ttls(), f.name(fState), f.name(fSettled), f.name(fFailed),
		f.name(fFinishedAt), f.name(fAttempts), f.name(fAbandoned), max(o.Attempt, 0), 0)
	// Fields are written only when they say something: an empty or zero
	// one reads the same as one never written. The error is cleared only
	// where an earlier attempt may have left one.
	if o.Error != "" || o.Attempt != 1 {
		args = append(args, f.name(fError), Excerpt(o.Error))
	}
	switch {
	case o.Done:
		args = append(args, f.name(fOutput), o.Output, f.name(fTarget), o.Target, f.name(fInputHash), o.InputHash)
		for _, n := range []struct {
			name field
			v    int64
		}{{fPromptTokens, int64(o.Usage.PromptTokens)}, {fCompletionTokens, int64(o.Usage.CompletionTokens)}, {fCostMicros, o.CostMicros}} {
			if n.v > 0 {
				args = append(args, f.name(n.name), n.v)
			}
		}
		if o.ToolCalls != "" {
			args = append(args, f.name(fToolCalls), o.ToolCalls)
		}
		if o.Degraded {
			args = append(args, f.name(fDegraded), "1")
		}
	case o.Output != "":
		args = append(args, f.name(fOutput), o.Output) // the rejected answer, for review
	}
	if !o.Done && o.Class != "" {
		args = append(args, f.name(fClass), o.Class)
	}
	args[11] = (len(args) - 12) / 2
	var rel release
	if o.Map != "" {
		m := s.fields.of(o.Map)
		args = append(args, "1", m.name(fState), m.name(fSettled), m.name(fFinishedAt), m.name(fNitems), m.name(fNdone), m.name(fNext),
			m.name(fNmissing), f.name(fReleased), m.name(fPromptTokens), o.Usage.PromptTokens, m.name(fCompletionTokens),
			o.Usage.CompletionTokens, m.name(fCostMicros), o.CostMicros)
		// the released instance's task: its pending key's index in KEYS
		// (0: not enqueued here; set by runSettle), then releaseArgs
		rel.at = len(args)
		if ra, ok := releaseArgs(o.Release); ok {
			rel.queue = o.Release.Queue
			args = append(append(append(args, 0), ra...), strconv.Itoa(o.Gen))
		} else {
			args = append(args, 0, "", "", "", "", "", "", "", 0)
		}
	} else {
		args = append(args, "0")
	}
	lb := loggedBatch(step, o.Events) // before the events are given their times: the same for the same events
	ev := append(o.Events[:len(o.Events):len(o.Events)], settledEvent(step, o))
	fused := s.fused.Load()
	spend := ""
	if o.Decided {
		spend = spendArg(o.Spend)
	}
	ck := ""
	if !o.NoDurableCalls {
		ck = callsKey(wf, step)
	}
	res, err := s.runSettle(ctx, wf, o.Gen, args, dependents, rel, fused, lb, ev, spend, ck)
	if fused && s.crossSlot(err) {
		res, err = s.runSettle(ctx, wf, o.Gen, args, dependents, rel, false, lb, ev, spend, ck)
	}
	// not confirmed: settled on the primary all the same (the result is
	// read, what it made ready enqueued), and the caller is told at the end
	err, unconfirmed := Unconfirmed(err)
	if err != nil {
		return nil, fmt.Errorf("store: settle %s/%s: %w", wf, step, err)
	}
	if unconfirmed != nil {
		unconfirmed = fmt.Errorf("store: settle %s/%s: %w", wf, step, unconfirmed)
	}
	state := str(res[0])
	switch state {
	case "gone":
		return nil, fmt.Errorf("store: settle %s/%s: %w", wf, step, ErrNotFound)
	case "layout":
		return nil, fmt.Errorf("store: settle %s/%s: %w", wf, step, ErrOldLayout)
	case "stale":
		return nil, fmt.Errorf("store: settle %s/%s attempt %d (the step is at attempt %s): %w", wf, step, o.Attempt, str(res[1]), ErrStaleAttempt)
	case "gen":
		return nil, fmt.Errorf("store: settle %s/%s of run %d (the workflow is at run %s): %w", wf, step, o.Gen, str(res[1]), ErrOtherRun)
	case "unexpanded":
		// the instance's attempt is stale: the map's own task expands it
		// again (its task came back with the record) and releases it anew
		return nil, fmt.Errorf("store: settle %s/%s: its map holds no expansion (lost with a failover): %w", wf, step, ErrStaleAttempt)
	case "settled":
		return &Settled{State: str(res[1]), Release: -1}, fmt.Errorf("store: settle %s/%s: %w", wf, step, ErrAlreadySettled)
	}
	out := &Settled{State: state, Release: -1}
	if n, err := strconv.Atoi(str(res[1])); err == nil {
		out.Release = n
	}
	out.Gen, _ = strconv.Atoi(str(res[2]))
	out.ReleaseEnqueued = res[3] == int64(1)
	if p, ok := res[4].(string); ok {
		out.ParentRead = true
		if l, ok := parentLink(p); ok {
			l.ChildGen = out.Gen
			out.Parent = &l
		}
	}
	for _, v := range res[5:] {
		i, ok := v.(int64)
		if !ok {
			continue
		}
		if n := int(max(i, -i)); n >= 1 && n <= len(dependents) {
			out.Ready = append(out.Ready, dependents[n-1].ID)
			out.Enqueued = append(out.Enqueued, i < 0)
		}
	}
	return out, unconfirmed
}

// release is where a map instance's settle args hold the released
// instance's task (at: the index of its pending key's place), and its
// queue ("": no task to enqueue).
type release struct {
	at    int
	queue string
}

// runSettle runs settleScript with args (up to the dependents), the
// step's calls key ck ("": none) and, per dependent, its fields and, when
// fused, its task; when fused, a map instance's released instance is
// enqueued too (rel). The outcome's events
// (ev, its own last) are logged unless lb says they were; spend
// (spendArg) is added to what their calls spent.
func (s *Store) runSettle(ctx context.Context, wf string, gen int, args []any, dependents []Dependent, rel release, fused bool, lb batch, ev []Event, spend, ck string) ([]any, error) {
	args = append(args, s.nowNanos(), strconv.Itoa(gen), lb.field, lb.token, ck) // a second run (CROSSSLOT) overwrites the same places
	keys := []string{wfKey(wf)}
	if rel.at > 0 {
		args[rel.at] = 0
		if fused && rel.queue != "" {
			if err := s.registerQueue(ctx, rel.queue); err != nil {
				return nil, err
			}
			keys = append(keys, asynqPendingKey(rel.queue))
			args[rel.at] = len(keys)
		}
	}
	for _, d := range dependents {
		df := s.fields.of(d.ID)
		if fused && d.Task != nil {
			if err := s.registerQueue(ctx, d.Task.Queue); err != nil {
				return nil, err
			}
			var at int
			keys, at = taskKeys(keys, d.Task)
			args = append(args, df.name(fState), df.name(fNin), d.Inputs, at, d.Task.ID, d.Task.message())
			continue
		}
		args = append(args, df.name(fState), df.name(fNin), d.Inputs, 0, "", "")
	}
	keys, args = s.logged(wf, s.now(), keys, args, ev...)
	if spend != "" { // luaEvents' spend: the fourth argument from the end
		args[len(args)-4] = args[len(args)-4].(string) + spend
	}
	var res []any
	err := s.acked(ctx, wfKey(wf), func(c redis.Cmdable) (err error) {
		res, err = settleScript.Run(ctx, c, keys, args...).Slice()
		return err
	})
	return res, err
}

// settledEvent is what the log says of a step's outcome (settleScript
// logs it unless the step was finished already).
func settledEvent(step string, o Outcome) Event {
	e := Event{Step: step, Attempt: max(o.Attempt, 0)}
	switch {
	case !o.Done:
		e.Type, e.Class, e.Reason = record.EventDead, o.Class, o.Error
	case o.Degraded:
		e.Type = record.EventDegraded
	default:
		e.Type = record.EventDone
	}
	if o.Done {
		e.Target, e.PromptTokens, e.CompletionTokens = o.Target, o.Usage.PromptTokens, o.Usage.CompletionTokens
		e.CostUSD = float64(o.CostMicros) / 1e6
	}
	return e
}

// spendArg is spend as luaEvents takes it ("provider micros ..."), in
// provider order; a provider's name with a space, or no positive amount,
// is left out.
func spendArg(spend map[string]int64) string {
	var b strings.Builder
	for _, p := range slices.Sorted(maps.Keys(spend)) {
		if m := spend[p]; m > 0 && p != "" && !strings.ContainsAny(p, " \t\n") {
			fmt.Fprintf(&b, "%s %d ", p, m)
		}
	}
	return b.String()
}
