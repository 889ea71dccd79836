package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Signals. A signal is a name and a match value ("payment.succeeded",
// "order-42") with JSON data. Everything of one (name, match) shares a
// hash tag, {sig:<hash>}, so each script below touches one slot (Redis
// Cluster safe); a waiting step's own record is its workflow's, and is
// settled by the caller, outside these scripts:
//
//	<tag>:w      set of the steps waiting (Waiter, as JSON)
//	<tag>:k      sorted set of kept signals' ids, scored by when they lapse (ms)
//	<tag>:d      hash of the kept signals' data, by id
//	<tag>:c      hash of the kept signals steps took, by waiter, until their step is completed
//	<tag>:i:<h>  an idempotency key's send (SHA-256 of the key): the signal's id and how far it got ('sending',
//	             'kept' or 'delivered'); while sending, also its data, whom it is for and its sender's claim (who,
//	             and until when); once kept or delivered, a marker: the id and the state, no data
//
// Every kept signal also holds a place in keptKey (signalcount.go), a key
// of its own that limits.max_kept_signals counts.
//
// A send takes the waiters as they are at that moment and leaves them in
// the set: the sender completes each (a step completed already, or no
// longer waiting, is skipped) and then removes them (DoneWaiters), so a
// sender that dies in between leaves them waiting for the next send. A
// send that reached no waiting step keeps the signal (KeepSignal) until
// it lapses; the first step to begin waiting takes it (AwaitSignal).
//
// An idempotency key's record is written, with the send's waiters, by
// the one script that takes them, so of the senders of one key exactly one
// sends: it claims the key for a lease it renews while it delivers
// (RenewSignalClaim). Another sender of the key is a duplicate and sends
// nothing, while the claim holds and once the send is kept or delivered;
// one whose claim lapsed (its sender died mid-send) is taken over by the
// next sender of the key, which finishes it with the record's id, data and
// waiters.

// Waiter is a step that waits for a signal: its workflow, step, run and
// attempt (a requeued step waits again as another attempt, so a sender's
// look at an earlier wait never touches the new one).
type Waiter struct {
	Workflow string `json:"wf"`
	Step     string `json:"step"`
	Gen      int    `json:"gen"`
	Attempt  int    `json:"attempt"`
}

func (w Waiter) member() string {
	b, _ := json.Marshal(w)
	return string(b)
}

func waiterOf(m string) (Waiter, bool) {
	var w Waiter
	err := json.Unmarshal([]byte(m), &w)
	return w, err == nil && w.Workflow != "" && w.Step != ""
}

// sigTag is the hash tag of signal name's keys for match value match.
func sigTag(name, match string) string {
	sum := sha256.Sum256([]byte(name + "\x00" + match))
	return Prefix + "{sig:" + hex.EncodeToString(sum[:12]) + "}"
}

// sigKeys are (name, match)'s waiters, kept signals, their data and the
// claims, then the record of idempotency key key (a key never written
// when there is none).
func sigKeys(name, match, key string) []string {
	t := sigTag(name, match)
	idem := t + ":i"
	if key != "" {
		sum := sha256.Sum256([]byte(key))
		idem += ":" + hex.EncodeToString(sum[:16])
	}
	return []string{t + ":w", t + ":k", t + ":d", t + ":c", idem}
}

// awaitScript makes a step wait for a signal, or hands it a kept signal
// that has not lapsed, oldest first: the signal becomes the step's claim
// (no other step can take it), returned again to the same waiter until
// the caller drops it (ClaimDone) once the step is completed, so a worker
// that dies in between loses nothing.
// KEYS: sigKeys. ARGV: now (ms), the waiter, how long the waiter set and
// the claims live at least (ms). Returns {'take', id, data, lapse (ms)}
// or {'wait'}.
var awaitScript = redis.NewScript(`
local claim = redis.call('HGET', KEYS[4], ARGV[2])
if claim then
  local c = cjson.decode(claim)
  return {'take', c.id, c.data, tostring(c.lapse)}
end
local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1])
if #gone > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[1])
  redis.call('HDEL', KEYS[3], unpack(gone))
end
local ttl = tonumber(ARGV[3])
local ids = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if #ids > 0 then
  local data = redis.call('HGET', KEYS[3], ids[1]) or 'null'
  redis.call('ZREM', KEYS[2], ids[1])
  redis.call('HDEL', KEYS[3], ids[1])
  redis.call('SREM', KEYS[1], ARGV[2])
  redis.call('HSET', KEYS[4], ARGV[2], cjson.encode({id = ids[1], data = data, lapse = tonumber(ids[2])}))
  if redis.call('PTTL', KEYS[4]) < ttl then redis.call('PEXPIRE', KEYS[4], ttl) end
  return {'take', ids[1], data, ids[2]}
end
redis.call('SADD', KEYS[1], ARGV[2])
if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
return {'wait'}
`)

// KeptSignal is a kept signal a step claimed.
type KeptSignal struct {
	ID    string
	Data  string
	Lapse time.Time // when it would have lapsed
}

// AwaitSignal makes step w wait for signal name with match value match
// for at least ttl, or, if a kept signal of that (name, match) has not
// lapsed, claims it for w and returns it (a claim not yet dropped is
// returned again). Waiting again changes nothing.
func (s *Store) AwaitSignal(ctx context.Context, name, match string, w Waiter, ttl time.Duration) (*KeptSignal, error) {
	res, err := awaitScript.Run(ctx, s.rdb, sigKeys(name, match, ""), s.now().UnixMilli(), w.member(), ttl.Milliseconds()).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("store: await signal %s: %w", name, err)
	}
	if len(res) == 4 && res[0] == "take" {
		// taken: its place among the kept signals is free (an error here
		// is the caller's to retry: the same waiter takes its claim again)
		if err := s.ReleaseKeptSignal(ctx, res[1]); err != nil {
			return nil, fmt.Errorf("store: await signal %s: %w", name, err)
		}
		ms, _ := strconv.ParseInt(res[3], 10, 64)
		return &KeptSignal{ID: res[1], Data: res[2], Lapse: time.UnixMilli(ms)}, nil
	}
	return nil, nil
}

