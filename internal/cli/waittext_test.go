package cli_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/cli"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

var stillRunning = regexp.MustCompile(`workflow (wf_\S+) is still running`)

// --wait's progress and status say what a waiting step waits for: a
// signal by its name and match, a child workflow by its id; only an
// approval step waits for a decision.
func TestWaitLinesSayWhatAStepWaitsFor(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	vars, cfg := envFor(t, e)
	child := writeFile(t, "child.yaml", "name: pending\nsteps:\n  - { id: hold, wait_for: { signal: never.sent } }\n")
	if r := run(t, cli.Enqueue, vars, "spec", "put", "pending", child, "--config", cfg); r.code != 0 {
		t.Fatalf("spec put: exit %d, err %q", r.code, r.err)
	}
	for _, c := range []struct {
		name, spec string
		want       []string
	}{
		{"signal", "name: paid\ninput: { order: \"42\" }\nsteps:\n  - { id: paid, wait_for: { signal: payment.succeeded, match: \"order-{{ .Input.order }}\" } }\n",
			[]string{`paid: waiting for signal payment.succeeded matching "order-42" (enqueue signal)`}},
		{"child", "name: parent\nsteps:\n  - { id: kid, workflow: { spec: pending } }\n",
			[]string{"kid: waiting for child workflow wf_", "(enqueue status wf_"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := writeFile(t, c.name+".yaml", c.spec)
			r := run(t, cli.Enqueue, vars, file, "--config", cfg, "--no-check", "--wait", "--wait-timeout", "3s")
			if r.code != 4 || strings.Contains(r.err, "decision") {
				t.Fatalf("--wait: exit %d, out %q, err %q: want exit 4 and no decision", r.code, r.out, r.err)
			}
			for _, w := range c.want {
				if !strings.Contains(r.err, w) {
					t.Fatalf("--wait's progress %q lacks %q", r.err, w)
				}
			}
			m := stillRunning.FindStringSubmatch(r.err)
			if m == nil {
				t.Fatalf("--wait's error %q names no workflow", r.err)
			}
			id := m[1]
			e.Wait(t, id, 15*time.Second, store.StateWaiting)
			s := run(t, cli.Enqueue, vars, "status", id, "--config", cfg)
			if s.code != 0 || strings.Contains(s.out, "decision") || !strings.Contains(s.out, strings.Replace(c.want[0], ": waiting", " waits", 1)) {
				t.Fatalf("status: exit %d, out %q", s.code, s.out)
			}
		})
	}
}
