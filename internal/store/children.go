package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	v, err := s.rdb.HGet(ctx, wfKey(wf), "parent").Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: parent of %s: %w", wf, err)
	}
	if l, ok := parentLink(v); ok {
		return &l, nil
	}
	return nil, nil
}

// SetChild records child as the child workflow step of wf started last.
func (s *Store) SetChild(ctx context.Context, wf, step, child string) error {
	if err := s.rdb.HSet(ctx, wfKey(wf), step+".child", child).Err(); err != nil {
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
