package producer_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// limitedClient is a producer client on e's Redis keeping at most
// maxKept signals, each for keep (0: the default).
func limitedClient(e *testenv.Env, maxKept int, keep time.Duration) *producer.Client {
	return producer.NewClient(e.Redis, producer.ClientOptions{Retention: e.Config.Retention.D(), SkipWorkerCheck: true,
		MaxKeptSignals: maxKept, SignalKeep: keep})
}

// limits.max_kept_signals counts the kept signals of every name and
// match: past it a send no step waits for is refused (ErrOverLimit, the
// limit and its value named, nothing kept, an idempotency key left free);
// a signal a step takes frees its place, and a send that reaches a
// waiting step is never refused.
func TestKeptSignalsAreCapped(t *testing.T) {
	const max = 3
	e := testenv.Start(t, testenv.Options{})
	c := limitedClient(e, max, time.Hour)
	for i := range max {
		name := fmt.Sprintf("paid%d", i) // other names, other matches: one count
		if r, err := c.Signal(t.Context(), producer.Signal{Name: name, Match: fmt.Sprint("m-", i)}); err != nil || !r.Kept {
			t.Fatalf("signal %d of %d: %+v %v, want kept", i+1, max, r, err)
		}
	}
	over := producer.Signal{Name: "paid", Match: "over", Data: json.RawMessage(`{"n": 4}`), IdempotencyKey: "evt-over"}
	_, err := c.Signal(t.Context(), over)
	var ole *producer.OverLimitError
	if !errors.Is(err, producer.ErrOverLimit) || !errors.As(err, &ole) || ole.RetryAfter < time.Second ||
		!strings.Contains(err.Error(), "limits.max_kept_signals (3)") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("signal %d: %v, want ErrOverLimit naming limits.max_kept_signals (3) on one line", max+1, err)
	}
	if kept, _, err := e.Store.KeptSignals(t.Context(), "paid", "over"); err != nil || kept != 0 {
		t.Fatalf("the refused signal is kept (%d, %v)", kept, err)
	}
	if n, err := e.Store.KeptSignalCount(t.Context()); err != nil || n != max {
		t.Fatalf("%d places held (%v), want %d", n, err, max)
	}

	// a step waiting on "over" is reached whatever the count
	id := e.Submit(t, waiterSpec(e, "over"))
	waitForWaiters(t, e, "over", 1)
	if r, err := c.Signal(t.Context(), producer.Signal{Name: "paid", Match: "over", Data: json.RawMessage(`{"n": 5}`)}); err != nil || len(r.Delivered) != 1 {
		t.Fatalf("a send to a waiting step while %d are kept: %+v %v", max, r, err)
	}
	e.Wait(t, id, 20*time.Second, store.StateCompleted)

	// a step takes a kept signal: its place is free
	taker := e.Submit(t, e.Spec(`name: taker
steps:
  - { id: paid, wait_for: { signal: paid0, match: "m-0", timeout: 1h } }
`))
	e.Wait(t, taker, 20*time.Second, store.StateCompleted)
	if n, err := e.Store.KeptSignalCount(t.Context()); err != nil || n != max-1 {
		t.Fatalf("%d places held after a step took one (%v), want %d", n, err, max-1)
	}
	r, err := c.Signal(t.Context(), over)
	if err != nil || !r.Kept || r.Duplicate {
		t.Fatalf("the refused send again, a place free: %+v %v, want kept as a first send of its key", r, err)
	}
	if _, err := c.Signal(t.Context(), producer.Signal{Name: "paid", Match: "one-more"}); !errors.Is(err, producer.ErrOverLimit) {
		t.Fatalf("signal past the limit again: %v, want ErrOverLimit", err)
	}
}

