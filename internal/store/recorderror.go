package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/record"
)

// recordErrorScript notes a failed attempt's error on its step, unless the
// workflow is gone or the attempt is stale or of another run (as
// settleScript decides).
// KEYS: wf. ARGV: the step's attempts, abandoned and error field names,
// attempt (0: not checked), message, generation, the retry_at field name
// and when the next attempt is due (”: not known, the field is cleared).
// Returns 1, 0 if gone, -1 if stale.
var recordErrorScript = redis.NewScript(luaEvents + `
local v = redis.call('HMGET', KEYS[1], 'state', ARGV[1], ARGV[2], 'gen')
if not v[1] then return 0 end
if (v[4] or '0') ~= ARGV[6] then return -1 end
local attempt = tonumber(ARGV[4])
if attempt > 0 and (attempt < tonumber(v[2] or '0') or v[3] == ARGV[4]) then return -1 end
if ARGV[8] ~= '' then
  redis.call('HSET', KEYS[1], ARGV[3], ARGV[5], ARGV[7], ARGV[8])
else
  redis.call('HSET', KEYS[1], ARGV[3], ARGV[5])
  redis.call('HDEL', KEYS[1], ARGV[7])
end
flush()
return 1
`)

// RecordError notes a failed attempt's error on the step without settling
// it (bounded by Excerpt), and when its next attempt is due (zero: not
// known), and logs it as step.failed with its class. gen and attempt are checked as Settle checks Outcome.Gen and
// Outcome.Attempt (ErrStaleAttempt for both); a gone workflow is
// ErrNotFound and is not recreated.
//
// before are what the attempt did before it failed (Outcome.Events),
// logged before its step.failed when the error is recorded.
func (s *Store) RecordError(ctx context.Context, wf, step string, gen, attempt int, class, msg string, due time.Time, before ...Event) error {
	p := step + "."
	at := ""
	ev := Event{Type: record.EventFailed, Step: step, Attempt: max(attempt, 0), Class: class, Reason: msg}
	if !due.IsZero() {
		at = ts(due)
		d := due.UTC()
		ev.NextAttemptAt = &d
	}
	keys, args := s.logged(wf, s.now(), []string{wfKey(wf)}, []any{p + "attempts", p + "abandoned", p + "error", max(attempt, 0), Excerpt(msg),
		strconv.Itoa(gen), p + "retry_at", at}, append(before[:len(before):len(before)], ev)...)
	n, err := recordErrorScript.Run(ctx, s.rdb, keys, args...).Int()
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
