package store

import "github.com/redis/go-redis/v9"

// createScript writes a workflow record and its step records atomically,
// or nothing if the id is taken.
// KEYS: wf, settled, failed, step keys...
// ARGV: ttl, nfields, field/value pairs of the wf hash...
var createScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local ttl = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local h = {}
for i = 3, 2 + 2 * n do h[#h + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], unpack(h))
redis.call('EXPIRE', KEYS[1], ttl)
for k = 4, #KEYS do
  redis.call('HSET', KEYS[k], 'state', 'pending', 'attempts', 0)
  redis.call('EXPIRE', KEYS[k], ttl)
end
return 1
`)

// beginScript starts an attempt at a step: it counts the attempt, marks the
// step running under a lease held by the asynq task (unless it is already
// done: a redelivery), and returns all a handler needs in one round trip.
// While another task holds an unexpired lease on the step, it returns
// {'busy', lease_until} and changes nothing: concurrent duplicates never
// call the LLM twice. The same task (a redelivery after a crash) may take
// its own lease over.
// KEYS: wf, step, dependency step keys...
// ARGV: now (ms), owner (asynq task id), lease (ms)
// Returns: {wf state, step fields (flat), {dep fields}...} or {} if gone.
var beginScript = redis.NewScript(`
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return {} end
local now = tonumber(ARGV[1])
if state ~= 'canceled' then
  local s = redis.call('HGET', KEYS[2], 'state')
  if s == 'running' then
    local owner = redis.call('HGET', KEYS[2], 'owner')
    local until_ = tonumber(redis.call('HGET', KEYS[2], 'lease_until') or '0')
    if owner and owner ~= ARGV[2] and until_ > now then
      return {'busy', tostring(until_)}
    end
  end
  if s ~= 'done' then
    redis.call('HINCRBY', KEYS[2], 'attempts', 1)
    redis.call('HSET', KEYS[2], 'state', 'running', 'owner', ARGV[2], 'lease_until', now + tonumber(ARGV[3]))
    if not redis.call('HGET', KEYS[2], 'started_at') then
      redis.call('HSET', KEYS[2], 'started_at', ARGV[1])
    end
  end
  if state == 'pending' then
    redis.call('HSET', KEYS[1], 'state', 'running')
    state = 'running'
  end
end
local out = {state, redis.call('HGETALL', KEYS[2])}
for k = 3, #KEYS do
  out[#out + 1] = redis.call('HMGET', KEYS[k], 'state', 'output', 'degraded')
end
return out
`)

// settleScript records a step's final outcome, idempotently (set
// membership, not counters), and returns the dependents whose inputs are
// now all settled (none once the workflow is canceled). A step that is done, or dead but optional, is settled; a
// dead step that is not optional blocks the workflow.
// Outcome "dead_if_open" settles the step dead only if it is not settled
// yet (the safety net for attempts asynq gave up on).
// KEYS: wf, step, settled, failed, dependent step keys...
// ARGV: step, outcome (done|dead|dead_if_open), optional (0|1), now, ttl, nfields,
//
//	field/value pairs..., then per dependent: ndeps, deps...
//
// Returns: {workflow state, ready dependent index (1-based into dependents)...}
var settleScript = redis.NewScript(`
local wfstate = redis.call('HGET', KEYS[1], 'state')
if not wfstate then return {'gone'} end
local step, outcome, optional, now, ttl = ARGV[1], ARGV[2], ARGV[3] == '1', ARGV[4], tonumber(ARGV[5])
if outcome == 'dead_if_open' then
  local s = redis.call('HGET', KEYS[2], 'state')
  if s == 'done' or s == 'dead' then return {wfstate} end
  outcome = 'dead'
end
local i = 6
local nf = tonumber(ARGV[i]); i = i + 1
if nf > 0 then
  local h = {}
  for j = 1, 2 * nf do h[j] = ARGV[i + j - 1] end
  redis.call('HSET', KEYS[2], unpack(h))
  i = i + 2 * nf
end
if outcome == 'done' then
  redis.call('HSET', KEYS[2], 'state', 'done', 'finished_at', now)
  redis.call('SREM', KEYS[4], step)
  redis.call('SADD', KEYS[3], step)
else
  redis.call('HSET', KEYS[2], 'state', 'dead', 'finished_at', now)
  if optional then
    redis.call('SADD', KEYS[3], step)
  else
    redis.call('SADD', KEYS[4], step)
  end
end
local out = {''}
for k = 5, #KEYS do
  local nd = tonumber(ARGV[i]); i = i + 1
  local ready = true
  for j = 0, nd - 1 do
    if redis.call('SISMEMBER', KEYS[3], ARGV[i + j]) == 0 then ready = false end
  end
  i = i + nd
  local ds = redis.call('HGET', KEYS[k], 'state')
  if ready and wfstate ~= 'canceled' and (ds == 'pending' or ds == 'queued') then
    redis.call('HSET', KEYS[k], 'state', 'queued')
    out[#out + 1] = k - 4
  end
  redis.call('EXPIRE', KEYS[k], ttl)
end
if wfstate ~= 'canceled' then
  local total = tonumber(redis.call('HGET', KEYS[1], 'nsteps'))
  if redis.call('SCARD', KEYS[3]) >= total then
    wfstate = 'completed'
    if not redis.call('HGET', KEYS[1], 'finished_at') then
      redis.call('HSET', KEYS[1], 'finished_at', now)
    end
  elseif redis.call('SCARD', KEYS[4]) > 0 then
    wfstate = 'blocked'
  else
    wfstate = 'running'
  end
  redis.call('HSET', KEYS[1], 'state', wfstate)
end
for k = 1, 4 do redis.call('EXPIRE', KEYS[k], ttl) end
out[1] = wfstate
return out
`)

// cancelScript marks a workflow canceled unless it already ended, and each
// of its steps that has not settled.
// KEYS: wf, step keys... ARGV: now. Returns the state after the call, or ”
// if gone.
var cancelScript = redis.NewScript(`
local s = redis.call('HGET', KEYS[1], 'state')
if not s then return '' end
if s == 'completed' or s == 'failed' or s == 'canceled' then return s end
redis.call('HSET', KEYS[1], 'state', 'canceled', 'finished_at', ARGV[1])
for k = 2, #KEYS do
  local st = redis.call('HGET', KEYS[k], 'state')
  if st and st ~= 'done' and st ~= 'dead' then
    redis.call('HSET', KEYS[k], 'state', 'canceled')
  end
end
return 'canceled'
`)

// failScript ends a blocked workflow as failed (its dead step was
// discarded). KEYS: wf. ARGV: now. Returns the state after the call.
var failScript = redis.NewScript(`
local s = redis.call('HGET', KEYS[1], 'state')
if not s then return '' end
if s ~= 'blocked' then return s end
redis.call('HSET', KEYS[1], 'state', 'failed', 'finished_at', ARGV[1])
return 'failed'
`)
