package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hibiken/asynq"
	"github.com/spf13/cobra"

	"github.com/agentq/agentq/internal/cli"
	"github.com/agentq/agentq/internal/dashcli"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/tasks"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

type result struct {
	code     int
	out, err string
}

func run(t *testing.T, mk func(cli.Env) *cobra.Command, vars map[string]string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	env := cli.Env{Out: &out, Err: &errOut, LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }}
	code := cli.Run(mk(env), env, args)
	return result{code, out.String(), errOut.String()}
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// envFor points the commands at a test environment's Redis and chaosllm.
func envFor(t *testing.T, e *testenv.Env) (map[string]string, string) {
	vars := map[string]string{"CHAOS": e.URL, "K1": testenv.Keys[0], "K2": testenv.Keys[1],
		"AGENTQ_REDIS_ADDR": e.DB.Addr, "AGENTQ_REDIS_DB": strconv.Itoa(e.DB.DB)}
	return vars, writeFile(t, "agentq.yaml", testenv.ConfigYAML)
}

const hello = `name: hello
steps:
  - id: greet
    route: solo
    prompt: "Say hello to {{ .Input.who }}"
`

func TestEnqueueWaitStatusResultListEndToEnd(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	vars, cfg := envFor(t, e)
	spec := writeFile(t, "hello.yaml", hello)

	r := run(t, cli.Enqueue, vars, spec, "--config", cfg, "--input", "who=Grace", "--wait")
	if r.code != 0 {
		t.Fatalf("enqueue --wait: exit %d, stderr %q", r.code, r.err)
	}
	if !strings.Contains(r.out, "): completed") || !strings.Contains(r.out, "chaosllm answer") {
		t.Fatalf("enqueue --wait printed %q", r.out)
	}
	id := strings.Fields(r.out)[1]

	r = run(t, cli.Enqueue, vars, "status", id, "--config", cfg, "--json")
	var wf map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.out), &wf) != nil {
		t.Fatalf("status --json: exit %d, %q %q", r.code, r.out, r.err)
	}
	for _, k := range []string{"id", "name", "state", "steps", "created_at", "finished_at"} {
		if _, ok := wf[k]; !ok {
			t.Errorf("status --json lacks %q: %s", k, r.out)
		}
	}
	step := wf["steps"].([]any)[0].(map[string]any)
	for _, k := range []string{"id", "state", "attempts", "output", "degraded", "error", "target", "usage"} {
		if _, ok := step[k]; !ok {
			t.Errorf("step JSON lacks %q: %v", k, step)
		}
	}

	r = run(t, cli.Enqueue, vars, "result", id, "--config", cfg)
	if r.code != 0 || !strings.HasPrefix(r.out, "chaosllm answer") || strings.Count(r.out, "\n") != 1 {
		t.Fatalf("result: exit %d, %q", r.code, r.out)
	}
	r = run(t, cli.Enqueue, vars, "list", "--config", cfg, "--state", "completed")
	if r.code != 0 || !strings.Contains(r.out, id) {
		t.Fatalf("list: exit %d, %q %q", r.code, r.out, r.err)
	}
	// every state lists (waiting and timed_out too); a state that is not
	// one is a usage error that names them, not an empty list
	for _, st := range []string{"waiting", "timed_out"} {
		if r = run(t, cli.Enqueue, vars, "list", "--config", cfg, "--state", st); r.code != 0 {
			t.Fatalf("list --state %s: exit %d, %q", st, r.code, r.err)
		}
	}
	if r = run(t, cli.Enqueue, vars, "list", "--config", cfg, "--state", "wiating"); r.code != 2 || !strings.Contains(r.err, "timed_out") {
		t.Fatalf("list --state wiating: exit %d, %q", r.code, r.err)
	}
	// submit without --wait prints the id; --json the document
	r = run(t, cli.Enqueue, vars, spec, "--config", cfg, "--json")
	if r.code != 0 || json.Unmarshal([]byte(r.out), &wf) != nil || wf["state"] != "pending" {
		t.Fatalf("submit --json: exit %d, %q", r.code, r.out)
	}
}

