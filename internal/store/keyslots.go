package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/record"
)

// Concurrency keys. A step whose spec names a concurrency key ("tenant-a",
// limit 3) holds one of the key's slots while it runs. Every key's state
// lives under one hash tag, {cc}, so each script below touches one slot
// (Redis Cluster safe) and one sweep finds every lapsed lease:
//
//	{cc}:h:<key>  sorted set: the key's holders (SlotHolder.member), scored by lease end (ms)
//	{cc}:q:<key>  list: the key's waiters, oldest first (JSON: member, task id, queue)
//	{cc}:qm       hash: waiter member → key (a step waits once)
//	{cc}:g        hash: granted holder member → its grant (JSON: key, task id, queue): a slot handed to a waiter whose task has not begun
//	{cc}:lim      hash: key → its limit (the last acquirer's)
//	{cc}:leases   sorted set: "<key>\x00<member>" by lease end, every key's, for the sweep
//	{cc}:held     hash: holder member → key
//	{cc}:seq      counter: grants' task id suffixes
//	{cc}:inflight, {cc}:waiting  sorted sets: key → holders, waiters (the metrics' top keys)
//	{cc}:totals   hash: inflight, waiting over every key
//
// A step over its key's limit does not hold a worker slot: its task joins
// the key's waiters and ends. A holder that releases its slot hands it to
// the oldest waiter in the same script (a grant), and the caller enqueues
// the waiter's task (a new task id: its first task ended), which takes the
// grant over when it begins. Nothing polls: a waiter is moved only by a
// release or by the sweep of a lapsed lease. A holder renews its lease
// while it runs; the lease of a SIGKILLed worker's holder lapses and the
// sweep hands its slot on. A grant whose task never reached asynq is
// enqueued again by the sweep (its task id keeps it from running twice).

const ccTag = Prefix + "{cc}"

func ccKeys(key string) []string {
	return []string{ccTag + ":h:" + key, ccTag + ":q:" + key, ccTag + ":qm", ccTag + ":g", ccTag + ":lim", ccTag + ":leases",
		ccTag + ":held", ccTag + ":seq", ccTag + ":inflight", ccTag + ":waiting", ccTag + ":totals"}
}

// ccFixed are the keys every key's scripts share (ccKeys without the first two).
func ccFixed() []string { return ccKeys("")[2:] }

// SlotHolder is a step that holds, or waits for, a slot of a concurrency
// key: its workflow, step (or map instance) and run.
type SlotHolder struct {
	Workflow string
	Step     string
	Gen      int
}

func (h SlotHolder) member() string {
	return h.Workflow + "\x00" + h.Step + "\x00" + strconv.Itoa(h.Gen)
}

// Grant is a slot handed to a waiter: enqueue its step's task with TaskID
// on Queue (Payload: the step's), and it takes the slot over when it
// begins.
type Grant struct {
	Key    string `json:"k"`
	TaskID string `json:"id"`
	Queue  string `json:"q"`
	Holder string `json:"m"`
	// Payload is the step's task payload.
	Payload string `json:"p"`
}

// luaCC holds the helpers the key scripts share. KEYS[1] and KEYS[2] are
// one key's holders and waiters; KEYS[3..] are ccFixed's.
const luaCC = `
local QM, G, LIM, LEASES, HELD, SEQ, INFL, WAIT, TOT = KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11]
local function counts(key, hk, qk)
  local n, w = redis.call('ZCARD', hk), redis.call('LLEN', qk)
  local n0, w0 = tonumber(redis.call('ZSCORE', INFL, key) or '0'), tonumber(redis.call('ZSCORE', WAIT, key) or '0')
  if n ~= n0 then redis.call('HINCRBY', TOT, 'inflight', n - n0) end
  if w ~= w0 then redis.call('HINCRBY', TOT, 'waiting', w - w0) end
  if n > 0 then redis.call('ZADD', INFL, n, key) else redis.call('ZREM', INFL, key) end
  if w > 0 then redis.call('ZADD', WAIT, w, key) else redis.call('ZREM', WAIT, key) end
end
local function hold(key, hk, m, expiry)
  redis.call('ZADD', hk, expiry, m)
  redis.call('ZADD', LEASES, expiry, key .. '\0' .. m)
  redis.call('HSET', HELD, m, key)
end
-- drop m's slot of key, and hand free slots to the oldest waiters:
-- returns the grants (JSON), appended to out
local function release(key, hk, qk, m, now, glease, out)
  redis.call('ZREM', hk, m)
  redis.call('ZREM', LEASES, key .. '\0' .. m)
  redis.call('HDEL', HELD, m)
  redis.call('HDEL', G, m)
  local lim = tonumber(redis.call('HGET', LIM, key) or '1')
  while redis.call('ZCARD', hk) < lim do
    local e = redis.call('LPOP', qk)
    if not e then break end
    local w = cjson.decode(e)
    redis.call('HDEL', QM, w.m)
    local g = cjson.encode({k = key, id = w.id .. ':k' .. redis.call('INCR', SEQ), q = w.q, m = w.m, p = w.p})
    hold(key, hk, w.m, now + glease)
    redis.call('HSET', G, w.m, g)
    out[#out + 1] = g
  end
  counts(key, hk, qk)
  return out
end
`

