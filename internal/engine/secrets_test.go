package engine_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/cli"
	"github.com/agentq/agentq/internal/dashboard"
	"github.com/agentq/agentq/internal/engine"
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
	t.Parallel() // its own database, worker and provider: it runs beside the others
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
	waitDeadLetters(t, e, "")

	fp := llmclient.Fingerprint("oa", 0, k1)
	get := huntSecrets(t, e, &logs, ids, []string{k1, k2})
	// the outage left an auth failure, named by fingerprint only
	if !strings.Contains(logs.String(), `"class":"auth"`) || !strings.Contains(logs.String(), "API key disabled") {
		t.Fatalf("the outage left no auth failure in the logs:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), fp) {
		t.Errorf("logs do not name the rejected key by its fingerprint %s", fp)
	}
	if page := get("/providers"); !strings.Contains(page, "oa#1 (…"+fp[len(fp)-5:len(fp)-1]) {
		t.Errorf("the providers page does not name the disabled key by fingerprint")
	}
}

// Providers and proxies that answer with bodies that are not JSON (a
// gateway's text/plain 401 echoing the key, with the key across the
// adapter's 512-byte excerpt cut; an error body echoing the key after 64
// KiB of filler; an HTML page; an answer that never ends), on both
// dialects: afterwards no 8-byte piece of any key is anywhere.
func TestNoSecretAnywhereAfterHostileBodies(t *testing.T) {
	t.Parallel() // its own database, worker and provider: it runs beside the others
	k1, k2 := testenv.Keys[0], testenv.Keys[1]
	var logs testenv.Buffer
	echo := func(n, pad, status int) chaosllm.Phase {
		return chaosllm.Phase{Requests: n, Fault: &chaosllm.Fault{Kind: chaosllm.KindTextEcho, Pad: pad, Status: status}}
	}
	e := testenv.Start(t, testenv.Options{Metrics: true, LogTo: &logs, Scenario: chaosllm.Scenario{
		Timelines: []chaosllm.Timeline{
			// a 401 disables the key, so each key's 401 comes last
			{Endpoint: "openai", Key: k1, Phases: []chaosllm.Phase{
				{Requests: 1, Fault: &chaosllm.Fault{Kind: chaosllm.KindEndless}},
				echo(1, 500, 500), echo(1, 65530, 503),
				{Requests: 1, Fault: &chaosllm.Fault{Kind: chaosllm.KindHTML}},
				echo(1, 490, 401), {}}},
			{Endpoint: "openai", Key: k2, Phases: []chaosllm.Phase{
				echo(2, 497, 500),
				{Requests: 1, Fault: &chaosllm.Fault{Kind: chaosllm.KindHuge, Status: 429, Size: 4 << 20, RetryAfter: chaosllm.Duration(time.Second)}},
				{}}},
			{Endpoint: "anthropic", Key: k1, Phases: []chaosllm.Phase{
				echo(1, 511, 529), echo(1, 2040, 500), echo(1, 493, 401), {}}},
		}}})
	var ids []string
	for _, route := range []string{"main", "solo", "main", "scored", "main", "solo", "main", "scored", "solo", "main"} {
		ids = append(ids, e.Submit(t, e.Spec("name: hostile\nsteps:\n  - { id: s, route: "+route+", prompt: \"hostile bodies via "+route+"\" }\n")))
	}
	for _, id := range ids {
		e.Wait(t, id, 60*time.Second, store.StateCompleted, store.StateBlocked, store.StateFailed)
	}
	for _, outcome := range []string{"text_echo_401", "text_echo_500", "text_echo_503", "text_echo_529", "endless_200", "huge_429", "html_502"} {
		if e.Chaos.Snapshot().Count("", "", outcome) == 0 {
			t.Errorf("chaosllm never answered %s: the scenario did not run (%+v)", outcome, e.Chaos.Snapshot())
		}
	}
	huntSecrets(t, e, &logs, ids, []string{k1, k2})
}

// dashboardToken is the token the hunt's dashboard runs with; it is hunted
// too.
const dashboardToken = "tqk-zx9-f0r-s3crets-hunt-v7w" // no English word: every 8-byte piece is looked for, and a page may say "dashboard"

