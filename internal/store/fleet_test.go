package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
)

func liveIDs(t *testing.T, f *store.Fleet) map[string]bool {
	t.Helper()
	ads, err := f.Live(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, ad := range ads {
		out[ad.ID] = true
	}
	return out
}

// An advertisement is listed until its TTL passes without a renewal (a
// killed worker) or until it is withdrawn (a graceful stop); the index
// keeps no entry for either, and one that does not decode is left out.
func TestAdvertisementsLapseOrAreWithdrawn(t *testing.T) {
	_, rdb := redistest.New(t)
	ctx := context.Background()
	f := store.NewFleet(rdb, nil)
	long := store.WorkerAd{ID: "host-1-aa", Queues: map[string]int{"default": 1}, Routes: []string{"main"}}
	if err := f.Advertise(ctx, long, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := f.Advertise(ctx, store.WorkerAd{ID: "host-2-bb"}, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if got := liveIDs(t, f); !got["host-1-aa"] || !got["host-2-bb"] {
		t.Fatalf("live %v, want both", got)
	}
	poll.Until(t, 5*time.Second, func() (bool, string) {
		return !liveIDs(t, f)["host-2-bb"], "an advertisement that was not renewed is still live after 5s (TTL 300ms)"
	})
	if n := rdb.ZCard(ctx, "agentq:{workers}").Val(); n != 1 {
		t.Fatalf("index holds %d entries after the lapse, want 1", n)
	}
	ads, _ := f.Live(ctx)
	if len(ads) != 1 || ads[0].Routes[0] != "main" || ads[0].Queues["default"] != 1 {
		t.Fatalf("live %+v", ads)
	}
	// garbage under a live index entry is skipped
	rdb.ZAdd(ctx, "agentq:{workers}", redis.Z{Score: float64(time.Now().Add(time.Hour).UnixMilli()), Member: "junk"})
	rdb.Set(ctx, "agentq:{workers}:junk", "{not json", time.Hour)
	if got := liveIDs(t, f); len(got) != 1 || !got["host-1-aa"] {
		t.Fatalf("live %v, want only host-1-aa", got)
	}
	if err := f.Withdraw(ctx, "host-1-aa"); err != nil {
		t.Fatal(err)
	}
	if got := liveIDs(t, f); got["host-1-aa"] || rdb.Exists(ctx, "agentq:{workers}:host-1-aa").Val() != 0 {
		t.Fatalf("withdrawn advertisement still there: %v", got)
	}
	if err := f.Advertise(ctx, store.WorkerAd{}, time.Second); !errors.Is(err, store.ErrBadAd) {
		t.Fatalf("an advertisement without an id: %v, want ErrBadAd", err)
	}
}

// Keys are listed from the advertisements and a caller's own
// configuration, once each with the live workers that use them and their
// shared state; provider#N finds one, or says which fingerprints it could
// mean; EnableKeys clears a disable for every worker.
func TestFleetKeys(t *testing.T) {
	_, rdb := redistest.New(t)
	ctx := context.Background()
	now := time.Now()
	f := store.NewFleet(rdb, func() time.Time { return now })
	k1 := store.AdKey{Provider: "oa", Fingerprint: "oa#1 (…aaaa)", ID: "id-1"}
	k2 := store.AdKey{Provider: "oa", Fingerprint: "oa#2 (…bbbb)", ID: "id-2"}
	other2 := store.AdKey{Provider: "oa", Fingerprint: "oa#2 (…cccc)", ID: "id-3"}
	an := store.AdKey{Provider: "an", Fingerprint: "an#1 (…dddd)", ID: "id-4"}
	for _, ad := range []store.WorkerAd{{ID: "w1", Keys: []store.AdKey{k1, k2}}, {ID: "w2", Keys: []store.AdKey{k1, an}}} {
		if err := f.Advertise(ctx, ad, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	ks := store.NewKeyState(rdb, func() time.Time { return now })
	if err := ks.Disable(ctx, "oa", "id-1", "auth: 401"); err != nil {
		t.Fatal(err)
	}
	if err := ks.Cool(ctx, "an", "id-4", now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	keys, err := f.FleetKeys(ctx, []store.AdKey{k2, other2})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, k := range keys {
		got = append(got, fmt.Sprintf("%s %s %d", k.Fingerprint, k.State, k.Workers))
	}
	want := "an#1 (…dddd) cooling 1|oa#1 (…aaaa) disabled 2|oa#2 (…bbbb) ok 1|oa#2 (…cccc) ok 0"
	if strings.Join(got, "|") != want {
		t.Fatalf("keys\n%s\nwant\n%s", strings.Join(got, "|"), want)
	}
	if keys[0].CoolUntil == nil || keys[1].Disabled != "auth: 401" {
		t.Fatalf("states %+v", keys[:2])
	}
	if k, err := store.FindKey(keys, "oa#1"); err != nil || k.ID != "id-1" {
		t.Fatalf("oa#1: %+v %v", k, err)
	}
	if k, err := store.FindKey(keys, "oa#2  (…cccc)"); err != nil || k.ID != "id-3" {
		t.Fatalf("a whole fingerprint: %+v %v", k, err)
	}
	for ref, want := range map[string]string{"oa#2": "oa#2 (…bbbb), oa#2 (…cccc)", "oa#9": "no key #9", "oa": "is not PROVIDER#N", "#1": "is not PROVIDER#N"} {
		if _, err := store.FindKey(keys, ref); !errors.Is(err, store.ErrUnknownKey) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want ErrUnknownKey and %q", ref, err, want)
		}
	}
	res, err := f.EnableKeys(ctx, nil, "oa#1", false)
	if err != nil || len(res.Enabled) != 1 || res.Enabled[0] != "oa#1 (…aaaa)" {
		t.Fatalf("enable oa#1: %+v %v", res, err)
	}
	if st, _ := ks.Load(ctx, []string{"oa"}); st["oa"]["id-1"].Disabled != "" {
		t.Fatal("oa#1 is still disabled")
	}
	res, err = f.EnableKeys(ctx, nil, "", true)
	if err != nil || len(res.Enabled) != 1 || res.Enabled[0] != "an#1 (…dddd)" || len(res.NotChanged) != 2 {
		t.Fatalf("enable all: %+v %v", res, err)
	}
}