// ClaimDone drops w's claim on a kept signal: it completed w's step, or
// went back to the others.
func (s *Store) ClaimDone(ctx context.Context, name, match string, w Waiter) error {
	if err := s.rdb.HDel(ctx, sigKeys(name, match, "")[3], w.member()).Err(); err != nil {
		return fmt.Errorf("store: signal %s: drop a claim: %w", name, err)
	}
	return nil
}

// luaSigRecord updates an idempotency key's record (KEYS[5]), if there is
// one: its state ('sending', 'kept' or 'delivered') and, when to is not
// nil, the waiters it is for; settled says the send was kept or
// delivered already. A send kept or delivered needs nothing more than its
// id (a later send of the key is its duplicate): its record drops to a
// marker, without the data (kept, it is in the kept signals: one copy),
// the waiters or the claim.
const luaSigRecord = `
local function record(st, to)
  local cur = redis.call('GET', KEYS[5])
  if not cur then return end
  local r = cjson.decode(cur)
  if st == 'sending' then
    r.st = st
    if to and #to > 0 then r.to = to end
  else
    r = {id = r.id, st = st}
  end
  redis.call('SET', KEYS[5], cjson.encode(r), 'KEEPTTL')
end
local function settled()
  local cur = redis.call('GET', KEYS[5])
  return cur and cjson.decode(cur).st ~= 'sending'
end
`

