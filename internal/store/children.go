package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Child workflows: a child's record names the step that started it
// ("parent", a ParentLink), and that step's record names the child it
// started last ("<step>.child"), so either finds the other.

// ParentLink is the step (of a run, in an attempt, on a queue) that
// started a child workflow: what the child's end tells.
type ParentLink struct {
	Workflow string `json:"wf"`
	Step     string `json:"step"`
	Gen      int    `json:"gen"`
	Attempt  int    `json:"attempt"`
	Queue    string `json:"queue"`
	// Depth is how deep the child is among children (1: a child of a
	// workflow that is not one).
	Depth int `json:"depth,omitempty"`
	// Root is the workflow at the top of the child's tree (tree.go); empty
	// in a link written before roots were recorded (RootOf walks up).
	Root string `json:"root,omitempty"`
	// ChildGen is, as ParentOf reads it, the child's own run (a child
	// rerun after it ended tells its parent again).
	ChildGen int `json:"-"`
}

func parentLink(v string) (ParentLink, bool) {
	var l ParentLink
	if v == "" || json.Unmarshal([]byte(v), &l) != nil || l.Workflow == "" {
		return l, false
	}
	return l, true
}

// ParentOf is the step that started child workflow wf; nil for a
// workflow that is not a child (or gone).
func (s *Store) ParentOf(ctx context.Context, wf string) (*ParentLink, error) {
	v, err := s.rdb.HMGet(ctx, wfKey(wf), "parent", "gen").Result()
	if err != nil {
		return nil, fmt.Errorf("store: parent of %s: %w", wf, err)
	}
	if l, ok := parentLink(str(v[0])); ok {
		l.ChildGen, _ = strconv.Atoi(str(v[1]))
		return &l, nil
	}
	return nil, nil
}

// setChildScript links a child to its step only while the record is at
// run gen with the step at attempt: a late link of an earlier attempt or
// run writes nothing, nor brings back a record that is gone.
// KEYS: wf. ARGV: the step's child and attempts field names, the child,
// gen, attempt.
var setChildScript = redis.NewScript(`
local v = redis.call('HMGET', KEYS[1], 'state', 'gen', ARGV[2])
if not v[1] or (v[2] or '0') ~= ARGV[4] or (v[3] or '0') ~= ARGV[5] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
`)

// SetChild records child as the child workflow step of wf started last,
// in run gen and the step's attempt; a link of another run or attempt
// (a stalled worker's, after a rerun or a requeue) is not written.
func (s *Store) SetChild(ctx context.Context, wf, step, child string, gen, attempt int) error {
	if err := setChildScript.Run(ctx, s.rdb, []string{wfKey(wf)}, step+".child", step+".attempts", child, gen, attempt).Err(); err != nil {
		return fmt.Errorf("store: child of %s/%s: %w", wf, step, err)
	}
	return nil
}

// Children are the child workflows wf's steps (and map instances) started
// last, a page of the record's fields at a time.
func (s *Store) Children(ctx context.Context, wf string) ([]string, error) {
	var out []string
	iter := s.rdb.HScan(ctx, wfKey(wf), 0, "*.child", 500).Iterator()
	for field := true; iter.Next(ctx); field = !field {
		if !field && strings.HasPrefix(iter.Val(), "wf_") {
			out = append(out, iter.Val())
		}
	}
	if err := iter.Err(); err != nil {
		return nil, fmt.Errorf("store: children of %s: %w", wf, err)
	}
	return out, nil
}

// A wait's own end (a signal step's timeout, a child's end) runs as the
// step's task; delivered again after it settled the step (a worker died
// before asynq archived it), it must not start the step over. Only a
// person's requeue of its dead letter does: Requeue marks the step first.

// WaitEndWanted reports whether a wait's end task for step of wf is to
// run: the step waits, or its dead letter was requeued (the mark is taken).
func (s *Store) WaitEndWanted(ctx context.Context, wf, step string) (bool, error) {
	f := s.fields.of(step)
	st, err := s.rdb.HGet(ctx, wfKey(wf), f.name(fState).(string)).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, fmt.Errorf("store: state of %s/%s: %w", wf, step, err)
	}
	if st == StepWaiting {
		return true, nil
	}
	n, err := s.rdb.HDel(ctx, wfKey(wf), step+".requeued").Result()
	if err != nil {
		return false, fmt.Errorf("store: requeue mark of %s/%s: %w", wf, step, err)
	}
	return n == 1, nil
}

// MarkRequeued marks step of wf requeued by a person (WaitEndWanted).
func (s *Store) MarkRequeued(ctx context.Context, wf, step string) error {
	if err := s.rdb.HSet(ctx, wfKey(wf), step+".requeued", "1").Err(); err != nil {
		return fmt.Errorf("store: mark %s/%s requeued: %w", wf, step, err)
	}
	return nil
}
