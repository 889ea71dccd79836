package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/record"
)

// Reading a workflow's event log (its layout: events.go), in one round
// trip whether the log is in the record or, for a workflow an older
// version submitted, a stream.

// logReadScript reads a workflow's log. KEYS: its record, its stream.
// ARGV: what to read ("range": up to ARGV[4] entries after the entry id
// ARGV[2] ("-": from the first), whose number and time are ARGV[3] and
// ARGV[5] (” for none); "last": the last entry; "info": the first entry
// and the bounds). A range after an entry of this log starts at that
// entry (the caller skips the events it read); after an id that is not
// one of this log's (a reader's id from before the workflow's id was
// submitted again, or a made-up one), at the first entry whose id orders
// after it (its time, then its number: both only grow along a log).
// Returns, for a log in the record: {1, the first entry's number, its
// entries...} ("range" and "last"), or {1, first, last, the first
// entry} ("info"); for a stream: {0, XRANGE's or XREVRANGE's entries}
// ("info": {0}, the caller asks the stream itself).
var logReadScript = redis.NewScript(luaHelpers + `
local K = KEYS[1]
local h = redis.call('HGET', K, '` + logHead + `')
if not h then
  if ARGV[1] == 'range' then return {0, redis.call('XRANGE', KEYS[2], ARGV[2], '+', 'COUNT', ARGV[4])} end
  if ARGV[1] == 'last' then return {0, redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)} end
  return {0}
end
local first, last = string.match(h, '(%d+) (%d+)')
first, last = tonumber(first), tonumber(last)
local function entry(n) return redis.call('HGET', K, '` + logEntry + `' .. n) end
if ARGV[1] == 'info' then return {1, first, last, entry(first)} end
if ARGV[1] == 'last' then return {1, last, entry(last)} end
local from = first
if ARGV[3] ~= '' then
  local an, ams = tonumber(ARGV[3]), tonumber(ARGV[5])
  local e = an >= first and an <= last and entry(an)
  if e and tonumber(string.match(e, '^(%d+)')) == ams then
    from = an
  else -- the first entry whose (time, number) is past the id's
    local lo, hi = first, last + 1
    while lo < hi do
      local mid = math.floor((lo + hi) / 2)
      local m = tonumber(string.match(entry(mid), '^(%d+)'))
      if m > ams or (m == ams and mid > an) then hi = mid else lo = mid + 1 end
    end
    from = lo
  end
end
local to = math.min(last, from + tonumber(ARGV[4]) - 1)
local out = {1, from}
if to < from then return out end
local f = {}
for n = from, to do f[#f + 1] = '` + logEntry + `' .. n end
for _, v in ipairs(hmget(K, f)) do out[#out + 1] = v end
return out
`)

// logEntryText is one entry of a log: its id and its events' JSON lines.
type logEntryText struct {
	id    string
	lines string
}

// readLog runs logReadScript and returns the entries it read after the
// entry id after ("": from the first); legacy says the log is a stream
// with no entries read ("info").
func (s *Store) readLog(ctx context.Context, wf, mode, after string, n int) (entries []logEntryText, first, last int64, legacy bool, err error) {
	start, ms, seq := "-", "", ""
	if after != "" {
		start = after
		ms, seq, _ = strings.Cut(after, "-")
	}
	v, err := logReadScript.Run(ctx, s.rdb, []string{wfKey(wf), eventsKey(wf)}, mode, start, seq, n, ms).Slice()
	if err != nil {
		return nil, 0, 0, false, err
	}
	if len(v) == 0 {
		return nil, 0, 0, false, fmt.Errorf("an empty answer")
	}
	if k, _ := v[0].(int64); k == 0 { // a stream
		if len(v) < 2 {
			return nil, 0, 0, true, nil
		}
		msgs, _ := v[1].([]any)
		for _, m := range msgs {
			pair, _ := m.([]any)
			if len(pair) != 2 {
				continue
			}
			id, _ := pair[0].(string)
			fv, _ := pair[1].([]any)
			for i := 0; i+1 < len(fv); i += 2 {
				if f, _ := fv[i].(string); f == "e" {
					text, _ := fv[i+1].(string)
					entries = append(entries, logEntryText{id: id, lines: text})
				}
			}
		}
		return entries, 0, 0, false, nil
	}
	if mode == "info" {
		if len(v) < 4 {
			return nil, 0, 0, false, fmt.Errorf("a short answer")
		}
		first, _ = v[1].(int64)
		last, _ = v[2].(int64)
		if e, ok := parseLogEntry(first, v[3]); ok {
			entries = append(entries, e)
		}
		return entries, first, last, false, nil
	}
	at, _ := v[1].(int64)
	for i, x := range v[2:] {
		if e, ok := parseLogEntry(at+int64(i), x); ok {
			entries = append(entries, e)
		}
	}
	return entries, 0, 0, false, nil
}