// sendScript takes the steps waiting for a signal as they are now and,
// with an idempotency key, claims the key for the send in the same step:
// its record ('sending', whom it is for) names the sender (its signal id)
// and when its claim lapses. The key claimed already returns its record,
// a duplicate; if that send was cut short (still 'sending', its claim
// lapsed), the sender takes the claim over and finishes it.
// KEYS: sigKeys. ARGV: the signal's id (the sender), whether a key was
// given (0|1), how long its record lives (ms), the data, now and the
// claim's lease (ms). Returns {'dup', record}, {'resume', record} or
// {'to', waiter...}.
var sendScript = redis.NewScript(`
local now = tonumber(ARGV[5])
if ARGV[2] == '1' then
  local prev = redis.call('GET', KEYS[5])
  if prev then
    local r = cjson.decode(prev)
    if r.st ~= 'sending' or (tonumber(r.lease) or 0) > now then return {'dup', prev} end
    r.own = ARGV[1]
    r.lease = now + tonumber(ARGV[6])
    local cur = cjson.encode(r)
    redis.call('SET', KEYS[5], cur, 'KEEPTTL')
    return {'resume', cur}
  end
end
local ws = redis.call('SMEMBERS', KEYS[1])
if ARGV[2] == '1' then
  local rec = {id = ARGV[1], data = ARGV[4], st = 'sending', own = ARGV[1], lease = now + tonumber(ARGV[6])}
  if #ws > 0 then rec.to = ws end -- cjson writes an empty table as {}
  redis.call('SET', KEYS[5], cjson.encode(rec), 'PX', ARGV[3])
end
local out = {'to'}
for _, w in ipairs(ws) do out[#out + 1] = w end
return out
`)

// Send is what SendSignal found.
type Send struct {
	// ID is the signal's id: the one given, or, for a Duplicate, the
	// first send's.
	ID string
	// To are the steps the send is for: those that waited when it was
	// sent.
	To []Waiter
	// Duplicate says the idempotency key was claimed before: there is
	// nothing to send, unless Resume.
	Duplicate bool
	// Resume says the key's send was cut short (its sender's claim
	// lapsed before it kept or delivered it): the caller holds the claim
	// now and finishes it, with Data, to To.
	Resume bool
	Data   string
}

// SendSignal takes the steps waiting for signal name with match value
// match (they stay waiting until the caller completes them and calls
// DoneWaiters). With an idempotency key, the send is recorded for keyTTL
// with data, and the key claimed for the sender id for lease (renewed
// with RenewSignalClaim): the same key again is a Duplicate, to finish
// (Resume) only if the claim lapsed before the send was kept or
// delivered.
func (s *Store) SendSignal(ctx context.Context, name, match, id, data, idemKey string, keyTTL, lease time.Duration) (Send, error) {
	res, err := sendScript.Run(ctx, s.rdb, sigKeys(name, match, idemKey), id, b2s(idemKey != ""), keyTTL.Milliseconds(), data,
		s.now().UnixMilli(), lease.Milliseconds()).StringSlice()
	if err != nil {
		return Send{}, fmt.Errorf("store: send signal %s: %w", name, err)
	}
	if len(res) == 2 && (res[0] == "dup" || res[0] == "resume") {
		var rec struct {
			ID   string   `json:"id"`
			To   []string `json:"to"`
			Data string   `json:"data"`
		}
		_ = json.Unmarshal([]byte(res[1]), &rec) // cjson writes an empty to as {}: no waiters
		return Send{ID: rec.ID, Duplicate: true, Resume: res[0] == "resume", Data: rec.Data, To: waiters(rec.To)}, nil
	}
	if len(res) == 0 || res[0] != "to" {
		return Send{}, fmt.Errorf("store: send signal %s: unexpected reply %q", name, res)
	}
	return Send{ID: id, To: waiters(res[1:])}, nil
}

func waiters(members []string) []Waiter {
	out := make([]Waiter, 0, len(members))
	for _, m := range members {
		if w, ok := waiterOf(m); ok {
			out = append(out, w)
		}
	}
	return out
}

