package cli_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/cli"
	"github.com/agentq/agentq/internal/dashcli"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/testenv"
)

// The command checks Host against its real listen address (port 0
// resolved) and --allowed-hosts; enqueue --server, which sends the
// address it dials as Host, works.
func TestDashboardChecksHostAndServesTheCLI(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	vars, cfgPath := envFor(t, e)
	var out, errOut testenv.Buffer
	env := cli.Env{Out: &out, Err: &errOut, LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }}
	cmd := dashcli.Command(env)
	cmd.SetArgs([]string{"--config", cfgPath, "--addr", "127.0.0.1:0", "--allowed-hosts", "dash.example,proxy.example:8443"})
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	addrRE := regexp.MustCompile(`dashboard on http://(127\.0\.0\.1:(\d+))`)
	var m []string
	poll.Until(t, 10*time.Second, func() (bool, string) {
		m = addrRE.FindStringSubmatch(out.String())
		return m != nil, fmt.Sprintf("no address printed: %q %q", out.String(), errOut.String())
	})
	addr, port := m[1], m[2]
	for _, tc := range []struct {
		host string
		want int
	}{
		{addr, 200}, {"localhost:" + port, 200}, {"dash.example", 200}, {"proxy.example:8443", 200},
		{"evil.example:" + port, http.StatusMisdirectedRequest}, {"proxy.example:" + port, http.StatusMisdirectedRequest},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+"/api/v1/workflows", nil)
		req.Host = tc.host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("Host %s: %d, want %d", tc.host, resp.StatusCode, tc.want)
		}
	}
	server := map[string]string{"AGENTQ_SERVER": "http://" + addr}
	if r := run(t, cli.Enqueue, server, "list"); r.code != 0 {
		t.Errorf("enqueue --server list: %d %q", r.code, r.err)
	}
	if r := run(t, cli.Enqueue, server, "status", "wf_nope"); r.code == 0 || !strings.Contains(r.err, "not found") {
		t.Errorf("enqueue --server status of a missing workflow (the API's answer): %d %q", r.code, r.err)
	}
	if r := run(t, cli.Enqueue, map[string]string{"AGENTQ_SERVER": "http://localhost:" + port}, "list"); r.code != 0 {
		t.Errorf("enqueue --server through localhost: %d %q", r.code, r.err)
	}
}

// A malformed --allowed-hosts entry is a usage error, before serving.
func TestDashboardRefusesABadAllowedHost(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	vars, cfgPath := envFor(t, e)
	var out, errOut testenv.Buffer
	env := cli.Env{Out: &out, Err: &errOut, LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }}
	cmd := dashcli.Command(env)
	cmd.SetArgs([]string{"--config", cfgPath, "--addr", "127.0.0.1:0", "--allowed-hosts", "https://dash.example/"})
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // a dashboard that serves anyway is stopped here
	defer cancel()
	err := cmd.ExecuteContext(ctx)
	if ctx.Err() != nil || cli.Code(err) != cli.ExitUsage || !strings.Contains(err.Error(), "allowed host") {
		t.Fatalf("err %v (code %d), out %q", err, cli.Code(err), out.String())
	}
}