// A kept signal that lapses frees its place.
func TestALapsedKeptSignalFreesItsPlace(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	c := limitedClient(e, 1, time.Second)
	if r, err := c.Signal(t.Context(), producer.Signal{Name: "paid", Match: "a"}); err != nil || !r.Kept {
		t.Fatalf("the first: %+v %v", r, err)
	}
	if _, err := c.Signal(t.Context(), producer.Signal{Name: "paid", Match: "b"}); !errors.Is(err, producer.ErrOverLimit) {
		t.Fatalf("the second, the first kept: %v, want ErrOverLimit", err)
	}
	poll.Until(t, 10*time.Second, func() (bool, string) {
		r, err := c.Signal(t.Context(), producer.Signal{Name: "paid", Match: "b"})
		return err == nil && r.Kept, fmt.Sprintf("the second once the first lapsed: %+v %v", r, err)
	})
}

// limits.max_signal_bytes bounds a signal's data (64 KiB by default):
// past it the send is ErrSignalTooLarge (an ErrBadSignal), naming it.
func TestASignalOverMaxSignalBytesIsRefused(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	big := json.RawMessage(`"` + strings.Repeat("x", 64<<10) + `"`) // 64 KiB and two quotes
	_, err := e.Client.Signal(t.Context(), producer.Signal{Name: "paid", Match: "big", Data: big})
	if !errors.Is(err, producer.ErrSignalTooLarge) || !errors.Is(err, producer.ErrBadSignal) ||
		!strings.Contains(err.Error(), "data is 65538 bytes, over limits.max_signal_bytes (65536)") {
		t.Fatalf("%v, want ErrSignalTooLarge naming limits.max_signal_bytes (65536)", err)
	}
	fits := json.RawMessage(`"` + strings.Repeat("x", 64<<10-2) + `"`)
	if r, err := e.Client.Signal(t.Context(), producer.Signal{Name: "paid", Match: "big", Data: fits}); err != nil || !r.Kept {
		t.Fatalf("data of 64 KiB: %+v %v, want kept", r, err)
	}
}

// An idempotency key's send, once kept or delivered, leaves a marker in
// Redis (its id and how it ended), not a copy of the data.
func TestAnIdempotencyKeyKeepsAMarkerNotTheData(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	const secret = "a-payload-only-the-signal-holds"
	data := json.RawMessage(`{"note": "` + secret + `"}`)
	id := e.Submit(t, waiterSpec(e, "delivered"))
	waitForWaiters(t, e, "delivered", 1)
	delivered, err := e.Client.Signal(t.Context(), producer.Signal{Name: "paid", Match: "delivered", Data: data, IdempotencyKey: "evt-delivered"})
	if err != nil || len(delivered.Delivered) != 1 {
		t.Fatalf("delivered: %+v %v", delivered, err)
	}
	e.Wait(t, id, 20*time.Second, store.StateCompleted)
	kept, err := e.Client.Signal(t.Context(), producer.Signal{Name: "paid", Match: "kept", Data: data, IdempotencyKey: "evt-kept"})
	if err != nil || !kept.Kept {
		t.Fatalf("kept: %+v %v", kept, err)
	}
	records := map[string]string{}
	iter := e.Redis.Scan(t.Context(), 0, store.Prefix+"{sig:*}:i:*", 100).Iterator()
	for iter.Next(t.Context()) {
		v, err := e.Redis.Get(t.Context(), iter.Val()).Result()
		if err != nil {
			t.Fatal(err)
		}
		records[iter.Val()] = v
	}
	if err := iter.Err(); err != nil || len(records) != 2 {
		t.Fatalf("%d idempotency records (%v), want 2: %v", len(records), err, records)
	}
	for k, v := range records {
		if strings.Contains(v, secret) || strings.Contains(v, "data") || strings.Contains(v, `"to"`) {
			t.Errorf("%s holds %s: a copy of the data (or the steps) beside a settled send", k, v)
		}
		if !strings.Contains(v, delivered.ID) && !strings.Contains(v, kept.ID) {
			t.Errorf("%s holds %s: no signal id", k, v)
		}
	}
	// the markers still make the keys' sends duplicates
	for _, c := range []struct{ match, id string }{{"delivered", delivered.ID}, {"kept", kept.ID}} {
		r, err := e.Client.Signal(t.Context(), producer.Signal{Name: "paid", Match: c.match, Data: data, IdempotencyKey: "evt-" + c.match})
		if err != nil || !r.Duplicate || r.ID != c.id || r.Kept || len(r.Delivered) != 0 {
			t.Fatalf("%s again: %+v %v, want a duplicate of %s", c.match, r, err, c.id)
		}
	}
}