// doneScript removes waiters and marks an idempotency key's send
// delivered. KEYS: sigKeys. ARGV: members.
var doneScript = redis.NewScript(luaSigRecord + `
for x = 1, #ARGV do redis.call('SREM', KEYS[1], ARGV[x]) end
record('delivered', nil)
return 1
`)

// DoneWaiters removes waiters of (name, match) that a signal completed,
// or that no longer wait (their step settled another way, or their
// workflow ended), and marks the send of idemKey ("": none) delivered.
func (s *Store) DoneWaiters(ctx context.Context, name, match, idemKey string, ws ...Waiter) error {
	members := make([]any, len(ws))
	for i, w := range ws {
		members[i] = w.member()
	}
	if err := doneScript.Run(ctx, s.rdb, sigKeys(name, match, idemKey), members...).Err(); err != nil {
		return fmt.Errorf("store: signal %s: remove waiters: %w", name, err)
	}
	return nil
}

// keepScript keeps a signal that reached no waiting step until it lapses,
// unless steps began waiting since the send: then it returns them (and
// records them as the idempotency key's send's). An idempotency key's
// send kept or delivered already (by a sender that took over a claim that
// lapsed, or that lost it) is not kept again.
// KEYS: sigKeys. ARGV: id, data, lapse and now (ms since the epoch), the
// waiters that did not wait after all (removed first). Returns {'kept'},
// {'settled'} or {'to', waiter...}.
var keepScript = redis.NewScript(luaSigRecord + `
if settled() then return {'settled'} end
for x = 5, #ARGV do redis.call('SREM', KEYS[1], ARGV[x]) end
local ws = redis.call('SMEMBERS', KEYS[1])
if #ws > 0 then
  record('sending', ws)
  local out = {'to'}
  for _, w in ipairs(ws) do out[#out + 1] = w end
  return out
end
local ttl = tonumber(ARGV[3]) - tonumber(ARGV[4])
if ttl <= 0 then -- lapsed already: nothing to keep
  record('kept', nil)
  return {'kept'}
end
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
for k = 2, 3 do
  if redis.call('PTTL', KEYS[k]) < ttl then redis.call('PEXPIRE', KEYS[k], ttl) end
end
record('kept', nil)
return {'kept'}
`)

// KeepSignal keeps signal id (data) of (name, match) until lapse, for the
// first step that begins waiting for it, after removing stale, the
// waiters the send found that did not wait after all, and marks the send
// of idemKey ("": none) kept. If steps began waiting since, nothing is
// kept and they are returned: the caller completes them instead.
// ErrSignalSettled if idemKey's send was kept or delivered already.
func (s *Store) KeepSignal(ctx context.Context, name, match, id, data, idemKey string, lapse time.Time, stale ...Waiter) ([]Waiter, error) {
	args := []any{id, data, lapse.UnixMilli(), s.now().UnixMilli()}
	for _, w := range stale {
		args = append(args, w.member())
	}
	res, err := keepScript.Run(ctx, s.rdb, sigKeys(name, match, idemKey), args...).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("store: keep signal %s: %w", name, err)
	}
	switch {
	case len(res) > 0 && res[0] == "to":
		return waiters(res[1:]), nil
	case len(res) > 0 && res[0] == "settled":
		return nil, fmt.Errorf("store: keep signal %s: %w", name, ErrSignalSettled)
	}
	return nil, nil
}

// KeptSignals counts the signals of (name, match) kept and not lapsed,
// and the steps waiting for one.
func (s *Store) KeptSignals(ctx context.Context, name, match string) (kept, waiting int64, err error) {
	keys := sigKeys(name, match, "")
	pipe := s.rdb.Pipeline()
	k := pipe.ZCount(ctx, keys[1], fmt.Sprint(s.now().UnixMilli()+1), "+inf")
	w := pipe.SCard(ctx, keys[0])
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, 0, fmt.Errorf("store: signal %s: %w", name, err)
	}
	return k.Val(), w.Val(), nil
}
