package cli_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/cli"
	"github.com/agentq/agentq/internal/dashboard"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/llmclient"
)

// bare points the commands at e's Redis with nothing else: no
// configuration file (the test runs in an empty directory), no routes, no
// provider keys.
func bare(t *testing.T, e *testenv.Env) map[string]string {
	t.Chdir(t.TempDir())
	return map[string]string{"AGENTQ_REDIS_ADDR": e.DB.Addr, "AGENTQ_REDIS_DB": strconv.Itoa(e.DB.DB)}
}

// lines are the lines of s that contain sub.
func lines(s, sub string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return out
}

func noKeyIn(t *testing.T, what, text string) {
	t.Helper()
	for _, k := range testenv.Keys {
		if strings.Contains(text, k) {
			t.Fatalf("%s shows an API key: %s", what, text)
		}
	}
}

// With no configuration of its own, enqueue checks a spec against what the
// running worker advertises: an unknown route is exit 2 with one line
// naming the step; status marks a step no live worker serves.
func TestSubmitWithoutConfigIsCheckedAgainstTheWorkers(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	vars := bare(t, e)
	bad := writeFile(t, "bad.yaml", "name: r\nsteps:\n  - { id: a, route: main, prompt: hi }\n  - { id: per_region, route: nope, prompt: hi, depends_on: [a] }\n")
	r := run(t, cli.Enqueue, vars, bad)
	want := `enqueue: ` + bad + `:4: steps[1] (per_region): no live worker serves route "nope" on queue default (live workers serve: fallback, flaky, hedged, limited, main, scored, solo)`
	if got := lines(r.err, "steps["); r.code != 2 || len(got) != 1 || got[0] != want {
		t.Fatalf("exit %d, stderr %q; want exit 2 and the one line\n%s", r.code, r.err, want)
	}
	if r = run(t, cli.Enqueue, vars, writeFile(t, "h.yaml", hello), "--input", "who=Ada", "--wait"); r.code != 0 {
		t.Fatalf("a spec the worker serves: exit %d %q", r.code, r.err)
	}
	stuck := writeFile(t, "stuck.yaml", "name: s\nsteps:\n  - { id: stuck, route: solo, prompt: hi, queue: reports }\n")
	if r = run(t, cli.Enqueue, vars, stuck); r.code != 2 || !strings.Contains(r.err, `steps[0] (stuck): no live worker serves queue "reports" (live workers serve queues: default)`) {
		t.Fatalf("a queue no worker takes: exit %d %q", r.code, r.err)
	}
	r = run(t, cli.Enqueue, vars, stuck, "--no-check")
	id := strings.TrimSpace(r.out)
	if r.code != 0 || !strings.HasPrefix(id, "wf_") {
		t.Fatalf("--no-check: exit %d %q %q", r.code, r.out, r.err)
	}
	r = run(t, cli.Enqueue, vars, "status", id)
	if r.code != 0 || !strings.Contains(r.out, "pending unserved  attempts=0") || !strings.Contains(r.out, `stuck unserved: no live worker serves queue "reports"`) {
		t.Fatalf("status: exit %d %q %q", r.code, r.out, r.err)
	}
	if r = run(t, cli.Enqueue, vars, "status", id, "--json"); !strings.Contains(r.out, `"unserved": "no live worker serves queue \"reports\"`) {
		t.Fatalf("status --json: %q", r.out)
	}
}

// With no worker alive, enqueue exits 5 and says --no-check submits
// anyway; with --no-check the workflow is written and waits.
func TestSubmitWithNoWorkerExits5(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	vars := bare(t, e)
	spec := writeFile(t, "h.yaml", hello)
	r := run(t, cli.Enqueue, vars, spec)
	if r.code != 5 || len(lines(r.err, "no live worker")) != 1 || !strings.Contains(r.err, "--no-check submits anyway") {
		t.Fatalf("exit %d, stderr %q; want 5", r.code, r.err)
	}
	if wfs, _ := e.Client.List(context.Background(), "", 10); len(wfs) != 0 {
		t.Fatalf("written though refused: %+v", wfs)
	}
	r = run(t, cli.Enqueue, vars, spec, "--no-check")
	if r.code != 0 {
		t.Fatalf("--no-check: exit %d %q", r.code, r.err)
	}
	wf, err := e.Store.Get(context.Background(), strings.TrimSpace(r.out))
	if err != nil || wf.State != store.StatePending {
		t.Fatalf("workflow %+v %v", wf, err)
	}
}

