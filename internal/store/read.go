package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/agentq/agentq/internal/record"
	"github.com/redis/go-redis/v9"
)

// workflowFields are the record's own fields that Get reads (not the spec).
var workflowFields = []string{"id", "name", "state", "created_at", "finished_at", "steps", "nsteps", "nsettled", "nfailed", "deadline_at", "error", "gen", "spend", "parent", "idem_key"}

// workflowRecord builds a workflow's own record (no steps) from its values
// in workflowFields' order.
func workflowRecord(h []any) *Workflow {
	w := &Workflow{ID: str(h[0]), Name: str(h[1]), State: str(h[2]), FinishedAt: parseTS(str(h[4])), Counts: &record.Counts{}}
	if c := parseTS(str(h[3])); c != nil {
		w.CreatedAt = *c
	}
	w.Counts.Steps, _ = strconv.Atoi(str(h[6]))
	w.Counts.Settled, _ = strconv.Atoi(str(h[7]))
	w.Counts.Dead, _ = strconv.Atoi(str(h[8]))
	w.DeadlineAt, w.Error = parseTS(str(h[9])), str(h[10])
	w.Generation, _ = strconv.Atoi(str(h[11]))
	w.IdempotencyKey = str(h[14])
	if l, ok := parentLink(str(h[13])); ok {
		w.Parent = &record.ParentRef{Workflow: l.Workflow, Step: l.Step}
	}
	if sp := str(h[12]); sp != "" {
		var micros map[string]float64
		if json.Unmarshal([]byte(sp), &micros) == nil && len(micros) > 0 {
			w.CostByProvider = make(map[string]float64, len(micros))
			for p, m := range micros {
				w.CostByProvider[p] = m / 1e6
			}
		}
	}
	return w
}

// Summary reads a workflow's own record and counters, not its steps: one
// HMGET of a fixed size, however wide the workflow (what a waiting caller
// polls).
func (s *Store) Summary(ctx context.Context, id string) (*Workflow, error) {
	h, err := s.rdb.HMGet(ctx, wfKey(id), workflowFields...).Result()
	if err != nil {
		return nil, fmt.Errorf("store: summary %s: %w", id, err)
	}
	if h[0] == nil {
		return nil, fmt.Errorf("store: summary %s: %w", id, ErrNotFound)
	}
	return workflowRecord(h), nil
}

// stepFields are the fields of a step that Get reads, in this order (a map
// step's counters last, in mapCountFields' order).
var stepFields = append([]string{"state", "attempts", "output", "tool_calls", "degraded", "error", "target",
	"prompt_tokens", "completion_tokens", "input_hash", "started_at", "finished_at", "class"}, append(mapCountFields, "cost_micros", "retry_at", "child")...)

// stepRecord builds a step's record from its values in stepFields' order.
func stepRecord(id string, v func(int) string) StepRecord {
	r := StepRecord{ID: id, State: v(0), Output: v(2), ToolCalls: RawJSON(v(3)), Degraded: v(4) == "1", Error: v(5), Target: v(6),
		InputHash: v(9), StartedAt: parseTS(v(10)), FinishedAt: parseTS(v(11)),
		Map: mapCounts(func(i int) string { return v(13 + i) })}
	if r.State == StepDead { // a step retried after its dead letter keeps the field, not the class
		r.Class = v(12)
	}
	r.Attempts, _ = strconv.Atoi(v(1))
	r.Usage.PromptTokens, _ = strconv.Atoi(v(7))
	r.Usage.CompletionTokens, _ = strconv.Atoi(v(8))
	if micro, _ := strconv.ParseInt(v(13+len(mapCountFields)), 10, 64); micro > 0 {
		r.CostUSD = float64(micro) / 1e6
	}
	if r.State == StepRunning { // between attempts: the next one's due time (dueNow drops a past one)
		r.NextAttemptAt = parseTS(v(14 + len(mapCountFields)))
	}
	r.Child = v(15 + len(mapCountFields))
	if r.State == "" {
		r.State = StepPending
	}
	return r
}

// Get reads a workflow with all its steps: two reads of one hash, the
// second only if the first found it (the step list says which fields). The
// second read takes the workflow's own fields again with its steps', so
// the record is one moment's: a script that changes a step and its
// workflow together (a requeued wait that unblocks it) is never seen half
// done. A map step's instances are not read: its counters say how far it
// is, and Instances pages through them.
func (s *Store) Get(ctx context.Context, id string) (*Workflow, error) {
	w, _, err := s.get(ctx, id, false)
	return w, err
}

