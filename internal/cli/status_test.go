package cli_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/cli"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// status exits 1 for a workflow that ended badly (blocked on a dead step
// here), as --wait does; what a provider sent back with control
// characters (a colour, a title, a bidi override) is shown escaped, never
// acted on by the terminal; a workflow name holding one is refused at
// submit, naming where.
func TestStatusExitCodeAndNoTerminalEscapes(t *testing.T) {
	hostile := "bad \x1b]0;pwned\x07\x1b[31mred\u202egnp.exe \x9b31m"
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Requests: 1, Fault: &chaosllm.Fault{Status: 400, Message: hostile}}, {}}}})
	vars, cfg := envFor(t, e)

	id := e.Submit(t, e.Spec("name: hostile\nsteps:\n  - { id: s, route: solo, prompt: hi }\n"))
	e.Wait(t, id, 20*time.Second, store.StateBlocked)
	for _, args := range [][]string{{"status", id}, {"status", id, "--json"}, {"list"}} {
		r := run(t, cli.Enqueue, vars, append(args, "--config", cfg)...)
		if args[0] == "status" && r.code != 1 {
			t.Errorf("%v of a blocked workflow: exit %d, want 1 (stderr %q)", args, r.code, r.err)
		}
		for _, raw := range []string{"\x1b", "\x07", "\u202e", "\x9b"} {
			if strings.Contains(r.out+r.err, raw) {
				t.Errorf("%v prints %q raw:\n%q", args, raw, r.out+r.err)
			}
		}
		if args[0] == "status" && len(args) == 2 && !strings.Contains(r.out, `\x1b[31mred\u202egnp.exe`) {
			t.Errorf("status does not show the error escaped:\n%s", r.out)
		}
	}

	// a completed workflow: exit 0
	done := e.Submit(t, e.Spec("name: fine\nsteps:\n  - { id: s, route: solo, prompt: hi }\n"))
	e.Wait(t, done, 20*time.Second, store.StateCompleted)
	if r := run(t, cli.Enqueue, vars, "status", done, "--config", cfg); r.code != 0 {
		t.Errorf("status of a completed workflow: exit %d", r.code)
	}

	// names with control or bidi characters are refused at submit
	for _, name := range []string{`"x\u001b[31m"`, `"invoice\u202egnp.exe"`, `"a\u0007b"`} {
		spec := writeFile(t, "bad.yaml", "name: "+name+"\nsteps:\n  - { id: s, route: solo, prompt: hi }\n")
		r := run(t, cli.Enqueue, vars, spec, "--config", cfg)
		if r.code != 2 || !strings.Contains(r.err, "bad.yaml:1: name: holds U+") {
			t.Errorf("name %s: exit %d, stderr %q; want 2 naming the name's line", name, r.code, r.err)
		}
	}
}