// slotAcquireScript takes a slot of a key for a step, or makes it a waiter.
// KEYS: the key's holders and waiters, then ccFixed. ARGV: key, holder
// member, limit, now (ms), lease (ms), the waiter entry (JSON).
// Returns 'held' (it had the slot: a redelivery, or its grant), 'ok' or
// 'wait'.
var slotAcquireScript = redis.NewScript(luaCC + `
local key, m, lim, now, lease = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
redis.call('HSET', LIM, key, lim)
if redis.call('ZSCORE', KEYS[1], m) then
  hold(key, KEYS[1], m, now + lease)
  redis.call('HDEL', G, m)
  return 'held'
end
if redis.call('ZCARD', KEYS[1]) < lim then
  hold(key, KEYS[1], m, now + lease)
  counts(key, KEYS[1], KEYS[2])
  return 'ok'
end
if not redis.call('HGET', QM, m) then
  redis.call('RPUSH', KEYS[2], ARGV[6])
  redis.call('HSET', QM, m, key)
  counts(key, KEYS[1], KEYS[2])
end
return 'wait'
`)

// Acquire takes one of key's limit slots for h for lease, or, with every
// slot held, makes h one of the key's waiters (once: acquiring again
// changes nothing): the grant that hands it a slot names its task (id
// taskID and a suffix, on queue, with payload). It reports whether h holds
// a slot.
func (s *Store) Acquire(ctx context.Context, key string, limit int, h SlotHolder, lease time.Duration, taskID, queue, payload string) (bool, error) {
	entry, _ := json.Marshal(map[string]string{"m": h.member(), "id": taskID, "q": queue, "p": payload})
	res, err := slotAcquireScript.Run(ctx, s.rdb, ccKeys(key), key, h.member(), limit, s.now().UnixMilli(), lease.Milliseconds(), entry).Text()
	if err != nil {
		return false, fmt.Errorf("store: concurrency key %q: acquire: %w", key, err)
	}
	return res != "wait", nil
}

// slotReleaseScript drops a holder's slot (whatever key it holds: KEYS[1] and
// KEYS[2] are found from it) and grants free slots to waiters.
// KEYS: ccFixed's, after two placeholders. ARGV: member, now (ms), the
// grant lease (ms), the key prefix of holders and waiters. Returns the
// grants (JSON).
var slotReleaseScript = redis.NewScript(luaCC + `
local m, now, glease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local key = redis.call('HGET', HELD, m)
if not key then return {} end
return release(key, ARGV[4] .. 'h:' .. key, ARGV[4] .. 'q:' .. key, m, now, glease, {})
`)

// Release drops h's slot, if it holds one, and returns the grants it made
// (enqueue each: Grant).
func (s *Store) Release(ctx context.Context, h SlotHolder, grantLease time.Duration) ([]Grant, error) {
	res, err := slotReleaseScript.Run(ctx, s.rdb, append([]string{ccTag + ":h", ccTag + ":q"}, ccFixed()...),
		h.member(), s.now().UnixMilli(), grantLease.Milliseconds(), ccTag+":").StringSlice()
	if err != nil {
		return nil, fmt.Errorf("store: release a concurrency slot: %w", err)
	}
	return grants(res), nil
}