// parseLogEntry is entry n of a log kept in its record, from its field's
// value ("<ms>\n<lines>"); false for none (a field trimmed).
func parseLogEntry(n int64, v any) (logEntryText, bool) {
	text, ok := v.(string)
	if !ok {
		return logEntryText{}, false
	}
	ms, lines, ok := strings.Cut(text, "\n")
	if !ok {
		return logEntryText{}, false
	}
	return logEntryText{id: ms + "-" + strconv.FormatInt(n, 10), lines: lines}, true
}

// Events returns the events of up to n entries of a workflow's log after
// the event id after ("": from the start), oldest first.
func (s *Store) Events(ctx context.Context, wf, after string, n int) ([]Event, error) {
	evs, _, err := s.EventsPage(ctx, wf, after, n)
	return evs, err
}

// EventsPage is Events, saying also whether it read n entries (more may
// follow at once).
func (s *Store) EventsPage(ctx context.Context, wf, after string, n int) ([]Event, bool, error) {
	entry, place := "", -1
	if after != "" {
		var ok bool
		if entry, place, ok = record.SplitEventID(after); !ok {
			return nil, false, fmt.Errorf("store: events of %s after %q: not an event id", wf, after)
		}
	}
	entries, _, _, _, err := s.readLog(ctx, wf, "range", entry, n) // its later events, then the entries after it
	if err != nil {
		return nil, false, fmt.Errorf("store: events of %s: %w", wf, err)
	}
	out := make([]Event, 0, len(entries))
	for _, m := range entries {
		for i, line := range strings.Split(m.lines, "\n") {
			if m.id == entry && i <= place {
				continue // read already
			}
			var e Event
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				return nil, false, fmt.Errorf("store: event %s of %s: %w", record.EventID(m.id, i), wf, err)
			}
			e.ID = record.EventID(m.id, i)
			out = append(out, e)
		}
	}
	return out, len(entries) == n, nil
}

// LastEventID is the id of the last event of a workflow's log ("": the
// log is empty or there is none).
func (s *Store) LastEventID(ctx context.Context, wf string) (string, error) {
	entries, _, _, _, err := s.readLog(ctx, wf, "last", "", 1)
	if err != nil {
		return "", fmt.Errorf("store: last event of %s: %w", wf, err)
	}
	if len(entries) == 0 {
		return "", nil
	}
	return record.EventID(entries[0].id, strings.Count(entries[0].lines, "\n")), nil
}

// LogInfo is what a workflow's event log holds.
type LogInfo struct {
	Length int64  // entries it holds
	Added  int64  // entries ever appended (a stream on Redis 6 reports Length)
	First  string // the oldest entry's id ("": empty)
}

// Trimmed is how many entries the log's bound removed.
func (i LogInfo) Trimmed() int64 { return max(i.Added-i.Length, 0) }

// EventLog describes a workflow's event log; a log that does not exist
// is empty.
func (s *Store) EventLog(ctx context.Context, wf string) (LogInfo, error) {
	entries, first, last, legacy, err := s.readLog(ctx, wf, "info", "", 1)
	if err != nil {
		return LogInfo{}, fmt.Errorf("store: event log of %s: %w", wf, err)
	}
	if legacy {
		return s.streamLog(ctx, wf)
	}
	if len(entries) == 0 {
		return LogInfo{}, nil
	}
	return LogInfo{Length: last - first + 1, Added: last + 1, First: entries[0].id}, nil
}

// streamLog is EventLog for a log kept as a stream.
func (s *Store) streamLog(ctx context.Context, wf string) (LogInfo, error) {
	info, err := s.rdb.XInfoStream(ctx, eventsKey(wf)).Result()
	if err != nil {
		if strings.Contains(err.Error(), "no such key") || errors.Is(err, redis.Nil) {
			return LogInfo{}, nil
		}
		return LogInfo{}, fmt.Errorf("store: event log of %s: %w", wf, err)
	}
	out := LogInfo{Length: info.Length, Added: info.EntriesAdded, First: info.FirstEntry.ID}
	if out.Added < out.Length {
		out.Added = out.Length
	}
	if out.First == "" && out.Length > 0 { // a server whose XINFO leaves it out
		first, err := s.rdb.XRangeN(ctx, eventsKey(wf), "-", "+", 1).Result()
		if err != nil {
			return LogInfo{}, fmt.Errorf("store: event log of %s: %w", wf, err)
		}
		if len(first) > 0 {
			out.First = first[0].ID
		}
	}
	return out, nil
}
