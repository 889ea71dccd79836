package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
)

// Every append to a workflow's log is announced on the workflow's
// channel, with the new entry's id, by the script that appends it: on a
// real Redis, on the embedded demo's miniredis and on a Redis Cluster,
// where a subscriber on any node hears it. LastEventID is the id of the
// log's last event.
func TestEveryAppendIsAnnouncedOnTheWorkflowsChannel(t *testing.T) {
	t.Run("redis-server", func(t *testing.T) {
		_, rdb := redistest.New(t)
		announces(t, rdb, rdb)
	})
	t.Run("miniredis", func(t *testing.T) {
		m := miniredis.RunT(t)
		rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
		t.Cleanup(func() { rdb.Close() })
		announces(t, rdb, rdb)
	})
	t.Run("cluster", func(t *testing.T) {
		if testing.Short() {
			t.Skip("starts a Redis Cluster")
		}
		cc, addrs := redistest.Cluster(t)
		// subscribe on a node that does not own the workflow's slot
		owner, err := cc.MasterForKey(t.Context(), store.EventsChannel("wf"))
		if err != nil {
			t.Fatal(err)
		}
		var other *redis.Client
		for _, a := range addrs {
			if a != owner.Options().Addr {
				other = redis.NewClient(&redis.Options{Addr: a})
				t.Cleanup(func() { other.Close() })
				break
			}
		}
		announces(t, cc, other)
	})
}

func announces(t *testing.T, rdb redis.UniversalClient, sub redis.UniversalClient) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	s := store.New(rdb, time.Hour, nil)
	s.SetLog(store.LogOptions{Limit: 100})
	ps := sub.Subscribe(ctx, store.EventsChannel("wf"))
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}
	if last, err := s.LastEventID(ctx, "wf"); err != nil || last != "" {
		t.Fatalf("before any event: last %q, %v", last, err)
	}
	if _, err := s.Create(ctx, store.NewWorkflow{ID: "wf", Name: "chord", Spec: []byte(`{}`), Steps: []string{"a", "b"}, Ready: []string{"a", "b"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Log(ctx, "wf", store.Event{Type: "llm.call", Step: "a"}, store.Event{Type: "tool.turn", Step: "a"}); err != nil {
		t.Fatal(err)
	}
	evs, err := s.Events(ctx, "wf", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var entries []string
	for _, e := range evs {
		if entry, place, _ := record.SplitEventID(e.ID); place == 0 {
			entries = append(entries, entry)
		}
	}
	if len(entries) != 2 {
		t.Fatalf("the log holds %d entries (%v), want 2", len(entries), evs)
	}
	for i, want := range entries {
		m, err := ps.ReceiveMessage(ctx)
		if err != nil {
			t.Fatalf("notice %d: %v", i, err)
		}
		if m.Channel != store.EventsChannel("wf") || m.Payload != want {
			t.Fatalf("notice %d: %q on %q, want %q on %q", i, m.Payload, m.Channel, want, store.EventsChannel("wf"))
		}
	}
	if last, err := s.LastEventID(ctx, "wf"); err != nil || last != evs[len(evs)-1].ID {
		t.Fatalf("last event %q, %v; want %s", last, err, evs[len(evs)-1].ID)
	}
}
