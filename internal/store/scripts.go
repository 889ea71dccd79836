package store

import "github.com/redis/go-redis/v9"

// A workflow is one Redis hash (wfKey): its own fields (id, name, state,
// created_at, finished_at, spec, steps, nsteps, nsettled, nfailed) and each
// step's fields named "<step>.<field>" (state, attempts, owner,
// lease_until, started_at, finished_at, output, tool_calls, degraded,
// error, target, prompt_tokens, completion_tokens, input_hash, nin, and the
// membership flags settled and failed). Step ids cannot contain ".", so
// the names cannot collide. One key per workflow means one TTL to refresh
// and scripts that read and write everything they need in one HMGET and
// one HSET. A step that has no fields yet is pending.
//
// The fan-in is decided by counters that flags guard: a step is settled
// when its "settled" flag is 1, and only the flag's flip adds one to each
// dependent's "nin" (and to nsettled), so redeliveries cannot skew them
// and a settle costs the same whatever the fan-in's width. A map step's
// instances ("<map>[<n>]", maps.go) count toward their map the same way.

// luaHelpers are shared by the scripts: HMGET and HSET over field lists of
// any length (Lua's unpack has a limit of a few thousand values).
const luaHelpers = `
local function hmget(k, f)
  if #f <= 4000 then return redis.call('HMGET', k, unpack(f)) end
  local out = {}
  for i = 1, #f, 4000 do
    local r = redis.call('HMGET', k, unpack(f, i, math.min(i + 3999, #f)))
    for j = 1, #r do out[#out + 1] = r[j] end
  end
  return out
end
local function hset(k, f, from)
  for i = from, #f, 4000 do redis.call('HSET', k, unpack(f, i, math.min(i + 3999, #f))) end
end
`

// luaInstances pages through a map step's released instances' states
// (1,000 fields an HMGET), calling fn(field, state) for each until it
// returns true; a state is false when the instance has no record yet.
// Only the end and rerun scripts include it (not the hot paths).
const luaInstances = `
local function eachInstance(k, id, fn)
  local next = tonumber(redis.call('HGET', k, id .. '.next') or '0')
  for from = 0, next - 1, 1000 do
    local f = {}
    for n = from, math.min(from + 999, next - 1) do f[#f + 1] = id .. '[' .. n .. '].state' end
    local st = redis.call('HMGET', k, unpack(f))
    for x = 1, #f do
      if fn(f[x], st[x]) then return end
    end
  end
end
`

// createScript writes a workflow record, or nothing if the id is taken,
// and, when given its index keys, adds the workflow to the workflow
// index and the open index (scored by its creation time) and enqueues its
// root tasks (Task).
// KEYS: wf, then the workflow index and the open index and per root task
// its task key and pending key, or nothing more. ARGV: ttl, n, n
// field/value arguments (the first pair the record's id), then the index
// entries' score (”: no index keys, nothing more follows), per root task
// its id and message, and now in nanoseconds. Returns 1, or 0 if taken.
// Its log is made here, in the record.
var createScript = redis.NewScript(luaEvents + luaEnqueue + `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local n = tonumber(ARGV[2])
redis.call('HSET', KEYS[1], unpack(ARGV, 3, 2 + n))
redis.call('EXPIRE', KEYS[1], ARGV[1])
local a = 3 + n
if ARGV[a] ~= '' then
  redis.call('ZADD', KEYS[2], ARGV[a], ARGV[4])
  redis.call('ZADD', KEYS[3], ARGV[a], ARGV[4])
  local nowns = ARGV[#ARGV]
  for i = 4, #KEYS, 2 do
    enqueue(KEYS[i], KEYS[i + 1], ARGV[a + 1], ARGV[a + 2], nowns)
    a = a + 2
  end
end
flush(true)
return 1
`)

// Field names are built by the caller (Go), not by the scripts, on every
// path a step takes each time: Lua string concatenation costs Redis about
// as much as a field write.

