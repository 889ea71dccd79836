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
//	{cc}:leases   sorted set: "<key>\x00<holder>" by lease end (ms): every slot held, of every key
//	{cc}:inflight sorted set: key → its slots held (the limit's count, and the metrics' top keys)
//	{cc}:q:<key>  list: the key's waiters, oldest first (JSON: holder, task id, queue, payload)
//	{cc}:qm       hash: waiting holder → key (a step waits once)
//	{cc}:waiting  sorted set: key → its waiters
//	{cc}:g        hash: granted holder → its grant (JSON): a slot handed to a waiter whose task has not begun
//	{cc}:lim      hash: key → its limit (the last waiter's: a sweep's grants read it)
//	{cc}:seq      counter: grants' task id suffixes
//
// A step over its key's limit does not hold a worker slot: its task joins
// the key's waiters and ends. A holder that releases its slot hands it to
// the oldest waiter in the same script (a grant), and the caller enqueues
// the waiter's task (a new task id: its first task ended), which takes the
// grant over when it begins (the releasing worker slot takes it from its
// queue and runs it at once: engine/keyslotwake.go). Nothing polls: a waiter is moved only by a
// release or by the sweep of a lapsed lease. A holder renews its lease
// while it runs; the lease of a SIGKILLed worker's holder lapses and the
// sweep hands its slot on. A grant whose task never reached asynq is
// enqueued again by the sweep (its task id keeps it from running twice).
// A step with a key costs two scripts of about four commands each.

const ccTag = Prefix + "{cc}"

// ccKeys are the keys of key's scripts: its waiters, then the shared ones.
func ccKeys(key string) []string {
	return []string{ccTag + ":q:" + key, ccTag + ":qm", ccTag + ":g", ccTag + ":lim", ccTag + ":leases",
		ccTag + ":seq", ccTag + ":inflight", ccTag + ":waiting"}
}

// SlotHolder is a step that holds, or waits for, a slot of concurrency key
// Key: its workflow, step (or map instance) and run.
type SlotHolder struct {
	Key      string
	Workflow string
	Step     string
	Gen      int
}

func (h SlotHolder) member() string {
	return h.Workflow + "\x00" + h.Step + "\x00" + strconv.Itoa(h.Gen)
}

func (h SlotHolder) lease() string { return h.Key + "\x00" + h.member() }

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
	raw     string // as the store holds it: a lapsed grant is acted on only if it is still this one
}

// luaCC holds the helpers the key scripts share; KEYS are ccKeys'.
const luaCC = `
local QM, G, LIM, LEASES, SEQ, INFL, WAIT = KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local function count(z, key, d)
  local n = tonumber(redis.call('ZINCRBY', z, d, key))
  if n <= 0 then redis.call('ZREM', z, key) end
  return n
end
-- drop m's slot of key (if it holds one), and hand free slots to the
-- oldest waiters (lim: the key's limit; nil: the stored one): the grants
-- (JSON) are appended to out. A holder that took its grant over dropped
-- the grant then; a lapsed grant's caller drops it.
local function release(key, qk, m, now, glease, lim, out)
  if redis.call('ZREM', LEASES, key .. '\0' .. m) == 0 then return out end
  local n = count(INFL, key, -1)
  lim = lim or tonumber(redis.call('HGET', LIM, key) or '1')
  local granted = 0
  while n < lim and granted < 100 do -- a limit raised a lot: the next releases grant the rest
    granted = granted + 1
    local e = redis.call('LPOP', qk)
    if not e then break end
    local w = cjson.decode(e)
    redis.call('HDEL', QM, w.m)
    count(WAIT, key, -1)
    local g = cjson.encode({k = key, id = w.id .. ':k' .. redis.call('INCR', SEQ), q = w.q, m = w.m, p = w.p})
    redis.call('ZADD', LEASES, now + glease, key .. '\0' .. w.m)
    redis.call('HSET', G, w.m, g)
    n = count(INFL, key, 1)
    out[#out + 1] = g
  end
  return out
end
`

// slotAcquireScript takes a slot of a key for a step, or makes it a
// waiter. KEYS: ccKeys. ARGV: key, holder member, limit, now (ms), lease
// (ms), the waiter entry (JSON). Returns 'held' (it had the slot: a
// redelivery, or its grant), 'ok' or 'wait'.
var slotAcquireScript = redis.NewScript(luaCC + `
local key, m, lim, now, lease = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local km = key .. '\0' .. m
if redis.call('ZSCORE', LEASES, km) then
  redis.call('ZADD', LEASES, now + lease, km)
  redis.call('HDEL', G, m)
  return 'held'
end
if tonumber(redis.call('ZSCORE', INFL, key) or '0') < lim then
  redis.call('ZADD', LEASES, now + lease, km)
  count(INFL, key, 1)
  return 'ok'
end
redis.call('HSET', LIM, key, lim)
if redis.call('HSETNX', QM, m, key) == 1 then
  redis.call('RPUSH', KEYS[1], ARGV[6])
  count(WAIT, key, 1)
end
return 'wait'
`)

