package store

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// A dead letter that is requeued is queued again in the record before its
// task leaves asynq's archive: from that moment the step is queued, no
// longer failed, and a workflow it alone blocked is running (or waiting),
// so a Wait right after a requeue waits for the step instead of returning
// blocked. The step's failed flag becomes "r" (requeued): Settle counts it
// as not failed, so the step's next outcome counts once, and Unrequeue
// knows to restore it when the task could not be requeued after all.

// requeueScript marks a dead step queued again (mode "requeue") or, for
// a requeue whose task stayed archived, dead again (mode "undo").
// KEYS: wf. ARGV: the step's state and failed field names, the dead
// letter's generation, the mode. Returns the workflow's state after the
// call ("" if it is gone); a step that is not dead (requeue) or not
// queued by a requeue (undo), a workflow of another run or one that
// ended are left alone.
var requeueScript = redis.NewScript(`
local v = redis.call('HMGET', KEYS[1], 'state', ARGV[1], ARGV[2], 'nfailed', 'nwaiting', 'gen')
local s = v[1]
if not s then return '' end
if (v[6] or '0') ~= ARGV[3] then return s end
if s == 'canceled' or s == 'timed_out' or s == 'failed' or s == 'completed' then return s end
local nfailed, nwaiting = tonumber(v[4] or '0'), tonumber(v[5] or '0')
local w
if ARGV[4] == 'requeue' then
  if v[2] ~= 'dead' then return s end
  w = {ARGV[1], 'queued'}
  if v[3] == '1' then
    nfailed = nfailed - 1
    w[#w + 1] = ARGV[2]; w[#w + 1] = 'r'
    w[#w + 1] = 'nfailed'; w[#w + 1] = nfailed
    if s == 'blocked' and nfailed == 0 then
      s = 'running'
      if nwaiting > 0 then s = 'waiting' end
      w[#w + 1] = 'state'; w[#w + 1] = s
    end
  end
else
  if v[2] ~= 'queued' then return s end
  w = {ARGV[1], 'dead'}
  if v[3] == 'r' then
    nfailed = nfailed + 1
    w[#w + 1] = ARGV[2]; w[#w + 1] = '1'
    w[#w + 1] = 'nfailed'; w[#w + 1] = nfailed
    if s == 'running' or s == 'waiting' then
      s = 'blocked'
      w[#w + 1] = 'state'; w[#w + 1] = s
    end
  end
end
redis.call('HSET', KEYS[1], unpack(w))
return s
`)

// Requeue marks dead step of workflow wf, of run gen, queued again before
// its dead letter's task is: see above. It returns the workflow's state
// after the call.
func (s *Store) Requeue(ctx context.Context, wf, step string, gen int) (string, error) {
	return s.requeue(ctx, wf, step, gen, "requeue")
}

// Unrequeue undoes Requeue for a dead letter whose task stayed archived
// (asynq refused to run it): the step is dead again and blocks its
// workflow as before.
func (s *Store) Unrequeue(ctx context.Context, wf, step string, gen int) (string, error) {
	return s.requeue(ctx, wf, step, gen, "undo")
}

func (s *Store) requeue(ctx context.Context, wf, step string, gen int, mode string) (string, error) {
	f := s.fields.of(step)
	st, err := requeueScript.Run(ctx, s.rdb, []string{wfKey(wf)}, f.name(fState), f.name(fFailed), strconv.Itoa(gen), mode).Text()
	if err != nil {
		return "", fmt.Errorf("store: %s %s of %s: %w", mode, step, wf, err)
	}
	if st == "" {
		return "", fmt.Errorf("store: %s %s of %s: %w", mode, step, wf, ErrNotFound)
	}
	return st, nil
}
