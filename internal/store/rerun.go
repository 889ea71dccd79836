package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/record"
)

// ErrNotFinished is returned by Rerun for a workflow that is still
// running (or waiting), or that is blocked or failed while some of its
// steps are still queued, running or waiting: only one whose steps have
// all stopped is rerun.
var ErrNotFinished = errors.New("the workflow has not finished")

// rerunScript clears the steps a rerun runs again (every field of theirs
// and of their map instances, but their count of settled inputs, which it
// sets anew to the inputs that are not run again and are settled), recounts
// the workflow, marks queued the steps whose inputs are all settled (an
// input that runs again is not: its settle in the new run counts it, as
// in a first run), and starts the next generation.
// A blocked or failed workflow with a step still in flight (queued,
// running or waiting, or a map with a released instance that is queued,
// running or not begun yet) is refused: a step of the earlier run still
// in flight would settle into a run that no longer waits for it (its
// outcome is refused by generation) and strand the new run. A map whose
// instances all stopped (one dead-lettered: the map stays mapped) is not
// in flight. A rerun that leaves a dead step is blocked, not running.
// The workflow is open again: its records live the open TTL again.
// KEYS: wf. ARGV: per step run again: its id, its number of inputs, the
// number of those that are not run again, then their settled fields; last
// the open TTL (seconds).
// Returns {generation, index (1-based) of each step now queued...},
// {'gone'}, {'running', state} or {'inflight', state, step ids...}.
var rerunScript = redis.NewScript(luaEvents + luaHelpers + luaInstances + `
local K = KEYS[1]
local OTTL = table.remove(ARGV)
local h = redis.call('HMGET', K, 'state', 'steps', 'gen')
if not h[1] then return {'gone'} end
local s = h[1]
if s ~= 'completed' and s ~= 'failed' and s ~= 'blocked' and s ~= 'timed_out' and s ~= 'canceled' then return {'running', s} end
local steps = cjson.decode(h[2])
if s == 'blocked' or s == 'failed' then -- canceled and timed_out marked every open step canceled
  local q = {}
  for _, id in ipairs(steps) do q[#q + 1] = id .. '.state' end
  local v = hmget(K, q)
  local busy = {'inflight', s}
  for x, id in ipairs(steps) do
    if v[x] == 'queued' or v[x] == 'running' or v[x] == 'waiting' or v[x] == 'throttled' then
      busy[#busy + 1] = id
    elseif v[x] == 'mapped' then -- in flight while one of its released instances is
      local open = false
      eachInstance(K, id, function(_, st)
        open = not st or st == 'queued' or st == 'running' or st == 'throttled' -- no record yet: its task waits
        return open
      end)
      if open then busy[#busy + 1] = id end
    end
  end
  if #busy > 2 then return busy end
end
local again, order, deps = {}, {}, {}
local i = 1
while i <= #ARGV do
  local id, nd, no = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  again[id] = true
  order[#order + 1] = id
  local d = {}
  for x = i + 3, i + 2 + no do d[#d + 1] = ARGV[x] end
  deps[#deps + 1] = {nd, d}
  i = i + 3 + no
end
local drop = {}
for _, f in ipairs(redis.call('HKEYS', K)) do
  local p = string.match(f, '^([^%.%[]+)[%.%[]')
  if p and again[p] then drop[#drop + 1] = f end
end
for x = 1, #drop, 4000 do redis.call('HDEL', K, unpack(drop, x, math.min(x + 3999, #drop))) end
redis.call('HDEL', K, 'finished_at', 'error', 'deadline_at') -- a rerun has no deadline of its own
local q = {}
for _, id in ipairs(steps) do q[#q + 1] = id .. '.settled'; q[#q + 1] = id .. '.failed'; q[#q + 1] = id .. '.state' end
local v = hmget(K, q)
local nsettled, nfailed, nwaiting = 0, 0, 0
for x = 1, #v, 3 do
  if v[x] == '1' then nsettled = nsettled + 1 end
  if v[x + 1] == '1' then nfailed = nfailed + 1 end
  if v[x + 2] == 'waiting' then nwaiting = nwaiting + 1 end
  if v[x + 2] == 'mapped' then -- a map the rerun leaves: its dead instances still block the workflow
    eachInstance(K, steps[(x + 2) / 3], function(f, st)
      if st == 'dead' and redis.call('HGET', K, string.sub(f, 1, #f - 5) .. 'failed') == '1' then nfailed = nfailed + 1 end
    end)
  end
end
local gen = tonumber(h[3] or '0') + 1
local ns = 'running'
if nfailed > 0 then ns = 'blocked' end -- a dead step the rerun does not run again still blocks it
local w = {'state', ns, 'nsettled', nsettled, 'nfailed', nfailed, 'nwaiting', nwaiting, 'gen', gen}
local out = {gen}
ev('{"type":"workflow.rerun","gen":' .. gen .. ',"steps":' .. cjson.encode(order))
for n, id in ipairs(order) do
  local nd, d = deps[n][1], deps[n][2]
  local nin = 0
  if #d > 0 then
    local f = redis.call('HMGET', K, unpack(d))
    for x = 1, #d do if f[x] == '1' then nin = nin + 1 end end
  end
  w[#w + 1] = id .. '.nin'; w[#w + 1] = nin
  if nin >= nd then
    w[#w + 1] = id .. '.state'; w[#w + 1] = 'queued'
    out[#out + 1] = n
    ev('{"type":"step.ready","step":"' .. id .. '"')
  end
end
hset(K, w, 1)
flush()
local base = string.sub(K, 1, #K - 2)
redis.call('EXPIRE', K, OTTL)
redis.call('EXPIRE', EK, OTTL) -- a log kept as a stream (an older version's); none: nothing
redis.call('EXPIRE', base .. 'idem', OTTL)
return out
`)