// Acquire takes one of h.Key's limit slots for h for lease, or, with
// every slot held, makes h one of the key's waiters (once: acquiring again
// changes nothing): the grant that hands it a slot names its task (id
// taskID and a suffix, on queue, with payload). It reports whether h
// holds a slot. Under redis.durability the slot or the place in line is
// confirmed (a waiter a promotion lost would wait for ever): not
// confirmed, it reports ErrNotConfirmed beside what it wrote, and
// acquiring again confirms it.
func (s *Store) Acquire(ctx context.Context, h SlotHolder, limit int, lease time.Duration, taskID, queue, payload string) (bool, error) {
	entry, _ := json.Marshal(map[string]string{"m": h.member(), "id": taskID, "q": queue, "p": payload})
	var res string
	err := s.acked(ctx, ccTag, func(c redis.Cmdable) (err error) {
		res, err = slotAcquireScript.Run(ctx, c, ccKeys(h.Key), h.Key, h.member(), limit, s.now().UnixMilli(), lease.Milliseconds(), entry).Text()
		return err
	})
	if err != nil {
		err = fmt.Errorf("store: concurrency key %q: acquire: %w", h.Key, err)
	}
	return res != "" && res != "wait", err
}

// slotReleaseScript drops a holder's slot and grants free slots to
// waiters. KEYS: ccKeys. ARGV: key, member, now (ms), the grant lease
// (ms), the limit (0: the stored one). Returns the grants (JSON).
var slotReleaseScript = redis.NewScript(luaCC + `
local lim = tonumber(ARGV[5])
if lim == 0 then lim = nil end
return release(ARGV[1], KEYS[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), lim, {})
`)

// Release drops h's slot, if it holds one, hands free slots of its key
// (limit; 0: the stored one) to its waiters and returns the grants it
// made (enqueue each: Grant).
func (s *Store) Release(ctx context.Context, h SlotHolder, limit int, grantLease time.Duration) ([]Grant, error) {
	return s.release(ctx, h.Key, h.member(), limit, grantLease)
}

func (s *Store) release(ctx context.Context, key, member string, limit int, grantLease time.Duration) ([]Grant, error) {
	res, err := slotReleaseScript.Run(ctx, s.rdb, ccKeys(key), key, member, s.now().UnixMilli(), grantLease.Milliseconds(), limit).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("store: concurrency key %q: release: %w", key, err)
	}
	return grants(res), nil
}

func grants(res []string) []Grant {
	out := make([]Grant, 0, len(res))
	for _, r := range res {
		var g Grant
		if json.Unmarshal([]byte(r), &g) == nil {
			g.raw = r
			out = append(out, g)
		}
	}
	return out
}

// Renew extends the leases of the holders hs that still hold their slots
// to lease from now: one command.
func (s *Store) Renew(ctx context.Context, lease time.Duration, hs ...SlotHolder) error {
	if len(hs) == 0 {
		return nil
	}
	at := float64(s.now().Add(lease).UnixMilli())
	zs := make([]redis.Z, len(hs))
	for i, h := range hs {
		zs[i] = redis.Z{Score: at, Member: h.lease()}
	}
	if err := s.rdb.ZAddXX(ctx, ccTag+":leases", zs...).Err(); err != nil {
		return fmt.Errorf("store: renew concurrency slots: %w", err)
	}
	return nil
}

