package store

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/record"
)

// waitScript parks a step that waits for something outside its workflow
// (a person's decision, a signal), showing message, and the workflow
// (unless it is blocked or ended) is "waiting" while any step does. A
// requeued dead step that waits again no longer blocks its workflow.
// Parking it again changes nothing.
// KEYS: wf. ARGV: the step's state and output field names, message, its
// failed field name. Returns the workflow's state after the call (empty
// if gone).
var waitScript = redis.NewScript(luaEvents + `
local v = redis.call('HMGET', KEYS[1], 'state', ARGV[1], 'nwaiting', ARGV[4], 'nfailed')
local s = v[1]
if not s then return '' end
if s == 'canceled' or s == 'timed_out' or s == 'completed' or s == 'failed' then return s end
if v[2] == 'waiting' or v[2] == 'done' or v[2] == 'dead' then return s end
local w = {ARGV[1], 'waiting', ARGV[2], ARGV[3], 'nwaiting', tonumber(v[3] or '0') + 1}
if v[4] == '1' then
  local nf = tonumber(v[5] or '1') - 1
  w[#w + 1] = ARGV[4]; w[#w + 1] = '0'
  w[#w + 1] = 'nfailed'; w[#w + 1] = nf
  if s == 'blocked' and nf <= 0 then s = 'running' end
end
if s == 'running' or s == 'pending' then
  s = 'waiting'
  w[#w + 1] = 'state'; w[#w + 1] = s
end
redis.call('HSET', KEYS[1], unpack(w))
flush()
return s
`)

// Wait parks an approval step until a person decides (Settle with
// Outcome.Decided); message is what the person is asked. It returns the
// workflow's state.
func (s *Store) Wait(ctx context.Context, wf, step, message string) (string, error) {
	f := s.fields.of(step)
	keys, args := s.logged(wf, s.now(), []string{wfKey(wf)}, []any{f.name(fState), f.name(fOutput), Excerpt(message), f.name(fFailed)},
		Event{Type: record.EventWaiting, Step: step, Reason: message})
	st, err := waitScript.Run(ctx, s.rdb, keys, args...).Text()
	if err != nil {
		return "", fmt.Errorf("store: wait %s/%s: %w", wf, step, err)
	}
	if st == "" {
		return "", fmt.Errorf("store: wait %s/%s: %w", wf, step, ErrNotFound)
	}
	return st, nil
}