// keys list and keys enable need no provider key in the command's
// configuration: the fingerprints come from the running worker's
// advertisement. Never a key in the output.
func TestKeysComeFromTheWorkersAdvertisements(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	vars := bare(t, e)
	r := run(t, cli.Enqueue, vars, "keys", "list")
	noKeyIn(t, "keys list", r.out+r.err)
	if r.code != 0 || len(lines(r.out, " ok ")) != 5 || !strings.Contains(r.out, "oa#2 (…") || !strings.Contains(r.out, "capped#1 (…") {
		t.Fatalf("keys list: exit %d %q %q", r.code, r.out, r.err)
	}
	ctx := context.Background()
	if err := store.NewKeyState(e.Redis, nil).Disable(ctx, "oa", llmclient.KeyID(testenv.Keys[1]), "auth: 401 invalid key"); err != nil {
		t.Fatal(err)
	}
	r = run(t, cli.Enqueue, vars, "keys", "list", "--json")
	var keys []store.KeyInfo
	if err := json.Unmarshal([]byte(r.out), &keys); err != nil || len(keys) != 5 {
		t.Fatalf("keys list --json: %v %q", err, r.out)
	}
	for _, k := range keys {
		if k.Workers != 1 || k.ID == "" || (k.Fingerprint == llmclient.Fingerprint("oa", 1, testenv.Keys[1])) != (k.State == store.KeyDisabled) {
			t.Fatalf("key %+v", k)
		}
	}
	noKeyIn(t, "keys list --json", r.out)
	if r = run(t, cli.Enqueue, vars, "keys", "enable", "oa#2"); r.code != 0 || strings.TrimSpace(r.out) != "enabled "+llmclient.Fingerprint("oa", 1, testenv.Keys[1]) {
		t.Fatalf("keys enable oa#2: exit %d %q %q", r.code, r.out, r.err)
	}
	if r = run(t, cli.Enqueue, vars, "keys", "enable", "oa#9"); r.code != 2 || !strings.Contains(r.err, "no key #9") {
		t.Fatalf("keys enable oa#9: exit %d %q", r.code, r.err)
	}
}

// keys list and keys enable work through --server; the dashboard's
// configuration has no providers, and its providers page still shows the
// workers' keys by fingerprint. A spec the workers do not serve is
// refused through the server too, and ?check=false (--no-check) skips it.
func TestKeysAndTheCheckThroughTheServer(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	cfg := e.Config
	cfg.Providers, cfg.Routes = nil, nil
	srv, err := dashboard.New(t.Context(), dashboard.Options{Config: cfg, Redis: e.Redis, Token: "api-token",
		AsynqOpt: asynq.RedisClientOpt{Addr: e.DB.Addr, DB: e.DB.DB}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer func() { hs.Close(); srv.Close() }()
	vars := map[string]string{"AGENTQ_SERVER": hs.URL, "AGENTQ_REDIS_ADDR": "127.0.0.1:1", "AGENTQ_DASHBOARD_TOKEN": "api-token"}
	t.Chdir(t.TempDir())

	r := run(t, cli.Enqueue, vars, "keys", "list")
	if r.code != 0 || len(lines(r.out, " ok ")) != 5 || !strings.Contains(r.out, "an#1 (…") {
		t.Fatalf("keys list --server: exit %d %q %q", r.code, r.out, r.err)
	}
	if err := store.NewKeyState(e.Redis, nil).Disable(context.Background(), "an", llmclient.KeyID(testenv.Keys[0]), "quota"); err != nil {
		t.Fatal(err)
	}
	if r = run(t, cli.Enqueue, vars, "keys", "list", "--json"); !strings.Contains(r.out, `"state": "disabled"`) {
		t.Fatalf("keys list --json --server: %q %q", r.out, r.err)
	}
	noToken := map[string]string{"AGENTQ_SERVER": hs.URL}
	if r = run(t, cli.Enqueue, noToken, "keys", "enable", "an#1"); r.code != 2 || !strings.Contains(r.err, "401") {
		t.Fatalf("keys enable without the token: exit %d %q", r.code, r.err)
	}
	if r = run(t, cli.Enqueue, vars, "keys", "enable", "an#1"); r.code != 0 || !strings.HasPrefix(r.out, "enabled an#1 (…") {
		t.Fatalf("keys enable --server: exit %d %q %q", r.code, r.out, r.err)
	}
	if r = run(t, cli.Enqueue, vars, "keys", "enable", "an#7"); r.code != 2 || !strings.Contains(r.err, "no key #7") {
		t.Fatalf("keys enable an#7 --server: exit %d %q", r.code, r.err)
	}
	req, _ := http.NewRequest("GET", hs.URL+"/providers", nil)
	req.Header.Set("Authorization", "Bearer api-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), "oa#1 (…") || !strings.Contains(string(page), "capped#1 (…") {
		t.Fatalf("providers page (%d) shows no worker key:\n%s", resp.StatusCode, page)
	}
	noKeyIn(t, "the providers page", string(page))

	bad := writeFile(t, "bad.yaml", strings.Replace(hello, "route: solo", "route: nope", 1))
	if r = run(t, cli.Enqueue, vars, bad); r.code != 2 || len(lines(r.err, "steps[")) != 1 || !strings.Contains(r.err, `steps[0] (greet): no live worker serves route "nope" on queue default`) {
		t.Fatalf("a route no worker serves, through the server: exit %d %q", r.code, r.err)
	}
	if r = run(t, cli.Enqueue, vars, bad, "--no-check"); r.code != 0 || !strings.HasPrefix(r.out, "wf_") {
		t.Fatalf("--no-check through the server: exit %d %q %q", r.code, r.out, r.err)
	}
}
