package cli_test

import (
	"strings"
	"testing"

	"github.com/agentq/agentq/internal/cli"
	"github.com/agentq/agentq/internal/testenv"
)

// enqueue holds no provider key: with the workers' configuration, whose
// keys are variables its environment does not set, it submits, reads a
// workflow's status and lists the keys the worker advertises. The worker,
// which calls the providers, still refuses that environment, naming the
// variable and its line.
func TestEnqueueNeedsNoProviderKeys(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	vars, cfg := envFor(t, e)
	delete(vars, "K1")
	delete(vars, "K2")
	r := run(t, cli.Enqueue, vars, writeFile(t, "hello.yaml", hello), "--config", cfg, "--input", "who=Ada", "--wait")
	if r.code != 0 || !strings.Contains(r.out, "): completed") {
		t.Fatalf("enqueue --wait: exit %d %q %q", r.code, r.out, r.err)
	}
	id := strings.Fields(r.out)[1]
	if r = run(t, cli.Enqueue, vars, "status", id, "--config", cfg); r.code != 0 || !strings.Contains(r.out, "completed") {
		t.Errorf("status: exit %d %q %q", r.code, r.out, r.err)
	}
	r = run(t, cli.Enqueue, vars, "keys", "list", "--config", cfg)
	noKeyIn(t, "keys list", r.out+r.err)
	if r.code != 0 || len(lines(r.out, " ok ")) != 5 || !strings.Contains(r.out, "an#1 (…") {
		t.Errorf("keys list: exit %d %q %q", r.code, r.out, r.err)
	}
	r = run(t, cli.Worker, vars, "--config", cfg)
	if r.code != 2 || !strings.Contains(r.err, cfg+":3: environment variable K1 is not set") {
		t.Errorf("worker without its keys: exit %d %q", r.code, r.err)
	}
}
