package cli_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq"
	"github.com/agentq/agentq/internal/cli"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/dashboard"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/schedule"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// serveAPI serves a dashboard for e with token until the test ends.
func serveAPI(t *testing.T, e *testenv.Env, token string) string {
	t.Helper()
	srv, err := dashboard.New(t.Context(), dashboard.Options{Config: e.Config, Redis: e.Redis, Token: token,
		AsynqOpt: asynq.RedisClientOpt{Addr: e.DB.Addr, DB: e.DB.DB}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return hs.URL
}

type submittedOut struct {
	ID       string `json:"id"`
	State    string `json:"state"`
	Existing *bool  `json:"existing"`
}

func decodeSubmitted(t *testing.T, r result) submittedOut {
	t.Helper()
	var s submittedOut
	if r.code != 0 || json.Unmarshal([]byte(r.out), &s) != nil || s.ID == "" || s.Existing == nil {
		t.Fatalf("exit %d, out %q, err %q", r.code, r.out, r.err)
	}
	return s
}

// enqueue --idempotency-key: the second submit with a key prints the same
// workflow ("existing": true, exit 0) and the database holds the same keys
// after it; another input with the key is refused on one line (exit 2).
// The same through the dashboard's API (--server), whose answers are 201,
// 200 and 409.
func TestEnqueueIdempotencyKey(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	vars, cfg := envFor(t, e)
	spec := writeFile(t, "h.yaml", hello)
	args := []string{spec, "--config", cfg, "--input", "who=Ada", "--no-check", "--json", "--idempotency-key", "order-1234"}

	first := decodeSubmitted(t, run(t, cli.Enqueue, vars, args...))
	if *first.Existing || first.ID != store.IdempotentID("order-1234") {
		t.Fatalf("first submit: %+v", first)
	}
	before := e.Redis.DBSize(t.Context()).Val()
	r := run(t, cli.Enqueue, vars, args...)
	again := decodeSubmitted(t, r)
	if !*again.Existing || again.ID != first.ID || !strings.Contains(r.err, "nothing new was created") {
		t.Fatalf("second submit: %+v, stderr %q", again, r.err)
	}
	if after := e.Redis.DBSize(t.Context()).Val(); after != before {
		t.Fatalf("the second submit changed the database: %d keys, then %d", before, after)
	}
	other := append([]string{}, args...)
	other[4] = "who=Grace"
	r = run(t, cli.Enqueue, vars, other...)
	if r.code != 2 || strings.Count(r.err, "\n") != 1 || !strings.Contains(r.err, `idempotency key "order-1234" names workflow `+first.ID) {
		t.Fatalf("another input with the key: exit %d, stderr %q", r.code, r.err)
	}
	if r = run(t, cli.Enqueue, vars, spec, "--config", cfg, "--idempotency-key", ""); r.code != 2 || !strings.Contains(r.err, "--idempotency-key") {
		t.Fatalf("an empty key: exit %d, stderr %q", r.code, r.err)
	}

	url := serveAPI(t, e, "api-token")
	server := map[string]string{"AGENTQ_SERVER": url, "AGENTQ_DASHBOARD_TOKEN": "api-token"}
	viaAPI := decodeSubmitted(t, run(t, cli.Enqueue, server, args[0], "--input", "who=Ada", "--no-check", "--json", "--idempotency-key", "order-1234"))
	if !*viaAPI.Existing || viaAPI.ID != first.ID {
		t.Fatalf("through the API: %+v", viaAPI)
	}
	if r = run(t, cli.Enqueue, server, spec, "--input", "who=Grace", "--no-check", "--idempotency-key", "order-1234"); r.code != 2 ||
		strings.Count(r.err, "\n") != 1 || !strings.Contains(r.err, "different spec or input") {
		t.Fatalf("another input through the API: exit %d, stderr %q", r.code, r.err)
	}
	post := func(key, who string) (int, map[string]any) {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", url+"/api/v1/workflows?check=false&input=who="+who, strings.NewReader(hello))
		req.Header.Set("Authorization", "Bearer api-token")
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}
	if code, body := post("order-1234", "Ada"); code != 200 || body["existing"] != true || body["id"] != first.ID {
		t.Fatalf("POST with the key: %d %v", code, body)
	}
	if code, body := post("order-1234", "Grace"); code != 409 || body["code"] != "idempotency_conflict" {
		t.Fatalf("POST with the key and another input: %d %v", code, body)
	}
	if code, body := post("order-77", "Ada"); code != 201 || body["existing"] != false {
		t.Fatalf("POST with a new key: %d %v", code, body)
	}
}

// enqueue queue pause stops the worker taking a queue's steps: a workflow
// submitted meanwhile makes no LLM call while a worker runs, until queue
// resume (here through the dashboard's API) lets it complete.
func TestQueuePauseHoldsStepsUntilResume(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	vars, cfg := envFor(t, e)
	spec := writeFile(t, "h.yaml", hello)
	url := serveAPI(t, e, "api-token")
	server := map[string]string{"AGENTQ_SERVER": url, "AGENTQ_DASHBOARD_TOKEN": "api-token"}

	if r := run(t, cli.Enqueue, vars, "queue", "pause", "default", "--config", cfg); r.code != 0 || !strings.Contains(r.out, "queue default: paused") {
		t.Fatalf("pause: exit %d, %q %q", r.code, r.out, r.err)
	}
	if r := run(t, cli.Enqueue, vars, "queue", "pause", "default", "--config", cfg); r.code != 0 || !strings.Contains(r.out, "was paused already") {
		t.Fatalf("pause again: exit %d, %q %q", r.code, r.out, r.err)
	}
	if r := run(t, cli.Enqueue, vars, "queue", "pause", "defualt", "--config", cfg); r.code != 2 || !strings.Contains(r.err, `queue "defualt": no such queue`) {
		t.Fatalf("pause a typo: exit %d, %q", r.code, r.err)
	}
	r := run(t, cli.Enqueue, vars, spec, "--config", cfg, "--input", "who=Ada")
	if r.code != 0 {
		t.Fatalf("submit: exit %d, %q", r.code, r.err)
	}
	id := strings.TrimSpace(r.out)
	start := time.Now()
	poll.Until(t, 5*time.Second, func() (bool, string) {
		calls := e.Calls.Count("oa/m-solo", "")
		wf, err := e.Store.Get(t.Context(), id)
		if err != nil || calls > 0 || wf.Steps[0].Attempts > 0 {
			t.Fatalf("the paused queue's step ran: %d calls, %+v, %v", calls, wf, err)
		}
		return time.Since(start) > 1500*time.Millisecond, "watching the paused queue"
	})
	r = run(t, cli.Enqueue, server, "queue", "list", "--json")
	var qs []agentq.QueueInfo
	if r.code != 0 || json.Unmarshal([]byte(r.out), &qs) != nil {
		t.Fatalf("queue list --json: exit %d, %q %q", r.code, r.out, r.err)
	}
	if q := findQueue(qs, "default"); q == nil || !q.Paused || q.Pending != 1 || q.Size != 1 || q.Workers != 1 {
		t.Fatalf("queue list: %+v", qs)
	}
	if r := run(t, cli.Enqueue, vars, "queue", "list", "--config", cfg); r.code != 0 || !strings.Contains(r.out, "default") || !strings.Contains(r.out, "paused") {
		t.Fatalf("queue list: exit %d, %q %q", r.code, r.out, r.err)
	}
	if r := run(t, cli.Enqueue, map[string]string{"AGENTQ_SERVER": url, "AGENTQ_DASHBOARD_TOKEN": "wrong"}, "queue", "resume", "default"); r.code != 2 || !strings.Contains(r.err, "401") {
		t.Fatalf("resume with a wrong token: exit %d, %q", r.code, r.err)
	}
	if r := run(t, cli.Enqueue, server, "queue", "resume", "default"); r.code != 0 || !strings.Contains(r.out, "queue default: resumed") {
		t.Fatalf("resume: exit %d, %q %q", r.code, r.out, r.err)
	}
	e.Wait(t, id, 15*time.Second, store.StateCompleted)
	if n := e.Calls.Count("oa/m-solo", ""); n != 1 {
		t.Fatalf("%d calls after resume, want 1", n)
	}
	if r := run(t, cli.Enqueue, server, "queue", "resume", "default"); r.code != 0 || !strings.Contains(r.out, "was not paused") {
		t.Fatalf("resume again: exit %d, %q %q", r.code, r.out, r.err)
	}
}

func findQueue(qs []agentq.QueueInfo, name string) *agentq.QueueInfo {
	for i := range qs {
		if qs[i].Name == name {
			return &qs[i]
		}
	}
	return nil
}

// A worker whose configuration has schedules: runs them: two workers, one
// "@every 1s" schedule with its input; its runs complete through chaosllm,
// and enqueue schedule list (Redis and --server) shows the holder and the
// last slot's workflow, the one the slot's idempotency key names. A worker
// whose schedule names a spec it refuses does not start (exit 2).
func TestSchedulesRunOnTheWorkers(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	vars, cfg := envFor(t, e)
	spec := writeFile(t, "greet.yaml", hello)
	e.Config.Schedules = []config.Schedule{{Name: "greet", Cron: "@every 1s", Spec: spec, Input: map[string]any{"who": "Ada"}}}
	e.StartWorker(t)
	e.StartAnotherWorker(t)
	poll.Until(t, 20*time.Second, func() (bool, string) {
		wfs, err := e.Client.List(t.Context(), record.StateCompleted, 100)
		return err == nil && len(wfs) >= 2, fmt.Sprintf("%d scheduled runs completed (%v)", len(wfs), err)
	})
	url := serveAPI(t, e, "api-token")
	for _, v := range []map[string]string{vars, {"AGENTQ_SERVER": url, "AGENTQ_DASHBOARD_TOKEN": "api-token"}} {
		args := []string{"schedule", "list", "--json"}
		if v["AGENTQ_SERVER"] == "" {
			args = append(args, "--config", cfg)
		}
		r := run(t, cli.Enqueue, v, args...)
		var ss []agentq.ScheduleInfo
		if r.code != 0 || json.Unmarshal([]byte(r.out), &ss) != nil || len(ss) != 1 {
			t.Fatalf("schedule list: exit %d, %q %q", r.code, r.out, r.err)
		}
		s := ss[0]
		if s.Name != "greet" || s.Cron != "@every 1s" || s.Workflow != "hello" || s.Holder == "" || s.LastSlot == nil ||
			s.LastWorkflow != store.IdempotentID(schedule.Key("greet", *s.LastSlot)) || !s.NextSlot.After(*s.LastSlot) {
			t.Fatalf("schedule list: %+v", s)
		}
	}
	wf, err := e.Client.Spec(t.Context(), store.IdempotentID(schedule.Key("greet", *lastSlot(t, e))))
	if err != nil || wf.Input["who"] != "Ada" {
		t.Fatalf("the run's input: %+v %v", wf, err)
	}

	bad := writeFile(t, "bad.yaml", strings.Replace(hello, "route: solo", "route: nope", 1))
	conf := writeFile(t, "agentq.yaml", testenv.ConfigYAML+"schedules:\n  - { name: broken, cron: \"@hourly\", spec: "+bad+" }\n")
	if r := run(t, cli.Worker, vars, "--config", conf); r.code != 2 || !strings.Contains(r.err, "schedules.broken.spec: "+bad+" is not a valid spec") ||
		!strings.Contains(r.err, `unknown route "nope"`) {
		t.Fatalf("a worker with a bad schedule: exit %d, %q", r.code, r.err)
	}
}

func lastSlot(t *testing.T, e *testenv.Env) *time.Time {
	t.Helper()
	ss, err := e.Client.Schedules(t.Context())
	if err != nil || len(ss) != 1 || ss[0].LastSlot == nil {
		t.Fatalf("schedules: %+v %v", ss, err)
	}
	return ss[0].LastSlot
}

// approved waits for a person's decision on review, then greets.
const approved = `name: approved
steps:
  - { id: review, approve: { message: "send it?" } }
  - { id: greet, route: solo, depends_on: [review], prompt: "Say hello" }
`

// enqueue approve and enqueue rerun: the approval lets the workflow go on
// (a second decision is refused with exit 2), and a rerun from the last
// step runs it again as the next generation; rerun without --from is bad
// usage.
func TestApproveAndRerunFromTheCLI(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	vars, cfg := envFor(t, e)
	spec := writeFile(t, "a.yaml", approved)
	id := decodeSubmitted(t, run(t, cli.Enqueue, vars, spec, "--config", cfg, "--no-check", "--json")).ID
	e.Wait(t, id, 15*time.Second, store.StateWaiting)

	r := run(t, cli.Enqueue, vars, "approve", id, "review", "--comment", "numbers checked", "--config", cfg)
	if r.code != 0 || !strings.Contains(r.out, "review approved: workflow "+id) {
		t.Fatalf("approve: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
	if r = run(t, cli.Enqueue, vars, "approve", id, "review", "--reject", "--config", cfg); r.code != 2 {
		t.Fatalf("a second decision: exit %d, err %q", r.code, r.err)
	}
	wf := e.Wait(t, id, 15*time.Second, store.StateCompleted)
	if wf.State != store.StateCompleted || !strings.Contains(wf.Steps[0].Output, "numbers checked") {
		t.Fatalf("after the approval: %s, review output %q", wf.State, wf.Steps[0].Output)
	}

	if r = run(t, cli.Enqueue, vars, "rerun", id, "--config", cfg); r.code != 2 || !strings.Contains(r.err, "--from") {
		t.Fatalf("rerun without --from: exit %d, err %q", r.code, r.err)
	}
	calls := e.Chaos.Snapshot().Total
	if r = run(t, cli.Enqueue, vars, "rerun", id, "--from", "greet", "--config", cfg); r.code != 0 || !strings.Contains(r.out, "runs again from greet (run 2)") {
		t.Fatalf("rerun: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
	poll.Until(t, 15*time.Second, func() (bool, string) {
		w, err := e.Store.Get(t.Context(), id)
		if err != nil {
			return false, err.Error()
		}
		return w.State == store.StateCompleted && w.Generation == 1, "workflow " + w.State
	})
	if n := e.Chaos.Snapshot().Total; n != calls+1 {
		t.Fatalf("the rerun made %d calls, want 1 (greet again, the approval kept)", n-calls)
	}
}

// enqueue --wait: a workflow parked for a person's decision keeps the wait
// going and says what it waits for (then --wait-timeout gives up: exit 4,
// still running); one that --deadline ends is timed_out, exit 1.
func TestWaitThroughAnApprovalAndADeadline(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	vars, cfg := envFor(t, e)
	approval := writeFile(t, "a.yaml", approved)
	r := run(t, cli.Enqueue, vars, approval, "--config", cfg, "--no-check", "--wait", "--wait-timeout", "3s")
	if r.code != 4 || !strings.Contains(r.out+r.err, "review: waiting for a decision (enqueue approve wf_") {
		t.Fatalf("--wait on an approval: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
	idle := writeFile(t, "d.yaml", "name: idle\nsteps:\n  - { id: s, route: solo, prompt: hi, queue: nobody }\n")
	r = run(t, cli.Enqueue, vars, idle, "--config", cfg, "--no-check", "--deadline", "1s", "--wait", "--wait-timeout", "30s")
	if r.code != 1 || !strings.Contains(r.out+r.err, "timed_out") {
		t.Fatalf("--wait past --deadline: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
}

// A worker counts the runs its schedules submit (agentq_schedule_runs_total)
// and every one it counts is a workflow in Redis.
func TestScheduleRunsAreCounted(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true, Metrics: true})
	spec := writeFile(t, "greet.yaml", hello)
	e.Config.Schedules = []config.Schedule{{Name: "greet", Cron: "@every 1s", Spec: spec, Input: map[string]any{"who": "Ada"}}}
	e.StartWorker(t)
	runs := func() int {
		resp, err := http.Get(e.MetricsURL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for _, l := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(l, `agentq_schedule_runs_total{result="submitted",schedule="greet"} `); ok {
				n, _ := strconv.Atoi(v)
				return n
			}
		}
		return 0
	}
	poll.Until(t, 20*time.Second, func() (bool, string) {
		n := runs()
		return n >= 2, fmt.Sprintf("%d runs counted", n)
	})
	n := runs()
	wfs, err := e.Client.List(t.Context(), "", 100)
	if err != nil || len(wfs) < n {
		t.Fatalf("%d runs counted, %d workflows in Redis (%v)", n, len(wfs), err)
	}
}

// enqueue signal: status says what the step waits for; the signal
// completes it with its data (or --data-file's); a second send
// of an --idempotency-key is a duplicate; a bad signal is exit 2 naming
// what is wrong; with nothing waiting, it is kept.
func TestSignalFromTheCLI(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	vars, cfg := envFor(t, e)
	spec := writeFile(t, "s.yaml", `name: paid
input: { order: "42" }
steps:
  - { id: paid, wait_for: { signal: payment.succeeded, match: "order-{{ .Input.order }}" } }
  - { id: greet, route: solo, depends_on: [paid], prompt: "Say hello" }
`)
	id := decodeSubmitted(t, run(t, cli.Enqueue, vars, spec, "--config", cfg, "--no-check", "--json")).ID
	e.Wait(t, id, 15*time.Second, store.StateWaiting)
	if r := run(t, cli.Enqueue, vars, "status", id, "--config", cfg); r.code != 0 || !strings.Contains(r.out, `waits for signal payment.succeeded matching "order-42" (enqueue signal)`) {
		t.Fatalf("status: exit %d, out %q", r.code, r.out)
	}
	for _, bad := range [][]string{
		{"signal", "pay ment"},
		{"signal", "paid", "--data", "{"},
		{"signal", "paid", "--data", "1", "--data-file", "x.json"},
		{"signal", "paid", "--idempotency-key", ""},
	} {
		if r := run(t, cli.Enqueue, vars, append(bad, "--config", cfg)...); r.code != 2 || strings.Count(strings.TrimSpace(r.err), "\n") != 0 {
			t.Errorf("%q: exit %d, err %q: want exit 2 and one line", bad, r.code, r.err)
		}
	}
	r := run(t, cli.Enqueue, vars, "signal", "payment.succeeded", "--match", "order-42", "--data", `{"amount": 1999}`, "--idempotency-key", "evt-1", "--config", cfg)
	if r.code != 0 || !strings.Contains(r.out, "completed 1 waiting step(s)") || !strings.Contains(r.out, id+" paid") {
		t.Fatalf("signal: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
	wf := e.Wait(t, id, 15*time.Second, store.StateCompleted)
	if wf.Steps[0].Output != `{"amount":1999}` {
		t.Fatalf("paid output %q", wf.Steps[0].Output)
	}
	r = run(t, cli.Enqueue, vars, "signal", "payment.succeeded", "--match", "order-42", "--data", `{"amount": 1999}`, "--idempotency-key", "evt-1", "--config", cfg)
	if r.code != 0 || !strings.Contains(r.out, "a duplicate of signal sig_") {
		t.Fatalf("a second send of the key: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
	r = run(t, cli.Enqueue, vars, "signal", "payment.succeeded", "--match", "order-43", "--data-file", writeFile(t, "d.json", `{"late": true}`), "--json", "--config", cfg)
	var res struct {
		Kept bool `json:"kept"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.out), &res) != nil || !res.Kept {
		t.Fatalf("a signal nothing waits for: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
}

// enqueue spec put, list and show: a put makes a version only when the
// content changes; show prints a version as YAML; a bad spec or name, or a
// missing one, is exit 2 with one line.
func TestSpecsFromTheCLI(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	vars, cfg := envFor(t, e)
	one := writeFile(t, "one.yaml", "name: research\nsteps:\n  - { id: search, route: solo, prompt: \"find {{ .Input.q }}\" }\n")
	two := writeFile(t, "two.yaml", "name: research\nsteps:\n  - { id: search, route: solo, prompt: \"look up {{ .Input.q }}\" }\n")
	for i, c := range []struct {
		file, want string
	}{{one, "research version 1 (stored)"}, {one, "research version 1 (unchanged)"}, {two, "research version 2 (stored)"}} {
		if r := run(t, cli.Enqueue, vars, "spec", "put", "research", c.file, "--config", cfg); r.code != 0 || strings.TrimSpace(r.out) != c.want {
			t.Fatalf("put %d: exit %d, out %q, err %q; want %q", i, r.code, r.out, r.err, c.want)
		}
	}
	if r := run(t, cli.Enqueue, vars, "spec", "list", "--config", cfg); r.code != 0 || strings.TrimSpace(r.out) != "research\tversion 2" {
		t.Fatalf("list: exit %d, out %q", r.code, r.out)
	}
	r := run(t, cli.Enqueue, vars, "spec", "show", "research", "--version", "1", "--config", cfg)
	if r.code != 0 || !strings.Contains(r.out, "# research version 1") || !strings.Contains(r.out, "find {{ .Input.q }}") {
		t.Fatalf("show --version 1: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
	bad := writeFile(t, "bad.yaml", "name: research\nsteps:\n  - { id: search, route: nowhere, prompt: x }\n")
	for _, args := range [][]string{
		{"spec", "put", "research", bad},
		{"spec", "put", "bad name", one},
		{"spec", "show", "nothing"},
		{"spec", "show", "research", "--version", "9"},
	} {
		if r := run(t, cli.Enqueue, vars, append(args, "--config", cfg)...); r.code != 2 || r.err == "" {
			t.Errorf("%q: exit %d, err %q: want exit 2", args, r.code, r.err)
		}
	}
	if r := run(t, cli.Enqueue, vars, "--help"); !strings.Contains(r.out, "signal") || !strings.Contains(r.out, "spec") {
		t.Errorf("enqueue --help does not show signal and spec:\n%s", r.out)
	}
}
