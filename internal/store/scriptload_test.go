package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
)

// The create pipeline sends its script by SHA only: a server that lost
// its scripts (SCRIPT FLUSH, a restart, a failover) answers NOSCRIPT, and
// the store loads them again and sends the round trip again, once.
func TestCreateSendsItsScriptBySHAAndSurvivesAScriptFlush(t *testing.T) {
	db, rdb := redistest.New(t)
	if db.Kind == "miniredis" {
		t.Skip("counting the commands sent needs a real redis-server (INFO commandstats)")
	}
	s := store.New(rdb, time.Hour, nil)
	s.SetLog(store.LogOptions{Limit: 100})
	ctx := context.Background()
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	root := store.Task{ID: "wf2:a", Queue: "default", Type: "agentq:step", Payload: []byte(`{"wf":"wf2","step":"a"}`)}
	for i, id := range []string{"wf1", "wf2"} {
		if i == 1 {
			if err := rdb.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
		w := store.NewWorkflow{ID: id, Name: "one", Spec: []byte(`{}`), Steps: []string{"a"}, Ready: []string{"a"}}
		if id == "wf2" {
			w.Roots = []store.Task{root}
		}
		enq, err := s.Create(ctx, w)
		if err != nil {
			t.Fatalf("create %s: %v", id, err)
		}
		if enq != (id == "wf2") {
			t.Errorf("create %s: roots enqueued %v", id, enq)
		}
	}
	for _, id := range []string{"wf1", "wf2"} {
		wf, err := s.Get(ctx, id)
		if err != nil || wf.State != store.StatePending {
			t.Fatalf("%s: %+v, %v", id, wf, err)
		}
		for _, idx := range []string{store.Prefix + "workflows", store.Prefix + "open"} {
			if err := rdb.ZScore(ctx, idx, id).Err(); err != nil {
				t.Errorf("%s not in %s: %v", id, idx, err)
			}
		}
		// the log lives as long as the record: it is in it
		logIsInTheRecord(t, rdb, id)
	}
	if n, _ := rdb.LLen(ctx, "asynq:{default}:pending").Result(); n != 1 {
		t.Errorf("%d tasks pending, want wf2's root", n)
	}
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(info, "cmdstat_eval:") {
		t.Errorf("a create sent its script's text (EVAL): %s", info)
	}
}
