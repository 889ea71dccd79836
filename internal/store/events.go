package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/record"
)

// Event is one entry of a workflow's event log (record.Event).
type Event = record.Event

// A workflow's event log lives in its record (wfKey), as fields of their
// own: one entry a script (a state change and what rode with it), field
// logEntry+n (n = 0, 1, ...), whose value is the entry's time in
// milliseconds and its events as JSON, one a line ("<ms>\n<json>\n<json>").
// The field logHead says which entries it holds and when the last was
// added ("<first> <last> <ms>"). An entry's id is "<ms>-<n>", the shape
// of a Redis stream's ids (ms never goes back along a log: a clock that
// does is read as the last entry's); an event's id is its entry's,
// followed for the second and later events of an entry by "." and its
// place ("1764752527774-0", "1764752527774-0.2"): one entry a change, not
// one an event (a settle logs an LLM call, streamed text, the step's
// outcome and the dependents it made ready). The scripts that change a
// workflow's state append the events that report the change in the same
// script, so an event is logged exactly when its change lands. The log
// keeps the store's EventLimit newest entries, exactly, and lives and
// expires with the record: no key, TTL or expiry of its own.
//
// The log was a Redis stream beside the record (eventsKey) before: each
// cost Redis a 4 KiB block however short the log (a stream preallocates
// its first node), about half of what a finished one-step workflow keeps.
// A workflow whose log is a stream (submitted by a version before the
// change) keeps appending to it and is read from it: its record has no
// logHead.
const (
	logHead  = "#log"
	logEntry = "#"
)

// eventsKey is the key of a workflow's log kept as a stream (see above),
// and the root of its log's channel's name (EventsChannel).
func eventsKey(wf string) string { return Prefix + "{wf:" + wf + "}:events" }

// MaxEventTextBytes bounds the text an event carries (streamed text,
// prompts and answers): a longer one is cut, and says so.
const MaxEventTextBytes = 4 << 10

// luaEvents opens every script that logs events. It takes the event
// log's arguments off the script's: the last key is the log, and the last
// four arguments are what the events' LLM calls cost by provider
// ("provider micros ..."), the tail that closes an event the script
// builds itself (its time), the events Go built for the change (one JSON
// object a line) and the log's bound ('0': no log). ev adds an event the
// script builds; flush, once the change is written, adds the spend to the
// workflow's (its "spend" field, a JSON object of micros by provider, kept
// with the log off too), appends the events, Go's first, and announces
// the new entry on the log's channel (EventsChannel). The scripts'
// comments on their KEYS and ARGV leave these out.
//
// Only the create script makes the log (flush(true)); the others append
// to it if its record holds one (a workflow submitted with the log off
// has none), or else to the stream an older version made. A script that
// writes the record itself gives flush its field/value list (flush(false,
// w), before its HSET): the entry rides in that HSET. One that read the
// log's head with its own fields sets LH to it (false: none), sparing
// flush the read.
const luaEvents = `
local EK, EN, EV, ET, ES = table.remove(KEYS), table.remove(ARGV), table.remove(ARGV), table.remove(ARGV), table.remove(ARGV)
local EVS = {}
local LH
local function ev(head) EVS[#EVS + 1] = head .. ET end
local function flush(make, into)
  if ES ~= '' then
    local sp = cjson.decode(redis.call('HGET', KEYS[1], 'spend') or '{}')
    for p, m in string.gmatch(ES, '(%S+) (%d+)') do sp[p] = (sp[p] or 0) + tonumber(m) end
    redis.call('HSET', KEYS[1], 'spend', cjson.encode(sp))
  end
  if EN == '0' then return end
  local e = EV
  if #EVS > 0 then
    local own = table.concat(EVS, '\n')
    if e == '' then e = own else e = e .. '\n' .. own end
  end
  if e == '' then return end
  local h = LH
  if make then h = false elseif h == nil then h = redis.call('HGET', KEYS[1], '` + logHead + `') end
  local first, last, ms = 0, -1, 0
  if h then
    first, last, ms = string.match(h, '(%d+) (%d+) (%d+)')
    first, last, ms = tonumber(first), tonumber(last), tonumber(ms)
  elseif not make then -- a log kept as a stream (an older version's), or none
    local id = redis.call('XADD', EK, 'NOMKSTREAM', 'MAXLEN', '~', EN, '*', 'e', e)
    if id then redis.call('PUBLISH', EK .. '` + noticeSuffix + `', id) end
    return
  end
  local t = redis.call('TIME')
  local now = math.max(tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), ms)
  last = last + 1
  local drop, bound = {}, tonumber(EN)
  while last - first + 1 > bound and #drop < 100 do
    drop[#drop + 1] = '` + logEntry + `' .. first
    first = first + 1
  end
  if #drop > 0 then redis.call('HDEL', KEYS[1], unpack(drop)) end
  local w = into or {}
  local n = #w
  w[n + 1], w[n + 2], w[n + 3], w[n + 4] = '` + logEntry + `' .. last, now .. '\n' .. e, '` + logHead + `', first .. ' ' .. last .. ' ' .. now
  if not into then redis.call('HSET', KEYS[1], unpack(w)) end
  redis.call('PUBLISH', EK .. '` + noticeSuffix + `', now .. '-' .. last)
end
`

