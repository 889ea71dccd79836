package webhook_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/defaults"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/webhook"
	"github.com/agentq/agentq/retry"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

var testSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("test signing key, 32 bytes long!"))

// results counts Options.Observe's calls.
type results struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *results) observe(event, result string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n[event+" "+result]++
}

func (r *results) get(k string) int { r.mu.Lock(); defer r.mu.Unlock(); return r.n[k] }

// serve runs an asynq server on the webhooks queue with a Handler of o
// (its Secret and Observe filled in) until the test ends; retries wait
// no backoff.
func serve(t *testing.T, rdb redis.UniversalClient, o webhook.Options) *results {
	t.Helper()
	res := &results{n: map[string]int{}}
	o.Secret, o.Observe = testSecret, res.observe
	h, err := webhook.NewHandler(o)
	if err != nil {
		t.Fatal(err)
	}
	now := retry.Backoff{Base: time.Millisecond, Factor: 1, Max: time.Millisecond, JitterLow: 1, JitterHigh: 1}
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{Concurrency: 2, Queues: map[string]int{webhook.Queue: 1},
		RetryDelayFunc:    webhook.RetryDelay(now, func() float64 { return 0 }, asynq.DefaultRetryDelayFunc),
		TaskCheckInterval: 20 * time.Millisecond, DelayedTaskCheckInterval: 50 * time.Millisecond, LogLevel: asynq.FatalLevel})
	mux := asynq.NewServeMux()
	mux.Handle(webhook.TypeDelivery, h)
	if err := srv.Start(mux); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	return res
}

func event(wf, url string) webhook.Event {
	return webhook.Event{Workflow: wf, Name: "report", Event: webhook.Blocked, State: "blocked", URL: url,
		At: time.Unix(1_800_000_000, 0), Unfinished: []string{"fetch", "write"}, Error: "step fetch dead-lettered: rate_limited"}
}

// waitState polls until the event's task is in state, and returns it.
func waitState(t *testing.T, insp *asynq.Inspector, wf, event string, state asynq.TaskState) *asynq.TaskInfo {
	t.Helper()
	var info *asynq.TaskInfo
	poll.Until(t, 20*time.Second, func() (bool, string) {
		var err error
		info, err = insp.GetTaskInfo(webhook.Queue, webhook.TaskID(wf, event))
		if err != nil {
			return false, err.Error()
		}
		return info.State == state, fmt.Sprintf("task is %s (retried %d, last error %q), want %s", info.State, info.Retried, info.LastErr, state)
	})
	return info
}

// A receiver that never answers 2xx gets every attempt, then the delivery
// is archived with the status in its reason (and a short, redacted
// excerpt of the body), counted as retrying twice and dead once.
func TestDeliveryIsArchivedAfterItsRetries(t *testing.T) {
	_, rdb := redistest.New(t)
	rcv := newReceiver(t, func(int) int { return http.StatusBadGateway })
	rcv.reply = "upstream says: " + testSecret + " " + strings.Repeat("x", 200<<10) // echoed, and longer than what is read
	res := serve(t, rdb, webhook.Options{Allow: []string{"127.0.0.1"}})
	c := asynq.NewClientFromRedisClient(rdb)
	t.Cleanup(func() { c.Close() })
	if err := webhook.Enqueue(t.Context(), c, event("wf_dead", rcv.URL+"/hook?token=abc"), defaults.Retention, asynq.MaxRetry(2)); err != nil {
		t.Fatal(err)
	}
	insp := asynq.NewInspectorFromRedisClient(rdb)
	info := waitState(t, insp, "wf_dead", webhook.Blocked, asynq.TaskStateArchived)
	if rcv.requests() != 3 {
		t.Errorf("the receiver got %d requests, want 3 (one try and two retries)", rcv.requests())
	}
	if !strings.Contains(info.LastErr, "answered 502: upstream says: [redacted] xxx") || strings.Contains(info.LastErr, "token=abc") ||
		strings.Contains(info.LastErr, strings.TrimPrefix(testSecret, "whsec_")) || len(info.LastErr) > 300 {
		t.Errorf("archived with %q: want the status and a short redacted excerpt, never the URL's query", info.LastErr)
	}
	if res.get("blocked retrying") != 2 || res.get("blocked dead") != 1 {
		t.Errorf("observed %v, want 2 retrying and 1 dead", res.n)
	}
	ds, err := webhook.List(insp, 10)
	if err != nil || len(ds) != 1 || ds[0].State != "archived" || ds[0].Attempts != 3 || ds[0].Host != rcv.Listener.Addr().String() ||
		ds[0].EventID != "msg_wf_dead_blocked" {
		t.Errorf("listed %+v (%v), want one archived delivery after 3 attempts", ds, err)
	}
}