// slotSweepScript ends lapsed leases: a holder's slot is released (and
// handed on); a grant whose task has not begun is returned to be looked
// at. KEYS: ccKeys (of no key). ARGV: now (ms), the grant lease (ms), the
// waiters' key prefix, at most how many. Returns {grants made...}, then
// an empty string, then {lapsed grants...}.
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
    release(key, ARGV[3] .. key, m, now, glease, nil, out)
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
// from running twice) and Regrant, or release.
func (s *Store) Sweep(ctx context.Context, grantLease time.Duration, n int) (made, lapsed []Grant, err error) {
	res, err := slotSweepScript.Run(ctx, s.rdb, ccKeys(""), s.now().UnixMilli(), grantLease.Milliseconds(), ccTag+":q:", n).StringSlice()
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

// lapsedScript acts on a lapsed grant only if it is still that grant
// (its task may have taken the slot over since the sweep read it): extends
// its lease, or releases it. KEYS: ccKeys. ARGV: key, member, the grant
// (JSON), regrant or release, now (ms), the lease (ms). Returns the grants
// a release made.
var lapsedScript = redis.NewScript(luaCC + `
if redis.call('HGET', G, ARGV[2]) ~= ARGV[3] then return {} end
local now, lease = tonumber(ARGV[5]), tonumber(ARGV[6])
if ARGV[4] == 'regrant' then
  redis.call('ZADD', LEASES, 'XX', now + lease, ARGV[1] .. '\0' .. ARGV[2])
  return {}
end
redis.call('HDEL', G, ARGV[2])
return release(ARGV[1], KEYS[1], ARGV[2], now, lease, nil, {})
`)

// Regrant extends a lapsed grant's lease (its task is in asynq, or was
// just enqueued again), if it is still that grant.
func (s *Store) Regrant(ctx context.Context, g Grant, lease time.Duration) error {
	_, err := s.lapsed(ctx, g, "regrant", lease)
	return err
}

// ReleaseGrant drops a grant whose task ended without taking it (it is
// gone from asynq, or ended before it began the step), if it is still that
// grant, handing the slot on.
func (s *Store) ReleaseGrant(ctx context.Context, g Grant, grantLease time.Duration) ([]Grant, error) {
	return s.lapsed(ctx, g, "release", grantLease)
}

func (s *Store) lapsed(ctx context.Context, g Grant, what string, lease time.Duration) ([]Grant, error) {
	res, err := lapsedScript.Run(ctx, s.rdb, ccKeys(g.Key), g.Key, g.Holder, g.raw, what, s.now().UnixMilli(), lease.Milliseconds()).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("store: concurrency key %q: %s a grant: %w", g.Key, what, err)
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
	tin := pipe.ZCard(ctx, ccTag+":leases") // every slot held is a lease
	twa := pipe.HLen(ctx, ccTag+":qm")      // every waiter is in qm once
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
	inflight, waiting = tin.Val(), twa.Val()
	for _, l := range byKey {
		loads = append(loads, *l)
	}
	return loads, inflight, waiting, nil
}

// slotKnownScript says whether a holder is anywhere in its key's state:
// waiting, granted, or holding a slot. KEYS: ccKeys. ARGV: key, member.
var slotKnownScript = redis.NewScript(luaCC + `
if redis.call('HEXISTS', QM, ARGV[2]) == 1 or redis.call('HEXISTS', G, ARGV[2]) == 1 or
  redis.call('ZSCORE', LEASES, ARGV[1] .. '\0' .. ARGV[2]) then
  return 1
end
return 0
`)

// SlotHolderKnown says whether h waits for a slot of its key, was granted
// one, or holds one: a throttled step for which it says no lost its place
// (a Redis promotion that did not have it, a lapsed grant given up on),
// and nothing will hand it a slot.
func (s *Store) SlotHolderKnown(ctx context.Context, h SlotHolder) (bool, error) {
	n, err := slotKnownScript.Run(ctx, s.rdb, ccKeys(h.Key), h.Key, h.member()).Int()
	if err != nil {
		return false, fmt.Errorf("store: concurrency key %q: %w", h.Key, err)
	}
	return n == 1, nil
}

// throttleScript marks a step (or map instance) waiting for a slot of a
// concurrency key: "throttled", with what it waits for as its output,
// unless it settled, waits for something else, or its workflow ended.
// A step running under another task (its grant's, begun since), or of
// another run of the workflow, is left as it is.
// KEYS: wf. ARGV: the step's state, output and owner field names, the
// text, the task's id, its generation. Returns {the workflow's state
// (empty if gone), 1 if the step was marked}.
var throttleScript = redis.NewScript(luaEvents + `
local v = redis.call('HMGET', KEYS[1], 'state', ARGV[1], ARGV[3], 'gen', '` + logHead + `')
local s = v[1]
if not s then return {'', 0} end
if s == 'canceled' or s == 'timed_out' or s == 'completed' or s == 'failed' then return {s, 0} end
if (v[4] or '0') ~= ARGV[6] then return {s, 0} end
local st = v[2]
if st == 'done' or st == 'dead' or st == 'waiting' or st == 'mapped' or st == 'canceled' or st == 'throttled' then return {s, 0} end
if st == 'running' and v[3] ~= ARGV[5] then return {s, 0} end
local w = {ARGV[1], 'throttled', ARGV[2], ARGV[4]}
LH = v[5] or false
flush(false, w)
redis.call('HSET', KEYS[1], unpack(w))
return {s, 1}
`)

// Throttle marks step of wf (run gen) waiting for a slot of a concurrency
// key (text says which) and logs it, unless another task than task runs
// it, it settled, or the workflow ended or runs another generation; it
// returns the workflow's state and whether it marked the step.
func (s *Store) Throttle(ctx context.Context, wf, step string, gen int, task, text string) (string, bool, error) {
	f := s.fields.of(step)
	keys, args := s.logged(wf, s.now(), []string{wfKey(wf)}, []any{f.name(fState), f.name(fOutput), f.name(fOwner), Excerpt(text), task, gen},
		Event{Type: record.EventThrottled, Step: step, Reason: text})
	res, err := throttleScript.Run(ctx, s.rdb, keys, args...).Slice()
	if err != nil {
		return "", false, fmt.Errorf("store: throttle %s/%s: %w", wf, step, err)
	}
	if len(res) != 2 {
		return "", false, fmt.Errorf("store: throttle %s/%s: unexpected reply %v", wf, step, res)
	}
	st, _ := res[0].(string)
	marked, _ := res[1].(int64)
	return st, marked == 1, nil
}