// EventsChannel is the Pub/Sub channel on which every append to workflow
// wf's event log is announced, by the script that appends it: the
// message is the new entry's id. A process that follows many workflows
// (the dashboard) subscribes to the ones it follows and reads a log when
// it changes instead of polling it.
//
// Its cost: one PUBLISH an append (2.1 a step), inside the script, so no
// round trip; Redis looks the channel up and, with nobody subscribed,
// does nothing more. The channel is the workflow's own, so a subscriber
// is sent the news of the workflows it follows only, however busy the
// rest of the fleet. PUBLISH is allowed in scripts on a Redis Cluster
// (the channel is not a key; it hashes to the log's slot all the same):
// there a message is sent over the cluster bus to every node, subscribed
// or not, one small message a node an append; sharded Pub/Sub (SPUBLISH)
// would keep it on the slot's shard but needs Redis 7.
func EventsChannel(wf string) string { return eventsKey(wf) + noticeSuffix }

// noticeSuffix makes a log's key its channel's name.
const noticeSuffix = ":new"

// LogOptions say what the store logs of the changes it writes.
type LogOptions struct {
	// Limit bounds each workflow's event log to this many entries
	// (older ones are trimmed); 0 (or less), as New leaves it, keeps no
	// log.
	Limit int
	// Worker names this process in the steps it starts; empty: none.
	Worker string
}

// SetLog sets what the store logs; call it before the store is used.
func (s *Store) SetLog(o LogOptions) {
	s.eventLimit = max(o.Limit, 0) // below 0: no log, as 0
	if o.Worker != "" {
		w, _ := json.Marshal(o.Worker)
		s.workerField = `,"worker":` + string(w)
	}
}

// logged returns a script's keys and arguments with the event log's put
// where luaEvents takes them: events are logged if the change lands,
// besides those the script builds (at now).
func (s *Store) logged(wf string, now time.Time, keys []string, args []any, events ...Event) ([]string, []any) {
	return s.loggedWith(wf, now, "", keys, args, events...)
}

// loggedWith is logged, with fields (JSON members, each after a comma)
// added to the events the script builds.
func (s *Store) loggedWith(wf string, now time.Time, fields string, keys []string, args []any, events ...Event) ([]string, []any) {
	var spend strings.Builder
	var lines []byte
	for i := range events {
		if events[i].At.IsZero() {
			events[i].At = now
		}
		if m := int64(math.Round(events[i].CostUSD * 1e6)); events[i].Type == record.EventLLMCall && m > 0 && events[i].Provider != "" {
			fmt.Fprintf(&spend, "%s %d ", events[i].Provider, m)
		}
		if s.eventLimit > 0 {
			if len(lines) > 0 {
				lines = append(lines, '\n')
			}
			e := storedEvent(events[i])
			lines = appendEventJSON(lines, &e)
		}
	}
	tail := make([]byte, 0, len(fields)+48)
	tail = appendJSONTime(append(append(tail, fields...), `,"at":`...), now.UTC())
	return append(keys, eventsKey(wf)), append(args, spend.String(), string(append(tail, '}')), string(lines), s.eventLimit)
}

