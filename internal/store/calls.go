package store

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// A code step's durable sub-calls (its LLM calls and memoized operations)
// live in one hash per step, beside the workflow's record and under its
// hash tag: field "<seq>" holds the request's hash, a newline and the
// stored answer. A step loads them all when an attempt begins (one HGETALL)
// and writes each as it is answered. They are kept apart from the
// workflow's record, which status and result read whole.
func callsKey(wf, step string) string { return Prefix + "{wf:" + wf + "}:calls:" + step }

// Call is one stored durable sub-call.
type Call struct {
	Hash  string // what was asked (the caller's hash of its request)
	Value string // what was answered
}

// Calls returns a step's stored sub-calls by sequence number.
func (s *Store) Calls(ctx context.Context, wf, step string) (map[int]Call, error) {
	m, err := s.rdb.HGetAll(ctx, callsKey(wf, step)).Result()
	if err != nil {
		return nil, fmt.Errorf("store: calls of %s/%s: %w", wf, step, err)
	}
	out := make(map[int]Call, len(m))
	for f, v := range m {
		seq, err := strconv.Atoi(f)
		if err != nil {
			continue // not a field of this layout
		}
		for i := 0; i < len(v); i++ {
			if v[i] == '\n' {
				out[seq] = Call{Hash: v[:i], Value: v[i+1:]}
				break
			}
		}
	}
	return out, nil
}

// saveCallScript stores one sub-call of attempt n of run gen, unless the
// workflow was rerun since, the step has begun a later attempt or attempt
// n was abandoned (the same fence as settle), or the workflow is gone.
// KEYS: wf, calls. ARGV: the step's attempts and abandoned field names,
// attempt (0: not checked), seq, value, ttl, generation.
// Returns 1, 0 (gone) or {'stale', current attempt}.
var saveCallScript = redis.NewScript(`
local v = redis.call('HMGET', KEYS[1], 'state', ARGV[1], ARGV[2], 'gen')
if not v[1] then return 0 end
if (v[4] or '0') ~= ARGV[7] then return {'stale', v[2] or '0'} end
local attempt, current = tonumber(ARGV[3]), tonumber(v[2] or '0')
if attempt > 0 and (attempt < current or v[3] == ARGV[3]) then return {'stale', current} end
redis.call('HSET', KEYS[2], ARGV[4], ARGV[5])
redis.call('EXPIRE', KEYS[2], ARGV[6])
return 1
`)

// SaveCall stores sub-call seq of a step's attempt in run gen of the
// workflow. It returns ErrStaleAttempt when the workflow was rerun since,
// a later attempt has begun (or this one was abandoned) and ErrNotFound
// when the workflow is gone.
func (s *Store) SaveCall(ctx context.Context, wf, step string, gen, attempt, seq int, c Call) error {
	p := step + "."
	var res any
	err := s.acked(ctx, wfKey(wf), func(rc redis.Cmdable) (err error) {
		res, err = saveCallScript.Run(ctx, rc, []string{wfKey(wf), callsKey(wf, step)},
			p+"attempts", p+"abandoned", max(attempt, 0), seq, c.Hash+"\n"+c.Value, s.ttl(), strconv.Itoa(gen)).Result()
		return err
	})
	if err != nil {
		return fmt.Errorf("store: save call %d of %s/%s: %w", seq, wf, step, err)
	}
	switch r := res.(type) {
	case int64:
		if r == 0 {
			return fmt.Errorf("store: save call %d of %s/%s: %w", seq, wf, step, ErrNotFound)
		}
		return nil
	case []any:
		return fmt.Errorf("store: save call %d of %s/%s (attempt %d, current %v): %w", seq, wf, step, attempt, r[1], ErrStaleAttempt)
	}
	return fmt.Errorf("store: save call %d of %s/%s: unexpected answer %v", seq, wf, step, res)
}