func grants(res []string) []Grant {
	out := make([]Grant, 0, len(res))
	for _, r := range res {
		var g Grant
		if json.Unmarshal([]byte(r), &g) == nil {
			out = append(out, g)
		}
	}
	return out
}

// slotRenewScript extends the leases of holders that still hold their slots.
// KEYS: ccFixed's, after two placeholders. ARGV: now+lease (ms), the key
// prefix, members. Returns how many were renewed.
var slotRenewScript = redis.NewScript(luaCC + `
local expiry, n = tonumber(ARGV[1]), 0
for x = 3, #ARGV do
  local m = ARGV[x]
  local key = redis.call('HGET', HELD, m)
  if key and redis.call('ZSCORE', ARGV[2] .. 'h:' .. key, m) then
    hold(key, ARGV[2] .. 'h:' .. key, m, expiry)
    n = n + 1
  end
end
return n
`)

// Renew extends the leases of the holders hs to lease from now.
func (s *Store) Renew(ctx context.Context, lease time.Duration, hs ...SlotHolder) error {
	if len(hs) == 0 {
		return nil
	}
	args := []any{s.now().Add(lease).UnixMilli(), ccTag + ":"}
	for _, h := range hs {
		args = append(args, h.member())
	}
	if err := slotRenewScript.Run(ctx, s.rdb, append([]string{ccTag + ":h", ccTag + ":q"}, ccFixed()...), args...).Err(); err != nil {
		return fmt.Errorf("store: renew concurrency slots: %w", err)
	}
	return nil
}

// slotSweepScript ends lapsed leases: a holder's slot is released (and handed
// on); a grant whose task has not begun is returned to be looked at. KEYS:
// ccFixed's, after two placeholders. ARGV: now (ms), the grant lease
// (ms), the key prefix, at most how many. Returns {grants made...}, then
// ”, then {lapsed grants...}.
var slotSweepScript = redis.NewScript(luaCC + `
local now, glease = tonumber(ARGV[1]), tonumber(ARGV[2])
local out, lapsed = {}, {}
for _, e in ipairs(redis.call('ZRANGEBYSCORE', LEASES, '-inf', now, 'LIMIT', 0, tonumber(ARGV[4]))) do
  local sep = string.find(e, '\0', 1, true)
  local key, m = string.sub(e, 1, sep - 1), string.sub(e, sep + 1)
  local g = redis.call('HGET', G, m)
  if g then
    lapsed[#lapsed + 1] = g
  else
    release(key, ARGV[3] .. 'h:' .. key, ARGV[3] .. 'q:' .. key, m, now, glease, out)
  end
end
out[#out + 1] = ''
for _, g in ipairs(lapsed) do out[#out + 1] = g end
return out
`)

// Sweep ends up to n lapsed leases: the slots of holders that stopped
// renewing (their worker died) are handed on (grants, to enqueue); the
// grants whose lease lapsed before their task began are returned as
// lapsed, for the caller to enqueue again (their task ids keep a task
// from running twice) and Regrant.
func (s *Store) Sweep(ctx context.Context, grantLease time.Duration, n int) (made, lapsed []Grant, err error) {
	res, err := slotSweepScript.Run(ctx, s.rdb, append([]string{ccTag + ":h", ccTag + ":q"}, ccFixed()...),
		s.now().UnixMilli(), grantLease.Milliseconds(), ccTag+":", n).StringSlice()
	if err != nil {
		return nil, nil, fmt.Errorf("store: sweep concurrency slots: %w", err)
	}
	for i, r := range res {
		if r == "" {
			return grants(res[:i]), grants(res[i+1:]), nil
		}
	}
	return grants(res), nil, nil
}

// Regrant extends a lapsed grant's lease (its task is in asynq, or was
// just enqueued again).
func (s *Store) Regrant(ctx context.Context, g Grant, lease time.Duration) error {
	expiry := s.now().Add(lease).UnixMilli()
	pipe := s.rdb.TxPipeline()
	pipe.ZAddXX(ctx, ccTag+":h:"+g.Key, redis.Z{Score: float64(expiry), Member: g.Holder})
	pipe.ZAddXX(ctx, ccTag+":leases", redis.Z{Score: float64(expiry), Member: g.Key + "\x00" + g.Holder})
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("store: regrant a concurrency slot: %w", err)
	}
	return nil
}

