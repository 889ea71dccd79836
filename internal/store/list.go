package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

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

// ListQuery filters and pages ListPage.
type ListQuery struct {
	State string // only workflows in this state; "": any
	Name  string // only workflows of this name; "": any
	Limit int    // at most this many (1 to 1000; 0: 50)
	// After, a workflow id, lists only workflows submitted before it: the
	// last id of the previous page. "": from the newest.
	After string
}

// listPage is how many ids ListPage reads of the index at a time.
const listPage = 200

// ListPage returns workflows newest first, filtered and paged by q,
// without their steps (one HMGET of each workflow's own fields, a page of
// them pipelined): its cost grows with the page, not with the workflows'
// width. An After that is not in the index (unknown, or expired) is
// ErrNotFound.
func (s *Store) ListPage(ctx context.Context, q ListQuery) ([]*Workflow, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 1000)
	seen := map[string]bool{}
	out := make([]*Workflow, 0, limit)
	for {
		start := int64(0)
		if q.After != "" {
			rank, err := s.rdb.ZRevRank(ctx, indexKey(), q.After).Result()
			if errors.Is(err, redis.Nil) {
				return nil, fmt.Errorf("store: list after an id the index does not hold: %w", ErrNotFound)
			}
			if err != nil {
				return nil, fmt.Errorf("store: list: %w", err)
			}
			start = rank + 1
		}
		ids, err := s.rdb.ZRevRange(ctx, indexKey(), start, start+listPage-1).Result()
		if err != nil {
			return nil, fmt.Errorf("store: list: %w", err)
		}
		if len(ids) == 0 {
			return out, nil
		}
		cmds := make([]*redis.SliceCmd, len(ids))
		pipe := s.rdb.Pipeline()
		for i, id := range ids {
			cmds[i] = pipe.HMGet(ctx, wfKey(id), workflowFields...)
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("store: list: %w", err)
		}
		for i, id := range ids {
			h, err := cmds[i].Result()
			if err != nil || h[0] == nil || seen[id] {
				continue // expired between the index and its record, or seen on a page before
			}
			seen[id] = true
			w := workflowRecord(h)
			if (q.State == "" || w.State == q.State) && (q.Name == "" || w.Name == q.Name) {
				out = append(out, w)
				if len(out) == limit {
					return out, nil
				}
			}
		}
		q.After = ids[len(ids)-1]
	}
}
