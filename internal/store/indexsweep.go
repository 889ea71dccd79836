package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// The workflow index (indexKey, what list reads) holds every workflow by
// its submit time. Entries younger than the retention always point at a
// record (an ended workflow's lives the retention from its end, an open
// one's longer); older ones are swept a page at a time by the reconciler's
// leader (SweepIndex): an entry whose record expired is dropped, and an
// open workflow older than limits.max_open_age is handed back to be ended.
// Create writes the entry and nothing else: the submit pays for no trim.

// Swept is one page of SweepIndex.
type Swept struct {
	// Dropped is how many entries pointed at no record and were removed.
	Dropped int
	// TooOld are the open workflows submitted before limits.max_open_age
	// ago: the caller ends them (TimeOutOpen).
	TooOld []string
	// Next is where the next page starts (a submit time in milliseconds);
	// 0 once the sweep reached the entries younger than the retention.
	Next int64
}

// SweepIndex looks at up to limit index entries submitted before the
// retention or limits.max_open_age ago (the shorter), from the submit
// time from on (0: the oldest). Each is looked at in one pipelined round
// trip (its record's state). A sweep from the oldest first drops, in one
// command, the entries submitted before max_open_age and the retention
// ago: no record outlives that.
func (s *Store) SweepIndex(ctx context.Context, from int64, limit int) (Swept, error) {
	now := s.now()
	if from == 0 {
		gone := strconv.FormatInt(now.Add(-(s.maxOpenAge + s.retention)).UnixMilli(), 10)
		if err := s.rdb.ZRemRangeByScore(ctx, indexKey(), "-inf", "("+gone).Err(); err != nil {
			return Swept{}, fmt.Errorf("store: sweep the workflow index: %w", err)
		}
	}
	upto := now.Add(-min(s.retention, s.maxOpenAge)).UnixMilli()
	if from > upto {
		return Swept{}, nil
	}
	min := "-inf"
	if from > 0 {
		min = strconv.FormatInt(from, 10)
	}
	zs, err := s.rdb.ZRangeByScoreWithScores(ctx, indexKey(), &redis.ZRangeBy{Min: min, Max: strconv.FormatInt(upto, 10),
		Count: int64(max(limit, 1))}).Result()
	if err != nil {
		return Swept{}, fmt.Errorf("store: sweep the workflow index: %w", err)
	}
	var out Swept
	if len(zs) == 0 {
		return out, nil
	}
	pipe := s.rdb.Pipeline()
	states := make([]*redis.SliceCmd, len(zs))
	for i, z := range zs {
		id, _ := z.Member.(string)
		states[i] = pipe.HMGet(ctx, wfKey(id), "state", "created_at")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return Swept{}, fmt.Errorf("store: sweep the workflow index: %w", err)
	}
	var gone []any
	tooOld := now.Add(-s.maxOpenAge).UnixMilli()
	for i, z := range zs {
		v := states[i].Val()
		state, _ := v[0].(string)
		switch {
		case state == "":
			gone = append(gone, z.Member)
		case !Ended(state):
			created, _ := v[1].(string)
			if at, err := strconv.ParseInt(created, 10, 64); err == nil && at < tooOld {
				out.TooOld = append(out.TooOld, z.Member.(string))
			}
		}
	}
	if len(gone) > 0 {
		if err := s.rdb.ZRem(ctx, indexKey(), gone...).Err(); err != nil {
			return Swept{}, fmt.Errorf("store: sweep the workflow index: %w", err)
		}
	}
	out.Dropped = len(gone)
	if len(zs) == max(limit, 1) {
		// the next page starts at the last score: entries sharing it are
		// looked at again (harmless); a page all of one score moves on
		last := int64(zs[len(zs)-1].Score)
		if last == from {
			last++
		}
		out.Next = last
	}
	return out, nil
}

// Ended says whether a workflow state is final: completed, failed,
// canceled or timed out.
func Ended(state string) bool {
	switch state {
	case StateCompleted, StateFailed, StateCanceled, StateTimedOut:
		return true
	}
	return false
}