// settleScript records a step's final outcome, idempotently, and returns
// the dependents that are now ready (none once the workflow is canceled,
// timed out or failed: those states are final, a settle leaves them).
// A step that is done, or dead but optional, is settled; a dead step that
// is not optional blocks the workflow. A step done or canceled, or dead
// and settled dead again, is finished: its fields are left as they are
// (its finishing time, output, usage and target are the first outcome's)
// and no second outcome is logged; what the outcome's attempt did (its
// paid calls) is logged unless this very batch of it was.
// Outcome "dead_if_open" settles the step dead only if it is not settled
// (or canceled) yet: the safety net for attempts asynq gave up on; it also
// marks the step's current attempt abandoned. An outcome of attempt n > 0
// is refused ({'stale', current}) once the step has begun a later attempt,
// or when attempt n was abandoned: a goroutine asynq left running past its
// deadline cannot overwrite the record of the attempt that replaced it,
// nor revive a step the safety net ended.
//
// The fan-in costs O(1) per settle whatever the width: the step's
// "settled" flag flips once, and only that flip adds one to each
// dependent's "nin" counter; a dependent is ready when its counter reaches
// its number of inputs. A settle delivered again flips nothing and counts
// nothing, and returns the same ready dependents while they have not
// started, so the caller can always enqueue them (deterministic task ids).
//
// A map instance ("<map>[<n>]") counts toward its map instead: its flip
// adds one to the map's "ndone"; the flip that makes ndone reach "nitems"
// settles the map step itself, and it is the map's dependents that count
// it. The instance's first outcome also releases the map's next instance
// (max_parallel's window): the index is kept in the instance's "released"
// field, so a settle delivered again releases the same one.
//
// KEYS: wf. ARGV: outcome (done|dead|dead_if_open), optional (0|1), now,
// the TTLs (Store.ttls), the step's state, settled, failed, finished_at, attempts and
// abandoned field names, attempt (0: not checked), nfields, field/value
// pairs..., then '0', or '1' and the map's state, settled, finished_at,
// nitems, ndone, next, nmissing and the instance's released field names,
// the map's prompt_tokens field and the outcome's prompt tokens, its
// completion_tokens field and the outcome's, its cost_micros field and the
// outcome's (the map's count its instances'), and the released instance's
// task: the index in KEYS of its pending key (0: the caller enqueues it),
// asynq's task key prefix, the id's and the payload's text before and
// after the index, the message's ends (Task.messageEnds) and the
// generation it was built for (enqueued here only at that generation);
// then now in nanoseconds and the generation (run) the outcome belongs to
// (-1: any; an outcome of another run is refused with {'gen', current}),
// the step's logged field and the token of the batch of events the
// outcome carries (empty: none; see Store.LogOnce), the key of the step's
// durable calls (empty: a step that makes none), then per dependent:
// its state field, its nin field, its number of inputs, and the index in
// KEYS of its task's key (0: the caller enqueues it; else the task's
// pending key follows it), the task's id and its message (Task): a
// dependent made ready is enqueued here if the workflow is at that
// generation (its index is returned negated).
// Returns: {workflow state, released index (-1: none), the workflow's
// generation (reruns, see Rerun), 1 if the released instance was enqueued
// here else 0, the workflow's parent link once it ended (its "parent"
// field, empty for none; nil while it is open), ready dependent index
// (1-based)...}, {'gone'}, {'layout'} (a record of an older layout),
// {'stale', current attempt}, {'gen', current generation}, {'settled',
// workflow state} (dead_if_open on a settled step) or {'unexpanded'} (an
// instance of a map whose expansion the record does not hold).
var settleScript = redis.NewScript(luaEvents + luaHelpers + luaEnqueue + luaEnded + `
local K, outcome, optional, now = KEYS[1], ARGV[1], ARGV[2] == '1', ARGV[3]
local OTTL, RTTL = string.match(ARGV[4], '(%d+) (%d+)')
local fstate, fsettled, ffailed = ARGV[5], ARGV[6], ARGV[7]
local attempt = tonumber(ARGV[11])
local nf = tonumber(ARGV[12])
local j = 13 + 2 * nf
local inst = ARGV[j] == '1'
local q = {'state', 'nsteps', 'nsettled', 'nfailed', 'fanin', fstate, fsettled, ffailed, ARGV[9], ARGV[10]}
local mf, ma, rel
if inst then
  mf, ma = j, #q + 1
  for x = j + 1, j + 8 do q[#q + 1] = ARGV[x] end
  q[#q + 1] = ARGV[j + 9]; q[#q + 1] = ARGV[j + 11]; q[#q + 1] = ARGV[j + 13]
  if tonumber(ARGV[j + 15]) > 0 then rel = j + 15 end -- the released instance's task, enqueued here
  j = j + 24
else
  j = j + 1
end
local nowns, tgen, lf, lid, ck = ARGV[j], ARGV[j + 1], ARGV[j + 2], ARGV[j + 3], ARGV[j + 4]
j = j + 5
local deps = {}
while j + 5 <= #ARGV do
  deps[#deps + 1] = {j, tonumber(ARGV[j + 2]), #q + 1, tonumber(ARGV[j + 3])}
  q[#q + 1] = ARGV[j]; q[#q + 1] = ARGV[j + 1]
  j = j + 6
end
q[#q + 1] = 'nwaiting'
q[#q + 1] = 'deadline_at'
q[#q + 1] = 'gen'
q[#q + 1] = 'nokey'
q[#q + 1] = '` + logHead + `'
local iw, idl, ig, ik, ih = #q - 4, #q - 3, #q - 2, #q - 1, #q
local il
if lid ~= '' then q[#q + 1] = lf; il = #q end
local v = hmget(K, q)
local wfstate = v[1]
if not wfstate then return {'gone'} end
if not v[3] or not v[5] then return {'layout'} end
local late = v[idl] and tonumber(v[idl]) <= tonumber(now)
local over = wfstate == 'canceled' or wfstate == 'timed_out' or wfstate == 'failed' -- ended: nothing more starts
local current = tonumber(v[9] or '0')
if tgen ~= '-1' and tgen ~= (v[ig] or '0') then return {'gen', v[ig] or '0'} end -- an earlier run's late outcome
if attempt > 0 and (attempt < current or v[10] == ARGV[11]) then return {'stale', current} end
-- an instance counts toward its map's expansion: with none here (a
-- failover promoted a replica the expansion had not reached), counting it
-- would settle the map on the instances that happened to report
if inst and not v[ma + 3] then return {'unexpanded'} end
local prev = v[6]
local nwaiting = tonumber(v[iw] or '0')
local abandon = false
if outcome == 'dead_if_open' then
  if wfstate == 'canceled' or prev == 'done' or prev == 'dead' or prev == 'canceled' or prev == 'mapped' then return {'settled', wfstate} end
  outcome, abandon = 'dead', true
elseif outcome == 'decided' then -- a decision or a signal on a waiting step, once, before the deadline
  if prev ~= 'waiting' or over or late then return {'settled', wfstate} end
  outcome = 'done'
end
-- a step done or canceled, or dead and settled dead again, is finished:
-- a settle delivered again (its first reply lost, its task redelivered, a
-- hand-off's run, the reconciler) writes none of its fields and logs no
-- second outcome, and returns what the first returned
local finished = prev == 'done' or prev == 'canceled' or (prev == 'dead' and outcome == 'dead')
-- what the attempt did (Go's events but the last, the outcome's own) is
-- logged once: the step's logged field keeps the token of the last batch
-- logged with it (or by Store.LogOnce), so the same batch settled again
-- is not logged again, while a later run's (the provider paid again) is,
-- even when the step is finished
local dup = lid ~= '' and v[il] == lid
if finished or dup then
  local pass, own = string.match(EV, '^(.*)\n([^\n]*)$')
  if not pass then pass, own = '', EV end
  if dup then pass, ES = '', '' end
  if finished then own = '' end
  if pass ~= '' and own ~= '' then EV = pass .. '\n' .. own else EV = pass .. own end
end
local w = {}
if lid ~= '' and not dup then w[1] = lf; w[2] = lid end
if not finished then
  w[#w + 1] = fstate; w[#w + 1] = outcome; w[#w + 1] = ARGV[8]; w[#w + 1] = now
  if abandon then w[#w + 1] = ARGV[10]; w[#w + 1] = current end
  for x = 13, 12 + 2 * nf do w[#w + 1] = ARGV[x] end
end
if prev == 'waiting' and outcome ~= 'waiting' then
  nwaiting = nwaiting - 1
  w[#w + 1] = 'nwaiting'; w[#w + 1] = nwaiting
end
local nsettled, nfailed = tonumber(v[3]), tonumber(v[4] or '0')
local nsettled0, nfailed0 = nsettled, nfailed
local refresh = false
local settled, flipped = v[7] == '1', false
if finished then
  -- its flags stay as they are
elseif outcome == 'done' or optional then
  if v[8] == '1' then
    nfailed = nfailed - 1
    w[#w + 1] = ffailed; w[#w + 1] = '0'
  end
  if not settled then
    settled, flipped = true, true
    w[#w + 1] = fsettled; w[#w + 1] = '1'
  end
elseif v[8] ~= '1' then
  nfailed = nfailed + 1
  w[#w + 1] = ffailed; w[#w + 1] = '1'
end
local released = '-1'
-- up: the step the dependents wait for (this one, or an instance's map)
local up, upflip = settled, flipped
if inst then
  local nitems, ndone, nmissing = tonumber(v[ma + 3] or '0'), tonumber(v[ma + 4] or '0'), tonumber(v[ma + 6] or '0')
  if flipped then
    ndone = ndone + 1
    w[#w + 1] = ARGV[mf + 5]; w[#w + 1] = ndone
    if outcome == 'done' then -- the map's tokens are its instances'
      w[#w + 1] = ARGV[mf + 9]; w[#w + 1] = tonumber(v[ma + 8] or '0') + tonumber(ARGV[mf + 10])
      w[#w + 1] = ARGV[mf + 11]; w[#w + 1] = tonumber(v[ma + 9] or '0') + tonumber(ARGV[mf + 12])
      w[#w + 1] = ARGV[mf + 13]; w[#w + 1] = tonumber(v[ma + 10] or '0') + tonumber(ARGV[mf + 14])
    end
  end
  if flipped and outcome == 'dead' then nmissing = nmissing + 1 end
  if outcome == 'done' and prev == 'dead' and v[7] == '1' then nmissing = nmissing - 1 end
  if nmissing ~= tonumber(v[ma + 6] or '0') then w[#w + 1] = ARGV[mf + 7]; w[#w + 1] = nmissing end
  released = v[ma + 7]
  if not released and (over or late) then
    released = '-1' -- nothing more starts; not recorded, so nothing is lost
  elseif not released then
    local nx = tonumber(v[ma + 5] or '0')
    released = '-1'
    if nx < nitems then
      released = tostring(nx)
      w[#w + 1] = ARGV[mf + 6]; w[#w + 1] = nx + 1
    end
    w[#w + 1] = ARGV[mf + 8]; w[#w + 1] = released
  end
  up, upflip = v[ma + 1] == '1', false
  if flipped and ndone >= nitems and not up then
    up, upflip = true, true
    nsettled = nsettled + 1
    w[#w + 1] = ARGV[mf + 1]; w[#w + 1] = 'done'
    w[#w + 1] = ARGV[mf + 2]; w[#w + 1] = '1'
    w[#w + 1] = ARGV[mf + 3]; w[#w + 1] = now
    ev('{"type":"step.done","step":"' .. string.sub(ARGV[mf + 1], 1, -7) .. '"')
  end
elseif flipped then
  nsettled = nsettled + 1
end
local renq = 0
if rel and released ~= '-1' and ARGV[rel + 8] == (v[ig] or '0') then
  local id, pl = ARGV[rel + 2] .. released .. ARGV[rel + 3], ARGV[rel + 4] .. released .. ARGV[rel + 5]
  enqueue(ARGV[rel + 1] .. id, KEYS[tonumber(ARGV[rel])], id, message(ARGV[rel + 6], pl, id, ARGV[rel + 7]), nowns)
  renq = 1
end
local out = {'', released, v[ig] or '0', renq, false}
for n, e in ipairs(deps) do
  local from, nd, at = e[1], e[2], e[3]
  local nin = tonumber(v[at + 1] or '0')
  if upflip then
    nin = nin + 1
    w[#w + 1] = ARGV[from + 1]; w[#w + 1] = nin
  end
  local ds = v[at]
  if up and nin >= nd and not over and not late and (not ds or ds == 'pending' or ds == 'queued') then
    if ds ~= 'queued' then
      w[#w + 1] = ARGV[from]; w[#w + 1] = 'queued'
      ev('{"type":"step.ready","step":"' .. string.sub(ARGV[from], 1, -7) .. '"')
    end
    if e[4] > 0 and tgen == (v[ig] or '0') then
      enqueue(KEYS[e[4]], KEYS[e[4] + 1], ARGV[from + 4], ARGV[from + 5], nowns)
      out[#out + 1] = -n
    else
      out[#out + 1] = n
    end
  end
end
if not over then
  local ns = 'running'
  if nsettled >= tonumber(v[2]) then
    ns = 'completed'
    if wfstate ~= 'completed' then
      w[#w + 1] = 'finished_at'; w[#w + 1] = now
      ev('{"type":"workflow.ended","state":"completed"')
    end
  elseif nfailed > 0 then
    ns = 'blocked'
  elseif nwaiting > 0 then
    ns = 'waiting'
  end
  if ns ~= wfstate then
    w[#w + 1] = 'state'; w[#w + 1] = ns
    refresh = true
  end
  wfstate = ns
end
if nsettled ~= nsettled0 then w[#w + 1] = 'nsettled'; w[#w + 1] = nsettled end
if nfailed ~= nfailed0 then w[#w + 1] = 'nfailed'; w[#w + 1] = nfailed end
LH = v[ih] or false
flush(false, w) -- the log's entry rides in the record's HSET
hset(K, w, 1)
-- the step's durable calls (a step that may make some) are history once
-- it settles: kept the retention
if ck ~= '' then redis.call('EXPIRE', ck, RTTL) end
-- an open workflow's record lives the open TTL after its last activity:
-- refreshed when its state changes and whenever less than three quarters
-- of it is left, not at every settle; an ended one's, the retention from
-- its end
if refresh and wfstate == 'completed' then
  ended(ARGV[4], v[ik] == '1') -- the retention counts from the end
elseif refresh or redis.call('PTTL', K) < tonumber(OTTL) * 750 then
  redis.call('EXPIRE', K, OTTL)
  if not LH then redis.call('EXPIRE', EK, OTTL) end -- a log kept as a stream (an older version's) lives as long
end
out[1] = wfstate
-- an ended workflow's parent step (a child's), for the caller to tell
if wfstate == 'completed' or wfstate == 'failed' or wfstate == 'canceled' or wfstate == 'timed_out' then
  out[5] = redis.call('HGET', K, 'parent') or ''
end
return out
`)

