package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
)

func loggingStore(t *testing.T, limit int) (*store.Store, *redis.Client) {
	_, rdb := redistest.New(t)
	s := store.New(rdb, time.Hour, nil)
	s.SetLog(store.LogOptions{Limit: limit, Worker: "w-1"})
	return s, rdb
}

// logIsInTheRecord fails unless workflow id's log is kept in its record
// (so it lives and expires with it), with no key of its own.
func logIsInTheRecord(t *testing.T, rdb *redis.Client, id string) {
	t.Helper()
	ctx := context.Background()
	if n := rdb.Exists(ctx, store.Prefix+"{wf:"+id+"}:events").Val(); n != 0 {
		t.Errorf("%s: the log has a key of its own", id)
	}
	if !rdb.HExists(ctx, store.Prefix+"{wf:"+id+"}:wf", "#log").Val() {
		t.Errorf("%s: the record holds no log", id)
	}
}

// seen renders a log as "type step attempt" lines.
func seen(t *testing.T, s *store.Store, wf string) []string {
	t.Helper()
	evs, err := s.Events(context.Background(), wf, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	last := ""
	for _, e := range evs {
		if last != "" && !record.EventIDBefore(last, e.ID) || e.At.IsZero() {
			t.Fatalf("event %+v: id not increasing after %s, or no time", e, last)
		}
		last = e.ID
		line := e.Type
		if e.Step != "" {
			line += " " + e.Step
		}
		if e.Attempt > 0 {
			line += fmt.Sprintf(" #%d", e.Attempt)
		}
		if e.State != "" {
			line += " " + e.State
		}
		out = append(out, line)
	}
	return out
}

func TestTheLogSaysWhatLandedOnceEachInOrder(t *testing.T) {
	s, rdb := loggingStore(t, 1000)
	ctx := context.Background()
	if _, err := s.Create(ctx, store.NewWorkflow{ID: "wf", Name: "chord", Spec: []byte(`{}`), Steps: []string{"a", "b", "c", "d"},
		Ready: []string{"a", "b", "c"}}); err != nil {
		t.Fatal(err)
	}
	begin := func(step, owner string) {
		t.Helper()
		if _, err := s.Begin(ctx, "wf", step, owner, 0, time.Minute, nil); err != nil {
			t.Fatal(err)
		}
	}
	begin("a", "t1")
	due := time.Now().Add(time.Minute)
	if err := s.RecordError(ctx, "wf", "a", 0, 1, "server", "server: 503", due); err != nil {
		t.Fatal(err)
	}
	begin("a", "t1")
	// attempt 1's late error and settle land nowhere, and so say nothing
	if err := s.RecordError(ctx, "wf", "a", 0, 1, "server", "late", time.Time{}); !errors.Is(err, store.ErrStaleAttempt) {
		t.Fatalf("late error: %v", err)
	}
	if _, err := s.Settle(ctx, "wf", "a", store.Outcome{Done: true, Attempt: 1}, chordDeps); !errors.Is(err, store.ErrStaleAttempt) {
		t.Fatalf("late settle: %v", err)
	}
	for _, st := range []string{"a", "b", "c"} {
		if st != "a" {
			begin(st, "t-"+st)
		}
		o := store.Outcome{Done: true, Output: st, Target: "p/m", Usage: store.Usage{PromptTokens: 3, CompletionTokens: 4}, CostMicros: 1500}
		if st == "a" {
			o.Attempt = 2
		}
		if _, err := s.Settle(ctx, "wf", st, o, chordDeps); err != nil {
			t.Fatal(err)
		}
	}
	// a settle delivered again lands nothing new
	if _, err := s.Settle(ctx, "wf", "c", store.Outcome{Done: true, Output: "c"}, chordDeps); err != nil {
		t.Fatal(err)
	}
	begin("d", "t-d")
	begin("d", "t-d") // a redelivery to the same task: another attempt, logged
	if _, err := s.Settle(ctx, "wf", "d", store.Outcome{Done: true, Output: "d", Degraded: true}, nil); err != nil {
		t.Fatal(err)
	}
	want := []string{"workflow.submitted", "step.ready a", "step.ready b", "step.ready c",
		"step.started a #1", "step.failed a #1", "step.started a #2", "step.done a #2",
		"step.started b #1", "step.done b", "step.started c #1", "step.done c", "step.ready d",
		"step.started d #1", "step.started d #2", "step.degraded d", "workflow.ended completed"}
	if got := seen(t, s, "wf"); !slices.Equal(got, want) {
		t.Fatalf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	evs, _ := s.Events(ctx, "wf", "", 100)
	if e := evs[4]; e.Worker != "w-1" {
		t.Errorf("step.started names worker %q", e.Worker)
	}
	if e := evs[5]; e.Class != "server" || e.Reason != "server: 503" || e.NextAttemptAt == nil || e.NextAttemptAt.UnixMilli() != due.UnixMilli() {
		t.Errorf("step.failed = %+v", e)
	}
	if e := evs[7]; e.Target != "p/m" || e.PromptTokens != 3 || e.CompletionTokens != 4 || e.CostUSD != 0.0015 {
		t.Errorf("step.done = %+v", e)
	}
	if e := evs[0]; e.Name != "chord" {
		t.Errorf("workflow.submitted = %+v", e)
	}
	// after an id, a reader gets what follows it, once
	after, _ := s.Events(ctx, "wf", evs[12].ID, 100)
	if len(after) != len(want)-13 || after[0].Type != record.EventStarted {
		t.Errorf("after %s: %d events, first %+v", evs[12].ID, len(after), after[0])
	}
	// the log goes with the record: it is in it
	logIsInTheRecord(t, rdb, "wf")
}

func TestTheLogSaysWhatCancelAndRerunDid(t *testing.T) {
	s, _ := loggingStore(t, 1000)
	ctx := context.Background()
	create(t, s, "wf")
	if _, err := s.Settle(ctx, "wf", "a", store.Outcome{Done: true}, chordDeps); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(ctx, "wf", []string{"a", "b", "c", "d"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(ctx, "wf", []string{"a", "b", "c", "d"}); err != nil { // again: nothing changes
		t.Fatal(err)
	}
	if _, _, err := s.Rerun(ctx, "wf", []string{"b"}, map[string][]string{"b": nil}, nil); err != nil {
		t.Fatal(err)
	}
	want := []string{"workflow.submitted", "step.done a", "step.canceled b", "step.canceled c", "step.canceled d",
		"workflow.ended canceled", "workflow.rerun", "step.ready b"}
	if got := seen(t, s, "wf"); !slices.Equal(got, want) {
		t.Fatalf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	evs, _ := s.Events(ctx, "wf", "", 100)
	if e := evs[6]; e.Gen != 1 || !slices.Equal(e.Steps, []string{"b"}) {
		t.Errorf("workflow.rerun = %+v", e)
	}
}

func TestTheLogIsBoundedAndSaysHowMuchWasTrimmed(t *testing.T) {
	s, rdb := loggingStore(t, 100)
	ctx := context.Background()
	create(t, s, "wf")
	for i := range 1000 {
		if err := s.Log(ctx, "wf", store.Event{Type: record.EventDelta, Step: "a", Text: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	info, err := s.EventLog(ctx, "wf")
	if err != nil {
		t.Fatal(err)
	}
	// the bound is kept exactly: the newest 100 entries
	if info.Added != 1001 || info.Length != 100 || info.Trimmed() != 901 || info.First == "" {
		t.Fatalf("log info %+v", info)
	}
	if n := rdb.HLen(ctx, store.Prefix+"{wf:wf}:wf").Val(); n > 120 {
		t.Fatalf("the record holds %d fields: trimmed entries are kept", n)
	}
	evs, _ := s.Events(ctx, "wf", "", 1000)
	if int64(len(evs)) != info.Length || evs[len(evs)-1].Text != "999" || evs[0].ID != info.First {
		t.Fatalf("%d events, last %+v", len(evs), evs[len(evs)-1])
	}
	// text is bounded per entry
	if err := s.Log(ctx, "wf", store.Event{Type: record.EventDelta, Text: strings.Repeat("x", 1<<20)}); err != nil {
		t.Fatal(err)
	}
	evs, _ = s.Events(ctx, "wf", evs[len(evs)-1].ID, 10)
	if len(evs) != 1 || len(evs[0].Text) > store.MaxEventTextBytes || !strings.HasSuffix(evs[0].Text, "bytes, cut)") {
		t.Fatalf("a 1 MiB text logged as %d bytes", len(evs[0].Text))
	}
	// a gone workflow's log is not recreated
	if err := s.Log(ctx, "gone", store.Event{Type: record.EventDelta}); err != nil {
		t.Fatal(err)
	}
	if info, _ := s.EventLog(ctx, "gone"); info.Length != 0 {
		t.Fatalf("a gone workflow has a log: %+v", info)
	}
}

func TestNoLogWhenItIsOff(t *testing.T) {
	s, _ := loggingStore(t, 0)
	ctx := context.Background()
	create(t, s, "wf")
	if _, err := s.Settle(ctx, "wf", "a", store.Outcome{Done: true}, chordDeps); err != nil {
		t.Fatal(err)
	}
	if info, _ := s.EventLog(ctx, "wf"); info.Length != 0 {
		t.Fatalf("log kept while off: %+v", info)
	}
}

// A change's events share one log entry: their ids are the entry's and
// then "<entry>.<place>", and a reader resumes after any of them.
func TestEventsOfOneChangeShareAnEntryAndResumeAnywhere(t *testing.T) {
	s, _ := loggingStore(t, 1000)
	ctx := context.Background()
	create(t, s, "wf")
	o := store.Outcome{Done: true, Events: []store.Event{{Type: record.EventLLMCall, Step: "a"}, {Type: record.EventDelta, Step: "a", Text: "hi"}}}
	if _, err := s.Settle(ctx, "wf", "a", o, chordDeps); err != nil {
		t.Fatal(err)
	}
	evs, err := s.Events(ctx, "wf", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 4 || evs[1].Type != record.EventLLMCall || evs[2].Type != record.EventDelta || evs[3].Type != record.EventDone {
		t.Fatalf("events %+v", evs)
	}
	entry := evs[1].ID
	if evs[2].ID != entry+".1" || evs[3].ID != entry+".2" || !record.EventIDBefore(evs[0].ID, entry) || !record.EventIDBefore(entry, evs[2].ID) {
		t.Fatalf("ids %s %s %s %s", evs[0].ID, evs[1].ID, evs[2].ID, evs[3].ID)
	}
	for i, after := range []string{evs[0].ID, entry, entry + ".1", entry + ".2"} {
		got, err := s.Events(ctx, "wf", after, 100)
		if err != nil || len(got) != 3-i || (len(got) > 0 && got[0].ID != evs[i+1].ID) {
			t.Fatalf("after %s: %+v %v", after, got, err)
		}
	}
	for _, bad := range []string{"x", "1-2.0", "1-2.-1", "1-2.01", "1-2."} {
		if record.ValidEventID(bad) {
			t.Errorf("%q taken for an event id", bad)
		}
	}
}

// A workflow an older version submitted keeps its log in a stream of its
// own: it is read from there, and appended to, as before.
func TestALogKeptAsAStreamIsReadAndAppendedTo(t *testing.T) {
	s, rdb := loggingStore(t, 1000)
	ctx := context.Background()
	create(t, s, "wf")
	rec, stream := store.Prefix+"{wf:wf}:wf", store.Prefix+"{wf:wf}:events"
	// the record as an older version left it: no log in it, a stream beside
	fields := rdb.HKeys(ctx, rec).Val()
	for _, f := range fields {
		if strings.HasPrefix(f, "#") {
			rdb.HDel(ctx, rec, f)
		}
	}
	old := rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: []string{"e", `{"id":"","type":"workflow.submitted","at":"2026-12-01T00:00:00Z"}`}}).Val()
	if err := s.Log(ctx, "wf", store.Event{Type: record.EventDelta, Step: "a", Text: "more"}); err != nil {
		t.Fatal(err)
	}
	evs, err := s.Events(ctx, "wf", "", 100)
	if err != nil || len(evs) != 2 || evs[0].ID != old || evs[1].Text != "more" {
		t.Fatalf("events %+v %v", evs, err)
	}
	if rdb.HExists(ctx, rec, "#log").Val() {
		t.Fatal("an append to a stream's workflow started a log in the record")
	}
	if last, _ := s.LastEventID(ctx, "wf"); last != evs[1].ID {
		t.Fatalf("last event %q, want %q", last, evs[1].ID)
	}
	if info, _ := s.EventLog(ctx, "wf"); info.Length != 2 || info.First != old {
		t.Fatalf("log info %+v", info)
	}
	if after, _ := s.Events(ctx, "wf", old, 100); len(after) != 1 || after[0].Text != "more" {
		t.Fatalf("after %s: %+v", old, after)
	}
	// the stream lives as long as the record: through its end and a rerun
	sameTTL := func(when string) {
		t.Helper()
		rec, log := rdb.TTL(ctx, rec).Val(), rdb.TTL(ctx, stream).Val()
		if log <= 0 || rec-log > time.Second || log-rec > time.Second {
			t.Fatalf("%s: the stream's TTL %s, the record's %s", when, log, rec)
		}
	}
	rdb.Expire(ctx, stream, time.Minute)
	if _, err := s.Cancel(ctx, "wf", []string{"a", "b", "c", "d"}); err != nil {
		t.Fatal(err)
	}
	sameTTL("canceled")
	if _, _, err := s.Rerun(ctx, "wf", []string{"a"}, map[string][]string{"a": nil}, nil); err != nil {
		t.Fatal(err)
	}
	sameTTL("rerun")
	if err := s.Log(ctx, "wf", store.Event{Type: record.EventDelta, Step: "a", Text: "after the rerun"}); err != nil {
		t.Fatal(err)
	}
	if evs, _ := s.Events(ctx, "wf", "", 100); len(evs) < 4 || evs[len(evs)-1].Text != "after the rerun" {
		t.Fatalf("events after the rerun %+v", evs)
	}
}

// A reader's id that is not one of the log's (from before the workflow's
// id was submitted again, or made up) gets what orders after it, by time
// then number, not what its number alone would say; a page reads as
// many entries as asked, past Lua's unpack bound.
func TestAReaderAfterAnotherLogsIDGetsWhatOrdersAfterIt(t *testing.T) {
	s, _ := loggingStore(t, 20000)
	ctx := context.Background()
	create(t, s, "wf")
	for i := range 9000 {
		if err := s.Log(ctx, "wf", store.Event{Type: record.EventDelta, Step: "a", Text: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	all, full, err := s.EventsPage(ctx, "wf", "", 9001)
	if err != nil || len(all) != 9001 || !full {
		t.Fatalf("one page of 9,001 entries: %d events, full %v, %v", len(all), full, err)
	}
	first, _, _ := strings.Cut(all[0].ID, "-")
	lastMS, _, _ := strings.Cut(all[len(all)-1].ID, "-")
	for _, c := range []struct {
		after string
		want  int // events after it
	}{
		{all[100].ID, len(all) - 101},
		{"99999999999999-3", 0},                           // later than every entry: nothing, not entry 4 on
		{"1-8999", len(all)},                              // earlier than every entry: all, not nothing
		{first + "-99999", countAfter(all, first, 99999)}, // past the last number at the first entry's time
		{lastMS + "-0", countAfter(all, lastMS, 0)},
	} {
		got, err := s.Events(ctx, "wf", c.after, 10000)
		if err != nil || len(got) != c.want {
			t.Errorf("after %s: %d events, want %d (%v)", c.after, len(got), c.want, err)
		}
		for _, e := range got {
			if !record.EventIDBefore(c.after, e.ID) {
				t.Fatalf("after %s: event %s", c.after, e.ID)
			}
		}
	}
}

// countAfter is how many of evs order after the entry id "<ms>-<n>".
func countAfter(evs []store.Event, ms string, n int) int {
	id := ms + "-" + fmt.Sprint(n)
	c := 0
	for _, e := range evs {
		if record.EventIDBefore(id, e.ID) {
			c++
		}
	}
	return c
}

// An entry's id never goes back, even when the clock does (a promoted
// replica's, another machine's): it takes the last entry's time.
func TestLogIDsGrowWhenTheClockGoesBack(t *testing.T) {
	s, rdb := loggingStore(t, 1000)
	ctx := context.Background()
	create(t, s, "wf")
	rec := store.Prefix + "{wf:wf}:wf"
	head := strings.Fields(rdb.HGet(ctx, rec, "#log").Val())
	if len(head) != 3 {
		t.Fatalf("log head %q", head)
	}
	ahead := time.Now().Add(time.Hour).UnixMilli()
	rdb.HSet(ctx, rec, "#log", head[0]+" "+head[1]+" "+fmt.Sprint(ahead))
	for i := range 3 {
		if err := s.Log(ctx, "wf", store.Event{Type: record.EventDelta, Step: "a", Text: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	evs, _ := s.Events(ctx, "wf", "", 100)
	if len(evs) < 4 {
		t.Fatalf("%d events", len(evs))
	}
	for i, e := range evs[len(evs)-3:] {
		if !strings.HasPrefix(e.ID, fmt.Sprint(ahead)+"-") {
			t.Errorf("entry %d's id %s: not at the last entry's time %d", i, e.ID, ahead)
		}
	}
	for i := 1; i < len(evs); i++ {
		if !record.EventIDBefore(evs[i-1].ID, evs[i].ID) {
			t.Fatalf("id %s after %s", evs[i].ID, evs[i-1].ID)
		}
	}
	// a reader after each id gets exactly what follows it
	for i := range evs {
		after, _ := s.Events(ctx, "wf", evs[i].ID, 100)
		if len(after) != len(evs)-1-i {
			t.Fatalf("after %s: %d events, want %d", evs[i].ID, len(after), len(evs)-1-i)
		}
	}
}