// GetWithSpec is Get with the workflow's spec (as Spec returns it), read
// in the same second read: one round trip fewer than Get and Spec.
func (s *Store) GetWithSpec(ctx context.Context, id string) (*Workflow, []byte, error) {
	w, raw, err := s.get(ctx, id, true)
	if err == nil && raw == nil {
		raw, err = s.Spec(ctx, id) // a record without steps: no second read
	}
	if err != nil {
		return nil, nil, err
	}
	return w, raw, nil
}

func (s *Store) get(ctx context.Context, id string, withSpec bool) (*Workflow, []byte, error) {
	h, err := s.rdb.HMGet(ctx, wfKey(id), workflowFields...).Result()
	if err != nil {
		return nil, nil, fmt.Errorf("store: get %s: %w", id, err)
	}
	var steps []string
	var vals []any
	var raw []byte
	for try := 0; ; try++ {
		if h[0] == nil {
			return nil, nil, fmt.Errorf("store: get %s: %w", id, ErrNotFound)
		}
		steps = steps[:0]
		_ = json.Unmarshal([]byte(str(h[5])), &steps)
		if len(steps) == 0 {
			break
		}
		fields := make([]string, 0, len(workflowFields)+len(steps)*len(stepFields)+1)
		fields = append(fields, workflowFields...)
		for _, st := range steps {
			for _, f := range stepFields {
				fields = append(fields, st+"."+f)
			}
		}
		if withSpec {
			fields = append(fields, "spec")
		}
		all, err := s.rdb.HMGet(ctx, wfKey(id), fields...).Result()
		if err != nil {
			return nil, nil, fmt.Errorf("store: get %s steps: %w", id, err)
		}
		if all[0] != nil && str(all[5]) == str(h[5]) {
			if withSpec {
				v := all[len(all)-1]
				if v == nil {
					return nil, nil, fmt.Errorf("store: spec %s: %w", id, ErrNotFound)
				}
				raw, all = []byte(str(v)), all[:len(all)-1]
			}
			h, vals = all[:len(workflowFields)], all[len(workflowFields):]
			break
		}
		// gone, or written again under the id between the two reads (its
		// step list another): read it again with its own
		if try == 2 {
			return nil, nil, fmt.Errorf("store: get %s: its record changed under three reads", id)
		}
		h = all[:len(workflowFields)]
	}
	w := workflowRecord(h)
	w.Steps = make([]StepRecord, 0, len(steps))
	now := s.now()
	for i, st := range steps {
		r := stepRecord(st, func(f int) string { return str(vals[i*len(stepFields)+f]) })
		r.NextAttemptAt = dueAfter(r.NextAttemptAt, now)
		w.Steps = append(w.Steps, r)
	}
	return w, raw, nil
}

// dueAfter is a next attempt's due time if it is still ahead of now: once
// it passed, the attempt runs (or has run).
func dueAfter(at *time.Time, now time.Time) *time.Time {
	if at == nil || !at.After(now) {
		return nil
	}
	return at
}

// Owners are the task ids that began the current attempts of steps of wf
// (empty for a step that has not begun): a step's own task's, or a
// concurrency grant's. Cancel stops them; a dead letter is found by them.
func (s *Store) Owners(ctx context.Context, wf string, steps []string) ([]string, error) {
	if len(steps) == 0 {
		return nil, nil
	}
	fields := make([]string, len(steps))
	for i, st := range steps {
		fields[i] = s.fields.of(st).name(fOwner).(string)
	}
	v, err := s.rdb.HMGet(ctx, wfKey(wf), fields...).Result()
	if err != nil {
		return nil, fmt.Errorf("store: owners of %s: %w", wf, err)
	}
	out := make([]string, len(steps))
	for i := range v {
		out[i] = str(v[i])
	}
	return out, nil
}

// StepAttempts is how many attempts step of wf has begun.
func (s *Store) StepAttempts(ctx context.Context, wf, step string) (int, error) {
	v, err := s.rdb.HGet(ctx, wfKey(wf), s.fields.of(step).name(fAttempts).(string)).Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: attempts of %s/%s: %w", wf, step, err)
	}
	n, _ := strconv.Atoi(v)
	return n, nil
}