// endScript ends a workflow as canceled or timed_out unless it already
// ended (or, for timed_out, its deadline has not passed), and marks each
// of its unsettled steps canceled, and so each released instance of a map
// that is not done or dead (the rest have no record); for timed_out it
// records which steps were left unfinished in the workflow's error.
// An ended workflow's records live the retention from then on (luaEnded).
// KEYS: wf. ARGV: now, the state to end in, the reason, the TTLs
// (Store.ttls), '1' to time out whatever the deadline (limits.max_open_age)
// else '0', then per step its id and its state field. Returns {the state
// after the call, 1 if this call ended the workflow else 0}, or {} if it
// is gone.
var endScript = redis.NewScript(luaEvents + luaHelpers + luaInstances + luaEnded + `
local q = {'state', 'deadline_at'}
for i = 7, #ARGV, 2 do q[#q + 1] = ARGV[i] end
local v = hmget(KEYS[1], q)
local s = v[1]
if not s then return {} end
if s == 'completed' or s == 'failed' or s == 'canceled' or s == 'timed_out' then return {s, 0} end
if ARGV[2] == 'timed_out' and ARGV[5] ~= '1' and (not v[2] or tonumber(v[2]) > tonumber(ARGV[1])) then return {s, 0} end
local w = {'state', ARGV[2], 'finished_at', ARGV[1]}
local open = {}
for i = 3, #v do
  if v[i] ~= 'done' and v[i] ~= 'dead' then
    local id = ARGV[2 * i]
    w[#w + 1] = ARGV[2 * i + 1]; w[#w + 1] = 'canceled'
    open[#open + 1] = id
    ev('{"type":"step.canceled","step":"' .. id .. '"')
    if v[i] == 'mapped' then -- its released instances that began and did not finish
      eachInstance(KEYS[1], id, function(f, st)
        if st and st ~= 'done' and st ~= 'dead' then w[#w + 1] = f; w[#w + 1] = 'canceled' end
      end)
    end
  end
end
if ARGV[3] ~= '' then
  local why = ARGV[3]
  if #open > 0 then why = why .. '; unfinished: ' .. table.concat(open, ', ') end
  w[#w + 1] = 'error'; w[#w + 1] = why
  ev('{"type":"workflow.ended","state":"' .. ARGV[2] .. '","reason":' .. cjson.encode(why))
else
  ev('{"type":"workflow.ended","state":"' .. ARGV[2] .. '"')
end
hset(KEYS[1], w, 1)
flush()
ended(ARGV[4])
return {ARGV[2], 1}
`)

// failScript ends a blocked workflow as failed (its dead step was
// discarded); its records live the retention from then on. KEYS: wf.
// ARGV: now, the TTLs (Store.ttls). Returns the state after the call.
var failScript = redis.NewScript(luaEvents + luaEnded + `
local s = redis.call('HGET', KEYS[1], 'state')
if not s then return '' end
if s ~= 'blocked' then return s end
redis.call('HSET', KEYS[1], 'state', 'failed', 'finished_at', ARGV[1])
flush()
ended(ARGV[2])
return 'failed'
`)