func TestEnqueueWaitOnDeadLetterExitsOne(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	vars, cfg := envFor(t, e)
	spec := writeFile(t, "flaky.yaml", "name: f\nsteps:\n  - { id: s, route: flaky, prompt: hi, max_retries: 0 }\n")
	r := run(t, cli.Enqueue, vars, spec, "--config", cfg, "--wait")
	if r.code != 1 || !strings.Contains(r.out, "blocked") || !strings.Contains(r.out, "s error: network") {
		t.Fatalf("exit %d, out %q, err %q", r.code, r.out, r.err)
	}
}

func TestCancel(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	vars, cfg := envFor(t, e)
	r := run(t, cli.Enqueue, vars, writeFile(t, "h.yaml", hello), "--config", cfg, "--no-check") // no worker: it stays queued
	id := strings.TrimSpace(r.out)
	r = run(t, cli.Enqueue, vars, "cancel", id, "--config", cfg)
	if r.code != 0 || !strings.Contains(r.out, "canceled") {
		t.Fatalf("cancel: %d %q %q", r.code, r.out, r.err)
	}
	wf, _ := e.Store.Get(context.Background(), id)
	if wf.State != store.StateCanceled {
		t.Fatalf("state %s", wf.State)
	}
	r = run(t, cli.Enqueue, vars, "status", "wf_nope", "--config", cfg)
	if r.code != 2 || !strings.Contains(r.err, "not found") {
		t.Fatalf("status of a missing id: %d %q", r.code, r.err)
	}
}

func TestBadInputExitsTwoAndWritesNothing(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	vars, cfg := envFor(t, e)
	badSpec := writeFile(t, "bad.yaml", strings.Replace(hello, "route: solo", "route: nope", 1))
	cases := []struct {
		name string
		args []string
		vars map[string]string
		want string
	}{
		{"unknown route", []string{badSpec, "--config", cfg}, vars, `steps[0] (greet).route: unknown route "nope"`},
		{"missing spec file", []string{"/nonexistent.yaml", "--config", cfg}, vars, "cannot read spec"},
		{"bad --input", []string{writeFile(t, "h.yaml", hello), "--config", cfg, "--input", "novalue"}, vars, `--input "novalue": want key=value`},
		{"config: unknown field", []string{badSpec, "--config", writeFile(t, "c.yaml", "redis: { adr: x }\n")}, vars, `c.yaml:1: unknown field "adr"`},
		{"config: missing variable", []string{badSpec, "--config", writeFile(t, "v.yaml", "redis: { password: \"${REDIS_PW}\" }\n")}, vars, "v.yaml:1: environment variable REDIS_PW is not set"},
		{"config: bad env override", []string{badSpec, "--config", cfg}, merge(vars, map[string]string{"AGENTQ_RETENTION": "forever"}), `AGENTQ_RETENTION: retention: bad duration "forever"`},
		{"unknown flag", []string{badSpec, "--frobnicate"}, vars, "unknown flag"},
		{"no args", []string{}, vars, "accepts 1 arg"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := run(t, cli.Enqueue, c.vars, c.args...)
			lines := strings.Split(strings.TrimSpace(r.err), "\n")
			if r.code != 2 || len(lines) != 1 || !strings.Contains(lines[0], c.want) {
				t.Fatalf("exit %d, stderr %q; want exit 2 and one line containing %q", r.code, r.err, c.want)
			}
		})
	}
	if n := e.Redis.DBSize(context.Background()).Val(); n != 0 {
		t.Fatalf("bad input wrote %d keys to Redis", n)
	}
}

