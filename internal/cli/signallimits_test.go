package cli_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/cli"
	"github.com/agentq/agentq/internal/dashboard"
	"github.com/agentq/agentq/internal/testenv"
)

// enqueue signal and the signal's bounds, on Redis and with --server: a
// match holding a control character, data with anything after its JSON
// value or over limits.max_signal_bytes are exit 2; a signal no step waits
// for past limits.max_kept_signals is exit 7; each says so in one line
// naming what.
func TestSignalBoundsFromTheCLI(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	vars, _ := envFor(t, e)
	cfg := writeFile(t, "agentq.yaml", testenv.ConfigYAML+"limits: { max_kept_signals: 1 }\n")
	dcfg := e.Config
	dcfg.Limits.MaxKeptSignals = 1
	srv, err := dashboard.New(t.Context(), dashboard.Options{Config: dcfg, Redis: e.Redis, Token: "right-token",
		AsynqOpt: asynq.RedisClientOpt{Addr: e.DB.Addr, DB: e.DB.DB}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	remote := map[string]string{"AGENTQ_SERVER": hs.URL, "AGENTQ_DASHBOARD_TOKEN": "right-token"}
	big := writeFile(t, "big.json", `"`+strings.Repeat("x", 64<<10)+`"`)

	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"signal", "paid", "--match", "order\x0142"}, 2, "match holds a control character (U+0001) at byte 5"},
		{[]string{"signal", "paid", "--match", "order\u009b42"}, 2, "match holds a control character (U+009B) at byte 5"},
		{[]string{"signal", "paid", "--data", `{"a": 1} x`}, 2, "data is not JSON"},
		{[]string{"signal", "paid", "--data", `{"a": 1}}`}, 2, "data is not JSON"},
		{[]string{"signal", "paid", "--data-file", big}, 2, "data is 65538 bytes, over limits.max_signal_bytes (65536)"},
		{[]string{"signal", "paid", "--match", "first"}, 0, ""},
		{[]string{"signal", "paid", "--match", "second", "--idempotency-key", "evt-2"}, 7, "limits.max_kept_signals (1) reached"},
	} {
		for _, on := range []string{"redis", "server"} {
			args, env := append(c.args, "--config", cfg), vars
			if on == "server" {
				args, env = c.args, remote
				if c.code == 0 {
					continue // kept once: the second is past the limit either way
				}
			}
			r := run(t, cli.Enqueue, env, args...)
			if r.code != c.code || !strings.Contains(r.err, c.want) || strings.Count(strings.TrimSpace(r.err), "\n") != 0 {
				t.Errorf("%s %q: exit %d, err %q; want exit %d and one line with %q", on, c.args, r.code, r.err, c.code, c.want)
			}
		}
	}
}