// ReleaseGrant drops a grant whose task ended without taking it (it is
// gone from asynq, or ended before it began the step), handing the slot on.
func (s *Store) ReleaseGrant(ctx context.Context, g Grant, grantLease time.Duration) ([]Grant, error) {
	res, err := slotReleaseScript.Run(ctx, s.rdb, append([]string{ccTag + ":h", ccTag + ":q"}, ccFixed()...),
		g.Holder, s.now().UnixMilli(), grantLease.Milliseconds(), ccTag+":").StringSlice()
	if err != nil {
		return nil, fmt.Errorf("store: release a concurrency grant: %w", err)
	}
	return grants(res), nil
}

// KeyLoad is one concurrency key's steps in flight and waiting.
type KeyLoad struct {
	Key      string
	InFlight int64
	Waiting  int64
}

// KeyLoads returns the top keys by steps in flight and by steps waiting
// (at most top each), and the totals over every key.
func (s *Store) KeyLoads(ctx context.Context, top int) (loads []KeyLoad, inflight, waiting int64, err error) {
	pipe := s.rdb.Pipeline()
	fi := pipe.ZRevRangeWithScores(ctx, ccTag+":inflight", 0, int64(top-1))
	wa := pipe.ZRevRangeWithScores(ctx, ccTag+":waiting", 0, int64(top-1))
	tot := pipe.HMGet(ctx, ccTag+":totals", "inflight", "waiting")
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, 0, 0, fmt.Errorf("store: concurrency key loads: %w", err)
	}
	byKey := map[string]*KeyLoad{}
	at := func(k string) *KeyLoad {
		if l := byKey[k]; l != nil {
			return l
		}
		byKey[k] = &KeyLoad{Key: k}
		return byKey[k]
	}
	for _, z := range fi.Val() {
		at(z.Member.(string)).InFlight = int64(z.Score)
	}
	for _, z := range wa.Val() {
		at(z.Member.(string)).Waiting = int64(z.Score)
	}
	inflight, _ = strconv.ParseInt(str(tot.Val()[0]), 10, 64)
	waiting, _ = strconv.ParseInt(str(tot.Val()[1]), 10, 64)
	for _, l := range byKey {
		loads = append(loads, *l)
	}
	return loads, inflight, waiting, nil
}

// throttleScript marks a step (or map instance) waiting for a slot of a
// concurrency key: "throttled", with what it waits for as its output,
// unless it settled, waits for something else, or its workflow ended.
// A step running under another task (its grant's, begun since) is left
// as it is.
// KEYS: wf. ARGV: the step's state, output and owner field names, the
// text, the task's id. Returns the workflow's state (” if gone).
var throttleScript = redis.NewScript(luaEvents + `
local v = redis.call('HMGET', KEYS[1], 'state', ARGV[1], ARGV[3])
local s = v[1]
if not s then return '' end
if s == 'canceled' or s == 'timed_out' or s == 'completed' or s == 'failed' then return s end
local st = v[2]
if st == 'done' or st == 'dead' or st == 'waiting' or st == 'mapped' or st == 'canceled' or st == 'throttled' then return s end
if st == 'running' and v[3] ~= ARGV[5] then return s end
redis.call('HSET', KEYS[1], ARGV[1], 'throttled', ARGV[2], ARGV[4])
flush()
return s
`)

// Throttle marks step of wf waiting for a slot of a concurrency key (text
// says which) and logs it, unless another task than task runs it; it
// returns the workflow's state.
func (s *Store) Throttle(ctx context.Context, wf, step, task, text string) (string, error) {
	f := s.fields.of(step)
	keys, args := s.logged(wf, s.now(), []string{wfKey(wf)}, []any{f.name(fState), f.name(fOutput), f.name(fOwner), Excerpt(text), task},
		Event{Type: record.EventThrottled, Step: step, Reason: text})
	st, err := throttleScript.Run(ctx, s.rdb, keys, args...).Text()
	if err != nil {
		return "", fmt.Errorf("store: throttle %s/%s: %w", wf, step, err)
	}
	return st, nil
}