// Rerun runs a finished (or blocked) workflow again from some of its
// steps: again lists them (a step and everything downstream of it), each
// with its inputs (its depends_on). Their records, checkpoints and map
// instances are cleared, and so are their durable sub-calls (maps: the
// items each map had), the workflow is running again in its next
// generation, and Rerun returns that generation and the steps of again
// that are ready now. ErrNotFinished for a workflow still running.
func (s *Store) Rerun(ctx context.Context, wf string, again []string, inputs map[string][]string, items map[string]int) (int, []string, error) {
	set := make(map[string]bool, len(again))
	for _, id := range again {
		set[id] = true
	}
	var args []any
	for _, id := range again {
		var outside []any
		for _, d := range inputs[id] {
			if !set[d] {
				outside = append(outside, d+".settled")
			}
		}
		args = append(append(args, id, len(inputs[id]), len(outside)), outside...)
	}
	keys, args := s.logged(wf, s.now(), []string{wfKey(wf)}, append(args, s.ttl()))
	var res []any
	err := s.acked(ctx, wfKey(wf), func(c redis.Cmdable) (err error) {
		res, err = rerunScript.Run(ctx, c, keys, args...).Slice()
		return err
	})
	err, unconfirmed := Unconfirmed(err)
	if err != nil {
		return 0, nil, fmt.Errorf("store: rerun %s: %w", wf, err)
	}
	switch str(res[0]) {
	case "gone":
		return 0, nil, fmt.Errorf("store: rerun %s: %w", wf, ErrNotFound)
	case "running":
		return 0, nil, fmt.Errorf("workflow %s is %s: %w", wf, str(res[1]), ErrNotFinished)
	case "inflight":
		ids := make([]string, 0, len(res)-2)
		for _, v := range res[2:] {
			ids = append(ids, str(v))
		}
		return 0, nil, fmt.Errorf("workflow %s is %s but still runs %s (rerun it once they stop, or cancel it first): %w",
			wf, str(res[1]), strings.Join(ids, ", "), ErrNotFinished)
	}
	gen, _ := strconv.Atoi(str(res[0]))
	var ready []string
	for _, v := range res[1:] {
		if i, ok := v.(int64); ok && i >= 1 && int(i) <= len(again) {
			ready = append(ready, again[i-1])
		}
	}
	keys = make([]string, 0, len(again))
	for _, id := range again {
		keys = append(keys, callsKey(wf, id))
		for n := range items[id] {
			keys = append(keys, callsKey(wf, record.InstanceID(id, n)))
		}
	}
	for i := 0; i < len(keys); i += 1000 {
		if err := s.rdb.Del(ctx, keys[i:min(i+1000, len(keys))]...).Err(); err != nil {
			return gen, ready, fmt.Errorf("store: rerun %s: clear durable calls: %w", wf, err)
		}
	}
	if unconfirmed != nil {
		return gen, ready, fmt.Errorf("store: rerun %s: %w", wf, unconfirmed)
	}
	return gen, ready, nil
}