// A match value holding a control character (C0, DEL, C1) or bytes that
// are not UTF-8 is refused, naming the match; so is data with anything
// after its JSON value.
func TestSignalMatchAndDataAreChecked(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	for _, c := range []struct {
		s    producer.Signal
		want string
	}{
		{producer.Signal{Name: "paid", Match: "order\n42"}, "match holds a control character (U+000A) at byte 5"},
		{producer.Signal{Name: "paid", Match: "\x00"}, "match holds a control character (U+0000) at byte 0"},
		{producer.Signal{Name: "paid", Match: "a\x7f"}, "match holds a control character (U+007F) at byte 1"},
		{producer.Signal{Name: "paid", Match: "é\u0085"}, "match holds a control character (U+0085) at byte 2"},
		{producer.Signal{Name: "paid", Match: "\xff"}, "match is not UTF-8"},
		{producer.Signal{Name: "paid", Data: json.RawMessage(`{"a": 1} {"b": 2}`)}, "data is not JSON"},
		{producer.Signal{Name: "paid", Data: json.RawMessage(`{"a": 1}}`)}, "data is not JSON"},
	} {
		_, err := e.Client.Signal(t.Context(), c.s)
		if !errors.Is(err, producer.ErrBadSignal) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q %q: %v, want ErrBadSignal, one line, %q", c.s.Match, c.s.Data, err, c.want)
		}
	}
	if r, err := e.Client.Signal(t.Context(), producer.Signal{Name: "paid", Match: "ordre n°42 ✓"}); err != nil || !r.Kept {
		t.Fatalf("a match of printable UTF-8: %+v %v", r, err)
	}
}

// On a Redis Cluster, where each (name, match)'s kept signals live in a
// slot of their own and the count in another: forty sends at once, of
// forty names, with room for five keep five and refuse the rest, and a
// kept signal a step takes frees its place.
func TestKeptSignalsAreCappedOnACluster(t *testing.T) {
	const max, senders = 5, 40
	e := testenv.Start(t, testenv.Options{Cluster: true, NoWorker: true})
	c := limitedClient(e, max, time.Hour)
	var (
		start = make(chan struct{})
		wg    sync.WaitGroup
		errs  = make([]error, senders)
	)
	for i := range senders {
		wg.Go(func() {
			<-start
			_, errs[i] = c.Signal(t.Context(), producer.Signal{Name: fmt.Sprintf("paid%d", i), Match: "m", IdempotencyKey: "evt"})
		})
	}
	close(start)
	wg.Wait()
	var kept []int
	for i, err := range errs {
		switch {
		case err == nil:
			kept = append(kept, i)
		case !errors.Is(err, producer.ErrOverLimit):
			t.Fatalf("sender %d: %v", i, err)
		}
	}
	if len(kept) != max {
		t.Fatalf("%d of %d sends kept with room for %d", len(kept), senders, max)
	}
	if n, err := e.Store.KeptSignalCount(t.Context()); err != nil || n != max {
		t.Fatalf("%d places held (%v), want %d", n, err, max)
	}
	// a step takes one: a refused send of its key goes through now
	taken := fmt.Sprintf("paid%d", kept[0])
	if s, err := e.Store.AwaitSignal(t.Context(), taken, "m", store.Waiter{Workflow: "wf_x", Step: "paid", Attempt: 1}, time.Hour); err != nil || s == nil {
		t.Fatalf("take %s: %+v %v", taken, s, err)
	}
	refused := 0
	for refused < senders && errs[refused] == nil {
		refused++
	}
	r, err := c.Signal(t.Context(), producer.Signal{Name: fmt.Sprintf("paid%d", refused), Match: "m", IdempotencyKey: "evt"})
	if err != nil || !r.Kept || r.Duplicate {
		t.Fatalf("a refused send again, once a place is free: %+v %v", r, err)
	}
}
