package cli_test

import (
	"strings"
	"testing"

	"github.com/agentq/agentq/internal/cli"
	"github.com/agentq/agentq/internal/testenv"
)

// Bad input is refused at submit, exit 2 on one line naming the field and
// the limit, and nothing is written: a wait over limits.max_wait (7 days
// by default) or of 0s, a deadline given with the submit over it, a
// concurrency key over a field the input lacks, a map over a list the
// spec holds longer than its max_items.
func TestSubmitRefusesWaitsKeysAndMapsOverTheirBounds(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	vars, cfg := envFor(t, e)
	items := "[" + strings.Repeat("1,", 1500) + "1]"
	for _, c := range []struct {
		name, spec string
		args       []string
		want       string
	}{
		{"signal timeout", "name: x\nsteps:\n  - { id: pay, wait_for: { signal: paid, timeout: 876000h } }\n", nil,
			"steps[0] (pay).wait_for.timeout: 876000h is over limits.max_wait (168h)"},
		{"signal timeout 0s", "name: x\nsteps:\n  - { id: pay, wait_for: { signal: paid, timeout: 0s } }\n", nil,
			"steps[0] (pay).wait_for.timeout: 0s is not a wait"},
		{"approval timeout", "name: x\nsteps:\n  - { id: ok, approve: { message: proceed, timeout: 200h } }\n", nil,
			"steps[0] (ok).approve.timeout: 200h is over limits.max_wait (168h)"},
		{"deadline", "name: x\ndeadline: 876000h\nsteps:\n  - { id: a, route: solo, prompt: hi }\n", nil,
			"deadline: 876000h is over limits.max_wait (168h)"},
		{"deadline flag", "name: x\nsteps:\n  - { id: a, route: solo, prompt: hi }\n", []string{"--deadline", "876000h"},
			"deadline: 876000h is over limits.max_wait (168h)"},
		{"key", "name: x\ninput: { who: ada }\nsteps:\n  - { id: a, route: solo, prompt: \"hi {{ .Input.who }}\", concurrency: { key: \"{{ .Input.tenant }}\", limit: 1 } }\n", nil,
			"steps[0] (a).concurrency.key: reads .Input.tenant, which the input does not have"},
		{"map", "name: x\ninput: { items: " + items + " }\nsteps:\n  - { id: each, route: solo, for_each: \"{{ .Input.items }}\", prompt: \"{{ .Item }}\" }\n", nil,
			"steps[0] (each).for_each: yields 1501 items over the input, over the step's max_items of 1000"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := e.Redis.DBSize(t.Context()).Val()
			args := append([]string{writeFile(t, "w.yaml", c.spec), "--config", cfg, "--no-check"}, c.args...)
			r := run(t, cli.Enqueue, vars, args...)
			if r.code != 2 || strings.Count(r.err, "\n") != 1 || !strings.Contains(r.err, c.want) {
				t.Fatalf("exit %d, out %q, err %q: want exit 2 and one line with %q", r.code, r.out, r.err, c.want)
			}
			if after := e.Redis.DBSize(t.Context()).Val(); after != before {
				t.Fatalf("a refused submit wrote to Redis: %d keys, then %d", before, after)
			}
		})
	}
}