// huntSecrets looks for every 8-byte piece of every secret (and of the
// dashboard token) in every Redis key and value, the worker's logs, its
// /metrics, and every dashboard page and API answer, asynqmon's included.
// It returns the dashboard getter for further checks.
func huntSecrets(t *testing.T, e *testenv.Env, logs *testenv.Buffer, ids, secrets []string) func(string) string {
	t.Helper()
	secrets = append(secrets, dashboardToken)
	for _, s := range secrets[:len(secrets)-1] { // and the base64 forms of each key a gateway may echo
		secrets = append(secrets, base64Middles(s)...)
	}
	hunt := func(where, text string) {
		t.Helper()
		for _, s := range secrets {
			for i := 0; i+8 <= len(s); i++ {
				if j := strings.Index(text, s[i:i+8]); j >= 0 {
					t.Errorf("%s holds a piece of a secret: …%s…", where, text[max(0, j-80):min(len(text), j+40)])
					break
				}
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
	if logs.String() == "" {
		t.Fatal("the worker logged nothing: the outage did not run")
	}
	hunt("worker logs", logs.String())
	hunt("worker /metrics", scrape(t, e.MetricsURL))

	// every dashboard page and API answer, asynqmon's included
	token := dashboardToken
	srv, err := dashboard.New(t.Context(), dashboard.Options{Config: e.Config, Redis: e.Redis, Token: token,
		AsynqOpt: asynq.RedisClientOpt{Addr: e.DB.Addr, DB: e.DB.DB}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
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
		if wf, err := e.Store.Summary(ctx, id); err == nil && store.Terminal(wf.State) {
			paths = append(paths, "/api/v1/workflows/"+id+"/events") // an ended workflow's event stream ends
		}
	}
	dls, err := e.Client.DeadLetters(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dls {
		paths = append(paths, "/dlq/"+d.TaskID, "/api/v1/dlq/"+d.TaskID)
	}
	for _, p := range paths {
		hunt("dashboard "+p, get(p))
	}

	// every CLI command's --json output (and its stderr)
	cfg := filepath.Join(t.TempDir(), "agentq.yaml")
	if err := os.WriteFile(cfg, []byte(testenv.ConfigYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"CHAOS": e.URL, "K1": testenv.Keys[0], "K2": testenv.Keys[1],
		"AGENTQ_REDIS_ADDR": e.DB.Addr, "AGENTQ_REDIS_DB": strconv.Itoa(e.DB.DB)}
	cmds := [][]string{{"list", "--json"}, {"dlq", "list", "--json"}, {"keys", "list", "--json"}, {"queue", "list", "--json"}}
	for _, id := range ids {
		cmds = append(cmds, []string{"status", id, "--json"}, []string{"result", id, "--json"})
	}
	for _, d := range dls {
		cmds = append(cmds, []string{"dlq", "show", d.TaskID, "--json"})
	}
	for _, args := range cmds {
		var out, errOut bytes.Buffer
		env := cli.Env{Out: &out, Err: &errOut, LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }}
		cli.Run(cli.Enqueue(env), env, append(args, "--config", cfg))
		if out.Len() == 0 && errOut.Len() == 0 {
			t.Fatalf("enqueue %v printed nothing", args)
		}
		hunt(fmt.Sprintf("enqueue %v", args), out.String()+errOut.String())
	}
	return get
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

// Keys echoed in pieces: split in two at every position, base64-encoded
// and inside "Basic base64(user:key)", by a gateway in front of each
// provider: afterwards no 8-byte piece of any key, nor of its base64 form,
// is anywhere (Redis, logs, /metrics, pages, API answers).
func TestNoSecretAnywhereAfterKeysEchoedInPieces(t *testing.T) {
	t.Parallel() // its own database, worker and provider: it runs beside the others
	k1, k2 := testenv.Keys[0], testenv.Keys[1]
	var logs testenv.Buffer
	echoes := func(k string, last ...chaosllm.Phase) []chaosllm.Phase {
		var ps []chaosllm.Phase
		for at := 1; at < len(k); at++ {
			ps = append(ps, chaosllm.Phase{Requests: 1, Fault: &chaosllm.Fault{Kind: chaosllm.KindTextEcho, Status: 500, Echo: "split", Split: at}})
		}
		for _, how := range []string{"base64", "basic"} {
			ps = append(ps, chaosllm.Phase{Requests: 1, Fault: &chaosllm.Fault{Kind: chaosllm.KindTextEcho, Status: 500, Echo: how}})
		}
		return append(ps, last...)
	}
	e := testenv.Start(t, testenv.Options{Metrics: true, LogTo: &logs, NoWorker: true, Scenario: chaosllm.Scenario{
		Timelines: []chaosllm.Timeline{
			// k1's last echo is a 401: the key is disabled, and k2 takes over
			{Endpoint: "openai", Key: k1, Phases: echoes(k1,
				chaosllm.Phase{Requests: 1, Fault: &chaosllm.Fault{Kind: chaosllm.KindTextEcho, Status: 401, Echo: "split", Split: 11}}, chaosllm.Phase{})},
			{Endpoint: "openai", Key: k2, Phases: echoes(k2, chaosllm.Phase{})},
			{Endpoint: "anthropic", Key: k1, Phases: echoes(k1, chaosllm.Phase{})},
		}}})
	e.Config.Events.Content = true // prompts, answers and errors in the event log too: redacted
	e.StartWorker(t)
	var ids []string
	submit := func(n int) {
		for range n {
			i := len(ids)
			route := []string{"main", "solo"}[i%2]
			ids = append(ids, e.Submit(t, e.Spec(fmt.Sprintf("name: pieces\nsteps:\n  - { id: s, route: %s, prompt: \"echo %d\" }\n", route, i))))
		}
		for _, id := range ids[len(ids)-n:] {
			e.Wait(t, id, 60*time.Second, store.StateCompleted, store.StateBlocked, store.StateFailed)
		}
	}
	submit(len(k1) + len(k2) + 6)
	// which key and target a call takes depends on the keys' health, and so
	// on timing: more workflows until k1's last echo (the 401) was sent
	for deadline := time.Now().Add(60 * time.Second); e.Chaos.Snapshot().Count("", "", "text_echo_401") == 0 && time.Now().Before(deadline); {
		submit(8)
	}
	for _, outcome := range []string{"text_echo_500", "text_echo_401"} {
		if e.Chaos.Snapshot().Count("", "", outcome) == 0 {
			t.Fatalf("chaosllm never answered %s: the scenario did not run", outcome)
		}
	}
	huntSecrets(t, e, &logs, ids, []string{k1, k2})
}

// base64Middles are the parts of s's base64 encodings (standard
// alphabet) that stand in the encoding of any text holding s, at each of
// the three alignments: what "Basic base64(user:key)" shows of the key.
func base64Middles(s string) []string {
	var out []string
	for pad := range 3 {
		e := base64.StdEncoding.EncodeToString(append(make([]byte, pad), s...))
		from := 0
		if pad > 0 {
			from = 4
		}
		if len(e)-4-from >= 8 {
			out = append(out, e[from:len(e)-4])
		}
	}
	return out
}

// A provider whose answers quote the key (whole and split, in a plain
// answer, in a stream and in a code step's answer), with the log keeping
// content: no piece of it in Redis (outputs, the event log, durable
// calls), the logs, the metrics or the dashboard, its event stream
// included.
func TestNoSecretAnywhereAfterAnswersEchoTheKey(t *testing.T) {
	k1 := testenv.Keys[0]
	var logs testenv.Buffer
	quote := strings.Repeat("a long answer, ", 60) + "your key: " + k1 + " and again " + k1[:12] + " / " + k1[12:] + strings.Repeat(" more text", 60)
	e := testenv.Start(t, testenv.Options{Metrics: true, LogTo: &logs, NoWorker: true,
		Scenario: chaosllm.Scenario{Answers: []chaosllm.Answer{{Match: "quote", Text: quote}}},
		Steps: map[string]engine.StepFunc{"quoter": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			resp, err := s.LLM().Stream(ctx, "solo", llmclient.Request{Messages: []llmclient.Message{{Role: "user", Content: "quote it"}}}, nil)
			if err != nil {
				return nil, err
			}
			return resp.Text, nil
		}}})
	e.Config.Events.Content = true
	e.StartWorker(t)
	id := e.Submit(t, e.Spec(`name: quotes
steps:
  - { id: plain, route: solo, prompt: "quote the key" }
  - { id: streamed, route: main, prompt: "quote it as you go", stream: true }
  - { id: code, run: quoter }
`))
	e.Wait(t, id, 30*time.Second, store.StateCompleted)
	huntSecrets(t, e, &logs, []string{id}, []string{k1})
}