func merge(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func TestRedisUnreachableExitsThree(t *testing.T) {
	vars := map[string]string{"AGENTQ_REDIS_ADDR": "127.0.0.1:1"}
	spec := writeFile(t, "h.yaml", strings.Replace(hello, "route: solo", "route: any", 1))
	r := run(t, cli.Enqueue, vars, spec)
	if r.code != 3 || !strings.Contains(r.err, "cannot reach Redis at 127.0.0.1:1") {
		t.Fatalf("exit %d, stderr %q", r.code, r.err)
	}
	r = run(t, cli.Enqueue, vars, "status", "wf_x")
	if r.code != 3 {
		t.Fatalf("status: exit %d, stderr %q", r.code, r.err)
	}
}

func TestWorkerConfigErrors(t *testing.T) {
	r := run(t, cli.Worker, nil, "--config", writeFile(t, "c.yaml", "providers:\n  - { name: p, kind: openai, timeout: 10 }\n"))
	if r.code != 2 || !strings.Contains(r.err, `c.yaml:2: bad duration "10"`) {
		t.Fatalf("exit %d, stderr %q", r.code, r.err)
	}
	r = run(t, cli.Worker, nil, "--embedded")
	if r.code != 2 || !strings.Contains(r.err, "unknown flag: --embedded") {
		t.Fatalf("exit %d, stderr %q (the demo is go run ./examples/analyst, not in the production worker)", r.code, r.err)
	}
}

func TestHelpHasExamples(t *testing.T) {
	for name, mk := range map[string]func(cli.Env) *cobra.Command{"worker": cli.Worker, "enqueue": cli.Enqueue, "dashboard": dashcli.Command} {
		var out bytes.Buffer
		cmd := mk(cli.Env{Out: &out, Err: &out})
		var walk func(*cobra.Command)
		walk = func(c *cobra.Command) {
			if c.Example == "" {
				t.Errorf("%s: command %q has no example", name, c.CommandPath())
			}
			for _, sub := range c.Commands() {
				if sub.Name() != "help" && sub.Name() != "completion" {
					walk(sub)
				}
			}
		}
		walk(cmd)
	}
}

// A step with no max_retries in its spec gets the configuration's.
func TestConfiguredMaxRetriesApply(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	vars, cfg := envFor(t, e)
	vars["AGENTQ_MAX_RETRIES"] = "3"
	r := run(t, cli.Enqueue, vars, writeFile(t, "h.yaml", hello), "--config", cfg, "--no-check")
	if r.code != 0 {
		t.Fatalf("submit: %d %q", r.code, r.err)
	}
	info, err := asynq.NewInspectorFromRedisClient(e.Redis).GetTaskInfo("default", tasks.TaskID(strings.TrimSpace(r.out), "greet"))
	if err != nil || info.MaxRetry != 3 {
		t.Fatalf("task %+v %v, want MaxRetry 3", info, err)
	}
}

// A map's progress and status are its counters: --wait reports the map
// settling (a line per tenth of it, not per instance), and status shows
// one row for the map with its items settled, not a row per instance.
func TestMapProgressAndStatusShowItsCounters(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	vars, cfg := envFor(t, e)
	items := make([]string, 40)
	for i := range items {
		items[i] = strconv.Itoa(i)
	}
	spec := writeFile(t, "map.yaml", `name: fan
input: { items: [`+strings.Join(items, ", ")+`] }
steps:
  - { id: m, for_each: "{{ .Input.items }}", max_parallel: 4, route: solo, prompt: "item {{ .Item }}" }
  - { id: reduce, depends_on: [m], route: solo, prompt: "{{ len .Steps.m.Outputs }} outputs" }
`)
	r := run(t, cli.Enqueue, vars, spec, "--config", cfg, "--wait")
	if r.code != 0 {
		t.Fatalf("enqueue --wait: exit %d, stderr %q", r.code, r.err)
	}
	progress := strings.Count(r.err, " m: ")
	if !strings.Contains(r.err, " m: done (40/40 items settled)") || progress < 2 || progress > 12 {
		t.Errorf("%d progress lines for the map (want one per tenth at most, and the last 40/40):\n%s", progress, r.err)
	}
	id := strings.Fields(r.out)[1]
	r = run(t, cli.Enqueue, vars, "status", id, "--config", cfg)
	if r.code != 0 || !strings.Contains(r.out, "done (40/40 items settled)") || strings.Contains(r.out, "m[") {
		t.Fatalf("status: exit %d\n%s", r.code, r.out)
	}
	if rows := strings.Count(r.out, "attempts="); rows != 2 {
		t.Errorf("status shows %d step rows, want 2 (the map collapsed into one):\n%s", rows, r.out)
	}
}
