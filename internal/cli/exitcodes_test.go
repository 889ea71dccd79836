package cli_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hibiken/asynq"
	"github.com/spf13/cobra"

	"github.com/agentq/agentq/internal/cli"
	"github.com/agentq/agentq/internal/dashboard"
	"github.com/agentq/agentq/internal/dashcli"
	"github.com/agentq/agentq/internal/testenv"
)

// The README's table of exit codes, held for every command: 2 for bad
// usage or input (a Redis address without a port, a missing workflow or
// dead letter, a token the dashboard refuses), 3 when Redis (or the
// dashboard) cannot be reached, 4 when --wait-timeout passes while the
// workflow runs, 5 when no live worker would run a submitted spec. 0 and 1
// are held by the end-to-end tests.
func TestExitCodesOfEveryCommand(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true}) // nothing runs: a submitted workflow stays pending
	vars, cfg := envFor(t, e)
	srv, err := dashboard.New(t.Context(), dashboard.Options{Config: e.Config, Redis: e.Redis, Token: "right-token",
		AsynqOpt: asynq.RedisClientOpt{Addr: e.DB.Addr, DB: e.DB.DB}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	spec := writeFile(t, "h.yaml", hello)

	noPort := map[string]string{"AGENTQ_REDIS_ADDR": "localhost"}
	badURL := map[string]string{"AGENTQ_REDIS_URL": "redis://:pw@127.0.0.1:6379/notanumber"}
	down := map[string]string{"AGENTQ_REDIS_ADDR": "127.0.0.1:1"}
	wrongToken := map[string]string{"AGENTQ_SERVER": hs.URL, "AGENTQ_DASHBOARD_TOKEN": "wrong-token"}
	rightToken := map[string]string{"AGENTQ_SERVER": hs.URL, "AGENTQ_DASHBOARD_TOKEN": "right-token"}
	readers := [][]string{{"status", "wf_x"}, {"result", "wf_x"}, {"cancel", "wf_x"}, {"list"}, {"dlq", "list"},
		{"dlq", "show", "wf_x:s"}, {"dlq", "requeue", "wf_x:s"}, {"dlq", "discard", "wf_x:s"}}
	type tc struct {
		name string
		mk   func(cli.Env) *cobra.Command
		vars map[string]string
		args []string
		code int
		want string
	}
	var cases []tc
	for _, a := range append(readers, []string{spec}, []string{"keys", "list"}) {
		cases = append(cases,
			tc{"no port: " + strings.Join(a, " "), cli.Enqueue, noPort, a, 2, `redis.addr: "localhost" is not host:port`},
			tc{"bad url: " + strings.Join(a, " "), cli.Enqueue, badURL, a, 2, `redis.url: "redis://:xxxxx@127.0.0.1:6379/notanumber": redis: invalid database number`},
			tc{"down: " + strings.Join(a, " "), cli.Enqueue, down, a, 3, "cannot reach Redis at 127.0.0.1:1"})
	}
	for _, a := range readers[:3] {
		cases = append(cases, tc{"missing: " + a[0], cli.Enqueue, vars, append(a, "--config", cfg), 2, "not found"})
	}
	for _, a := range readers[5:] {
		cases = append(cases, tc{"missing dead letter: " + a[1], cli.Enqueue, vars, append(a, "--config", cfg), 2, "no such dead letter"})
	}
	cases = append(cases,
		tc{"wrong token: cancel", cli.Enqueue, wrongToken, []string{"cancel", "wf_x"}, 2, "401"},
		tc{"wrong token: requeue", cli.Enqueue, wrongToken, []string{"dlq", "requeue", "wf_x:s"}, 2, "401"},
		tc{"still running", cli.Enqueue, vars, []string{spec, "--config", cfg, "--wait", "--wait-timeout", "1s", "--no-check"}, 4, "is still running after 1s"},
		tc{"no live worker", cli.Enqueue, vars, []string{spec, "--config", cfg}, 5, "no live worker"},
		tc{"no live worker: --server", cli.Enqueue, rightToken, []string{spec}, 5, "no live worker"},
		tc{"worker: no port", cli.Worker, noPort, nil, 2, `redis.addr: "localhost" is not host:port`},
		tc{"worker: down", cli.Worker, merge(vars, down), []string{"--config", cfg}, 3, "cannot reach Redis at 127.0.0.1:1"},
		tc{"dashboard: no port", dashcli.Command, noPort, []string{"--addr", "127.0.0.1:0"}, 2, `redis.addr: "localhost" is not host:port`},
		tc{"dashboard: down", dashcli.Command, down, []string{"--addr", "127.0.0.1:0"}, 3, "cannot reach Redis at 127.0.0.1:1"},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := run(t, c.mk, c.vars, c.args...)
			if r.code != c.code || !strings.Contains(r.err, c.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", r.code, r.err, c.code, c.want)
			}
		})
	}
}

// An --input key the spec never reads is refused (a typo would otherwise
// be accepted); --allow-unused-input makes it a warning.
func TestUnusedInputIsRefused(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	vars, cfg := envFor(t, e)
	spec := writeFile(t, "h.yaml", hello)
	r := run(t, cli.Enqueue, vars, spec, "--config", cfg, "--input", "woh=Ada", "--no-check")
	if r.code != 2 || !strings.Contains(r.err, "--input woh: no template of the spec reads .Input.woh (it reads: who)") {
		t.Fatalf("exit %d, stderr %q", r.code, r.err)
	}
	r = run(t, cli.Enqueue, vars, spec, "--config", cfg, "--input", "woh=Ada", "--allow-unused-input", "--no-check")
	if r.code != 0 || !strings.Contains(r.err, "warning: --input woh") {
		t.Fatalf("with --allow-unused-input: exit %d, stderr %q", r.code, r.err)
	}
	if r = run(t, cli.Enqueue, vars, spec, "--config", cfg, "--input", "who=Ada", "--no-check"); r.code != 0 || r.err != "" {
		t.Fatalf("a key the spec reads: exit %d, stderr %q", r.code, r.err)
	}
}