// storedEvent is e as the log keeps it: no id (the entry's is), text
// bounded.
func storedEvent(e Event) Event {
	e.ID = ""
	e.Text, e.Prompt, e.Answer = cutText(e.Text), cutText(e.Prompt), cutText(e.Answer)
	e.Reason = Excerpt(e.Reason)
	e.Error = Excerpt(e.Error)
	return e
}

func cutText(s string) string {
	if len(s) <= MaxEventTextBytes {
		return s
	}
	note := " … (" + strconv.Itoa(len(s)) + " bytes, cut)"
	return strings.ToValidUTF8(s[:MaxEventTextBytes-len(note)], "") + note
}

// Log appends events that report no state change of their own (LLM
// calls, tool turns, durable calls, streamed text) to a workflow's log,
// in order, unless the workflow is gone.
// An LLM call's event (llm.call) with a cost also counts it toward the
// workflow's spend by the provider that answered (Workflow.CostByProvider),
// with the log off too.
func (s *Store) Log(ctx context.Context, wf string, events ...Event) error {
	if len(events) == 0 {
		return nil
	}
	keys, args := s.logged(wf, s.now(), []string{wfKey(wf)}, nil, events...)
	if args[0] == "" && args[2] == "" {
		return nil // nothing spent, no log
	}
	if err := logScript.Run(ctx, s.rdb, keys, args...).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("store: log events of %s: %w", wf, err)
	}
	return nil
}

// logScript appends events to a workflow's log (and counts their spend)
// if the workflow exists. KEYS: wf. ARGV: luaEvents' only.
var logScript = redis.NewScript(luaEvents + `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
flush()
return 1
`)

// LogOnce logs the events an attempt of step carried with an outcome
// whose settle ended without saying whether it landed (its write failed,
// its reply was lost), unless they were logged: by that settle, if it
// landed, or by an earlier LogOnce. Their calls were paid for either way.
// The step's record keeps which batch of its events was logged last (a
// token of what they are and when they happened), and so does a settle
// that logs them: a settle carrying the same events later logs its
// outcome's own event only.
func (s *Store) LogOnce(ctx context.Context, wf, step string, events ...Event) error {
	if len(events) == 0 {
		return nil
	}
	lb := loggedBatch(step, events)
	keys, args := s.logged(wf, s.now(), []string{wfKey(wf)}, []any{lb.field, lb.token}, events...)
	if args[2] == "" && args[4] == "" {
		return nil // nothing spent, no log
	}
	if err := logOnceScript.Run(ctx, s.rdb, keys, args...).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("store: log events of %s/%s: %w", wf, step, err)
	}
	return nil
}

// logOnceScript is logScript for a batch of a step's events, logged
// unless the step's logged field holds its token (and then noted there).
// KEYS: wf. ARGV: the step's logged field, the batch's token.
var logOnceScript = redis.NewScript(luaEvents + `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
flush()
return 1
`)

// batch names a batch of a step's events, logged once (Settle, LogOnce):
// the step's field that keeps the token of its batch logged last, and
// this batch's token (both "": no events).
type batch struct{ field, token string }

// loggedBatch is evs' batch, step's. The token is a hash of what the
// events are and when they happened: the same events sent again give the
// same token, another run's (the provider paid again) another.
func loggedBatch(step string, evs []Event) batch {
	if len(evs) == 0 {
		return batch{}
	}
	h := fnv.New64a()
	var b []byte
	for i := range evs {
		e := &evs[i]
		b = append(append(b[:0], e.Type...), 0)
		b = append(append(b, e.Step...), 0)
		b = append(append(b, e.Provider...), 0)
		for _, n := range []int64{int64(e.Attempt), e.At.UnixNano(), e.LatencyMS, int64(e.PromptTokens), int64(e.CompletionTokens), int64(len(e.Text))} {
			b = append(strconv.AppendInt(b, n, 10), 0)
		}
		h.Write(b)
	}
	return batch{field: step + ".logged", token: strconv.FormatUint(h.Sum64(), 36)}
}
