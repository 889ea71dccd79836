package main

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/defaults"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/webhook"
	"github.com/agentq/agentq/retry"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

var secrets = []string{"whsec_" + base64.StdEncoding.EncodeToString([]byte("an example signing key, 32 bytes")), "a raw secret that is long enough"}

// The example verifies what agentq signs, with either form of secret, and
// refuses a changed body, another key and a stale timestamp.
func TestReceiverVerifiesWhatAgentqSigns(t *testing.T) {
	now := time.Now()
	body := []byte(`{"type":"workflow.completed","timestamp":"2026-01-02T03:04:05Z","data":{"id":"wf_1","name":"n","state":"completed"}}`)
	headers := func(key []byte, ts time.Time) http.Header {
		h := http.Header{}
		h.Set(webhook.HeaderID, "msg_wf_1_completed")
		h.Set(webhook.HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
		h.Set(webhook.HeaderSignature, webhook.Sign(key, "msg_wf_1_completed", ts.Unix(), body))
		return h
	}
	for _, s := range secrets {
		sent, err := webhook.ParseSecret(s)
		if err != nil {
			t.Fatal(err)
		}
		key, err := parseSecret(s)
		if err != nil || !bytes.Equal(key, sent) {
			t.Fatalf("%.10s…: the example reads the key as %q (%v), agentq as %q", s, key, err, sent)
		}
		if err := verify(key, headers(sent, now), body, now); err != nil {
			t.Errorf("%.10s…: %v", s, err)
		}
		if verify(key, headers(sent, now), append([]byte(" "), body...), now) == nil {
			t.Errorf("%.10s…: a changed body passed", s)
		}
		if verify([]byte("another key, long enough to use"), headers(sent, now), body, now) == nil {
			t.Errorf("%.10s…: another key passed", s)
		}
		if verify(key, headers(sent, now.Add(-6*time.Minute)), body, now) == nil {
			t.Errorf("%.10s…: a timestamp six minutes old passed", s)
		}
	}
}

// A receiver that fails twice (500) gets the event on agentq's third try,
// over real HTTP from the real queue; the example verifies its signature
// and handles it exactly once.
func TestReceiverGetsTheEventOnTheThirdTry(t *testing.T) {
	_, rdb := redistest.New(t)
	key, _ := parseSecret(secrets[0])
	var (
		mu      sync.Mutex
		handled []event
		tries   atomic.Int32
	)
	rc := newReceiver(key, time.Now, func(e event) { mu.Lock(); handled = append(handled, e); mu.Unlock() })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tries.Add(1) <= 2 {
			http.Error(w, "down for a moment", http.StatusInternalServerError)
			return
		}
		rc.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	h, err := webhook.NewHandler(webhook.Options{Secret: secrets[0], Allow: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	quick := retry.Backoff{Base: time.Millisecond, Factor: 1, Max: time.Millisecond, JitterLow: 1, JitterHigh: 1}
	as := asynq.NewServerFromRedisClient(rdb, asynq.Config{Queues: map[string]int{webhook.Queue: 1}, Concurrency: 1, LogLevel: asynq.FatalLevel,
		RetryDelayFunc:    webhook.RetryDelay(quick, func() float64 { return 0 }, asynq.DefaultRetryDelayFunc),
		TaskCheckInterval: 20 * time.Millisecond, DelayedTaskCheckInterval: 50 * time.Millisecond})
	mux := asynq.NewServeMux()
	mux.Handle(webhook.TypeDelivery, h)
	if err := as.Start(mux); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(as.Shutdown)
	c := asynq.NewClientFromRedisClient(rdb)
	t.Cleanup(func() { c.Close() })
	ev := webhook.Event{Workflow: "wf_third", Name: "report", Event: webhook.Completed, State: "completed", URL: srv.URL + "/hooks/agentq", At: time.Now()}
	if err := webhook.Enqueue(t.Context(), c, ev, defaults.Retention); err != nil {
		t.Fatal(err)
	}
	insp := asynq.NewInspectorFromRedisClient(rdb)
	poll.Until(t, 20*time.Second, func() (bool, string) {
		info, err := insp.GetTaskInfo(webhook.Queue, webhook.TaskID("wf_third", webhook.Completed))
		if err != nil {
			return false, err.Error()
		}
		return info.State == asynq.TaskStateCompleted, "delivery is " + info.State.String() + ", last error: " + info.LastErr
	})
	mu.Lock()
	defer mu.Unlock()
	if tries.Load() != 3 || len(handled) != 1 {
		t.Fatalf("%d tries, %d events handled: want the third try to deliver, once", tries.Load(), len(handled))
	}
	if e := handled[0]; e.Type != "workflow.completed" || e.Data.ID != "wf_third" || e.Data.Name != "report" || e.Data.State != "completed" {
		t.Errorf("handled %+v", e)
	}
}