// A destination the guard refuses (127.0.0.1 not listed, or a name that
// resolves to it) is archived at once with the reason; nothing connects.
func TestRefusedDestinationIsArchivedAtOnce(t *testing.T) {
	_, rdb := redistest.New(t)
	rcv := newReceiver(t, func(int) int { return 200 })
	res := serve(t, rdb, webhook.Options{})
	c := asynq.NewClientFromRedisClient(rdb)
	t.Cleanup(func() { c.Close() })
	insp := asynq.NewInspectorFromRedisClient(rdb)
	for wf, host := range map[string]string{"wf_ip": "127.0.0.1", "wf_name": "localhost"} {
		if err := webhook.Enqueue(t.Context(), c, event(wf, "http://"+host+":"+rcv.port()+"/hook"), defaults.Retention); err != nil {
			t.Fatal(err)
		}
		info := waitState(t, insp, wf, webhook.Blocked, asynq.TaskStateArchived)
		t.Logf("%s: %s", host, info.LastErr)
		if info.Retried != 0 || !strings.Contains(info.LastErr, "a loopback address") || !strings.Contains(info.LastErr, "webhooks.allow") {
			t.Errorf("%s: archived after %d retries with %q: want at once, saying why", host, info.Retried, info.LastErr)
		}
	}
	if rcv.conns.Load() != 0 || res.get("blocked refused") != 2 {
		t.Errorf("receiver connections %d, observed %v: want none, and 2 refused", rcv.conns.Load(), res.n)
	}
}

// The event is enqueued once however often it is asked for; what is
// stored and sent holds no secret (only the signature is derived from
// it), and the body holds ids and states.
func TestOneTaskPerEventAndNoSecretAnywhere(t *testing.T) {
	_, rdb := redistest.New(t)
	rcv := newReceiver(t, func(int) int { return http.StatusNoContent })
	c := asynq.NewClientFromRedisClient(rdb)
	t.Cleanup(func() { c.Close() })
	ev := event("wf_once", rcv.URL+"/hook")
	for range 3 {
		if err := webhook.Enqueue(t.Context(), c, ev, defaults.Retention); err != nil {
			t.Fatal(err)
		}
	}
	insp := asynq.NewInspectorFromRedisClient(rdb)
	pending, err := insp.ListPendingTasks(webhook.Queue)
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending %d (%v), want one task", len(pending), err)
	}
	key, _ := webhook.ParseSecret(testSecret)
	leaks := func(where, s string) {
		t.Helper()
		if strings.Contains(s, testSecret) || strings.Contains(s, strings.TrimPrefix(testSecret, "whsec_")) || strings.Contains(s, string(key)) {
			t.Errorf("%s holds the secret: %s", where, s)
		}
	}
	leaks("the stored task", string(pending[0].Payload))
	serve(t, rdb, webhook.Options{Allow: []string{"127.0.0.1"}})
	waitState(t, insp, "wf_once", webhook.Blocked, asynq.TaskStateCompleted)
	if rcv.requests() != 1 {
		t.Fatalf("%d requests, want 1", rcv.requests())
	}
	req, body := rcv.reqs[0], string(rcv.body[0])
	for k, v := range req.Header {
		if k != http.CanonicalHeaderKey(webhook.HeaderSignature) {
			leaks("header "+k, strings.Join(v, " "))
		}
	}
	leaks("the body", body)
	want := `{"type":"workflow.blocked","timestamp":"2027-01-15T08:00:00Z","data":{"id":"wf_once","name":"report","state":"blocked",` +
		`"unfinished_steps":["fetch","write"],"error":"step fetch dead-lettered: rate_limited"}}`
	if body != want {
		t.Errorf("body\n%s\nwant\n%s", body, want)
	}
	if err := webhook.Verify(key, req.Header, rcv.body[0], time.Now(), 5*time.Minute); err != nil || req.Header.Get(webhook.HeaderID) != "msg_wf_once_blocked" {
		t.Errorf("id %q: %v", req.Header.Get(webhook.HeaderID), err)
	}
}

func TestEnqueueRefusesBadInput(t *testing.T) {
	_, rdb := redistest.New(t)
	c := asynq.NewClientFromRedisClient(rdb)
	t.Cleanup(func() { c.Close() })
	for _, e := range []webhook.Event{
		{Workflow: "wf", Event: "completed", URL: "ftp://x"},
		{Workflow: "wf", Event: "completed", URL: "https://user:pw@x.example/"},
		{Workflow: "wf", Event: "done", URL: "https://x.example/"},
	} {
		if err := webhook.Enqueue(t.Context(), c, e, defaults.Retention); err == nil || strings.Contains(err.Error(), "pw@") {
			t.Errorf("%+v: %v", e, err)
		}
	}
}
