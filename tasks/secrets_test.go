package tasks_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/dashboard"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/llmclient"
)

// After a scripted outage in which providers reject a key and echo it back
// (as some providers and proxies do), no API key's text is anywhere: not in
// Redis (every key and value, task payloads and asynq's error messages
// included), the worker's logs, /metrics, or any dashboard page or API
// answer (asynqmon's too). Keys are named by fingerprint only.
func TestNoSecretAnywhereAfterAnOutage(t *testing.T) {
	k1, k2 := testenv.Keys[0], testenv.Keys[1]
	var logs testenv.Buffer
	e := testenv.Start(t, testenv.Options{Metrics: true, LogTo: &logs, Scenario: chaosllm.Scenario{
		Keys: []string{k2}, // k1 is rejected: 401 with the key echoed in the message
		Timelines: []chaosllm.Timeline{
			{Endpoint: "openai", Key: k2, Phases: []chaosllm.Phase{
				{Requests: 2, Fault: &chaosllm.Fault{Status: 429, RetryAfter: chaosllm.Duration(time.Second)}},
				{Requests: 1, Fault: &chaosllm.Fault{Status: 400, Message: "request rejected for key " + k2}},
				{Requests: 2, Fault: &chaosllm.Fault{Status: 503, Message: "upstream failed for Bearer " + k2}},
				{}}},
		}}})

	var ids []string
	for _, route := range []string{"main", "main", "solo", "flaky", "main"} {
		degrade := ""
		if route == "flaky" {
			degrade = ", degrade: template"
		}
		ids = append(ids, e.Submit(t, e.Spec("name: outage\nsteps:\n  - { id: s, route: "+route+", prompt: \"secret hunt via "+route+"\""+degrade+" }\n")))
	}
	for _, id := range ids {
		e.Wait(t, id, 30*time.Second, store.StateCompleted, store.StateBlocked, store.StateFailed)
	}

	secrets := []string{k1, k2}
	hunt := func(where, text string) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(text, s) {
				i := strings.Index(text, s)
				t.Errorf("%s holds an API key: …%s…", where, text[max(0, i-80):min(len(text), i+len(s)+20)])
			}
		}
	}

	// Redis: every key name and every value of every type
	ctx := t.Context()
	var keys []string
	iter := e.Redis.Scan(ctx, 0, "*", 500).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if len(keys) < 10 {
		t.Fatalf("only %d keys in Redis: the outage did not run", len(keys))
	}
	for _, k := range keys {
		hunt("Redis key name "+k, k)
		hunt("Redis value of "+k, dumpValue(t, e.Redis, k))
	}
	// the worker's logs, after the outage produced some
	if !strings.Contains(logs.String(), `"class":"auth"`) || !strings.Contains(logs.String(), "API key disabled") {
		t.Fatalf("the outage left no auth failure in the logs:\n%s", logs.String())
	}
	hunt("worker logs", logs.String())
	fp := llmclient.Fingerprint("oa", 0, k1)
	if !strings.Contains(logs.String(), fp) {
		t.Errorf("logs do not name the rejected key by its fingerprint %s", fp)
	}
	hunt("worker /metrics", scrape(t, e.MetricsURL))

	// every dashboard page and API answer, asynqmon's included
	const token = "dashboard-token-for-the-secrets-test"
	srv, err := dashboard.New(dashboard.Options{Config: e.Config, Redis: e.Redis, Token: token,
		AsynqOpt: asynq.RedisClientOpt{Addr: e.DB.Addr, DB: e.DB.DB}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv)
	defer hs.Close()
	get := func(path string) string {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	paths := []string{"/workflows", "/providers", "/dlq", "/metrics", "/api/v1/workflows", "/api/v1/dlq",
		"/asynq/api/queues", "/asynq/api/queues/default/archived_tasks", "/asynq/api/queues/default/completed_tasks",
		"/asynq/api/queues/default/retry_tasks", "/asynq/api/servers"}
	for _, id := range ids {
		paths = append(paths, "/workflows/"+id, "/api/v1/workflows/"+id, "/api/v1/workflows/"+id+"/result")
	}
	dls := waitDeadLetters(t, e, "")
	for _, d := range dls {
		paths = append(paths, "/dlq/"+d.TaskID, "/api/v1/dlq/"+d.TaskID)
	}
	for _, p := range paths {
		hunt("dashboard "+p, get(p))
	}
	if page := get("/providers"); !strings.Contains(page, "oa#1 (…"+fp[len(fp)-5:len(fp)-1]) {
		t.Errorf("the providers page does not name the disabled key by fingerprint")
	}
}

// dumpValue reads a Redis value of any type as text.
func dumpValue(t *testing.T, rdb redis.UniversalClient, key string) string {
	t.Helper()
	ctx := t.Context()
	var b strings.Builder
	switch typ := rdb.Type(ctx, key).Val(); typ {
	case "string":
		b.WriteString(rdb.Get(ctx, key).Val())
	case "hash":
		for f, v := range rdb.HGetAll(ctx, key).Val() {
			b.WriteString(f + "=" + v + "\n")
		}
	case "list":
		b.WriteString(strings.Join(rdb.LRange(ctx, key, 0, -1).Val(), "\n"))
	case "set":
		b.WriteString(strings.Join(rdb.SMembers(ctx, key).Val(), "\n"))
	case "zset":
		b.WriteString(strings.Join(rdb.ZRange(ctx, key, 0, -1).Val(), "\n"))
	case "stream":
		for _, m := range rdb.XRange(ctx, key, "-", "+").Val() {
			for f, v := range m.Values {
				b.WriteString(f + "=" + v.(string) + "\n")
			}
		}
	case "none":
	default:
		t.Fatalf("key %s has type %s, which this test cannot read", key, typ)
	}
	return b.String()
}
